"""`user topic list | info | echo | hz | bw | pub`, behaving like `ros2 topic`, on the Zenoh runtime."""

from __future__ import annotations

import argparse
import itertools
import logging
import math
import statistics
import sys
import threading
import time
from collections import deque
from typing import Any

import yaml

from user.bus.base import BusError
from user.bus.zenoh_bus import ZenohBus
from user.cli.common import add_qos_options, open_tool_bus, print_reports, qos_of, stop_on_signals
from user.interfaces.codec import Codec, UnknownTypeError, default_codec
from user.interfaces.convert import MessageDataError, from_data, to_data
from user.runtime.node import Node

_log = logging.getLogger("user.topic")
TYPE_DISCOVERY_TIMEOUT_S = 10.0  # `echo` without TYPE and without --timeout gives up after this


class TopicToolError(RuntimeError):
    """A `user topic` command cannot do what was asked."""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("topic", help="inspect and publish topics (like ros2 topic)")
    tsub = p.add_subparsers(dest="topic_command", required=True, metavar="VERB")

    ls = tsub.add_parser("list", help="topics announced by running nodes")
    ls.add_argument("-t", "--show-types", action="store_true")
    ls.add_argument("--timeout", type=float, default=0.5, help="seconds to collect announcements")
    ls.set_defaults(func=run_list)

    info = tsub.add_parser("info", help="type, publishers and subscribers of a topic")
    info.add_argument("topic")
    info.add_argument("-v", "--verbose", action="store_true", help="every endpoint with its node and QoS")
    info.add_argument("--timeout", type=float, default=0.5, help="seconds to collect announcements")
    info.set_defaults(func=_run_info)

    echo = tsub.add_parser("echo", help="print messages of a topic as YAML")
    echo.add_argument("topic")
    echo.add_argument("type", nargs="?", help="message type (default: as announced by its publisher)")
    echo.add_argument("--once", action="store_true", help="print one message and exit")
    echo.add_argument("--count", type=int, help="exit after this many messages")
    echo.add_argument(
        "--timeout",
        type=float,
        help=f"exit after this many seconds (without TYPE: give up after it, default {TYPE_DISCOVERY_TIMEOUT_S:.0f} s, "
        "when no publisher announces the type)",
    )
    echo.add_argument("--no-arr", action="store_true", help="summarise arrays instead of printing them")
    add_qos_options(echo)
    echo.set_defaults(func=run_echo)

    hz = tsub.add_parser("hz", help="print the publishing rate of a topic")
    hz.add_argument("topic")
    hz.add_argument("--window", "-w", type=int, default=10_000, help="messages in the rate window")
    hz.add_argument("--count", type=int, help="exit after this many reports")
    hz.add_argument("--timeout", type=float, help="exit after this many seconds")
    add_qos_options(hz)
    hz.set_defaults(func=run_hz)

    bw = tsub.add_parser("bw", help="print the bandwidth a topic uses (bytes per second)")
    bw.add_argument("topic")
    bw.add_argument("--window", "-w", type=int, default=100, help="messages in the bandwidth window")
    bw.add_argument("--count", type=int, help="exit after this many reports")
    bw.add_argument("--timeout", type=float, help="exit after this many seconds")
    add_qos_options(bw)
    bw.set_defaults(func=_run_bw)

    _add_pub(tsub)


