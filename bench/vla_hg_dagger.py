"""The VLA learning online by HG-DAgger on the CPU (issue 35's acceptance): `user bringup vla_hg_dagger_cpu` for
`--duration-s` (default 30 min), then its figures from the run's episodes.csv.

The deployment (config/vla_hg_dagger_cpu.yaml): a test-sized π0-shaped VLA learns peg insertion on one simulated
arm, 10 expert demonstrations first, then the VLA acts and a scripted corrector takes over when the peg strays from
the expert's path or stalls on it. Printed: the online episodes, the mean intervened steps per episode of the first
10 and of the last 10 (target: last <= half the first), the success rate of the last 20 (target >= 80 %), and the
curve: per block of 10 online episodes, the mean intervened steps and the success rate, with the wall time at the
block's end (from the run's start).

Run: python3 bench/vla_hg_dagger.py [--duration-s 1800] [--keep] [--json PATH]
     python3 bench/vla_hg_dagger.py --run-dir RUN   (only the figures of a run made before)
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bringup import REPO, Bringup

BLOCK = 10  # online episodes per point of the curve


@dataclass
class Figures:
    online_episodes: int
    demos: int
    interventions_first_10: float  # mean intervened steps per episode
    interventions_last_10: float
    success_last_20: float
    curve: list[tuple[float, float, float]]  # (seconds at the block's end, mean intervened steps, success rate)

    @property
    def met(self) -> bool:
        return self.interventions_last_10 <= self.interventions_first_10 / 2 and self.success_last_20 >= 0.8


def figures(run: Path) -> Figures:
    """The acceptance figures of a run directory's episodes.csv."""
    with (run / "episodes.csv").open() as f:
        rows = list(csv.DictReader(f))
    demo = [r for r in rows if r["is_demo"].lower() in ("true", "1")]
    online = [r for r in rows if r not in demo]
    if len(online) < 20:
        raise SystemExit(f"{run}: only {len(online)} online episodes; 20 are needed for the figures")
    steps = [int(r["interventions"]) for r in online]
    success = [r["success"].lower() in ("true", "1") for r in online]
    curve = []
    for start in range(0, len(online) - BLOCK + 1, BLOCK):
        block = slice(start, start + BLOCK)
        curve.append(
            (float(online[start + BLOCK - 1]["elapsed_s"]), sum(steps[block]) / BLOCK, sum(success[block]) / BLOCK)
        )
    return Figures(len(online), len(demo), sum(steps[:10]) / 10, sum(steps[-10:]) / 10, sum(success[-20:]) / 20, curve)


def print_figures(f: Figures, run: Path) -> None:
    print(f"run {run}: {f.online_episodes} online episodes after {f.demos} demonstrations")
    print(f"intervened steps per episode, first 10: {f.interventions_first_10:.1f}")
    print(f"intervened steps per episode, last 10:  {f.interventions_last_10:.1f} (target <= half the first)")
    print(f"success of the last 20:                 {f.success_last_20:.0%} (target >= 80 %)")
    print(f"acceptance: {'met' if f.met else 'NOT met'}")
    print("curve (per 10 online episodes): seconds, mean intervened steps, success")
    for seconds, steps, rate in f.curve:
        print(f"  {seconds:7.0f} s  {steps:5.1f}  {rate:4.0%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=1800.0, help="how long the deployment runs")
    parser.add_argument("--run-dir", type=Path, help="only compute the figures of this run directory")
    parser.add_argument("--keep", action="store_true", help="keep the run directory")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.run_dir is not None:
        run = args.run_dir
    else:
        work = Path(tempfile.mkdtemp(prefix="vla_hg_dagger_"))
        run = work / "run"
        bringup = Bringup(REPO / "config" / "vla_hg_dagger_cpu.yaml", run, work / "bringup.out")
        try:
            deadline = time.monotonic() + args.duration_s
            while time.monotonic() < deadline and bringup.alive():
                time.sleep(1.0)
        finally:
            bringup.stop_and_report("vla_hg_dagger")
    result = figures(run)
    print_figures(result, run)
    if args.json is not None:
        args.json.write_text(json.dumps({**asdict(result), "met": result.met}, indent=2))
    if args.run_dir is None and not args.keep:
        shutil.rmtree(run.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
