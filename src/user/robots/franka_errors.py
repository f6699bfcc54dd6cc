"""The typed errors of the libfranka driver, and the operator-readable error for each exception franky raises.

The texts matched here are libfranka 0.21.2's (the one franky 2.0.0 bundles): src/robot_impl.h
`handleCommandResponse` and `commandNotPossibleMsg` ("<command> command rejected: command not possible in the
current mode ("Reflex")!"), src/robot_impl.cpp `createControlException` ("... motion aborted by reflex! [flags]",
then a control_command_success_rate line), src/exception.cpp (the version mismatch) and src/control_tools.cpp
(real-time scheduling). A refusal because of the robot's mode is not a new reflex: it means an earlier reflex or
user stop was never recovered from, and the message says so.
"""

from __future__ import annotations

import re

from user.robots.base import RobotError


class FrankaError(RobotError):
    """libfranka reported a problem; the message says what to do."""


class FrankaConnectionError(FrankaError):
    """The robot cannot be reached, refused the connection, or the connection was lost."""


class FrankaReflexError(FrankaError):
    """The robot stopped itself (collision / limit reflex); it needs error recovery."""


class FrankaControlError(FrankaError):
    """A motion was rejected or aborted for another reason (robot mode, user stop, link, preempted)."""


class FrankaGripperError(FrankaError):
    """The Franka Hand failed a command or lost its connection."""


FRANKY_INDEX = "https://timschneider42.github.io/franky/whl/by-robot-server-version"
# robot server version -> (the oldest robot system image that speaks it, the libfranka of franky's build for it);
# libfranka docs/compatibility_matrix.rst, franky doc/getting-started/installation.md (the libfranka builds)
SERVER_VERSIONS = {
    10: ("FR3 system version 5.9.0", "0.21.2"),
    9: ("FR3 system version 5.7.2", "0.17.0"),
    8: ("FR3 system version 5.7.0", "0.14.2"),
    7: ("FR3 system version 5.5.0", "0.13.3"),
    6: ("FR3 system version 5.2.0", "0.12.1"),
    5: ("Panda system version 4.2.1", "0.9.2"),
    4: ("Panda system version 4.0.0", "0.8.0"),
    3: ("Panda system version 3.0.0", "0.7.1"),
}
USER_STOP_HINT = "release the user stop (external activation device), then clear the e-stop (runs error recovery)"
RECOVER_HINT = "clear the e-stop: clear_estop() runs libfranka's error recovery"
# libfranka src/robot_state.cpp writes the modes as: Other, Idle, Move, Guiding, Reflex, User stopped,
# Automatic error recovery; franky's RobotMode names them Other ... UserStopped, AutomaticErrorRecovery
MODE_HINTS = {
    "Reflex": f"an earlier reflex left it in mode Reflex and error recovery has not run: {RECOVER_HINT}",
    "User stopped": f"the user stop is pressed: {USER_STOP_HINT}",
    "UserStopped": f"the user stop is pressed: {USER_STOP_HINT}",
    "Other": "its joints are locked or FCI is off: unlock the joints and activate FCI in Desk, then clear the e-stop",
    "Guiding": "it is being hand-guided (guiding button held): let go of it, then clear the e-stop",
    "Automatic error recovery": "error recovery is still running: wait a few seconds, then clear the e-stop again",
    "AutomaticErrorRecovery": "error recovery is still running: wait a few seconds, then clear the e-stop again",
}
_MODE = re.compile(r'current mode \("?([^")]+)"?\)')
_VERSIONS = re.compile(r"server version: (\d+), library version: (\d+)")


def mode_name(mode: object) -> str:
    """A franky `RobotMode` value as its name (Reflex, UserStopped, ...)."""
    return str(getattr(mode, "name", mode)).rsplit(".", 1)[-1]


def mode_hint(mode: str) -> str:
    """What to do about a robot mode (libfranka's text or franky's name) that refuses motions."""
    return MODE_HINTS.get(mode, f"after a user stop the robot needs error recovery: {RECOVER_HINT}")


def mode_error(mode: str, host: str, what: str) -> FrankaControlError:
    """The robot is in a mode that refuses motions (read from its state before trying one)."""
    return FrankaControlError(f"{what}: the Franka at {host} is in mode {mode}: {mode_hint(mode)}.")


def one_line(text: str) -> str:
    """libfranka's multi-line texts (the reflex message adds a success-rate line) as one console line."""
    return "; ".join(part.strip() for part in text.splitlines() if part.strip())


