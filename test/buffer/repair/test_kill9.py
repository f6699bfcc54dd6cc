"""kill -9 at random moments and at named points of the protocol (mid-roll included): after every restart
`verify` passes and the buffer holds exactly the episodes the writer had reported complete.

The writer (test/buffer/kill_writer.py) prints "committing E" just before the transition that completes
episode E and "complete E" when the commit returned. A kill between the index commit and that print keeps
the episode although it was never reported, so then (and only then) E may be one more than reported.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from test.conftest import REPO, user_cmd
from user.buffer.disk.metadata import read_metadata
from user.buffer.index import Index
from user.buffer.repair.verify import verify
from user.interfaces import default_codec

DEADLINE_S = 30.0


class Writer:
    """The writer process, its stdout read line by line with deadlines."""

    def __init__(self, directory: Path, seed: int, die_at: str = "") -> None:
        cmd = [sys.executable, "-m", "test.buffer.kill_writer", str(directory), "--seed", str(seed)]
        if die_at:
            cmd += ["--die-at", die_at]
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.eof = False
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def next_line(self, timeout_s: float = DEADLINE_S) -> str | None:
        """The next line; None at EOF (the process died). Fails the test at the deadline."""
        if self.eof:
            return None
        try:
            line = self.lines.get(timeout=timeout_s)
        except queue.Empty:
            self.proc.kill()
            pytest.fail(f"writer said nothing for {timeout_s} s")
        if line is None:
            self.eof = True
        else:
            self.seen.append(line)
        return line

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)

    def drain(self) -> None:
        """Wait for the process to end and read everything it printed."""
        self.proc.wait(DEADLINE_S)
        while self.next_line() is not None:
            pass


def _last_report(lines: list[str], fallback: int) -> tuple[int, bool]:
    """(episodes last reported complete, whether a commit was under way when it died)."""
    reported, committing = fallback, False
    for line in lines:
        word, number = line.split()
        if word == "complete":
            reported, committing = int(number), False
        elif word == "committing":
            committing = True
    return reported, committing


def _verify(directory: Path) -> None:
    index = Index(directory, read_only=True)
    try:
        report = verify(directory, index, default_codec())
    finally:
        index.close()
    assert report.ok, report.problems


def _round(
    directory: Path, seed: int, die_at: str, *, rng: random.Random, expect: tuple[int, ...], deaths: list[str]
) -> tuple[int, ...]:
    """One writer life; returns the episode counts acceptable at the next start."""
    writer = Writer(directory, seed, die_at)
    first = writer.next_line()
    if first is None:  # died while opening (a fault point inside recovery)
        writer.drain()
        assert writer.proc.returncode == -signal.SIGKILL
        deaths.append(die_at)
        return expect
    ready = int(first.split()[1])
    assert ready in expect, f"after the kill the buffer holds {ready} episodes; the writer had reported {expect}"
    _verify(directory)
    writer.send("go")
    if die_at and not die_at.startswith("recover:"):
        writer.drain()  # it kills itself at the fault point
    else:
        wanted = rng.randint(1, 12)
        while sum(1 for line in writer.seen if line.startswith("complete")) < wanted:
            if writer.next_line() is None:
                break
        try:
            writer.proc.wait(timeout=rng.uniform(0.0, 0.03))  # a random moment, not a line boundary
        except subprocess.TimeoutExpired:
            writer.kill()
        writer.drain()
    assert writer.proc.returncode == -signal.SIGKILL
    reported, committing = _last_report(writer.seen[1:], ready)
    if die_at == "episode:written":  # written to the segment, never committed
        return (reported,)
    if die_at == "episode:indexed" or die_at.startswith("roll:"):  # committed, not reported yet
        return (reported + 1,)
    return (reported, reported + 1) if committing else (reported,)


def _final_checks(directory: Path, expect: tuple[int, ...]) -> None:
    writer = Writer(directory, seed=999)
    line = writer.next_line()
    assert line is not None and int(line.split()[1]) in expect
    writer.send("stop")
    writer.drain()
    assert writer.proc.returncode == 0
    done = subprocess.run(user_cmd("buffer", "verify", str(directory)), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    info = subprocess.run(
        user_cmd("buffer", "info", str(directory), "--json"), capture_output=True, text=True, timeout=60
    )
    assert json.loads(info.stdout)["episodes"] in expect
    assert json.loads(info.stdout)["segments_open"] == 0
    for bag in sorted((directory / "segments").iterdir()):  # every segment a finished, Humble-readable bag
        meta = read_metadata(bag)
        assert meta.version == 5
        with open(bag / meta.relative_file_paths[0], "rb") as f:
            decoded = list(make_reader(f, decoder_factories=[DecoderFactory()]).iter_decoded_messages())
        assert len(decoded) == meta.message_count


def _run(tmp_path: Path, plan: list[str], seed: int) -> list[str]:
    directory = tmp_path / "buffer"
    rng = random.Random(seed)
    expect: tuple[int, ...] = (0,)
    deaths: list[str] = []
    for n, die_at in enumerate(plan):
        expect = _round(directory, seed * 100 + n, die_at, rng=rng, expect=expect, deaths=deaths)
    _final_checks(directory, expect)
    return deaths


def test_kill9_at_random_moments_and_mid_roll(tmp_path: Path) -> None:
    # A roll cut after its footer leaves an open segment with committed episodes, so the next open recovers
    # it, and is killed in the middle of that recovery.
    plan = ["", "episode:written", "roll:finished", "recover:rewritten", "", "roll:metadata", "recover:indexed"]
    plan += ["roll:closed", "episode:indexed", ""]
    assert _run(tmp_path, plan, seed=1) == ["recover:rewritten", "recover:indexed"]


@pytest.mark.slow
def test_kill9_many_times(tmp_path: Path) -> None:
    points = ["episode:written", "episode:indexed", "roll:finished", "roll:metadata", "roll:closed"]
    plan = ["" if n % 3 else points[(n // 3) % len(points)] for n in range(40)]
    _run(tmp_path, plan, seed=2)
