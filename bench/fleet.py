"""Fleet scale (issue 36, item 5): what a bigger fleet costs one learner and one rollout.

Lightweight lock-step robots: the real robot node with the `gym` driver on Pendulum-v1 (no physics engine; a step
is a few lines of numpy), each in its own process, acting only on the rollout's action for each step (a step
without one in time is held, as on a real robot), `--rate-hz` steps per second in real time (0: not real time, as
fast as the rollout answers and the learner's data credit allows), episodes of `--episode-steps` steps. ONE learner
stores every robot's transitions and acknowledges every episode; ONE rollout serves all of them; a private Zenoh
router between them, all under `user bringup`. Fleets of each `--sizes` run one after the other, each a fresh
deployment, on the same machine.

Training is kept minimal, on purpose (the point is ingest, receipts, credit and weight fan-out): SAC with 64x64
networks, batch 64, 0.05 gradient steps per transition, the policy published every `publish_every` update calls
chosen so that a version goes out about every 2 s whatever the fleet's size. The rollout switches a robot to new
weights at once (`apply: immediate`), so the fan-out below is delivery, not the wait for an episode boundary (with
the default `episode_boundary` it grows by up to one episode). Real-time robots never wait for the learner's data
credit; its credit messages still reach every robot.

Measured over a window of `--window-s` seconds that starts once every robot has ended an episode:

- stored transitions / s: the learner's `buffer_transitions` (its stats, every 0.5 s) at the window's end minus at
  its start, over the window; beside it what the robots offered (robots x rate) and per robot;
- the learner's CPU seconds per 1,000 stored transitions (utime + stime from /proc/<pid>/stat over the window);
- CPU share over the window (1.0 = one core) of the learner, the rollout, the router, the robots (mean and sum) and
  this probe, and how busy the whole machine was (/proc/stat), with the 1-minute load average (mean of samples);
- acknowledgement latency: an episode's END to the learner's receipt (p50 / p99 / max, and ENDs never receipted);
- weight fan-out: a version's first chunk to the last robot's first action with it (p50 / max, and versions some
  robot never acted with);
- scaling efficiency 1 -> 4 robots: stored rate at 4 / (4 x stored rate at 1) (target >= 0.8 while the machine is
  not saturated), and for each size, whether it kept up (stored per robot >= 90 % of one robot's alone) and if not,
  what saturated (`fleet_probe.saturated`).

Run: python3 bench/fleet.py [--quick] [--sizes 1,4,16,32] [--window-s 60] [--rate-hz 20] [--episode-steps 50]
     [--dry-run] [--json PATH] [--keep]   (default: about 8 min on 2 cores; --quick: 1 and 2 robots, 10 s windows)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from bringup import Bringup, free_port, read_cpu_s, wait_for
from fleet_probe import FleetProbe, ack_latencies, ack_split, fan_outs, machine_busy, percentiles_ms, saturated
from user.bus.router import router_reachable
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings
from user.deploy.deployment import load
from user.deploy.node_params import check_node_params

EFFICIENCY_TARGET = 0.8
KEEPS_UP = 0.9  # stored per robot >= this x one robot's alone
UPDATES_PER_STEP = 0.05
PUBLISH_PERIOD_S = 2.0
STATS_TOPIC = "/learner/stats"
WEIGHTS_TOPIC = "/policy/weights"
LEARNING = {
    "policy_id": "fleet_pendulum",
    "algorithm": "sac",
    "mlp": {"state_dim": 3, "action_dim": 1, "hidden": [64, 64]},
    "sac": {"batch_size": 64, "critic_hidden": [64, 64]},
}


def robot_ids(n: int) -> list[str]:
    return [f"lock_{i:02d}" for i in range(n)]


def deployment(
    n: int,
    endpoint: str,
    run_dir: Path,
    rate_hz: float,
    episode_steps: int,
    *,
    fsync: str = "episode",
    learner_params: Sequence[str] = (),
) -> dict[str, Any]:
    """One learner, one rollout and `n` lock-step gym robots on a private router; `fsync`: the buffer's policy;
    `learner_params`: the learner's settings changed, each `dotted.name=YAML value`."""
    robots = robot_ids(n)
    offered = n * (rate_hz or 100.0)  # not real time: about 100 steps/s per robot assumed for the publication cadence
    publish_every = max(1, round(offered * UPDATES_PER_STEP * PUBLISH_PERIOD_S))
    learner = {
        "robots": robots,
        "run_dir": str(run_dir),
        "learning": LEARNING,
        "torch_threads": 1,
        "stats_period_s": 0.5,
        "checkpoint_period_s": 3600.0,
        "pacing": {"updates_per_step": UPDATES_PER_STEP, "min_transitions": 200, "publish_every": publish_every},
        "buffer": {"storage": {"fsync": fsync}},
    }
    for item in learner_params:
        set_dotted(learner, item)
    rollout = {"robots": robots, "learning": LEARNING, "weights_publisher": "learner", "torch_threads": 1,
               "apply": "immediate"}  # fmt: skip
    nodes: list[dict[str, Any]] = [
        {"name": "learner", "kind": "learner", "params": learner},
        {"name": "rollout", "kind": "rollout", "params": rollout},
    ]
    for i, robot in enumerate(robots):
        params = {
            "robot_id": robot,
            "driver": "gym",
            "gym_env": "Pendulum-v1",
            "realtime": rate_hz > 0,
            "control_rate_hz": rate_hz or 100.0,
            "max_steps": episode_steps,
            "seed": 1000 * i,
            "wait_for_consumer_s": 300.0,
        }
        nodes.append({"name": robot, "kind": "robot", "params": params})
    return {"name": f"bench_fleet_{n}", "router": {"endpoints": [endpoint], "start": "always"}, "nodes": nodes}


