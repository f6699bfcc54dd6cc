"""`pedal` node: foot pedal presses -> user/msg/HumanReward on `/human_reward`.

Any publisher of that type and topic is treated the same by its consumers; this node maps three keys:
`success_key` ends the episode as a success (MODE_EPISODE_END, reward `success_reward`), `failure_key`
ends it as a failure (MODE_EPISODE_END, reward 0), `step_key` gives `step_reward` for the current step
(MODE_STEP). Sources: `evdev` (a Linux input device path, held exclusively with `grab` so a keyboard-type
pedal does not also type into the focused window), `keyboard` (single characters typed in a terminal, without
Enter: `success_char`, `failure_char` and `step_char` stand for the three keys) or `scripted` (key presses at
given times, for tests).

The header stamp says when the key was pressed, so consumers attach it to the step it was pressed in. It is
the wall clock, what a real robot stamps its steps with, unless `clock_topic` is set (e.g. /clock): then it
is the latest rosgraph_msgs/Clock time heard there, the time of a simulated robot, and a press before any
clock message is dropped with a warning (counted in `presses_without_clock`), never sent with a wall stamp.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from user.bus.base import BEST_EFFORT, RELIABLE, Bus
from user.config.strict import ConfigError, setting
from user.interfaces.refusals import Refusals
from user.interfaces.stamps import from_time, header
from user.runtime.node import Node
from user.teleop.errors import DeviceError
from user.teleop.evdev_pedal import EvdevPedal
from user.teleop.keyboard_pedal import KeyboardPedal
from user.teleop.pedal import PedalPress, PedalSource, ScriptedPedal

MODE_STEP = 0  # user/msg/HumanReward MODE_STEP
MODE_EPISODE_END = 1  # user/msg/HumanReward MODE_EPISODE_END


@dataclass
class PedalParams:
    source: Literal["evdev", "keyboard", "scripted"] = setting(
        "evdev", "evdev: a Linux input device; keyboard: characters typed in a terminal; scripted: timed presses"
    )
    device_path: str = setting("/dev/input/event0", "evdev: the pedal's input device", when=("source", "evdev"))
    grab: bool = setting(
        True,
        "evdev: hold the device exclusively while the node runs (its presses reach no other program; "
        "a device another process holds is a start-up error)",
        when=("source", "evdev"),
    )
    tty_path: str = setting(
        "/dev/tty", "keyboard: the terminal read (/dev/tty: the node's own)", when=("source", "keyboard")
    )
    success_char: str = setting(
        "s",
        "keyboard: the character that presses success_key (one character, or space/enter/tab)",
        when=("source", "keyboard"),
    )
    failure_char: str = setting(
        "f",
        "keyboard: the character that presses failure_key (one character, or space/enter/tab)",
        when=("source", "keyboard"),
    )
    step_char: str = setting(
        "space",
        "keyboard: the character that presses step_key (one character, or space/enter/tab)",
        when=("source", "keyboard"),
    )
    name: str = setting("pedal0", "device name written into the messages")
    robot_id: str = setting("", "robot the rewards are for; empty = the only robot / all robots")
    topic: str = setting("/human_reward", "human reward topic")
    clock_topic: str = setting(
        "",
        "rosgraph_msgs/Clock topic whose latest time stamps the presses (e.g. /clock for a simulated robot); "
        "empty: the wall clock",
    )
    success_key: str = setting("KEY_A", "key that ends the episode as a success")
    failure_key: str = setting("KEY_C", "key that ends the episode as a failure")
    step_key: str = setting("KEY_B", "key that rewards the current step")
    success_reward: float = setting(1.0, "reward sent with a success")
    step_reward: float = setting(1.0, "reward sent for a step press")
    poll_hz: float = setting(100.0, "how often the device is read, Hz", min=1.0, max=1000.0)
    scripted_presses: list[tuple[float, str]] = setting(
        [], "scripted: (seconds after start, key) pairs", when=("source", "scripted")
    )


def open_source(p: PedalParams) -> PedalSource:
    """The pedal source `p` selects; a device that cannot be opened is a `DeviceError` saying why."""
    if p.source == "scripted":
        return ScriptedPedal(p.scripted_presses)
    if p.source == "keyboard":
        keys = [(p.success_char, p.success_key), (p.failure_char, p.failure_key), (p.step_char, p.step_key)]
        return KeyboardPedal(p.tty_path, keys)
    return EvdevPedal(p.device_path, grab=p.grab)


class PedalNode(Node):
    """Reads the pedal on a timer (never blocking) and publishes one HumanReward per mapped press."""

    Params = PedalParams

    def __init__(self, bus: Bus, source: PedalSource | None = None) -> None:
        super().__init__(bus)
        p = self.params = self.declare_parameters(PedalParams)
        try:
            self.source = source if source is not None else open_source(p)
        except DeviceError as exc:
            raise ConfigError(str(exc)) from exc
        self._msg = self.codec.msg_class("user/msg/HumanReward")
        self._pub = self.create_publisher(p.topic, "user/msg/HumanReward", RELIABLE)
        self.published = 0
        self.clock_ns: int | None = None  # the latest time heard on `clock_topic`
        self.presses_without_clock = 0  # presses dropped because no clock time was heard yet
        self.refused = Refusals(self.log, level=logging.WARNING)
        if p.clock_topic:
            # best effort matches every /clock publisher (rclpy's own time source subscribes the same way)
            self.create_subscription(p.clock_topic, "rosgraph_msgs/msg/Clock", self._on_clock, BEST_EFFORT)
        self.create_timer(1.0 / p.poll_hz, self._tick)

    def _on_clock(self, msg: Any) -> None:
        ns = from_time(msg.clock)
        if ns < 0:
            self.refused.refuse("negative clock", f"the clock time {ns} ns on {self.params.clock_topic}: not used")
            return
        self.clock_ns = ns

    def _tick(self) -> None:
        try:
            presses = self.source.poll()
        except DeviceError as exc:
            self.log.error("%s", exc)
            return
        for press in presses:
            self._publish(press)

    def _stamp_ns(self, press: PedalPress) -> int | None:
        """The stamp a press is sent with: its own (wall clock), or the latest clock time; None when none came yet."""
        p = self.params
        if not p.clock_topic:
            return press.stamp_ns
        clock_ns = self.clock_ns
        if clock_ns is None:
            self.presses_without_clock += 1
            self.log.warning(
                "%s: %s pressed before any time was heard on %s: dropped (is the simulation publishing its clock?)",
                p.name,
                press.key,
                p.clock_topic,
            )
        return clock_ns

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
        stamp_ns = self._stamp_ns(press)
        if stamp_ns is None:
            return
        reward, mode, success = mapping[press.key]
        self._pub.publish(
            self._msg(
                header=header(stamp_ns, "", self.codec),
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
