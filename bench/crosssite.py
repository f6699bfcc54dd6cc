"""Cross-site benchmark (issue 15): a lab and the cloud joined by a wide-area link with 50 ms round trip and
20 Mbit/s (a user-space relay between the two sites' routers, test/helpers/link_relay.py: these machines have
no netem), everything else as a user deploys it (`user bringup` of a two-site deployment, every node its own
process, the learner in `cloud`, one sim FR3 arm on peg insertion in `lab`, lockstep with its policy). The two
sites share this machine's cores, which two sites never do: the learner runs at nice 19, so that the lab's
processes get the CPU first, as they would on their own machine.

Three figures, side by side in one run:

1. Episode generation time with the rollout local to the robot (in `lab`: observations and actions stay in the
   site) against the rollout in the cloud (every step crosses the link twice), the same deployment otherwise
   (`placement: warn` lets the split one start). Measured by a probe in the lab on the robot's episode events:
   the mean wall time from START to END over `--episodes` episodes after the first two, and env steps per second.
   Target: local >= 3x faster.
   The robot is not held by the learner's data credit here (`credit_topic: ""`): the learner shares these two
   cores at nice 19 and updates far slower than a learner with a GPU of its own, and the credit (which holds a
   lockstep robot while the learner is behind its update-to-data ratio) would then time the episodes by the
   learner's update rate, not by where the rollout runs. `--hold` measures with the credit on.
2. Weight bytes per sync: the bytes of every WeightChunk of one version as they arrive in the lab, for float32
   and (a second run) bfloat16 weights with `weight_delta` (compressed; later versions as deltas on the one
   before: `user.sync.delta`), against the learner's full fp32 state (actor, critics and target critics: every
   tensor of the algorithm's state_dict). Target <= 0.2x.
3. Time to deliver a 30 s spooled backlog: the link is cut for `--cut-s` while the arm (real time, 10 Hz) keeps
   acting; from the moment it is back until the learner's buffer holds every episode the arm ended.

Run: MUJOCO_GL=egl python3 bench/crosssite.py [--episodes 15] [--cut-s 30] [--rtt-ms 50] [--mbit 20] [--hold] [--keep]
     (about 6 minutes)
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from test.conftest import free_port, user_cmd, wait_until
from test.helpers.link_relay import LinkRelay, LinkShape
from user.buffer.replay import ReplayBuffer
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings
from user.interfaces.codec import default_codec

ARM = "arm_x"
DOMAIN = "xsite"
LEARNING = {
    "mlp": {"state_dim": 17, "action_dim": 7, "hidden": [256, 256]},
    "rlpd": {"num_critics": 10, "critic_hidden": [256, 256], "batch_size": 64, "utd_ratio": 1},
}


def deployment(
    path: Path, ports: dict[str, int], rollout_site: str, *, realtime: bool, dtype: str, delta: bool, hold: bool
) -> Path:
    import yaml

    node = {"shutdown_timeout_s": 30.0}
    doc: dict[str, Any] = {
        "name": "crosssite",
        "domain": DOMAIN,
        "placement": "warn",
        "sites": {
            "cloud": {"endpoints": [f"tcp/127.0.0.1:{ports['cloud']}"], "dial": [f"tcp/127.0.0.1:{ports['relay']}"]},
            "lab": {"endpoints": [f"tcp/127.0.0.1:{ports['lab']}"], "connect": ["cloud"]},
        },
        "nodes": [
            {"name": "learner", "kind": "learner", "site": "cloud", "nice": 19, **node,
             "params": {"robots": [ARM], "run_dir": "{run_dir}", "learning": LEARNING, "torch_threads": 1,
                        "pacing": {"min_transitions": 64, "publish_every": 20, "weight_dtype": dtype,
                                   "weight_delta": delta}}},
            {"name": "rollout", "kind": "rollout", "site": rollout_site,
             "params": {"robots": [ARM], "learning": LEARNING}},
            {"name": ARM, "kind": "robot", "site": "lab",
             "params": {"robot_id": ARM, "task": "peg_insertion", "realtime": realtime, "control_rate_hz": 10.0,
                        "privileged_state": True, "max_steps": 40, "wait_for_consumer_s": 60.0,
                        "state_dir": "{run_dir}/robots", "outbox_resend_s": 2.0, "outbox_episodes": 200,
                        "credit_topic": "/data_credit" if hold else ""}},
        ],
    }  # fmt: skip
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


class LabProbe:
    """In the lab: the arm's episode events (arrival times) and the bytes of each weights version."""

    def __init__(self, endpoint: str) -> None:
        self.codec = default_codec()
        self.lock = threading.Lock()
        self.starts: dict[int, float] = {}
        self.ends: dict[int, tuple[float, int]] = {}  # episode -> (arrival, steps)
        self.version_bytes: dict[int, int] = {}
        self.bus = ZenohBus("lab_probe", ZenohSettings(router=[endpoint], domain=DOMAIN))
        self.bus.create_subscription(f"/{ARM}/episode_events", "user/msg/EpisodeEvent", self._on_event)
        self.bus.create_subscription("/policy/weights", "user/msg/WeightChunk", self._on_chunk)

    def _on_event(self, payload: bytes) -> None:
        msg = self.codec.decode(payload, "user/msg/EpisodeEvent")
        with self.lock:
            if msg.kind == 0:
                self.starts[int(msg.episode_id)] = time.monotonic()
            else:
                self.ends[int(msg.episode_id)] = (time.monotonic(), int(msg.steps))

    def _on_chunk(self, payload: bytes) -> None:
        msg = self.codec.decode(payload, "user/msg/WeightChunk")
        with self.lock:
            self.version_bytes[int(msg.version)] = self.version_bytes.get(int(msg.version), 0) + len(msg.data)

    def episodes(self) -> list[tuple[float, int]]:
        """(duration s, steps) of every episode whose START and END were both heard, in id order."""
        with self.lock:
            return [(self.ends[e][0] - self.starts[e], self.ends[e][1]) for e in sorted(self.ends) if e in self.starts]

    def close(self) -> None:
        self.bus.close()


