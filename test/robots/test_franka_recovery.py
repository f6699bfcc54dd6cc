"""FrankaLibfrankaRobot on day one: reflexes, user stops, link faults and connect-time failures as on a real arm.

franky-sim cannot produce these (its robot never leaves modes Idle/Move and its recovery always succeeds), so
these tests load `test.robots.franky_standin` as `franky`: a robot that follows libfranka 0.21.2 and franky 2.0.0
in what it raises and when (each behaviour there names its upstream source).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import numpy as np
import pytest

from test.robots import franky_standin as fs
from user.robots import franka_libfranka
from user.robots.franka_errors import FrankaConnectionError, FrankaControlError, FrankaReflexError, translate_error
from user.robots.franka_libfranka import FrankaLibfrankaRobot
from user.robots.franka_libfranka_config import FrankaLibfrankaConfig

pytestmark = pytest.mark.timeout(30)
HOST = "172.16.0.2"


@pytest.fixture
def unit(monkeypatch: pytest.MonkeyPatch) -> fs.ControlUnit:
    """A fresh robot behind HOST; the driver imports the stand-in as franky and skips its TCP probe."""
    control_unit = fs.ControlUnit()
    monkeypatch.setitem(sys.modules, "franky", fs)
    monkeypatch.setitem(fs.CONTROL_UNITS, HOST, control_unit)
    monkeypatch.setattr(franka_libfranka, "probe", lambda host, port, timeout_s: None)
    return control_unit


def make_arm(controller: str = "impedance", ignore_realtime: bool = True) -> FrankaLibfrankaRobot:
    cfg = FrankaLibfrankaConfig(host=HOST, ignore_realtime=ignore_realtime, gripper=False, controller=controller)
    return FrankaLibfrankaRobot(cfg)


@pytest.fixture
def arm(unit: fs.ControlUnit) -> Iterator[FrankaLibfrankaRobot]:
    robot = make_arm()
    robot.connect()
    robot.reset()
    yield robot
    robot.close()


def act(dx: float = 0.0) -> np.ndarray:
    a = np.zeros(7, np.float32)
    a[0], a[6] = dx, 1.0
    return a


def test_the_standin_names_what_franky_names() -> None:
    franky = pytest.importorskip("franky", reason="franky-control is not installed (the franka extra)")
    assert [m.name for m in fs.RobotMode] == list(franky.RobotMode.__members__)
    for name in ("ControlException", "CommandException", "NetworkException", "RealtimeException"):
        assert type(getattr(franky, name)("x")).__module__ == getattr(fs, name).__module__ == "franky._franky"
    assert "communication_constraints_violation" in dir(franky.Errors)
    assert bool(franky.Errors()) and bool(fs.Errors())  # no __bool__: an empty Errors is truthy in both


# ---- defect 1: recovery follows the robot mode, not the error flags ----------------------------------------


@pytest.mark.parametrize("controller", ["impedance", "waypoint"])
def test_clear_estop_recovers_a_reflex_whose_flags_already_cleared(unit: fs.ControlUnit, controller: str) -> None:
    arm = make_arm(controller)
    arm.connect()
    try:
        arm.reset()
        assert not arm.step(act(0.5)).held
        recovered = unit.recoveries  # reset() already ran one, routinely
        unit.reflex("cartesian_reflex")
        with pytest.raises(FrankaReflexError, match="stopped itself with a reflex"):
            arm.step(act(0.5))
        unit.finish_braking()
        assert not arm.franky_robot.has_errors and arm.franky_robot.state.robot_mode is fs.RobotMode.Reflex
        arm.clear_estop()
        moved = arm.step(act(0.5))
        assert not moved.held and not arm.estopped and unit.recoveries == recovered + 1
        assert unit.mode is fs.RobotMode.Idle
    finally:
        arm.close()


def test_reset_recovers_a_robot_left_in_reflex_mode(unit: fs.ControlUnit) -> None:
    unit.mode = fs.RobotMode.Reflex  # e.g. the node was restarted after a reflex; the flags cleared long ago
    arm = make_arm()
    arm.connect()
    try:
        state = arm.reset()
        assert unit.mode is fs.RobotMode.Idle and state.tcp_pose.shape == (7,)
        assert arm.franky_robot.is_in_control
    finally:
        arm.close()


def test_a_user_stop_must_be_released_before_the_estop_clears(arm: FrankaLibfrankaRobot, unit: fs.ControlUnit) -> None:
    recovered = unit.recoveries  # reset() already ran one, routinely
    unit.press_user_stop()
    with pytest.raises(FrankaControlError, match="release the user stop"):
        arm.step(act(0.5))
    with pytest.raises(FrankaControlError, match="release the user stop"):
        arm.clear_estop()  # nothing can recover while it is pressed; the e-stop stays latched
    assert arm.estopped and unit.recoveries == recovered
    unit.release_user_stop()
    arm.clear_estop()  # mode Idle, no flags: recovery still has to run (franka_ros #308)
    assert not arm.step(act(0.5)).held and unit.recoveries == recovered + 1


def test_a_command_refused_for_the_mode_is_no_new_reflex() -> None:
    mode_texts = {
        '("Reflex")!': ("error recovery has not run", "clear the e-stop"),
        '("User stopped")!': ("release the user stop",),
        '("Other")! Did you open the brakes?': ("unlock the joints", "activate FCI"),
        '("Guiding")!': ("guiding",),
    }
    for tail, hints in mode_texts.items():
        exc = fs.ControlException(f"libfranka: Move command rejected: command not possible in the current mode {tail}")
        err = translate_error(exc, HOST, "sending the target")
        assert type(err) is FrankaControlError, (tail, err)
        for hint in hints:
            assert hint in str(err), (hint, str(err))
    user_stop = translate_error(fs.ControlException("libfranka: Move command aborted: User Stop pressed!"), HOST, "x")
    assert type(user_stop) is FrankaControlError and "release the user stop" in str(user_stop)


# ---- defect 7: link faults are not collisions; real-time limits named ---------------------------------------


def test_a_communication_constraints_violation_reads_as_a_link_fault(
    arm: FrankaLibfrankaRobot, unit: fs.ControlUnit
) -> None:
    unit.reflex("communication_constraints_violation")
    with pytest.raises(FrankaControlError) as caught:
        arm.step(act(0.5))
    err = caught.value
    assert not isinstance(err, FrankaReflexError) and "hit something" not in str(err)
    assert "direct cable" in str(err) and "real-time kernel" in str(err) and "\n" not in str(err)
    unit.finish_braking()
    arm.clear_estop()  # the robot is in Reflex all the same: recovery runs, control resumes
    assert not arm.step(act(0.5)).held


@pytest.mark.parametrize(
    ("kernel", "permitted", "hints"),
    [
        (True, False, ("rtprio", "memlock", "/etc/security/limits.conf")),
        (False, True, ("PREEMPT_RT", "rtprio")),
    ],
)
def test_realtime_refusals_say_what_to_set_up(
    unit: fs.ControlUnit, kernel: bool, permitted: bool, hints: tuple[str, ...]
) -> None:
    unit.realtime_kernel, unit.rt_scheduling_permitted = kernel, permitted
    arm = make_arm(ignore_realtime=False)
    with pytest.raises(FrankaConnectionError) as caught:
        arm.connect()
    for hint in hints:
        assert hint in str(caught.value), (hint, str(caught.value))
    assert not arm.connected


# ---- defect 5: a robot on another server version ------------------------------------------------------------


@pytest.mark.parametrize(("server", "system"), [(9, "FR3 system version 5.7.2"), (5, "Panda system version 4.2.1")])
def test_an_older_system_image_names_the_franky_build_to_install(
    unit: fs.ControlUnit, server: int, system: str
) -> None:
    unit.server_version = server
    arm = make_arm()
    with pytest.raises(FrankaConnectionError) as caught:
        arm.connect()
    text = str(caught.value)
    assert f"robot server version {server}" in text and "franky's libfranka speaks version 10" in text
    assert system in text
    index = f"https://timschneider42.github.io/franky/whl/by-robot-server-version/{server}/"
    assert re.search(rf"pip install .*franky-control.*--extra-index-url {re.escape(index)}", text), text
    assert not arm.connected
