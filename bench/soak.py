"""Soak (issue 13): the default deployment under random faults for a set time, and what it cost.

The deployment of bench/faults.py (config/default.yaml on a private router, a reward node per robot) runs with
its run directory on a tmpfs of `--disk-mb`, so a full disk can be made and freed. Every `--every-s` seconds one
fault is drawn at random:

- kill: a random node killed (kill -9); the supervisor respawns it;
- freeze: a random node stopped (SIGSTOP) for 10 s, then continued;
- forge: forged messages from a rogue peer on the router: a one-step NaN episode on a robot's replay topic, a
  transition with a NaN reward on its live topic, NaN policy weights with a valid CRC and layout, a wrong-layout
  weight version 2**40, and malformed CDR bytes;
- disk-full: the run directory's filesystem filled for 10 s, then freed.

At the end it prints: episodes the robots completed, stored, lost and duplicated; NaN values in stored
transitions; whether the rollout ever applied a forged weight version; refused messages by node and cause (from
the nodes' logs); respawns; resident memory per node over time with its slope (flat: the second half grows at most
max(2 MiB, 1 %) per 10 minutes). Memory is judged on each node's longest-lived process (a respawned process starts
small and grows through its start-up), and the learner's decoded-transition cache is set to `--learner-cache`
transitions so that it is full within the first minutes: a bounded cache filling up is not a leak.

The forger signs its weights as the deployment's learner (`header.frame_id`, which is no authentication), so the
rollout's checks of completeness, finiteness and layout are what must refuse them.

Run (as root for the tmpfs; without it the disk-full fault is skipped):
    MUJOCO_GL=egl python3 bench/soak.py --minutes 10 [--seed 0] [--every-s 30] [--spare learner] [--json PATH] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import torch

from faults import FaultRun, Outcome
from user.buffer.config import BufferConfig
from user.buffer.replay import ReplayBuffer
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings
from user.config.strict import from_mapping
from user.interfaces.domain import transition_to_msg
from user.learner.config import LearningConfig
from user.policies.base import FlatWeights
from user.runtime.node import Node
from user.sync.chunking import chunk_to_msg, split_weights

FAULTS = ("kill", "freeze", "forge", "disk-full")
KILLABLE = ("robot", "learner", "rollout", "reward", "monitor", "router")  # the experts finish with the demos
FORGED_VERSION = 2**40
REFUSED_RE = re.compile(r"refused (?P<what>.*?): (?P<field>[\w.\[\]]+) (?P<problem>[^(\n]+?)(?: \(|$)")
MORE_RE = re.compile(r"\((\d+) more refused for this cause")


class Forger(Node):
    """A rogue peer: publishes what no honest node would."""

    def __init__(self, bus: ZenohBus, learning: LearningConfig) -> None:
        super().__init__(bus)
        self.spec = learning.build_policy().get_weights().spec
        self.policy_id = learning.policy_id
        self._weights = self.create_publisher("/policy/weights", "user/msg/WeightChunk")
        self.impersonates = "learner"  # the learner_id the rollouts accept weights from
        self._raw: dict[str, Any] = {}
        self.sent: Counter[str] = Counter()

    def forge(self, robot: str, episode_id: int) -> None:
        from test.buffer.factories import transition  # the factory of the project's tests: a plausible step

        nan_state = transition(robot, episode_id, 0, 1, images=False)  # a one-step episode
        nan_state.observation.state[:] = np.nan
        replay = self.create_publisher(f"/{robot}/transitions/replay", "user/msg/Transition")
        replay.publish(transition_to_msg(nan_state, self.codec))
        self.sent["nan replay episode"] += 1
        live = self.create_publisher(f"/{robot}/transitions", "user/msg/Transition")
        bad_reward = dataclasses.replace(transition(robot, episode_id + 1, 0, 5, images=False), reward=float("nan"))
        live.publish(transition_to_msg(bad_reward, self.codec))
        self.sent["nan reward"] += 1
        nan_weights = FlatWeights(torch.full((self.spec.numel,), float("nan")), self.spec, FORGED_VERSION - 1)
        for chunk in split_weights(nan_weights, self.policy_id, publisher=self.impersonates):
            self._weights.publish(chunk_to_msg(chunk, self.codec, time.time_ns()))
        self.sent["nan weights"] += 1
        wrong = FlatWeights(torch.zeros(3), type(self.spec)(("w",), ((3,),)), FORGED_VERSION)
        for chunk in split_weights(wrong, self.policy_id, publisher=self.impersonates):
            self._weights.publish(chunk_to_msg(chunk, self.codec, time.time_ns()))
        self.sent["wrong-layout weights"] += 1
        raw = self.bus.create_publisher(f"/{robot}/transitions", "user/msg/Transition")
        raw.publish(b"\x00\x01\x00\x00" + bytes(range(40)))
        self.sent["malformed cdr"] += 1


class DiskFiller:
    """Fills the filesystem of `directory` (a tmpfs of its own) and frees it again."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "filler.bin"

    def fill(self) -> None:
        with contextlib.suppress(OSError), open(self.path, "wb") as f:
            block = b"\0" * (1 << 20)
            while True:
                f.write(block)

    def free(self) -> None:
        self.path.unlink(missing_ok=True)


