"""The typed errors of the libfranka driver, and the operator-readable error for each exception franky raises."""

from __future__ import annotations

from user.robots.base import RobotError


class FrankaError(RobotError):
    """libfranka reported a problem; the message says what to do."""


class FrankaConnectionError(FrankaError):
    """The robot cannot be reached, refused the connection, or the connection was lost."""


class FrankaReflexError(FrankaError):
    """The robot stopped itself (collision / limit reflex); it needs error recovery."""


class FrankaControlError(FrankaError):
    """A motion was rejected or aborted for another reason (preempted, user stop, timing)."""


class FrankaGripperError(FrankaError):
    """The Franka Hand failed a command or lost its connection."""


def translate_error(exc: BaseException, host: str, what: str) -> FrankaError:
    """The typed, operator-readable error for an exception raised by franky while doing `what`."""
    kind, text = type(exc).__name__, str(exc)
    where = f"Franka at {host}"
    if kind == "NetworkException":
        return FrankaConnectionError(
            f"{what}: no usable connection to the {where} ({text}). Check the network cable, that the robot "
            "is powered and that FCI is activated in Desk, then connect() again."
        )
    if kind == "RealtimeException":
        return FrankaConnectionError(f"{what}: {text} Use a PREEMPT_RT kernel, or ignore_realtime: true (sims).")
    if kind == "IncompatibleVersionException":
        return FrankaConnectionError(f"{what}: {text} franky's libfranka does not match the robot firmware.")
    if kind == "ControlException" and "reflex" in text.lower():
        return FrankaReflexError(
            f"{what}: the {where} stopped itself with a reflex ({text}). It hit something or exceeded a limit: "
            "make the workspace safe, then clear_estop() (runs error recovery) and reset()."
        )
    if kind in ("ControlException", "CommandException", "InvalidOperationException", "TorqueSignalTimeoutException"):
        hint = " Is the user stop released and are the joints unlocked in Desk?"
        if "communication_constraints_violation" in text:
            hint = " The control link missed deadlines: use a direct cable and a real-time kernel."
        elif "preempted" in text:
            hint = " Another program, Desk or the user stop ended it."
        return FrankaControlError(f"{what}: the {where} aborted or refused the motion ({text}).{hint}")
    if kind == "GripperException":
        return FrankaGripperError(f"{what}: the Franka Hand at {host} failed ({text}).")
    return FrankaError(f"{what}: {kind}: {text}")
