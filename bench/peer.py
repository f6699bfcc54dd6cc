"""The child side of bench/bus.py, shared by both runtimes: counting sinks and the trial protocol over a pipe."""

from __future__ import annotations

import threading
import time
from typing import Any

PEER_IDLE_EXIT_S = 1800.0  # the child quits when it hears nothing for this long (latency rounds send nothing)


class Counter:
    """Counts received payloads; notes the time the expected count is reached."""

    def __init__(self) -> None:
        self.reset(0)

    def reset(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.nbytes = 0
        self.t_last = 0.0
        self.done = threading.Event()

    def on_bytes(self, data: bytes) -> None:
        self.count += 1
        self.nbytes += len(data)
        if self.count == self.expected:
            self.t_last = time.monotonic()  # CLOCK_MONOTONIC: comparable across processes
            self.done.set()


def serve_trials(conn: Any, counters: dict[str, Counter]) -> None:
    """Say "up", then answer throughput trials ("tp", impl, expected, timeout) until "quit" or the parent is gone."""
    conn.send(("up",))
    try:
        while conn.poll(PEER_IDLE_EXIT_S):
            command = conn.recv()
            if command[0] != "tp":
                return  # "quit"
            _, impl, expected, timeout_s = command
            counter = counters[impl]
            counter.reset(expected)
            conn.send(("ready",))
            counter.done.wait(timeout_s)
            conn.send(("result", counter.count, counter.nbytes, counter.t_last))
    except (EOFError, OSError):
        return  # the parent is gone
