"""Benchmark of the Bus against its raw middleware on both runtimes (Zenoh; ROS 2 rclpy + Fast DDS), and of
the Observation codec.

Everything that is compared is measured side by side in one run (raw and bus trials alternate, medians
over rounds), so machine noise hits both equally: read the ratios, not the absolute numbers.

1. Throughput, reliable (congestion control BLOCK), pre-encoded payloads of 100 B and 1 MB. The publisher
   runs in this process, the subscriber in a spawned child process; both are peers of a `user router`
   subprocess and talk directly once discovery is done. `ZenohBus` pub/sub against a raw zenoh session
   opened with the identical config (`session_config`); the raw subscriber copies the payload with
   `sample.payload.to_bytes()` exactly like the bus does. Every message is counted at the subscriber.
   Target: bus/raw throughput >= 0.8.
2. Round-trip latency (ping from here, echo from the child on a pong topic), 100 B and 1 MB, median,
   both with express=False (the bus default). Target: bus - raw <= +0.2 ms.
3. The same two measurements on ROS 2: `RosBus` (a `RosRuntime` in each process) against raw rclpy nodes
   with the same QoS and the same serialized payloads (CDR of std_msgs/msg/UInt8MultiArray holding 100 B
   and 1 MB), publisher here, subscriber/echo in a spawned child (bench/bus_ros.py). DDS on loopback, with
   bench/fastdds_shm.xml (8 MB shared-memory segments) unless FASTDDS_DEFAULT_PROFILES_FILE says otherwise.
   Targets as above. Needs the ROS environment (`source scripts/ros_env.sh`); skipped without it.
4. Codec rates for an Observation with two 128x128 JPEG images (quality 90) and a 32-float state:
   encode/s (domain object -> msg -> bytes), decode/s (bytes -> msg -> domain object), the CDR part alone
   (msg <-> bytes), and one 128x128 JPEG decode for comparison. Informational (no target).

Run: python3 bench/bus.py [--quick] [--rounds N] [--runtime zenoh|ros|all]
     (default about 90 s on 2 cores, --quick about 25 s)
Exit status 1 when a message was lost or the benchmark could not finish; a MISS is a result, not an error.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from peer import Counter, serve_trials

THROUGHPUT_TARGET = 0.8  # bus msgs/s divided by raw msgs/s, at least
LATENCY_TARGET_MS = 0.2  # bus median RTT minus raw median RTT, at most
SIZES = (("100 B", 100), ("1 MB", 1_000_000))
TYPENAME = "bench/msg/Payload"  # only named in the bus's graph tokens; payloads are opaque bytes
IMPLS = ("raw", "bus")
KEYS = {  # key expressions; the bus topic of a key is "/" + key
    "raw": {"tp": "bench/tp/raw", "ping": "bench/ping/raw", "pong": "bench/pong/raw"},
    "bus": {"tp": "bench/tp/bus", "ping": "bench/ping/bus", "pong": "bench/pong/bus"},
}
STARTUP_TIMEOUT_S = 30.0  # router, child process and discovery
PONG_TIMEOUT_S = 5.0  # one round trip


class BenchError(RuntimeError):
    """The benchmark could not run to the end (a deadline passed, a process died)."""


@dataclass(frozen=True)
class Plan:
    """How long and how often to measure."""

    rounds: int  # raw/bus pairs per measurement
    trial_s: float  # target duration of one throughput trial
    pings: int  # round trips per latency trial (100 B; fewer for 1 MB)
    codec_s: float  # duration of one codec rate measurement
    codec_repeats: int


DEFAULT_PLAN = Plan(rounds=15, trial_s=0.4, pings=1000, codec_s=0.25, codec_repeats=5)
QUICK_PLAN = Plan(rounds=5, trial_s=0.25, pings=300, codec_s=0.1, codec_repeats=3)


# --------------------------------------------------------------------------------------------------------
# The child process: throughput sink and ping echo, raw and bus.


def _raw_options() -> dict[str, Any]:
    import zenoh

    return {
        "congestion_control": zenoh.CongestionControl.BLOCK,
        "reliability": zenoh.Reliability.RELIABLE,
        "express": False,
    }


def _declare_peer_raw(session: Any, counter: Counter) -> list[Any]:
    """Raw sink on the throughput key and raw echo ping -> pong; returns what must stay referenced."""
    keys = KEYS["raw"]
    pong = session.declare_publisher(keys["pong"], **_raw_options())

    def on_tp(sample: Any) -> None:
        counter.on_bytes(sample.payload.to_bytes())

    def on_ping(sample: Any) -> None:
        pong.put(sample.payload.to_bytes())

    return [
        pong,
        session.declare_subscriber(keys["tp"], on_tp),
        session.declare_subscriber(keys["ping"], on_ping),
    ]


def _declare_peer_bus(bus: Any, counter: Counter) -> None:
    """The same as `_declare_peer_raw`, through the Bus API."""
    keys = KEYS["bus"]
    pong = bus.create_publisher("/" + keys["pong"], TYPENAME)
    bus.create_subscription("/" + keys["tp"], TYPENAME, counter.on_bytes)
    bus.create_subscription("/" + keys["ping"], TYPENAME, pong.publish)


def peer_main(conn: Any, endpoint: str) -> None:
    """Child process: serve throughput trials and echo pings until told to quit."""
    import zenoh

    from user.bus.zenoh_bus import ZenohBus
    from user.bus.zenoh_config import ZenohSettings, session_config

    settings = ZenohSettings(router=[endpoint])
    session = zenoh.open(session_config(settings))
    bus = ZenohBus("bench_peer", settings)
    counters = {"raw": Counter(), "bus": Counter()}
    keep = _declare_peer_raw(session, counters["raw"])
    _declare_peer_bus(bus, counters["bus"])
    try:
        serve_trials(conn, counters)
    finally:
        del keep
        bus.close()
        session.close()  # type: ignore[no-untyped-call]  # zenoh's stubs leave it unannotated


# --------------------------------------------------------------------------------------------------------
# This process: router, child, publishers and the measurements.


@dataclass
class Side:
    """This process's end of one implementation (raw or bus)."""

    name: str
    put_tp: Callable[[bytes], None]
    put_ping: Callable[[bytes], None]
    pong: threading.Event
    keep: list[Any] = field(default_factory=list)  # declared entities that must stay referenced


