"""`arm_urdf`: the FR3's and ARX L5's robot_description parse as URDF (urdfdom's own `check_urdf`), form one tree,
and name the joints the arm's model and `joint_states` name."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from user.sim.arm_model import ArmModel
from user.sim.arx_model import arx_model
from user.sim.franka_model import fr3_model
from user.sim.kinematics import ArmKinematics
from user.sim.urdf import TCP_LINK, WRIST_OPTICAL_LINK, arm_urdf, quat_to_rpy

ARMS = [pytest.param(fr3_model, id="fr3"), pytest.param(arx_model, id="arx_l5")]


@pytest.mark.parametrize("make", ARMS)
def test_urdf_parses_with_urdfdom(make: Callable[[], ArmModel], tmp_path: Path) -> None:
    check = shutil.which("check_urdf")
    assert check, "check_urdf (Debian liburdfdom-tools) is not installed: scripts/install --ros installs it"
    path = tmp_path / "arm.urdf"
    path.write_text(arm_urdf(make()))
    out = subprocess.run([check, str(path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Successfully Parsed XML" in out.stdout


@pytest.mark.parametrize("make", ARMS)
def test_one_tree_from_the_root_to_the_tool_and_the_joint_states_names(make: Callable[[], ArmModel]) -> None:
    arm = make()
    robot = ET.fromstring(arm_urdf(arm))
    links = {link.get("name") for link in robot.findall("link")}
    children: dict[str, str] = {}
    movable = []
    for joint in robot.findall("joint"):
        parent, child = joint.find("parent").get("link"), joint.find("child").get("link")  # type: ignore[union-attr]
        assert parent in links and child in links, joint.get("name")
        assert child not in children, f"{child} has two parents"
        children[str(child)] = str(parent)
        if joint.get("type") != "fixed":
            movable.append(joint.get("name"))
    roots = links - set(children)
    assert roots == {ArmKinematics(arm).root}
    link = TCP_LINK  # the tool reaches the root
    while link in children:
        link = children[link]
    assert link in roots
    assert WRIST_OPTICAL_LINK in links
    assert movable == list(ArmKinematics(arm).joint_names)
    assert set(arm.joints) <= set(movable)


def test_fr3_joints_carry_franka_description_names_and_limits() -> None:
    robot = ET.fromstring(arm_urdf(fr3_model()))
    joints = {j.get("name"): j for j in robot.findall("joint")}
    for i in range(1, 8):
        limit = joints[f"fr3_joint{i}"].find("limit")
        assert limit is not None and float(limit.get("lower", 0)) < float(limit.get("upper", 0))
        assert float(limit.get("effort", 0)) in (87.0, 12.0)


@pytest.mark.parametrize(
    ("quat", "rpy"),
    [
        ((1.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
        ((0.0, 1.0, 0.0, 0.0), (3.141593, 0.0, 0.0)),
        ((0.7071068, 0.0, 0.0, 0.7071068), (0.0, 0.0, 1.570796)),
        ((0.7071068, 0.0, 0.7071068, 0.0), (0.0, 1.570796, 0.0)),
    ],
)
def test_quat_to_rpy(quat: tuple[float, ...], rpy: tuple[float, ...]) -> None:
    assert quat_to_rpy(quat) == pytest.approx(rpy, abs=1e-5)