def translate_error(exc: BaseException, host: str, what: str) -> FrankaError:
    """The typed, operator-readable error for an exception raised by franky while doing `what`."""
    kind, text = type(exc).__name__, one_line(str(exc))
    where = f"Franka at {host}"
    if kind == "NetworkException":
        return FrankaConnectionError(
            f"{what}: no usable connection to the {where} ({text}). Check the network cable, that the robot "
            "is powered and that FCI is activated in Desk, then connect() again."
        )
    if kind == "RealtimeException":
        return realtime_error(text, what)
    if kind == "IncompatibleVersionException":
        return version_error(text, host, what)
    if kind in ("ControlException", "CommandException", "InvalidOperationException", "TorqueSignalTimeoutException"):
        return motion_error(text, where, what)
    if kind == "GripperException":
        return FrankaGripperError(f"{what}: the Franka Hand at {host} failed ({text}).")
    return FrankaError(f"{what}: {kind}: {text}")


def motion_error(text: str, where: str, what: str) -> FrankaError:
    """A motion or command that libfranka refused or aborted, classified by its text."""
    mode = _MODE.search(text)
    if mode is not None:
        return FrankaControlError(
            f"{what}: the {where} refused the command in mode {mode.group(1)} ({text}): {mode_hint(mode.group(1))}."
        )
    if "User Stop pressed" in text:
        return FrankaControlError(f"{what}: the user stop of the {where} was pressed ({text}): {USER_STOP_HINT}.")
    if "communication_constraints_violation" in text:
        return FrankaControlError(
            f"{what}: the {where} stopped because the 1 kHz control link missed deadlines ({text}). This is no "
            "collision: use a direct cable to the Control unit (no switch), a real-time kernel (PREEMPT_RT) "
            f"and an otherwise idle robot PC, then {RECOVER_HINT}."
        )
    if "reflex" in text.lower():
        return FrankaReflexError(
            f"{what}: the {where} stopped itself with a reflex ({text}). It hit something or exceeded a limit: "
            "make the workspace safe, then clear_estop() (runs error recovery) and reset()."
        )
    if "manual error recovery required" in text:
        return FrankaControlError(
            f"{what}: the {where} needs manual error recovery ({text}): in Desk, guide the arm out of the limit "
            "it violated and acknowledge the error, then clear the e-stop."
        )
    hint = " Is the user stop released and are the joints unlocked in Desk?"
    if "preempted" in text:
        hint = " Another program, Desk or the user stop ended it."
    return FrankaControlError(f"{what}: the {where} aborted or refused the motion ({text}).{hint}")


def realtime_error(text: str, what: str) -> FrankaConnectionError:
    """libfranka refused to run without real-time scheduling (RealtimeConfig.Enforce)."""
    limits = (
        "give this user real-time limits: a group `realtime` with rtprio 99 and memlock 102400 in "
        "/etc/security/limits.conf, then log in again"
    )
    if "kernel" in text:
        fix = f"Boot a PREEMPT_RT kernel (`uname -a` shows PREEMPT_RT) and {limits}"
    else:
        fix = f"The kernel may be right but this user may not use SCHED_FIFO: {limits}"
    sep = " " if text.endswith((".", "!")) else ". "
    return FrankaConnectionError(
        f"{what}: {text}{sep}{fix} (docs/franka_libfranka.md, Real-time permissions). "
        "ignore_realtime: true is for simulators only."
    )


def version_error(text: str, host: str, what: str) -> FrankaConnectionError:
    """The robot's server version is not the one franky's libfranka speaks: name the franky build to install."""
    found = _VERSIONS.search(text)
    if found is None:
        return FrankaConnectionError(f"{what}: {text} franky's libfranka does not match the robot's system image.")
    server, library = int(found.group(1)), int(found.group(2))
    image, libfranka = SERVER_VERSIONS.get(server, ("an unknown system image", "?"))
    update = ", or update the FR3's system image" if server < library and image.startswith("FR3") else ""
    return FrankaConnectionError(
        f"{what}: the Franka at {host} speaks robot server version {server} ({image} or newer), franky's "
        f"libfranka speaks version {library}. Install the franky build for server version {server} "
        f"(libfranka {libfranka}): pip uninstall -y franky-control && pip install franky-control "
        f"--extra-index-url {FRANKY_INDEX}/{server}/ (docs/franka_libfranka.md){update}."
    )