def _wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            raise BenchError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.02)


def _matching(publisher: Any) -> Callable[[], bool]:
    """Whether a subscriber matches this raw Zenoh publisher yet (a predicate for `_wait_until`)."""
    return lambda: publisher.matching_status.matching


def open_raw_side(session: Any) -> Side:
    keys = KEYS["raw"]
    event = threading.Event()

    def got_pong(_data: bytes) -> None:
        event.set()

    def on_pong(sample: Any) -> None:
        got_pong(sample.payload.to_bytes())

    tp = session.declare_publisher(keys["tp"], **_raw_options())
    ping = session.declare_publisher(keys["ping"], **_raw_options())
    sub = session.declare_subscriber(keys["pong"], on_pong)
    for pub in (tp, ping):
        _wait_until(_matching(pub), STARTUP_TIMEOUT_S, "the raw subscriber")
    return Side("raw", tp.put, ping.put, event, [tp, ping, sub])


def open_bus_side(bus: Any) -> Side:
    keys = KEYS["bus"]
    event = threading.Event()

    def got_pong(_data: bytes) -> None:
        event.set()

    tp = bus.create_publisher("/" + keys["tp"], TYPENAME)
    ping = bus.create_publisher("/" + keys["ping"], TYPENAME)
    bus.create_subscription("/" + keys["pong"], TYPENAME, got_pong)
    for pub in (tp, ping):
        if not pub.wait_for_subscribers(STARTUP_TIMEOUT_S):
            raise BenchError("timed out waiting for the bus subscriber")
    return Side("bus", tp.publish, ping.publish, event)