class Run:
    """One `user bringup` of the deployment with the link relay in place."""

    def __init__(
        self,
        work: Path,
        label: str,
        rollout_site: str,
        *,
        realtime: bool,
        dtype: str,
        shape: LinkShape,
        delta: bool = False,
        hold: bool = True,
    ) -> None:
        self.ports = {k: free_port() for k in ("cloud", "lab", "relay")}
        self.relay = LinkRelay(self.ports["relay"], self.ports["cloud"], shape)
        self.run_dir = work / label
        config = deployment(
            work / f"{label}.yaml", self.ports, rollout_site, realtime=realtime, dtype=dtype, delta=delta, hold=hold
        )
        self.out = open(work / f"{label}.out", "wb")  # noqa: SIM115 - closed in stop()
        argv = user_cmd("bringup", str(config), "--run-dir", str(self.run_dir))
        self.proc = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT)
        self.probe = LabProbe(f"tcp/127.0.0.1:{self.ports['lab']}")

    def stored(self) -> set[int]:
        try:
            with ReplayBuffer.open(self.run_dir / "buffer", read_only=True) as buf:
                rows = buf.storage.index.fetchall("SELECT DISTINCT episode_id FROM transitions")
        except Exception:  # not created yet
            return set()
        return {int(r[0]) for r in rows}

    def stop(self) -> None:
        self.probe.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.out.close()
        self.relay.close()


def generation(work: Path, rollout_site: str, episodes: int, shape: LinkShape, hold: bool) -> dict[str, float]:
    run = Run(work, f"gen_{rollout_site}", rollout_site, realtime=False, dtype="float32", shape=shape, hold=hold)
    try:
        if not wait_until(lambda: len(run.probe.episodes()) >= episodes + 2, 900.0, 0.5):
            raise RuntimeError(f"{rollout_site}: only {len(run.probe.episodes())} episodes; see {run.out.name}")
        measured = run.probe.episodes()[2 : episodes + 2]
        seconds = sum(d for d, _ in measured)
        steps = sum(s for _, s in measured)
        versions = dict(run.probe.version_bytes)
    finally:
        run.stop()
    return {"episode_s": seconds / len(measured), "steps_per_s": steps / seconds, "link_mb": run.relay.bytes / 1e6,
            "version_bytes": max(versions.values(), default=0)}  # fmt: skip