def _add_pub(tsub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    pub = tsub.add_parser("pub", help="publish a message given as YAML")
    pub.add_argument("topic")
    pub.add_argument("type")
    pub.add_argument("values", nargs="?", default="{}", help='the message as YAML, e.g. "{data: hi}"')
    pub.add_argument("-1", "--once", action="store_true", help="publish one message and exit")
    pub.add_argument("-t", "--times", type=int, help="publish this many messages and exit")
    pub.add_argument("-r", "--rate", type=float, default=1.0, help="messages per second (default 1)")
    pub.add_argument(
        "--wait-matching",
        type=float,
        default=2.0,
        help="seconds to wait for a subscriber before the first message",
    )
    add_qos_options(pub)
    pub.set_defaults(func=run_pub)


def _guard(fn: Any) -> Any:
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return int(fn(args))
        except (TopicToolError, BusError, UnknownTypeError, MessageDataError, yaml.YAMLError) as exc:
            _log.error("%s", exc)
            return 2

    return wrapped


def _run_info(args: argparse.Namespace) -> int:
    from user.cli.topic_info import run_info

    return _guard(run_info)(args)  # type: ignore[no-any-return]


def _run_bw(args: argparse.Namespace) -> int:
    from user.cli.topic_info import run_bw

    return _guard(run_bw)(args)  # type: ignore[no-any-return]


def discover_type(bus: ZenohBus, topic: str, codec: Codec, timeout_s: float) -> str:
    """The type a running publisher announces for `topic`, waiting up to `timeout_s`; says on stderr that it
    waits when the first look finds none."""
    deadline = time.monotonic() + timeout_s
    for attempt in itertools.count():
        types = bus.topic_names_and_types(timeout_s=0.3).get(topic, [])
        if len(types) == 1:
            return codec.resolve(types[0])
        if len(types) > 1:
            raise TopicToolError(f"{topic} is announced with several types ({', '.join(types)}); pass one")
        if attempt == 0:
            print(
                f"waiting for a publisher of {topic} to announce its type (pass TYPE to skip) "
                f"for up to {timeout_s:.0f} s ...",
                file=sys.stderr,
                flush=True,
            )
        if time.monotonic() >= deadline:
            raise TopicToolError(
                f"cannot tell the type of {topic} after {timeout_s:.0f} s: no node announces it. "
                "Pass it, e.g. "
                f"`user topic echo {topic} std_msgs/msg/String`"
            )
    raise AssertionError("unreachable")  # itertools.count() never ends


@_guard
def run_list(args: argparse.Namespace) -> int:
    bus = open_tool_bus("topic")
    try:
        for topic, types in bus.topic_names_and_types(timeout_s=args.timeout).items():
            print(f"{topic} [{', '.join(types)}]" if args.show_types else topic)
    finally:
        bus.close()
    return 0


def _wait(stop: threading.Event, done: threading.Event, timeout_s: float | None) -> None:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not stop.is_set() and not done.is_set():
        if deadline is not None and time.monotonic() >= deadline:
            return
        done.wait(0.1)


@_guard
def run_echo(args: argparse.Namespace) -> int:
    stop = stop_on_signals()
    codec = default_codec()
    qos = qos_of(args)
    bus = open_tool_bus("topic")
    start = time.monotonic()
    try:
        typename = (
            codec.resolve(args.type)
            if args.type
            else discover_type(bus, args.topic, codec, args.timeout or TYPE_DISCOVERY_TIMEOUT_S)
        )
        limit = 1 if args.once else args.count
        done = threading.Event()
        seen = 0

        def on_msg(msg: Any) -> None:
            nonlocal seen
            if done.is_set():
                return
            data = to_data(msg, codec, max_array=16 if args.no_arr else None)
            sys.stdout.write(yaml.safe_dump(data, sort_keys=False, default_flow_style=False) + "---\n")
            sys.stdout.flush()
            seen += 1
            if limit is not None and seen >= limit:
                done.set()

        Node(bus, codec).create_subscription(args.topic, typename, on_msg, qos)
        _wait(stop, done, None if args.timeout is None else max(0.0, args.timeout - (time.monotonic() - start)))
    finally:
        bus.close()
    return 0


class RateMeter:
    """Arrival statistics over a sliding window, as `ros2 topic hz` prints them."""

    def __init__(self, window: int) -> None:
        self.times: deque[float] = deque(maxlen=window + 1)
        self.lock = threading.Lock()

    def tick(self, now: float) -> None:
        with self.lock:
            self.times.append(now)

    def report(self) -> str | None:
        with self.lock:
            stamps = list(self.times)
        if len(stamps) < 2:
            return None
        gaps = [b - a for a, b in itertools.pairwise(stamps)]
        mean = statistics.fmean(gaps)
        std = statistics.pstdev(gaps)
        rate = 1.0 / mean if mean > 0 else math.inf
        return (
            f"average rate: {rate:.3f}\n\tmin: {min(gaps):.3f}s max: {max(gaps):.3f}s "
            f"std dev: {std:.5f}s window: {len(stamps)}"
        )


@_guard
def run_hz(args: argparse.Namespace) -> int:
    stop = stop_on_signals()
    qos = qos_of(args)
    bus = open_tool_bus("topic")
    meter = RateMeter(args.window)
    try:
        bus.create_subscription(args.topic, "unknown", lambda _payload: meter.tick(time.monotonic()), qos)
        print_reports(stop, args, meter.report)
    finally:
        bus.close()
    return 0


@_guard
def run_pub(args: argparse.Namespace) -> int:
    stop = stop_on_signals()
    codec = default_codec()
    typename = codec.resolve(args.type)
    msg = from_data(typename, yaml.safe_load(args.values) or {}, codec)
    payload = codec.encode(msg, typename)
    times = 1 if args.once else args.times
    qos = qos_of(args)
    bus = open_tool_bus("topic")
    try:
        pub = bus.create_publisher(args.topic, typename, qos)
        if not pub.wait_for_subscribers(args.wait_matching):
            _log.warning("no subscriber on %s after %.1f s; publishing anyway", args.topic, args.wait_matching)
        sent = 0
        period = 1.0 / args.rate
        next_at = time.monotonic()
        while not stop.is_set():
            pub.publish(payload)
            sent += 1
            print(f"publishing #{sent}: {to_data(msg, codec, max_array=16)}", flush=True)
            if times is not None and sent >= times:
                break
            next_at += period
            stop.wait(max(0.0, next_at - time.monotonic()))
    finally:
        bus.close()
    return 0
