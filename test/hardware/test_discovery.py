"""Acceptance: three announcer processes, `user hardware list`, kill -9, and a placement that names the loss."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from test.conftest import user_cmd, wait_until
from test.hardware.test_registry import lost
from user.bus.zenoh_bus import ZenohBus
from user.hardware.registry import Registry
from user.hardware.scheduler import MissingResourceError, Placement, place
from user.runtime.node import Node

MakeBus = Callable[..., ZenohBus]
DISCOVERY_DEADLINE_S = 30.0  # process start-up included
LOSS_DEADLINE_S = 15.0  # generous: a killed process is noticed when its socket closes (milliseconds);
# the Zenoh lease (10 s by default) bounds it even when no close is seen


class Announcers:
    """`user node hardware_announcer` processes, killed at teardown."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, resource_id: str, **params: object) -> None:
        args = ["node", "hardware_announcer", "--name", f"hw_{resource_id}", "-p", f"resource_id:={resource_id}"]
        for name, value in params.items():
            args += ["-p", f"{name}:={json.dumps(value)}"]
        with open(self.logs / f"{resource_id}.log", "wb") as log:
            self.procs[resource_id] = subprocess.Popen(user_cmd(*args), env=self.env, stdout=log, stderr=log)

    def log(self, resource_id: str) -> str:
        return (self.logs / f"{resource_id}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


@pytest.fixture
def announcers(zenoh_env: dict[str, str], tmp_path: Path) -> Iterator[Announcers]:
    group = Announcers(zenoh_env, tmp_path)
    yield group
    group.stop_all()


def test_three_processes_are_listed_and_a_killed_one_is_lost_and_refused(
    announcers: Announcers,
    make_bus: MakeBus,
    zenoh_env: dict[str, str],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    tag = uuid.uuid4().hex[:6]
    franka, arx, gpu = f"franka_sim_{tag}", f"arx_sim_{tag}", f"learner_gpu_{tag}"
    announcers.start(franka, model="franka_panda_sim", site="lab_a", dof=7, control_rate_hz=10.0, cameras=["wrist"])
    announcers.start(arx, model="arx_l5_sim", site="lab_b", dof=6, control_rate_hz=10.0)
    # A declared (not detected) accelerator: this test must run on hosts without a GPU.
    announcers.start(gpu, kind="accelerator", model="declared_for_test", site="cloud", memory_bytes=80 * 2**30)

    registry = Registry(Node(make_bus("acceptance_registry")))
    try:
        found = registry.wait_for([franka, arx, gpu], DISCOVERY_DEADLINE_S)
        assert [s.health for s in found] == ["alive"] * 3

        listed = subprocess.run(
            user_cmd("hardware", "list", "--timeout", "1.0"), env=zenoh_env, capture_output=True, timeout=60
        )
        assert listed.returncode == 0, listed.stderr.decode()
        rows = {line.split()[0]: line for line in listed.stdout.decode().splitlines()[1:]}
        assert {franka, arx, gpu} <= set(rows)
        assert "7 DoF @ 10 Hz" in rows[franka] and "lab_a" in rows[franka] and rows[franka].endswith("alive")
        assert "accelerator" in rows[gpu] and "80.0 GiB" in rows[gpu]

        plan = [
            Placement("rollout_franka", needs_robot_ids=(franka,)),
            Placement("rollout_arx", needs_robot_ids=(arx,)),
            Placement("learner", needs_accelerator=True, min_accelerator_memory_bytes=40 * 2**30),
        ]
        before = place(plan, registry.descriptors())
        assert (before["rollout_arx"].site, before["learner"].accelerator) == ("lab_b", gpu)

        start = time.monotonic()
        announcers.procs[arx].send_signal(signal.SIGKILL)
        assert wait_until(lambda: lost(registry, arx), LOSS_DEADLINE_S), "killed announcer still listed"
        removal_s = time.monotonic() - start
        record_property("removal_after_kill_s", removal_s)
        print(f"\nremoval after kill -9: {removal_s:.3f} s")  # shown with pytest -s
        assert {s.resource_id for s in registry.resources()} >= {franka, gpu}
        assert arx not in {s.resource_id for s in registry.resources()}

        with pytest.raises(MissingResourceError) as info:
            place(plan, registry.descriptors())
        assert arx in str(info.value) and "rollout_arx" in str(info.value)
        assert set(info.value.schedule.assignments) == {"rollout_franka", "learner"}
    finally:
        registry.close()

    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(
        f"placements:\n"
        f"  - {{group: rollout_franka, needs_robot_ids: [{franka}]}}\n"
        f"  - {{group: rollout_arx, needs_robot_ids: [{arx}]}}\n"
        f"  - {{group: learner, needs_accelerator: true}}\n"
    )
    placed = subprocess.run(
        user_cmd("hardware", "place", str(plan_file), "--timeout", "1.0"),
        env=zenoh_env,
        capture_output=True,
        timeout=60,
    )
    assert placed.returncode == 1, placed.stderr.decode()
    assert f"no robot '{arx}' is announced" in placed.stderr.decode()
    assert "rollout_franka: site lab_a" in placed.stdout.decode() and f"accelerator {gpu}" in placed.stdout.decode()

    listed = subprocess.run(
        user_cmd("hardware", "list", "--json", "--timeout", "1.0"), env=zenoh_env, capture_output=True, timeout=60
    )
    ids = {entry["resource_id"] for entry in json.loads(listed.stdout)}
    assert {franka, gpu} <= ids and arx not in ids
    assert all(announcers.procs[r].poll() is None for r in (franka, gpu)), announcers.log(franka)


@pytest.mark.slow
def test_a_frozen_process_is_lost_when_its_lease_expires(announcers: Announcers, make_bus: MakeBus) -> None:
    """SIGSTOP keeps the socket open, like a hung host or a pulled cable: only the lease tells (10 s default)."""
    frozen = f"frozen_{uuid.uuid4().hex[:6]}"
    announcers.start(frozen)
    registry = Registry(Node(make_bus("lease_registry")))
    try:
        registry.wait_for([frozen], DISCOVERY_DEADLINE_S)
        start = time.monotonic()
        announcers.procs[frozen].send_signal(signal.SIGSTOP)
        assert wait_until(lambda: lost(registry, frozen), 30.0)
        print(f"\nremoval after SIGSTOP (lease expiry): {time.monotonic() - start:.3f} s")
    finally:
        registry.close()
        announcers.procs[frozen].kill()
