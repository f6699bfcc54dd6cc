"""Real-time chunking at the edge (issue 35, item 3): does the robot ever wait for its next chunk?

One simulated arm at a lab site (10 Hz, real time, cameras on) plays the action chunks of a test-sized π0-shaped VLA
that a rollout computes at a cloud site. Between the sites' Zenoh routers: a user-space relay holding every byte
`--delay-ms` in each direction (default 25 ms: a 50 ms round trip; test/helpers/link_relay.py, these machines have
no netem). The rollout adds `--inference-ms` (default 200 ms) to every chunk's computation, as a large model on a
GPU would take. Two modes of the rollout, one after the other in this run, each a fresh `user bringup`:

- rtc: the next chunk is asked for `execute_horizon - delay_steps` steps into the current one and sampled to
  continue the actions the arm plays meanwhile (guided inpainting, `user.policies.pi0.rtc`);
- replace: plain chunk replacement, the next chunk asked for once the current one is used up.

Measured by the robot itself (its log's line per episode, `user.nodes.parts.robot_chunks`): the control periods it
held for lack of an action after each episode's first action (the first chunk of an episode is waited for in both
modes and not counted), the steps it took, the chunks it played and how often a newer chunk took over. No learner:
the rollout acts with the model's initial weights (the point is timing, not skill).

Run: python3 bench/rtc.py [--quick] [--duration-s 60] [--delay-ms 25] [--inference-ms 200] [--json PATH]
     [--dry-run]   (default: about 3 min on 2 cores; --quick: 25 s per mode)
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from bringup import REPO, Bringup, free_port

sys.path.insert(0, str(REPO))
from test.helpers.link_relay import LinkRelay, LinkShape
from user.deploy.deployment import load
from user.deploy.node_params import check_node_params

ARM = "arm_rtc"
RATE_HZ = 10.0
CHUNK = 10  # H, actions per chunk
EXECUTE = 5  # s: steps of a chunk played before the next should take over
DELAY = 3  # d: control periods from an observation to its chunk's arrival (200 ms + 50 ms round trip at 10 Hz)
EPISODE_LINE = re.compile(
    r"chunks: episode (\d+): (\d+) steps, held (\d+) periods .*?; (\d+) chunks played, (\d+) switches in all"
)
LEARNING = {
    "policy_id": "rtc_bench",
    "policy_kind": "vla",
    "vla": {
        "size": "test",
        "seed": 0,
        "chunk_size": CHUNK,
        "state_dim": 17,
        "action_dim": 7,
        "instruction": "insert the peg into the hole",
        "observation": {"cameras": ["front"], "image_size": 32, "image_mean": [0.5] * 3, "image_std": [0.5] * 3},
    },
    "algorithm": "hg_dagger",
}


@dataclass
class ModeResult:
    """What the robot reported over one mode's run."""

    mode: str
    episodes: int  # episodes the robot summarised (ended)
    steps: int  # steps taken in those episodes
    held_after_first: int  # periods held for lack of an action after each episode's first action, summed
    held_per_episode: list[int]
    chunks_played: int
    switches: int


def deployment(path: Path, ports: dict[str, int], mode: str, inference_s: float, domain: str) -> Path:
    chunking = {"mode": mode, "execute_horizon": EXECUTE, "delay_steps": DELAY, "added_latency_s": inference_s}
    doc: dict[str, Any] = {
        "name": f"rtc_{mode}",
        "domain": domain,
        "sites": {
            "cloud": {"endpoints": [f"tcp/127.0.0.1:{ports['cloud']}"], "dial": [f"tcp/127.0.0.1:{ports['relay']}"]},
            "lab": {"endpoints": [f"tcp/127.0.0.1:{ports['lab']}"], "connect": ["cloud"]},
        },
        "nodes": [
            {"name": "rollout", "kind": "rollout", "site": "cloud",
             "params": {"robots": [ARM], "learning": LEARNING, "wait_for_weights": False, "send": "chunks",
                        "chunking": chunking, "torch_threads": 1}},
            {"name": ARM, "kind": "robot", "site": "lab",
             "params": {"robot_id": ARM, "driver": "sim_franka", "task": "peg_insertion", "realtime": True,
                        "control_rate_hz": RATE_HZ, "cameras": True, "max_steps": 40, "actions_from": "chunks",
                        "outbox_episodes": 0}},
        ],
    }  # fmt: skip
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def robot_figures(log: Path, mode: str) -> ModeResult:
    """The robot's per-episode lines: periods held after the first action, and the running chunk counters."""
    text = log.read_text(errors="replace") if log.exists() else ""
    held: list[int] = []
    steps = played = switches = 0
    for _episode, taken, stalls, chunks, switched in EPISODE_LINE.findall(text):
        held.append(int(stalls))
        steps += int(taken)
        played, switches = int(chunks), int(switched)
    return ModeResult(mode, len(held), steps, sum(held), held, played, switches)