@dataclass
class Point:
    robots: int
    window_s: float
    stored_per_s: float
    received_per_s: float
    offered_per_s: float  # robots x rate (nan when not real time)
    learner_cpu_per_1k: float  # CPU seconds of the learner per 1,000 stored transitions
    shares: dict[str, float]  # CPU share over the window (1.0 = one core)
    machine_busy: float  # fraction of all CPUs
    load: float  # mean 1-minute load average
    ack_ms: tuple[float, float, float, int]
    acks_missing: int
    end_to_done_ms: tuple[float, float, float, int]  # --split-acks: END -> the done step's arrival (else NaN)
    done_to_ack_ms: tuple[float, float, float, int]  # --split-acks: the done step (or END, if later) -> receipt
    fanout_ms: tuple[float, float, float, int]
    versions_unreached: int
    startup_s: float


def cpu_of(pids: dict[str, int]) -> dict[str, float]:
    return {name: cpu for name, pid in pids.items() if (cpu := read_cpu_s(pid)) is not None}


def shares_over(before: dict[str, float], after: dict[str, float], span: float, robots: list[str]) -> dict[str, float]:
    """CPU share per node over `span` s; robots summed and averaged; this process as `probe`."""
    used = {name: (after[name] - before[name]) / span for name in after if name in before}
    robot_shares = [used.get(r, math.nan) for r in robots]
    out = {name: used.get(name, math.nan) for name in ("learner", "rollout", "router")}
    out["robots (sum)"] = float(sum(robot_shares))
    out["robot (mean)"] = float(sum(robot_shares) / len(robot_shares))
    out["probe"] = used.get("probe", math.nan)
    return out


def set_dotted(params: dict[str, Any], item: str) -> None:
    """Set `params[a][b]...` from `a.b...=VALUE` (VALUE read as YAML); `ValueError` for an item without `=`."""
    name, sep, value = item.partition("=")
    if not sep or not name:
        raise ValueError(f"--learner-param {item!r}: expected NAME=VALUE")
    *path, last = name.split(".")
    for key in path:
        params = params.setdefault(key, {})
    params[last] = yaml.safe_load(value)


