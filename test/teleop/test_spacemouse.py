"""The SpaceMouse device and the `teleop` node over a stand-in of pyspacemouse 1.1.5 / easyhid / hidraw
(test/teleop/pyspacemouse_standin.py): how it opens and fails to, reads without lag, and survives an unplug."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

import numpy as np
import pytest

from test.conftest import wait_until
from test.teleop.pyspacemouse_standin import HIDRAW_QUEUE, ManualClock, SpaceMouseHardware, install
from user.bus.zenoh_bus import ZenohBus
from user.config.strict import ConfigError
from user.nodes.teleop import TeleopNode
from user.teleop.errors import DeviceError
from user.teleop.spacemouse import SpaceMouseTeleop

TICK_S = 0.02  # the teleop node's default 50 Hz


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def hardware(monkeypatch: pytest.MonkeyPatch, clock: ManualClock) -> SpaceMouseHardware:
    hw = SpaceMouseHardware(clock)
    install(monkeypatch, hw)
    return hw


def tick(device: SpaceMouseTeleop, clock: ManualClock) -> np.ndarray | None:
    clock.now += TICK_S
    return device.read()


# ---- defect 2: opening with the documented set-up, and every library failure a DeviceError ------------------


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        ("hidapi_installed", r"apt install libhidapi-hidraw0"),
        ("plugged", r"no SpaceMouse found: plug it in"),
        ("readable", r"udev rule .*replug"),
    ],
)
def test_each_open_failure_is_one_device_error_line_saying_what_to_do(
    hardware: SpaceMouseHardware, fault: str, says: str
) -> None:
    setattr(hardware, fault, False)
    with pytest.raises(DeviceError, match=says) as caught:
        SpaceMouseTeleop()
    assert "\n" not in str(caught.value)


def test_an_open_failure_stops_the_node_at_start_with_a_configuration_error(
    hardware: SpaceMouseHardware, make_bus: Callable[..., ZenohBus]
) -> None:
    hardware.plugged = False
    with pytest.raises(ConfigError, match="no SpaceMouse found"):
        TeleopNode(make_bus("teleop", {"device": "spacemouse"}))


def test_an_unplug_is_a_device_error_and_a_replug_is_reopened(hardware: SpaceMouseHardware, clock: ManualClock) -> None:
    device = SpaceMouseTeleop(clock=clock)
    hardware.hold(x=0.5)
    assert tick(device, clock) is not None
    hardware.unplug()
    for _ in range(3):  # every read until it is back: the same DeviceError, never easyhid's HIDException
        with pytest.raises(DeviceError, match=r"SpaceMouse .*unplugged.*plug it back in"):
            tick(device, clock)
    hardware.replug()
    hardware.readable = False  # replugged, but the udev rule did not apply: a new reason, a new line
    clock.now += 1.0
    with pytest.raises(DeviceError, match="cannot be opened .*udev rule"):
        device.read()
    hardware.readable = True
    hardware.hold(y=0.5)
    clock.now += 1.0  # the next reopen attempt is due: opened again, no report read yet
    assert device.read() is None and hardware.opens == 3
    action = tick(device, clock)  # the next report, 16 ms later
    assert action is not None and action[0] == pytest.approx(0.5)  # y -> forward: moving again
    device.close()


# ---- defect 3: no backlog of HID reports ----------------------------------------------------------------------


def test_a_release_after_a_long_hold_is_seen_at_the_next_tick(hardware: SpaceMouseHardware, clock: ManualClock) -> None:
    device = SpaceMouseTeleop()
    hardware.hold(x=0.8)
    for _ in range(int(3.0 / TICK_S)):  # three seconds of intervention at 50 Hz against 62.5 reports/s
        action = tick(device, clock)
        assert action is not None
    hardware.release()
    assert tick(device, clock) is None  # idle at once: the robot gets no stale intervention
    assert hardware.queued() == 0 and hardware.dropped == 0


def test_a_full_kernel_queue_is_emptied_in_one_read(hardware: SpaceMouseHardware, clock: ManualClock) -> None:
    device = SpaceMouseTeleop()
    hardware.hold(z=0.6)
    clock.now += 5.0  # the node stalled (e.g. a slow machine): the ring filled up
    assert hardware.queued() == HIDRAW_QUEUE
    action = device.read()
    assert action is not None and action[2] == pytest.approx(0.6)
    assert hardware.queued() == 0


def test_a_button_click_shorter_than_a_tick_still_moves_the_gripper(
    hardware: SpaceMouseHardware, clock: ManualClock
) -> None:
    device = SpaceMouseTeleop()
    hardware.report(buttons=[1, 0])  # left button down and up again between two reads
    hardware.report(buttons=[0, 0])
    action = tick(device, clock)
    assert action is not None and action[6] == -1.0  # closed
    assert tick(device, clock) is None  # then idle


# ---- acceptance: an unplug mid-intervention -------------------------------------------------------------------


def test_an_unplug_mid_intervention_stops_interventions_with_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, make_bus: Callable[..., ZenohBus], caplog: pytest.LogCaptureFixture
) -> None:
    hardware = SpaceMouseHardware(time.monotonic)
    install(monkeypatch, hardware)
    robot = f"arm_{uuid.uuid4().hex[:6]}"
    node = TeleopNode(make_bus("teleop", {"robot_id": robot, "device": "spacemouse"}))
    caplog.set_level(logging.INFO, logger="user.teleop")
    try:
        hardware.hold(x=0.5)
        assert wait_until(lambda: node.published > 3 and node._active, 10.0)
        hardware.unplug()
        assert wait_until(lambda: not node._active, 1.0)  # within a tick or two of the unplug
        settled = node.published
        assert wait_until(lambda: hardware.opens >= 2, 5.0)  # alive: it keeps trying to reopen the device
        assert node.published == settled  # and sent no intervention since
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1, errors
        assert "unplugged" in errors[0] and "no interventions" in errors[0]
        hardware.replug()
        hardware.hold(z=0.3)
        assert wait_until(lambda: node.published > settled, 5.0)  # reopened, interventions again
        assert any("works again" in r.getMessage() for r in caplog.records)
    finally:
        node.destroy()


def test_a_deflected_puck_that_goes_silent_is_not_a_command(hardware: SpaceMouseHardware, clock: ManualClock) -> None:
    """Out of range mid-deflection: no rest report ever comes, so the last state must not stay a command."""
    device = SpaceMouseTeleop(clock=clock)
    hardware.hold(x=0.6)
    for _ in range(10):  # reports every 16 ms: a command every tick
        assert tick(device, clock) is not None
    hardware.out_of_range()
    assert tick(device, clock) is not None  # one tick without a report is normal
    for _ in range(15):
        clock.now += TICK_S
        device.read()
    assert device.read() is None
    assert device.refused.counts["no report while deflected"] >= 1
    hardware.hold(x=0.6)  # back in range: reports again, commands again
    assert tick(device, clock) is not None
