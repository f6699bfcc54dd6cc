"""Does an image learner wait on its buffer? (issue 17)

Runs the image deployment (config/peg_insertion_image_gpu.yaml: two simulated FR3 arms with wrist and front
cameras, 128x128 JPEG, scripted demonstrations then RLPD online with a ResNet-10 policy and DrQ) under `user
bringup` on a private Zenoh router, with the learner on `device: cpu` and the policy's images resized to
--image-size (small, so the CPU can train on them at all), for --minutes after the learner's first update.
Then it reads the learner's progress.csv: `buffer_wait_fraction` is the share of the learner's wall time spent
waiting for a batch the rate limiter had already allowed (the batch was still being read or decoded), beside
`idle_fraction` (every wait, also for data not yet there or not yet allowed by the update-to-data ratio).

Target: buffer_wait_fraction < 5 %.

Run: python3 bench/image_feed.py [--minutes 5] [--image-size 32]      (about minutes + 2 min on 2 cores)
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bringup import Bringup, free_port, wait_for

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "config" / "peg_insertion_image_gpu.yaml"
TARGET = 0.05


def deployment(endpoint: str, image_size: int) -> dict[str, Any]:
    """The image deployment on a private router, the learner on the CPU, the policy on small images."""
    dep: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    dep["name"] = "bench_image_feed"
    dep["router"] = {"endpoints": [endpoint], "start": "always"}
    for node in dep["nodes"]:
        if node["kind"] == "learner":
            node["params"]["device"] = "cpu"
            node["params"]["checkpoint_period_s"] = 600.0
        if node["kind"] in ("learner", "rollout"):
            node["params"]["learning"]["cnn"]["observation"]["image_size"] = image_size
    return dep


def last_row(path: Path) -> dict[str, str] | None:
    if not path.exists():
        return None
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return rows[-1] if rows else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="measured after the first update")
    parser.add_argument("--image-size", type=int, default=32, help="the policy's image size")
    parser.add_argument("--startup-s", type=float, default=600.0, help="longest wait for the first update")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_image_feed_") as tmp:
        work = Path(tmp)
        config = work / "deployment.yaml"
        config.write_text(yaml.safe_dump(deployment(f"tcp/127.0.0.1:{free_port()}", args.image_size)))
        progress = work / "run" / "progress.csv"
        bringup = Bringup(config, work / "run", work / "bringup.out")
        try:

            def trained() -> bool:
                row = last_row(progress)
                return row is not None and int(row["update_calls"]) > 0

            wait_for(trained, args.startup_s, bringup.alive, "the learner's first update")
            first = last_row(progress)
            print(f"first update after {time.time() - bringup.started:.0f} s; measuring {args.minutes:g} min")
            end = time.time() + 60.0 * args.minutes
            wait_for(lambda: time.time() >= end, 60.0 * args.minutes + 5.0, bringup.alive, "the window's end")
            row = last_row(progress)
        finally:
            code = bringup.stop()
        if row is None or first is None:
            print((work / "bringup.out").read_text(errors="replace")[-3000:])
            return 1
        wait = float(row["buffer_wait_fraction"])
        print(
            f"learner on cpu, policy images {args.image_size}x{args.image_size}: {row['update_calls']} update calls, "
            f"{row['gradient_steps']} gradient steps, {row['env_steps']} env steps, buffer {row['buffer_transitions']}"
        )
        print(f"idle {float(row['idle_fraction']):.1%} (all waiting), buffer wait {wait:.2%} (bringup exit {code})")
        print(f"{'PASS' if wait < TARGET else 'MISS'}  buffer wait fraction < {TARGET:.0%}: {wait:.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