def run_size(n: int, args: argparse.Namespace, workdir: Path) -> Point:
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    dep = deployment(
        n,
        endpoint,
        workdir / f"run_{n}",
        args.rate_hz,
        args.episode_steps,
        fsync=args.fsync,
        learner_params=args.learner_param,
    )
    path = workdir / f"fleet_{n}.yaml"
    path.write_text(yaml.safe_dump(dep, sort_keys=False))
    robots = robot_ids(n)
    print(f"\n[{n} robots] starting (load average {os.getloadavg()[0]:.2f})", flush=True)
    bringup = Bringup(path, workdir / f"run_{n}", workdir / f"fleet_{n}.out")
    bus: ZenohBus | None = None
    probe: FleetProbe | None = None
    try:
        wait_for(lambda: router_reachable([endpoint], 0.5), 60.0, bringup.alive, "the router")
        bus = ZenohBus("bench_fleet_probe", ZenohSettings(router=[endpoint]))
        probe = FleetProbe(bus, robots, STATS_TOPIC, WEIGHTS_TOPIC, done_steps=args.split_acks)
        p = probe
        wait_for(lambda: p.robots_ended() >= set(robots), args.startup_s, bringup.alive, "every robot's first episode")
        wait_for(lambda: p.stored_at(time.time()) is not None, 30.0, bringup.alive, "the learner's stats")
        startup = time.time() - bringup.started
        bringup.start_sampling(2.0)
        t0, busy0, cpu0 = time.time(), machine_busy(), {**cpu_of(bringup.pids()), "probe": time.process_time()}
        print(f"[{n} robots] all acting after {startup:.0f} s; measuring {args.window_s:g} s", flush=True)
        wait_for(lambda: time.time() >= t0 + args.window_s, args.window_s + 5.0, bringup.alive, "the window's end")
        t1, busy1, cpu1 = time.time(), machine_busy(), {**cpu_of(bringup.pids()), "probe": time.process_time()}
        grace = t1 + max(5.0, 2 * PUBLISH_PERIOD_S)  # receipts and actions of the window's last ENDs and versions
        wait_for(lambda: time.time() >= grace, 30.0, bringup.alive, "the receipts of the window's last episodes")
        s0, s1 = probe.stored_at(t0), probe.stored_at(t1)
        observed = probe.snapshot()
        load = [v for t, v in bringup.load if t0 <= t <= t1] or [os.getloadavg()[0]]
    finally:
        if probe is not None:
            probe.destroy()
        if bus is not None:
            bus.close()
        bringup.stop_and_report(f"{n} robots")
    span = t1 - t0
    assert s0 is not None and s1 is not None  # waited for above
    stored = s1[0] - s0[0]
    acks, missing = ack_latencies(observed, (t0, t1))
    to_done, to_ack = ack_split(observed, (t0, t1))
    fans, unreached = fan_outs(observed, robots, (t0, t1))
    return Point(
        robots=n,
        window_s=span,
        stored_per_s=stored / span,
        received_per_s=(s1[1] - s0[1]) / span,
        offered_per_s=n * args.rate_hz if args.rate_hz > 0 else math.nan,
        learner_cpu_per_1k=(cpu1["learner"] - cpu0["learner"]) / (stored / 1000.0) if stored else math.nan,
        shares=shares_over(cpu0, cpu1, span, robots),
        machine_busy=(busy1[0] - busy0[0]) / (busy1[1] - busy0[1]),
        load=sum(load) / len(load),
        ack_ms=percentiles_ms(acks),
        acks_missing=missing,
        end_to_done_ms=percentiles_ms(to_done),
        done_to_ack_ms=percentiles_ms(to_ack),
        fanout_ms=percentiles_ms(fans),
        versions_unreached=unreached,
        startup_s=startup,
    )


