"""A user-space TCP relay that plays a wide-area link between two sites' routers, for tests and benchmarks.

These machines have no `netem` qdisc, so delay, rate and cuts come from here: every byte crossing the relay in
either direction is held for `delay_s` (half the round trip) and paced to `rate_bps`, and `cut()` drops every
connection and refuses new ones until `restore()`, as a cable pulled out would. Only loopback addresses.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass

CHUNK = 16384  # bytes read at once


@dataclass
class LinkShape:
    """What the link does to traffic (each direction on its own)."""

    delay_s: float = 0.0  # one-way delay: half the round-trip time
    rate_bps: float = 0.0  # bits per second; 0: unlimited


class _Pipe:
    """One direction of one connection: read, hold `delay_s`, pace, write."""

    def __init__(self, src: socket.socket, dst: socket.socket, shape: LinkShape, relay: LinkRelay) -> None:
        self.src, self.dst, self.shape, self.relay = src, dst, shape, relay
        self.queue: deque[tuple[float, bytes]] = deque()
        self.ready = threading.Condition()
        self.closed = False
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._write, daemon=True).start()

    def _read(self) -> None:
        try:
            while data := self.src.recv(CHUNK):
                with self.ready:
                    self.queue.append((time.monotonic() + self.shape.delay_s, data))
                    self.ready.notify()
        except OSError:
            pass
        finally:
            with self.ready:
                self.closed = True
                self.ready.notify()

    def _write(self) -> None:
        next_free = time.monotonic()  # when the link is free to send again at `rate_bps`
        while True:
            with self.ready:
                while not self.queue and not self.closed:
                    self.ready.wait(0.5)
                if not self.queue:
                    break
                due, data = self.queue.popleft()
            now = time.monotonic()
            if self.shape.rate_bps > 0:
                next_free = max(next_free, now) + len(data) * 8 / self.shape.rate_bps
                due = max(due, next_free)
            if due > now:
                time.sleep(due - now)
            try:
                self.dst.sendall(data)
                self.relay.count(len(data))
            except OSError:
                break
        for sock in (self.src, self.dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class LinkRelay:
    """Listens on 127.0.0.1:`port` and relays each connection to 127.0.0.1:`target_port` through the link."""

    def __init__(self, port: int, target_port: int, shape: LinkShape | None = None) -> None:
        self.port, self.target_port = port, target_port
        self.shape = shape or LinkShape()
        self.bytes = 0  # bytes delivered, both directions
        self._lock = threading.Lock()
        self._up = threading.Event()
        self._up.set()
        self._conns: list[socket.socket] = []
        self._stop = threading.Event()
        self._server = socket.create_server(("127.0.0.1", port), reuse_port=False)
        self._server.settimeout(0.2)
        threading.Thread(target=self._accept, daemon=True).start()

    def count(self, n: int) -> None:
        with self._lock:
            self.bytes += n

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except (TimeoutError, OSError):
                continue
            if not self._up.is_set():
                client.close()  # the cable is out: the dialling router sees a refused link and retries
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._conns += [client, upstream]
            _Pipe(client, upstream, self.shape, self)
            _Pipe(upstream, client, self.shape, self)

    def cut(self) -> None:
        """Drop every connection and refuse new ones."""
        self._up.clear()
        with self._lock:
            conns, self._conns = self._conns, []
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def restore(self) -> None:
        self._up.set()

    def close(self) -> None:
        self._stop.set()
        self.cut()
        self._server.close()
