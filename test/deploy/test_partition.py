"""Partition tolerance (issue 15): the link between a lab and the cloud (a user-space relay standing in for the
WAN) is cut for 30 s during a run. The lab's arm keeps stepping with its last weights, its completed episodes
wait in its outbox (spooled under `state_dir`), and after the link is back the learner's buffer holds every
episode the arm ended, each transition exactly once."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from test.conftest import free_port, user_cmd, wait_until
from test.helpers.deployments import arm_nodes, learner_node
from test.helpers.link_relay import LinkRelay
from user.buffer.replay import ReplayBuffer
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings
from user.interfaces.codec import default_codec

pytest.importorskip("mujoco")
pytestmark = pytest.mark.timeout(420)

ARM = "arm_p"
CUT_S = 30.0
ROBOT = 'realtime: true, control_rate_hz: 20.0, max_steps: 40, state_dir: "{run_dir}/robots", outbox_resend_s: 2.0'


def _deployment(tmp_path: Path, cloud: int, relay: int, lab: int) -> Path:
    path = tmp_path / "partition.yaml"
    path.write_text(
        f"""name: partition
domain: part
sites:
  cloud: {{endpoints: [tcp/127.0.0.1:{cloud}], dial: [tcp/127.0.0.1:{relay}]}}
  lab: {{endpoints: [tcp/127.0.0.1:{lab}], connect: [cloud]}}
nodes:
{learner_node([ARM], utd=1)}{arm_nodes(ARM, "lab", 0, demos=1, robot=ROBOT)}"""
    )
    return path


def _stored(run: Path) -> dict[int, list[int]]:
    """Episode id -> the steps stored for it (every transition row)."""
    if not (run / "buffer").is_dir():
        return {}
    try:
        with ReplayBuffer.open(run / "buffer", read_only=True) as buf:
            rows = buf.storage.index.fetchall("SELECT episode_id, step FROM transitions WHERE robot_id = ?", (ARM,))
    except Exception:  # the learner has not created its index yet
        return {}
    out: dict[int, list[int]] = {}
    for episode, step in rows:
        out.setdefault(int(episode), []).append(int(step))
    return out


class EndProbe:
    """Every END event of the arm, heard inside the lab (episode id -> steps), with its arrival time."""

    def __init__(self, endpoint: str) -> None:
        self.codec = default_codec()
        self.ended: dict[int, tuple[int, float]] = {}
        self.lock = threading.Lock()
        self.bus = ZenohBus("probe", ZenohSettings(router=[endpoint], domain="part"))
        self.bus.create_subscription(f"/{ARM}/episode_events", "user/msg/EpisodeEvent", self._on)

    def _on(self, payload: bytes) -> None:
        msg = self.codec.decode(payload, "user/msg/EpisodeEvent")
        if msg.kind == 1:
            with self.lock:
                self.ended[int(msg.episode_id)] = (int(msg.steps), time.monotonic())

    def snapshot(self) -> dict[int, tuple[int, float]]:
        with self.lock:
            return dict(self.ended)


def test_a_30_s_partition_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    cloud, relay_port, lab = free_port(), free_port(), free_port()
    relay = LinkRelay(relay_port, cloud)
    run = tmp_path / "run"
    out = tmp_path / "bringup.out"
    with open(out, "wb") as f:
        proc = subprocess.Popen(user_cmd("bringup", str(_deployment(tmp_path, cloud, relay_port, lab)), "--run-dir",
                                         str(run)), stdout=f, stderr=subprocess.STDOUT)  # fmt: skip
    probe: EndProbe | None = None
    try:
        assert wait_until(lambda: len(_stored(run)) >= 3, 180.0, 1.0), out.read_text()[-3000:]
        probe = EndProbe(f"tcp/127.0.0.1:{lab}")
        relay.cut()
        cut_at = time.monotonic()
        time.sleep(CUT_S)
        during = [e for e, (_, t) in probe.snapshot().items() if t > cut_at + 2.0]
        stored_during = set(_stored(run))
        relay.restore()
        assert len(during) >= 3, "the arm did not keep stepping while the cloud was unreachable"
        assert not set(during) <= stored_during  # they really were cut off

        def delivered() -> bool:
            stored = _stored(run)
            return all(e in stored for e in probe.snapshot()) if probe else False

        assert wait_until(delivered, 120.0, 1.0), (sorted(probe.snapshot()), sorted(_stored(run)))
    finally:
        if probe is not None:
            probe.bus.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        code = proc.wait(90)
        relay.close()
    assert code == 0, out.read_text()[-3000:]
    stored = _stored(run)
    ended = probe.snapshot()
    for episode, (steps, _) in ended.items():
        assert sorted(stored[episode]) == list(range(steps)), f"episode {episode}: not each step exactly once"
    ids = sorted(stored)
    assert ids == list(range(ids[0], ids[-1] + 1))  # no episode missing in between