def weights_bf16(work: Path, shape: LinkShape, versions: int = 12) -> tuple[int, float]:
    """bfloat16 with `weight_delta`: (the first version's bytes: a keyframe, the median bytes of the rest)."""
    run = Run(work, "weights_bf16", "lab", realtime=False, dtype="bfloat16", shape=shape, delta=True)
    try:
        wait_until(lambda: len(run.probe.version_bytes) >= versions, 600.0, 0.5)
        sizes = [run.probe.version_bytes[v] for v in sorted(run.probe.version_bytes)]
    finally:
        run.stop()
    later = sorted(sizes[1:])
    return sizes[0], float(later[len(later) // 2]) if later else float("nan")


def backlog(work: Path, cut_s: float, shape: LinkShape) -> dict[str, float]:
    run = Run(work, "backlog", "lab", realtime=True, dtype="float32", shape=shape)
    try:
        if not wait_until(lambda: len(run.stored()) >= 3, 600.0, 0.5):
            raise RuntimeError(f"backlog: no episodes stored; see {run.out.name}")
        run.relay.cut()
        time.sleep(cut_s)
        ended = {e for e in run.probe.ends}
        missing = ended - run.stored()
        run.relay.restore()
        back = time.monotonic()
        ok = wait_until(lambda: ended <= run.stored(), 300.0, 0.1)
        delivered_s = time.monotonic() - back
        steps = sum(run.probe.ends[e][1] for e in missing)
    finally:
        run.stop()
    return {"spooled_episodes": len(missing), "spooled_steps": steps, "deliver_s": delivered_s if ok else float("nan")}


def full_state_bytes() -> tuple[int, int]:
    """(actor fp32 bytes, every tensor of the learner's algorithm state: actor, critics, targets) for LEARNING."""
    import torch

    from user.config.strict import from_mapping
    from user.learner.config import LearningConfig

    config = from_mapping(LearningConfig, {**LEARNING, "algorithm": "rlpd"}, where="bench")
    policy = config.build_policy()
    algorithm = config.build_algorithm(policy)

    def tensor_bytes(obj: Any) -> int:
        if isinstance(obj, torch.Tensor):
            return obj.numel() * 4
        if isinstance(obj, dict):
            return sum(tensor_bytes(v) for v in obj.values())
        if isinstance(obj, (list, tuple)):
            return sum(tensor_bytes(v) for v in obj)
        return 0

    actor = sum(t.numel() * 4 for t in policy.actor.parameters())
    return actor, tensor_bytes(algorithm.state_dict())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=15, help="episodes measured per placement")
    p.add_argument("--cut-s", type=float, default=30.0, help="how long the link is cut for the backlog figure")
    p.add_argument("--rtt-ms", type=float, default=50.0)
    p.add_argument("--mbit", type=float, default=20.0)
    p.add_argument("--hold", action="store_true", help="episode generation with the robot held by the learner's credit")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args()
    shape = LinkShape(delay_s=args.rtt_ms / 2000.0, rate_bps=args.mbit * 1e6)
    work = Path(tempfile.mkdtemp(prefix="crosssite_"))
    try:
        local = generation(work, "lab", args.episodes, shape, args.hold)
        cloud = generation(work, "cloud", args.episodes, shape, args.hold)
        bf16, bf16_delta = weights_bf16(work, shape)
        spool = backlog(work, args.cut_s, shape)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    actor, full = full_state_bytes()
    held = "held by" if args.hold else "not held by"
    print(f"\ncrosssite: link {args.rtt_ms:g} ms RTT, {args.mbit:g} Mbit/s (user-space relay); work dir {work}")
    print(f"episode generation: the robot {held} the learner's data credit\n")
    print("| figure | rollout in lab | rollout in cloud | ratio |\n|---|---|---|---|")
    print(f"| mean episode generation time, s | {local['episode_s']:.2f} | {cloud['episode_s']:.2f} | "
          f"{cloud['episode_s'] / local['episode_s']:.2f}x faster local |")  # fmt: skip
    print(f"| env steps / s | {local['steps_per_s']:.1f} | {cloud['steps_per_s']:.1f} | |")
    print(f"| link traffic during the run, MB | {local['link_mb']:.1f} | {cloud['link_mb']:.1f} | |")
    print("\n| weights | bytes per sync | vs the learner's full fp32 state |\n|---|---|---|")
    print(f"| learner's full fp32 state (actor, 10 critics, targets) | {full} | 1.00 |")
    print(f"| actor, float32 (measured in the lab) | {local['version_bytes']} | {local['version_bytes'] / full:.3f} |")
    print(f"| actor, bfloat16, compressed keyframe (first version) | {bf16} | {bf16 / full:.3f} |")
    print(f"| actor, bfloat16, delta on the previous version (median) | {bf16_delta:.0f} | {bf16_delta / full:.3f} |")
    print(f"| actor parameters alone, fp32 | {actor} | {actor / full:.3f} |")
    print(f"\nbacklog: {spool['spooled_episodes']} episodes ({spool['spooled_steps']} steps) spooled during a "
          f"{args.cut_s:g} s cut, delivered {spool['deliver_s']:.1f} s after the link was back")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
