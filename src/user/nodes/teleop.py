"""`teleop` node: a human's device -> interventions on `/<robot_id>/intervention` (user/msg/Action).

Each message is flagged intervened with source HUMAN. Deadman: nothing is published while the operator is
idle, so the robot node's intervention deadline hands control back to the policy by itself. Devices:
`spacemouse` (pyspacemouse) and `scripted` (a fixed action for a time window, for tests and demos).
A keyboard device will need a display-free key source (evdev), like the pedal node.

A device that cannot be opened stops the node at start (a configuration error, exit code 2, one line saying
what to do). A device that stops answering while the node runs (a SpaceMouse unplugged mid-intervention) ends
the intervention at once: nothing more is published, so the robot node's intervention deadline hands the arm
back (to the policy, or to a hold when no policy action is fresh), and one error line says why; the node stays
up, the device reopens itself when it is back, and one line says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from user.bus.base import RELIABLE, Bus
from user.config.strict import ConfigError, setting
from user.interfaces.domain import Action, action_to_msg
from user.robot_loop.gate import SOURCE_HUMAN
from user.runtime.node import Node
from user.teleop.device import ScriptedTeleop, TeleopDevice
from user.teleop.errors import DeviceError
from user.teleop.spacemouse import SpaceMouseTeleop


@dataclass
class TeleopParams:
    robot_id: str = setting("franka_sim", "robot to intervene on; topic default /<robot_id>/intervention")
    device: Literal["spacemouse", "scripted"] = setting("spacemouse", "input device: spacemouse or scripted")
    rate_hz: float = setting(50.0, "device polling (and publishing, while active) rate, Hz", min=1.0, max=1000.0)
    deadzone: float = setting(
        0.05, "spacemouse: axis values below this count as idle", min=0.0, max=1.0, when=("device", "spacemouse")
    )
    scripted_action: list[float] = setting(
        [0.0] * 6 + [-1.0], "scripted: the action to send", when=("device", "scripted")
    )
    scripted_start_s: float = setting(
        1.0, "scripted: active from this many seconds after start", min=0.0, when=("device", "scripted")
    )
    scripted_duration_s: float = setting(1.0, "scripted: active for this long, s", min=0.0, when=("device", "scripted"))
    topic: str = setting("", "intervention topic; empty = /<robot_id>/intervention")


class TeleopNode(Node):
    """Polls the device on a timer; publishes only while the operator is active."""

    Params = TeleopParams

    def __init__(self, bus: Bus, device: TeleopDevice | None = None) -> None:
        super().__init__(bus)
        p = self.params = self.declare_parameters(TeleopParams)
        try:
            self.device = device or self._open(p)
        except DeviceError as exc:
            raise ConfigError(str(exc)) from exc
        self._pub = self.create_publisher(p.topic or f"/{p.robot_id}/intervention", "user/msg/Action", RELIABLE)
        self.published = 0
        self._active = False
        self.device_error: str | None = None  # why the device does not answer now (logged once per reason)
        self.create_timer(1.0 / p.rate_hz, self._tick)

    @staticmethod
    def _open(p: TeleopParams) -> TeleopDevice:
        if p.device == "scripted":
            return ScriptedTeleop(p.scripted_action, p.scripted_start_s, p.scripted_duration_s)
        return SpaceMouseTeleop(p.deadzone)

    def _tick(self) -> None:
        try:
            action = self.device.read()
        except DeviceError as exc:
            self._device_failed(exc)
            return
        if self.device_error is not None:
            self.device_error = None
            self.log.info("device %s works again", self.params.device)
        if (action is not None) != self._active:
            self._active = action is not None
            self.log.info("operator %s", "took over" if self._active else "released")
        if action is None:
            return
        msg = Action(self.params.robot_id, 0, 0, np.asarray(action, np.float32), self.now_ns(), True, SOURCE_HUMAN)
        self._pub.publish(action_to_msg(msg, self.codec))
        self.published += 1

    def _device_failed(self, exc: DeviceError) -> None:
        """No intervention from now on; one line per reason, not one per tick."""
        self._active = False
        if str(exc) != self.device_error:
            self.device_error = str(exc)
            self.log.error("%s; no interventions until it works again", exc)

    def destroy(self) -> None:
        try:
            self.device.close()
        except DeviceError as exc:
            self.log.warning("%s", exc)