def mount_tmpfs(directory: Path, size_mb: int) -> bool:
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(directory)], check=False)
    return done.returncode == 0


def refusals(log_dir: Path) -> dict[str, int]:
    """`node: field problem` -> messages refused, from the nodes' log lines (repeats folded into later lines)."""
    out: Counter[str] = Counter()
    for log in sorted(log_dir.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            match = REFUSED_RE.search(line)
            if match is None:
                continue
            more = MORE_RE.search(line)
            key = f"{log.stem}: {match['field']} {match['problem'].strip()}"
            out[key] += 1 + (int(more.group(1)) if more else 0)
    return dict(out)


def nan_transitions(buffer_dir: Path) -> int:
    with ReplayBuffer.open(buffer_dir, BufferConfig(), read_only=True) as buf:
        count = 0
        for start in range(0, len(buf), 512):
            for t in buf.get(list(range(start, min(len(buf), start + 512)))):
                values = [t.observation.state, t.next_observation.state, t.action.data, np.asarray([t.reward])]
                count += int(not all(np.all(np.isfinite(v)) for v in values))
        return count


def forged_weights_applied(log_dir: Path) -> bool:
    text = (log_dir / "rollout.log").read_text(errors="replace") if (log_dir / "rollout.log").exists() else ""
    return any(f"weights version {v}" in text for v in (FORGED_VERSION, FORGED_VERSION - 1))


def memory(bringup: Any) -> dict[str, dict[str, float]]:
    """Per node, of its longest-lived process: first, last and max RSS (MiB), the least-squares slope of the second
    half in MiB / 10 min, the minutes it covers, and how many processes the node had (respawns + 1)."""
    out = {}
    for name, samples in bringup.nodes.items():
        pids = Counter(samples.rss_pids)
        if not pids:
            continue
        longest = pids.most_common(1)[0][0]
        series = [s for s, pid in zip(samples.rss, samples.rss_pids, strict=True) if pid == longest]
        if len(series) < 4:
            continue
        t = np.asarray([s[0] for s in series])
        mib = np.asarray([s[1] for s in series])
        half = t >= t[0] + (t[-1] - t[0]) / 2
        slope = float(np.polyfit(t[half] - t[0], mib[half], 1)[0] * 600) if half.sum() >= 2 else 0.0
        flat = slope <= max(2.0, 0.01 * float(mib[-1]))
        out[name] = {"first": float(mib[0]), "last": float(mib[-1]), "max": float(mib.max()), "slope_10min": slope,
                     "minutes": float(t[-1] - t[0]) / 60, "processes": len(pids), "flat": float(flat)}  # fmt: skip
    return out


def throw_faults(
    run: FaultRun, forger: Forger, filler: DiskFiller | None, args: argparse.Namespace
) -> tuple[list[Outcome], Counter[str]]:
    """Random faults every `args.every_s` for `args.minutes`; the kills' and freezes' outcomes and the counts."""
    rng = random.Random(args.seed)
    done: list[Outcome] = []
    kinds: Counter[str] = Counter()
    end = time.time() + 60 * args.minutes
    while time.time() < end:
        fault = rng.choice([f for f in FAULTS if filler is not None or f != "disk-full"])
        kinds[fault] += 1
        if fault in ("kill", "freeze"):
            kind = rng.choice([k for k in KILLABLE if k not in args.spare])
            done.append(run.inject(rng.choice(run.nodes_of(kind)), kind, "kill" if fault == "kill" else "stop"))
        elif fault == "forge":
            forger.forge(rng.choice(run.robots), 900_000 + kinds[fault])
        elif filler is not None:
            filler.fill()
            time.sleep(10.0)  # the disk stays full for this long: a fault's duration, not a synchronisation
            filler.free()
        print(f"{time.strftime('%H:%M:%S')} {fault} done", flush=True)
        time.sleep(max(0.0, args.every_s - 10.0))  # the pause between faults
    return done, kinds


def soak(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    disk = mount_tmpfs(workdir / "run", args.disk_mb)
    run = FaultRun(workdir, demos=2, freeze_s=10.0, learner_cache=args.learner_cache)
    run.bringup.start_sampling(10.0)
    learning = from_mapping(LearningConfig, run.dep["nodes"][0]["params"]["learning"], where="soak")
    try:
        run.start(2)
        forger = Forger(ZenohBus("bench_soak_forger", ZenohSettings(router=[run.endpoint])), learning)
        done, kinds = throw_faults(run, forger, DiskFiller(workdir / "run") if disk else None, args)
        forger.destroy()
        forger.bus.close()
        _, summary = run.finish(done)
        log_dir = run.run_dir / "logs"
        return {  # read before the tmpfs goes
            **summary,
            "faults": dict(kinds),
            "forged_sent": dict(forger.sent),
            "nan_transitions_stored": nan_transitions(run.run_dir / "buffer"),
            "forged_weights_applied": forged_weights_applied(log_dir),
            "refused": refusals(log_dir),
            "respawns": run.log().count("respawning"),
            "bringup_errors": [line for line in run.log().splitlines() if "[ERROR]" in line][-30:],
            "memory": memory(run.bringup),
        }
    finally:
        if run.bringup.alive():
            run.bringup.stop()
        with contextlib.suppress(OSError):  # the nodes' logs outlive the tmpfs (kept with --keep)
            shutil.copytree(run.run_dir / "logs", workdir / "logs")
        if disk:
            subprocess.run(["umount", "-l", str(workdir / "run")], check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long faults are thrown")
    parser.add_argument("--every-s", type=float, default=30.0, help="seconds between faults")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--disk-mb", type=int, default=1024, help="size of the run directory's tmpfs")
    parser.add_argument("--learner-cache", type=int, default=2000, help="the learner's decoded-transition cache")
    parser.add_argument(
        "--spare", type=lambda text: [k for k in text.split(",") if k], default=[],
        help="node kinds never killed or frozen (e.g. learner, to follow one process's memory for the whole run)",
    )  # fmt: skip
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    report = soak(args, workdir)
    print(json.dumps(report, indent=1), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))
    if args.keep:
        print(f"kept {workdir}", flush=True)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    ok = report["lost"] == 0 and report["duplicated"] == 0 and report["nan_transitions_stored"] == 0
    return 0 if ok and not report["forged_weights_applied"] else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # test.buffer.factories, for the forger
    sys.exit(main())