def run_mode(work: Path, mode: str, duration_s: float, shape: LinkShape, inference_s: float) -> ModeResult:
    ports = {k: free_port() for k in ("cloud", "lab", "relay")}
    relay = LinkRelay(ports["relay"], ports["cloud"], shape)
    run_dir = work / mode
    config = deployment(work / f"{mode}.yaml", ports, mode, inference_s, f"rtc_{mode}_{ports['cloud']}")
    bringup = Bringup(config, run_dir, work / f"{mode}.out")
    try:
        deadline = time.monotonic() + duration_s
        while time.monotonic() < deadline and bringup.alive():
            time.sleep(0.5)
        if not bringup.alive():
            raise SystemExit(f"{mode}: user bringup ended early; see {work / f'{mode}.out'}")
    finally:
        bringup.stop_and_report(mode)
        relay.close()
    return robot_figures(run_dir / "logs" / f"{ARM}.log", mode)


def dry_run(work: Path) -> None:
    for mode in ("rtc", "replace"):
        ports = {k: free_port() for k in ("cloud", "lab", "relay")}
        config = deployment(work / f"{mode}.yaml", ports, mode, 0.2, "rtc_dry")
        check_node_params(load(config), work / f"{mode}_run")
    print("deployments check")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="25 s per mode")
    parser.add_argument("--duration-s", type=float, default=60.0, help="seconds each mode runs")
    parser.add_argument("--delay-ms", type=float, default=25.0, help="one-way link delay, ms (half the round trip)")
    parser.add_argument("--inference-ms", type=float, default=200.0, help="time added to every chunk's computation")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--dry-run", action="store_true", help="only check the two deployments")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rtc_bench_"))
    try:
        if args.dry_run:
            dry_run(work)
            return 0
        duration = 25.0 if args.quick else args.duration_s
        shape = LinkShape(delay_s=args.delay_ms / 1e3)
        results = [run_mode(work, mode, duration, shape, args.inference_ms / 1e3) for mode in ("rtc", "replace")]
        print_table(results, args)
        if args.json is not None:
            args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
        return 0
    finally:
        if args.keep:
            print(f"work directory: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def print_table(results: list[ModeResult], args: argparse.Namespace) -> None:
    print(
        f"link {2 * args.delay_ms:.0f} ms round trip, inference {args.inference_ms:.0f} ms, {RATE_HZ:.0f} Hz, "
        f"chunks of {CHUNK}, execute horizon {EXECUTE}, delay {DELAY} periods"
    )
    rows: list[tuple[str, Callable[[ModeResult], str]]] = [
        ("episodes ended", lambda r: str(r.episodes)),
        ("steps in them", lambda r: str(r.steps)),
        ("periods held for lack of an action (after an episode's first)", lambda r: str(r.held_after_first)),
        ("  per 100 steps", lambda r: f"{100 * r.held_after_first / r.steps:.1f}" if r.steps else "-"),
        ("chunks played", lambda r: str(r.chunks_played)),
        ("switches (a newer chunk took over)", lambda r: str(r.switches)),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{'':{width}}  " + "  ".join(f"{r.mode:>10}" for r in results))
    for name, cell in rows:
        print(f"{name:{width}}  " + "  ".join(f"{cell(r):>10}" for r in results))


if __name__ == "__main__":
    sys.exit(main())