def keeps_up(point: Point, alone: Point | None) -> bool | None:
    if alone is None or not alone.stored_per_s:
        return None
    return point.stored_per_s / point.robots >= KEEPS_UP * alone.stored_per_s


def efficiency(points: dict[int, Point], of: int = 4) -> float | None:
    if 1 not in points or of not in points or not points[1].stored_per_s:
        return None
    return points[of].stored_per_s / (of * points[1].stored_per_s)


def report(points: dict[int, Point], cores: int) -> None:
    sizes = sorted(points)
    print("\nFleet scale (one learner, one rollout; columns: robots)")
    print(f"{'':<46}" + "".join(f"{n:>10}" for n in sizes))

    def row(label: str, fmt: Any) -> None:
        print(f"{label:<46}" + "".join(f"{fmt(points[n]):>10}" for n in sizes))

    row("window, s", lambda p: f"{p.window_s:.0f}")
    row(f"machine load average (mean, {cores} CPUs)", lambda p: f"{p.load:.2f}")
    row("machine CPU busy, % (all processes)", lambda p: f"{100 * p.machine_busy:.0f}")
    row("offered transitions / s (robots x rate)", lambda p: f"{p.offered_per_s:.0f}")
    row("received transitions / s (learner)", lambda p: f"{p.received_per_s:.1f}")
    row("stored transitions / s (learner)", lambda p: f"{p.stored_per_s:.1f}")
    row("  per robot", lambda p: f"{p.stored_per_s / p.robots:.2f}")
    row("learner CPU s per 1,000 stored", lambda p: f"{p.learner_cpu_per_1k:.3f}")
    for name in ("learner", "rollout", "router", "robots (sum)", "robot (mean)", "probe"):
        row(f"CPU share, {name} (1.0 = one core)", lambda p, k=name: f"{p.shares[k]:.3f}")
    row("ack latency END -> receipt p50, ms", lambda p: f"{p.ack_ms[0]:.1f}")
    row("ack latency p99, ms", lambda p: f"{p.ack_ms[1]:.1f}")
    row("ack latency max, ms", lambda p: f"{p.ack_ms[2]:.1f}")
    row("  episodes ended / never receipted", lambda p: f"{p.ack_ms[3] + p.acks_missing}/{p.acks_missing}")
    if any(p.end_to_done_ms[3] for p in points.values()):  # --split-acks
        row("  END -> done step p50, ms", lambda p: f"{p.end_to_done_ms[0]:.1f}")
        row("  END -> done step p99, ms", lambda p: f"{p.end_to_done_ms[1]:.1f}")
        row("  done step -> receipt p50, ms", lambda p: f"{p.done_to_ack_ms[0]:.1f}")
        row("  done step -> receipt p99, ms", lambda p: f"{p.done_to_ack_ms[1]:.1f}")
    row("weight fan-out to the last robot p50, ms", lambda p: f"{p.fanout_ms[0]:.0f}")
    row("weight fan-out max, ms", lambda p: f"{p.fanout_ms[2]:.0f}")
    row("  versions published / never reached all", lambda p: f"{p.fanout_ms[3] + p.versions_unreached}"
        f"/{p.versions_unreached}")  # fmt: skip
    row("start-up until every robot ended one, s", lambda p: f"{p.startup_s:.0f}")
    alone = points.get(1)
    print("\nScaling:")
    for n in sizes:
        p = points[n]
        up = keeps_up(p, alone)
        where = saturated({k: v for k, v in p.shares.items() if k != "robots (sum)"}, p.machine_busy, cores)
        status = "n/a" if up is None else ("keeps up" if up else f"stops scaling: {where}")
        print(f"  {n:>3} robots: {p.stored_per_s / p.robots:.2f} stored/s per robot; {status}")
    eff = efficiency(points)
    if eff is None:
        print("  scaling efficiency 1 -> 4 robots: n/a (needs sizes 1 and 4)")
    else:
        busy = points[4].machine_busy >= 0.9
        verdict = ("met" if eff >= EFFICIENCY_TARGET else "NOT MET") + (" (machine saturated at 4)" if busy else "")
        print(f"  scaling efficiency 1 -> 4 robots: {eff:.2f} (target >= {EFFICIENCY_TARGET}): {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 and 2 robots, 10 s windows")
    parser.add_argument("--sizes", default=None, help="comma-separated fleet sizes (default 1,4,16,32)")
    parser.add_argument("--window-s", type=float, default=None, help="measured window per size (default 60)")
    parser.add_argument("--rate-hz", type=float, default=20.0, help="steps per second per robot; 0: not real time")
    parser.add_argument("--episode-steps", type=int, default=50, help="steps per episode")
    parser.add_argument("--startup-s", type=float, default=600.0, help="longest wait for every robot's first END")
    parser.add_argument("--dry-run", action="store_true", help="write and check the deployments, start nothing")
    parser.add_argument("--json", type=Path, default=None, help="write every size's figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the run directories and logs")
    parser.add_argument(
        "--split-acks",
        action="store_true",
        help="also read every transition, to split the ack latency at each episode's done step",
    )
    parser.add_argument(
        "--fsync",
        choices=("episode", "segment", "never"),
        default="episode",
        help="the learner's buffer.storage.fsync (default episode, as shipped): what a stored episode waits for",
    )
    parser.add_argument(
        "--learner-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a learner setting changed (dotted name, YAML value; repeatable), e.g. tensorboard=false",
    )
    args = parser.parse_args(argv)
    try:
        for item in args.learner_param:
            set_dotted({}, item)
    except ValueError as exc:
        parser.error(str(exc))
    sizes = [int(s) for s in (args.sizes or ("1,2" if args.quick else "1,4,16,32")).split(",") if s.strip()]
    if not sizes or min(sizes) < 1:
        parser.error("--sizes: positive fleet sizes")
    if args.rate_hz < 0 or args.episode_steps < 1:
        parser.error("--rate-hz >= 0 and --episode-steps >= 1")
    args.window_s = args.window_s or (10.0 if args.quick else 60.0)
    cores = os.cpu_count() or 1
    print(
        f"bench/fleet.py: Python {sys.version.split()[0]}, {cores} CPUs, sizes {sizes}, {args.rate_hz:g} Hz per robot "
        f"(0: not real time), {args.episode_steps}-step episodes, {args.window_s:g} s windows; training minimal "
        f"({UPDATES_PER_STEP} gradient steps per transition), buffer fsync {args.fsync}; learner settings changed: "
        f"{', '.join(args.learner_param) or 'none'}; "
        f"load average at start {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    workdir = Path(tempfile.mkdtemp(prefix="bench_fleet_"))
    started = time.monotonic()
    try:
        if args.dry_run:
            return dry_run(sizes, args, workdir)
        points: dict[int, Point] = {}
        for n in sizes:
            points[n] = run_size(n, args, workdir)
            if args.json is not None:
                args.json.write_text(json.dumps([asdict(p) for p in points.values()], indent=1))
        report(points, cores)
    finally:
        if args.keep:
            print(f"\nrun directories and logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n(took {time.monotonic() - started:.0f} s; load average at the end {os.getloadavg()[0]:.2f})")
    return 0


def dry_run(sizes: list[int], args: argparse.Namespace, workdir: Path) -> int:
    """Write each size's deployment and load it as `user bringup` would (every node's settings checked)."""
    for n in sizes:
        path = workdir / f"fleet_{n}.yaml"
        shape = deployment(
            n,
            "tcp/127.0.0.1:7447",
            workdir,
            args.rate_hz,
            args.episode_steps,
            fsync=args.fsync,
            learner_params=args.learner_param,
        )
        path.write_text(yaml.safe_dump(shape))
        checked = load(path)
        check_node_params(checked, path)
        print(f"[{n} robots] deployment checked: {len(checked.nodes)} nodes", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
