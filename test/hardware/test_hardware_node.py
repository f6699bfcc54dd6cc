"""The `hardware_announcer` node kind: parameters, announcing, withdrawing on shutdown."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Callable

import pytest

from test.conftest import user_cmd, wait_until
from test.hardware.test_registry import lost
from user.bus.zenoh_bus import ZenohBus
from user.config.strict import ConfigError
from user.hardware.registry import Registry
from user.nodes.hardware import HardwareAnnouncer
from user.runtime.kinds import load_kind
from user.runtime.node import Node

MakeBus = Callable[..., ZenohBus]


def test_kind_is_registered() -> None:
    assert load_kind("hardware_announcer") is HardwareAnnouncer


def test_announces_from_parameters_and_withdraws_on_destroy(make_bus: MakeBus) -> None:
    resource_id = f"cam_{uuid.uuid4().hex[:6]}"
    params = {"resource_id": resource_id, "kind": "camera", "model": "realsense_d435", "control_rate_hz": 30}
    node = HardwareAnnouncer(make_bus("cam_node", params))
    registry = Registry(Node(make_bus("registry")))
    try:
        (status,) = registry.wait_for([resource_id], 10.0)
        assert (status.kind, status.descriptor.model, status.descriptor.control_rate_hz) == (
            "camera",
            "realsense_d435",
            30.0,
        )
        node.destroy()
        assert wait_until(lambda: lost(registry, resource_id), 10.0)
    finally:
        registry.close()


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has an NVIDIA GPU")
def test_detect_on_a_host_without_gpus_announces_nothing(make_bus: MakeBus) -> None:
    node = HardwareAnnouncer(make_bus("gpu_node", {"resource_id": "gpu", "kind": "accelerator", "detect": True}))
    assert node.announcers == []


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"kind": "robot"}, "resource_id is required"),
        ({"resource_id": "x", "kind": "robot", "detect": True}, "detect: true needs kind: accelerator"),
        ({"resource_id": "x", "kind": "lidar"}, "kind: 'lidar' is not one of"),
        ({"resource_id": "bad id", "kind": "robot"}, "invalid resource id 'bad id'"),
        ({"resource_id": "x", "dof": -1}, "dof: -1 is below the minimum 0"),
    ],
)
def test_bad_parameters_fail_at_startup(make_bus: MakeBus, params: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        HardwareAnnouncer(make_bus("bad", params))


def test_bad_parameter_exits_2_naming_it(zenoh_env: dict[str, str]) -> None:
    proc = subprocess.run(
        user_cmd("node", "hardware_announcer", "-p", "resource_id:=x", "-p", "detect:=true"),
        env=zenoh_env,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert b"detect: true needs kind: accelerator" in proc.stderr
