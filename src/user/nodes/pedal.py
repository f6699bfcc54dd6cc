"""`pedal` node: foot pedal presses -> user/msg/HumanReward on `/human_reward`.

Any publisher of that type and topic is treated the same by its consumers; this node maps three keys:
`success_key` ends the episode as a success (MODE_EPISODE_END, reward `success_reward`), `failure_key`
ends it as a failure (MODE_EPISODE_END, reward 0), `step_key` gives `step_reward` for the current step
(MODE_STEP). The header stamp is the press time, so consumers attach it to the right step. Sources:
`evdev` (a Linux input device path) or `scripted` (key presses at given times, for tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from user.bus.base import RELIABLE, Bus
from user.config.strict import ConfigError, setting
from user.interfaces.stamps import header
from user.robot_loop.devices import DeviceError, EvdevPedal, PedalPress, PedalSource, ScriptedPedal
from user.runtime.node import Node

MODE_STEP = 0  # user/msg/HumanReward MODE_STEP
MODE_EPISODE_END = 1  # user/msg/HumanReward MODE_EPISODE_END


@dataclass
class PedalParams:
    source: Literal["evdev", "scripted"] = setting("evdev", "evdev: a Linux input device; scripted: timed presses")
    device_path: str = setting("/dev/input/event0", "evdev: the pedal's input device", when=("source", "evdev"))
    name: str = setting("pedal0", "device name written into the messages")
    robot_id: str = setting("", "robot the rewards are for; empty = the only robot / all robots")
    topic: str = setting("/human_reward", "human reward topic")
    success_key: str = setting("KEY_A", "key that ends the episode as a success")
    failure_key: str = setting("KEY_C", "key that ends the episode as a failure")
    step_key: str = setting("KEY_B", "key that rewards the current step")
    success_reward: float = setting(1.0, "reward sent with a success")
    step_reward: float = setting(1.0, "reward sent for a step press")
    poll_hz: float = setting(100.0, "how often the device is read, Hz", min=1.0, max=1000.0)
    scripted_presses: list[tuple[float, str]] = setting(
        [], "scripted: (seconds after start, key) pairs", when=("source", "scripted")
    )


class PedalNode(Node):
    """Reads the pedal on a timer (never blocking) and publishes one HumanReward per mapped press."""

    Params = PedalParams

    def __init__(self, bus: Bus, source: PedalSource | None = None) -> None:
        super().__init__(bus)
        p = self.params = self.declare_parameters(PedalParams)
        try:
            if source is not None:
                self.source = source
            elif p.source == "scripted":
                self.source = ScriptedPedal(p.scripted_presses)
            else:
                self.source = EvdevPedal(p.device_path)
        except DeviceError as exc:
            raise ConfigError(str(exc)) from exc
        self._msg = self.codec.msg_class("user/msg/HumanReward")
        self._pub = self.create_publisher(p.topic, "user/msg/HumanReward", RELIABLE)
        self.published = 0
        self.create_timer(1.0 / p.poll_hz, self._tick)

    def _tick(self) -> None:
        try:
            presses = self.source.poll()
        except DeviceError as exc:
            self.log.error("%s", exc)
            return
        for press in presses:
            self._publish(press)

    def _publish(self, press: PedalPress) -> None:
        p = self.params
        mapping = {
            p.success_key: (p.success_reward, MODE_EPISODE_END, True),
            p.failure_key: (0.0, MODE_EPISODE_END, False),
            p.step_key: (p.step_reward, MODE_STEP, False),
        }
        if press.key not in mapping:
            self.log.debug("ignoring key %s", press.key)
            return
        reward, mode, success = mapping[press.key]
        self._pub.publish(
            self._msg(
                header=header(press.stamp_ns, "", self.codec),
                robot_id=p.robot_id,
                source=p.name,
                reward=float(reward),
                mode=mode,
                success=success,
            )
        )
        self.published += 1
        self.log.info("%s: %s (reward %.2f)", p.name, press.key, reward)

    def destroy(self) -> None:
        self.source.close()