def wait_for_echo(side: Side) -> None:
    """Ping until the first pong comes back (the child's pong publisher has found our subscriber)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        side.pong.clear()
        side.put_ping(b"hello")
        if side.pong.wait(0.2):
            return
        if time.monotonic() >= deadline:
            raise BenchError(f"no echo from the child over {side.name}")


def _receive(conn: Any, kind: str, timeout_s: float) -> tuple[Any, ...]:
    if not conn.poll(timeout_s):
        raise BenchError(f"child process sent no {kind!r} within {timeout_s:.0f} s")
    reply = conn.recv()
    if reply[0] != kind:
        raise BenchError(f"child process sent {reply!r}, expected {kind!r}")
    return tuple(reply)


@dataclass
class Throughput:
    """Trials of one implementation at one payload size."""

    rates: list[float] = field(default_factory=list)  # msgs/s per trial in round order, NaN if incomplete
    sent: int = 0
    received: int = 0
    received_bytes: int = 0


def throughput_trial(conn: Any, side: Side, payload: bytes, count: int, result: Throughput) -> float:
    """Publish `count` payloads as fast as BLOCK allows; msgs/s from first put to last arrival."""
    timeout_s = 30.0 + count * len(payload) / 20e6  # generous: 20 MB/s would be pathological
    conn.send(("tp", side.name, count, timeout_s))
    _receive(conn, "ready", 10.0)
    put = side.put_tp
    start = time.monotonic()
    for _ in range(count):
        put(payload)
    _, received, nbytes, t_last = _receive(conn, "result", timeout_s + 10.0)
    result.sent += count
    result.received += received
    result.received_bytes += nbytes
    rate = count / (t_last - start) if received == count else math.nan
    result.rates.append(rate)
    return rate


def latency_trial(side: Side, payload: bytes, pings: int, warmup: int) -> list[float]:
    """Round-trip times in seconds, one ping in flight at a time."""
    event, put = side.pong, side.put_ping
    rtts = []
    for i in range(warmup + pings):
        event.clear()
        start = time.perf_counter()
        put(payload)
        if not event.wait(PONG_TIMEOUT_S):
            raise BenchError(f"{side.name}: no pong for {len(payload)} B within {PONG_TIMEOUT_S} s")
        if i >= warmup:
            rtts.append(time.perf_counter() - start)
    return rtts


def round_orders(rounds: int) -> Iterator[tuple[str, str]]:
    """raw, bus, then bus, raw, ... so that slow drifts hit both the same."""
    for r in range(rounds):
        yield IMPLS if r % 2 == 0 else IMPLS[::-1]


def calibrate_count(conn: Any, sides: dict[str, Side], payload: bytes, plan: Plan) -> int:
    """Messages per trial so that a raw trial lasts about `plan.trial_s`; warms both sides up."""
    count = 2000 if len(payload) < 10_000 else 40
    for _ in range(4):
        warm = {impl: Throughput() for impl in IMPLS}
        rate = throughput_trial(conn, sides["raw"], payload, count, warm["raw"])
        throughput_trial(conn, sides["bus"], payload, count, warm["bus"])
        if math.isnan(rate) or warm["bus"].received != warm["bus"].sent:
            raise BenchError(f"warm-up lost messages at {len(payload)} B: {warm}")
        enough = count >= 0.5 * rate * plan.trial_s
        count = max(count, int(rate * plan.trial_s))
        if enough:
            break
    return count


def measure_throughput(
    conn: Any, sides: dict[str, Side], payload: bytes, plan: Plan
) -> tuple[int, dict[str, Throughput]]:
    """Calibrate the message count, then alternate raw and bus trials."""
    count = calibrate_count(conn, sides, payload, plan)
    results = {impl: Throughput() for impl in IMPLS}
    for order in round_orders(plan.rounds):
        for impl in order:
            throughput_trial(conn, sides[impl], payload, count, results[impl])
    return count, results


def measure_latency(sides: dict[str, Side], payload: bytes, plan: Plan) -> dict[str, list[float]]:
    pings = plan.pings if len(payload) < 10_000 else max(20, plan.pings // 6)
    rtts: dict[str, list[float]] = {impl: [] for impl in IMPLS}
    for order in round_orders(plan.rounds):
        for impl in order:
            rtts[impl] += latency_trial(sides[impl], payload, pings, warmup=max(2, pings // 20))
    return rtts


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop_process(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@contextlib.contextmanager
def router(endpoint: str) -> Iterator[None]:
    """A `user router` subprocess, stopped on exit."""
    from user.bus.router import router_reachable

    proc = subprocess.Popen(
        [sys.executable, "-m", "user", "router", "--listen", endpoint],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until(lambda: proc.poll() is None and router_reachable([endpoint], 0.5), 15.0, "the router")
        yield
    finally:
        _stop_process(proc)


@contextlib.contextmanager
def peer_process(target: Callable[..., None], *args: Any) -> Iterator[Any]:
    """The child process `target(pipe, *args)` (spawned: it shares nothing with us); yields our end of the pipe
    once the child said it is up."""
    ctx = multiprocessing.get_context("spawn")
    conn, child_conn = ctx.Pipe()
    proc = ctx.Process(target=target, args=(child_conn, *args), name="bench-peer", daemon=True)
    proc.start()
    try:
        _receive(conn, "up", STARTUP_TIMEOUT_S)
        yield conn
    finally:
        with contextlib.suppress(OSError):
            conn.send(("quit",))
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(5)


@dataclass
class BusResults:
    peers: int  # peers our raw session is linked to directly
    counts: dict[str, int]  # throughput messages per trial, by size label
    throughput: dict[str, dict[str, Throughput]]  # size label -> impl -> trials
    latency: dict[str, dict[str, list[float]]]  # size label -> impl -> RTTs (s)


def run_bus_benchmark(plan: Plan) -> BusResults:
    import zenoh

    from user.bus.zenoh_bus import ZenohBus
    from user.bus.zenoh_config import ZenohSettings, session_config

    endpoint = f"tcp/127.0.0.1:{free_port()}"
    settings = ZenohSettings(router=[endpoint])
    with contextlib.ExitStack() as stack:
        stack.enter_context(router(endpoint))
        conn = stack.enter_context(peer_process(peer_main, endpoint))
        session = zenoh.open(session_config(settings))
        stack.callback(session.close)
        bus = ZenohBus("bench_main", settings)
        stack.callback(bus.close)
        sides = {"raw": open_raw_side(session), "bus": open_bus_side(bus)}
        for side in sides.values():
            wait_for_echo(side)
        results = BusResults(len(list(session.info.peers_zid())), {}, {}, {})
        for label, size in SIZES:
            payload = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
            results.counts[label], results.throughput[label] = measure_throughput(conn, sides, payload, plan)
        for label, size in SIZES:
            payload = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
            results.latency[label] = measure_latency(sides, payload, plan)
        return results


def run_ros_benchmark(plan: Plan) -> BusResults:
    """Section 3: RosBus against raw rclpy, the same structure as `run_bus_benchmark`."""
    import bus_ros
    from user.bus.ros_runtime import RosRuntime

    with contextlib.ExitStack() as stack:
        conn = stack.enter_context(peer_process(bus_ros.peer_main))
        raw = bus_ros.RawRos("bench_main_raw")
        stack.callback(raw.close)
        runtime = RosRuntime("bench_main_bus")
        stack.callback(runtime.close)
        sides = bus_ros.open_sides(raw, runtime.bus, Side)
        for side in sides.values():
            wait_for_echo(side)
        results = BusResults(0, {}, {}, {})
        payloads = {label: bus_ros.payload(size) for label, size in SIZES}
        for label, _ in SIZES:
            results.counts[label], results.throughput[label] = measure_throughput(conn, sides, payloads[label], plan)
        for label, _ in SIZES:
            results.latency[label] = measure_latency(sides, payloads[label], plan)
        return results


def ros_missing() -> str | None:
    try:
        import rclpy  # noqa: F401
        import rosidl_runtime_py  # noqa: F401
    except ImportError as exc:
        return f"{exc} (source scripts/ros_env.sh)"
    return None


# --------------------------------------------------------------------------------------------------------
# Codec.


def make_image(seed: int) -> np.ndarray:
    """128x128 RGB: smooth gradients plus sensor-like noise (about 5 KB as JPEG at quality 90)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:128, 0:128]
    base = np.stack([x * 2, (y * 2 + seed * 16) % 256, (x + y) // 2 + 40], axis=-1).astype(np.float64)
    return np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype(np.uint8)


def make_observation() -> Any:
    from user.interfaces.domain import EncodedImage, Observation
    from user.interfaces.images import encode_jpeg

    stamp = 1_700_000_000_000_000_000
    images = tuple(
        EncodedImage(camera=cam, format="jpeg", data=encode_jpeg(make_image(k), quality=90), stamp_ns=stamp)
        for k, cam in enumerate(("wrist", "front"))
    )
    return Observation(
        robot_id="franka_1",
        task="peg_insertion",
        episode_id=12,
        step=345,
        state=np.linspace(-1.0, 1.0, 32, dtype=np.float32),
        stamp_ns=stamp,
        images=images,
    )


def calls_per_second(fn: Callable[[], object], seconds: float) -> float:
    """Call `fn` in growing batches for about `seconds`; calls per second."""
    calls, batch = 0, 1
    start = time.perf_counter()
    while True:
        for _ in range(batch):
            fn()
        calls += batch
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls / elapsed
        batch = min(batch * 2, max(1, int(calls * (seconds - elapsed) / elapsed)))


def run_codec_benchmark(plan: Plan) -> tuple[Any, dict[str, float]]:
    from user.interfaces import default_codec
    from user.interfaces.domain import observation_from_msg, observation_to_msg
    from user.interfaces.images import decode_image

    codec = default_codec()
    typename = "user/msg/Observation"
    obs = make_observation()
    msg = observation_to_msg(obs, codec)
    data = codec.encode(msg)
    back = observation_from_msg(codec.decode(data, typename))
    if back.images != obs.images or not np.array_equal(back.state, obs.state):
        raise BenchError("the Observation did not survive an encode/decode round trip")
    ops: dict[str, Callable[[], object]] = {
        "encode  Observation -> msg -> bytes": lambda: codec.encode(observation_to_msg(obs, codec)),
        "decode  bytes -> msg -> Observation": lambda: observation_from_msg(codec.decode(data, typename)),
        "CDR encode  msg -> bytes": lambda: codec.encode(msg),
        "CDR decode  bytes -> msg": lambda: codec.decode(data, typename),
        "JPEG decode  one 128x128 image": lambda: decode_image(obs.images[0].data),
    }
    rates: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(plan.codec_repeats):  # interleaved, like the bus trials
        for name, fn in ops.items():
            rates[name].append(calls_per_second(fn, plan.codec_s))
    return (obs, len(data)), {name: statistics.median(r) for name, r in rates.items()}


# --------------------------------------------------------------------------------------------------------
# Report.


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _median(values: list[float]) -> float:
    """Median of the values that are not NaN (NaN if none)."""
    finite = [v for v in values if not math.isnan(v)]
    return statistics.median(finite) if finite else math.nan


def _throughput_row(label: str, impl: str, size: int, count: int, t: Throughput) -> str:
    finite = [r for r in t.rates if not math.isnan(r)]
    med = _median(t.rates)
    spread = f"({min(finite):,.0f} .. {max(finite):,.0f})" if finite else "(none complete)"
    lost = "" if t.received == t.sent else f"  LOST {t.sent - t.received:,}"
    if t.received and t.received_bytes % t.received:
        lost += f"  BYTES {t.received_bytes:,} not a multiple of {t.received:,} messages"
    received = f"{t.received:,}/{t.sent:,}"
    return f"{label:<8} {impl:<5} {count:>10,} {med:>13,.0f} {spread:>23} {med * size / 1e6:>9.1f} {received:>19}{lost}"


def report_throughput(results: BusResults, plan: Plan, section: str = "1a. Zenoh") -> dict[str, float]:
    print(
        f"\n{section}: throughput, reliable, publisher and subscriber in separate processes, "
        f"median of {plan.rounds} interleaved rounds"
    )
    print(
        f"{'payload':<8} {'impl':<5} {'msgs/trial':>10} {'msgs/s p50':>13} {'(min .. max)':>23} "
        f"{'MB/s':>9} {'received/sent':>19}"
    )
    ratios = {}
    for label, size in SIZES:
        by_impl = results.throughput[label]
        for impl in IMPLS:
            print(_throughput_row(label, impl, size, results.counts[label], by_impl[impl]))
        ratios[label] = _median(by_impl["bus"].rates) / _median(by_impl["raw"].rates)
        pairs = [
            b / r for r, b in zip(by_impl["raw"].rates, by_impl["bus"].rates, strict=True) if not math.isnan(b / r)
        ]
        spread = f"(per-round pairs {min(pairs):.2f} .. {max(pairs):.2f})" if pairs else ""
        ok = ratios[label] >= THROUGHPUT_TARGET
        print(f"{'':<8} bus/raw = {ratios[label]:.3f} {spread}   target >= {THROUGHPUT_TARGET}  {_verdict(ok)}")
    return ratios


def report_latency(results: BusResults, section: str = "1b. Zenoh") -> dict[str, float]:
    print(f"\n{section}: round-trip latency (ping -> echo in the child -> pong), one in flight, ms")
    print(f"{'payload':<8} {'pings':>6} {'raw p50':>9} {'bus p50':>9} {'bus-raw':>9} {'raw p90':>9} {'bus p90':>9}")
    diffs = {}
    for label, _ in SIZES:
        rtts = results.latency[label]
        p50 = {impl: 1e3 * statistics.median(rtts[impl]) for impl in IMPLS}
        p90 = {impl: 1e3 * float(np.percentile(rtts[impl], 90)) for impl in IMPLS}
        diffs[label] = p50["bus"] - p50["raw"]
        ok = diffs[label] <= LATENCY_TARGET_MS
        print(
            f"{label:<8} {len(rtts['raw']):>6} {p50['raw']:>9.3f} {p50['bus']:>9.3f} {diffs[label]:>+9.3f} "
            f"{p90['raw']:>9.3f} {p90['bus']:>9.3f}   (target <= +{LATENCY_TARGET_MS}) {_verdict(ok)}"
        )
    return diffs


def report_codec(sample: tuple[Any, int], rates: dict[str, float]) -> None:
    obs, size = sample
    jpegs = " + ".join(f"{len(img.data):,}" for img in obs.images)
    print(
        f"\n4. Codec: Observation with 2 x 128x128 JPEG q90 ({jpegs} B) and {obs.state.size} float32 "
        f"-> {size:,} B message"
    )
    print(f"{'operation':<38} {'per s':>10} {'us each':>9}")
    for name, rate in rates.items():
        print(f"{name:<38} {rate:>10,.0f} {1e6 / rate:>9.1f}")


def summary(ratios: dict[str, float], diffs: dict[str, float]) -> str:
    parts = [f"throughput bus/raw {label} {r:.2f} {_verdict(r >= THROUGHPUT_TARGET)}" for label, r in ratios.items()]
    parts += [f"latency bus-raw {label} {d:+.3f} ms {_verdict(d <= LATENCY_TARGET_MS)}" for label, d in diffs.items()]
    return f"SUMMARY (targets: throughput >= {THROUGHPUT_TARGET}, latency <= +{LATENCY_TARGET_MS} ms): " + "; ".join(
        parts
    )


def _lost(results: BusResults) -> bool:
    return any(
        t.received != t.sent or (t.received and t.received_bytes % t.received)
        for label, _ in SIZES
        for t in results.throughput[label].values()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer and shorter trials (~25 s)")
    parser.add_argument("--rounds", type=int, default=None, help="raw/bus pairs per measurement")
    parser.add_argument("--runtime", choices=("zenoh", "ros", "all"), default="all", help="which runtimes")
    args = parser.parse_args(argv)
    plan = QUICK_PLAN if args.quick else DEFAULT_PLAN
    if args.rounds:
        plan = Plan(args.rounds, plan.trial_s, plan.pings, plan.codec_s, plan.codec_repeats)
    started = time.monotonic()
    print(
        f"bench/bus.py ({'quick' if args.quick else 'default'}): Python {sys.version.split()[0]}, "
        f"{multiprocessing.cpu_count()} CPUs; ratios are what count, absolute numbers depend on the machine"
    )
    lines, lost = [], False
    if args.runtime in ("zenoh", "all"):
        try:
            results = run_bus_benchmark(plan)
        except BenchError as exc:
            print(f"Zenoh bus benchmark failed: {exc}", file=sys.stderr)
            return 1
        print(
            f"(this process's raw session has {results.peers} direct peer links besides the router: the child's "
            f"two sessions and our bus; data does not pass through the router)"
        )
        lines.append("Zenoh " + summary(report_throughput(results, plan), report_latency(results)))
        lost |= _lost(results)
    if args.runtime in ("ros", "all"):
        missing = ros_missing()
        if missing is not None:
            print(f"\n3. ROS 2: skipped, the ROS runtime is not available: {missing}")
            if args.runtime == "ros":
                return 1
        else:
            try:
                ros = run_ros_benchmark(plan)
            except (BenchError, RuntimeError) as exc:
                print(f"ROS 2 bus benchmark failed: {exc}", file=sys.stderr)
                return 1
            throughput = report_throughput(ros, plan, "3a. ROS 2 (RosBus vs raw rclpy, Fast DDS)")
            lines.append("ROS 2 " + summary(throughput, report_latency(ros, "3b. ROS 2 (RosBus vs raw rclpy)")))
            lost |= _lost(ros)
    report_codec(*run_codec_benchmark(plan))
    print()
    for line in lines:
        print(line)
    print(f"(took {time.monotonic() - started:.0f} s)")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
