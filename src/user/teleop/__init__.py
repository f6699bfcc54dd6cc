"""Human input devices (ROS-free): teleoperation devices and foot pedals -> intervention actions and presses.

A `TeleopDevice` (`device`: the protocol and its scripted stand-in; `spacemouse`: a 3Dconnexion SpaceMouse) gives
the operator's arm action, or None while they are idle; a `PedalSource` (`pedal`: presses and the scripted
stand-in; `evdev_pedal`: a USB foot pedal; `keyboard_pedal`: a terminal used as a pedal) gives key presses. The
`teleop` and `pedal` nodes (`user.nodes`) move them onto the bus.

Hardware libraries are imported only when a real device is opened, with an error naming the pip package
(and the device path) when they are missing, so nodes that use the scripted devices need neither.

What a device reports is outside data: a SpaceMouse reading with a non-finite (or non-numeric) axis value is
never a command (the read yields nothing: the robot holds), and a pedal press with an unusable timestamp
(non-finite, negative, beyond int64 nanoseconds) gets the wall-clock time. Each such input is counted by
cause in the device's `refused` (`user.interfaces.refusals`: logged once per cause, then rate-limited); a
device that cannot be read at all raises `DeviceError`, never another exception.
"""

from user.teleop.device import ScriptedTeleop, TeleopDevice
from user.teleop.errors import DeviceError
from user.teleop.evdev_pedal import EvdevPedal
from user.teleop.keyboard_pedal import KeyboardPedal
from user.teleop.pedal import PedalPress, PedalSource, ScriptedPedal
from user.teleop.spacemouse import SpaceMouseTeleop

__all__ = [
    "DeviceError",
    "EvdevPedal",
    "KeyboardPedal",
    "PedalPress",
    "PedalSource",
    "ScriptedPedal",
    "ScriptedTeleop",
    "SpaceMouseTeleop",
    "TeleopDevice",
]
