"""`user hardware`: the table, and clear errors without a router or with a bad plan."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from test.conftest import free_port, user_cmd
from user.cli.hardware_cmd import capacity, format_table, table_rows
from user.hardware.descriptor import ResourceDescriptor
from user.hardware.registry import Pending, ResourceStatus


def test_table_shows_capacity_per_kind_and_health() -> None:
    now = 1000.0
    statuses = [
        ResourceStatus(
            ResourceDescriptor("franka", "robot", model="fr3", site="lab_a", dof=7, control_rate_hz=10.0),
            "alive",
            0,
            now,
        ),
        ResourceStatus(ResourceDescriptor("cam", "camera", site="lab_a", control_rate_hz=30.0), "lost", 990.0, 990.0),
        ResourceStatus(
            ResourceDescriptor(
                "gpu_0", "accelerator", model="NVIDIA H200", memory_bytes=141 * 2**30, compute_units=132
            ),
            "alive",
            0,
            now,
        ),
    ]
    text = format_table(table_rows(statuses, [Pending("robot", "arx", 0.0)], now))
    lines = text.splitlines()
    assert lines[0].split() == ["ID", "KIND", "MODEL", "SITE", "CAPACITY", "HEALTH"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert "7 DoF @ 10 Hz" in rows["franka"] and rows["franka"].endswith("alive")
    assert "30 fps" in rows["cam"] and rows["cam"].endswith("lost 10 s ago")
    assert "141.0 GiB, 132 SMs" in rows["gpu_0"]
    assert rows["arx"].endswith("announced, no descriptor yet")
    assert capacity(ResourceDescriptor("c", "camera")) == "-"


def test_list_without_a_router_says_so(zenoh_env: dict[str, str]) -> None:
    env = dict(zenoh_env, USER_ZENOH_ROUTER=f"tcp/127.0.0.1:{free_port()}")
    start = time.monotonic()
    proc = subprocess.run(user_cmd("hardware", "list"), env=env, capture_output=True, timeout=60)
    assert proc.returncode == 2
    assert time.monotonic() - start < 30
    assert b"no Zenoh router reachable" in proc.stderr and b"user router" in proc.stderr


def test_list_with_nothing_announced_says_so(zenoh_env: dict[str, str]) -> None:
    proc = subprocess.run(
        user_cmd("hardware", "list", "--timeout", "0.3"), env=zenoh_env, capture_output=True, timeout=60
    )
    assert proc.returncode == 0
    out = proc.stdout.decode()
    assert out.startswith("ID") or "no hardware announced within 0.3 s" in out  # other tests may share the router


def test_place_with_a_bad_plan_names_the_key(zenoh_env: dict[str, str], tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("placements:\n  - {group: x, needs_robots: [a]}\n")
    proc = subprocess.run(user_cmd("hardware", "place", str(plan)), env=zenoh_env, capture_output=True, timeout=60)
    assert proc.returncode == 2
    assert b"unknown key 'needs_robots'" in proc.stderr and str(plan).encode() in proc.stderr
