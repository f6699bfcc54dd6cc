"""What can go wrong with an ARX arm, as typed errors whose messages an operator can act on.

Every one is a `RobotError`, so `ArmRobot` latches its e-stop and holds when a driver call raises one. The texts
the arx5-sdk prints for its failures (src/app/controller_base.cpp) are quoted where the operator meets them.
"""

from __future__ import annotations

from user.robots.base import RobotError

# arx5-sdk include/app/solver.h IK_STATUS_MAP_ (KDL SolverI codes, LMA's own, and the SDK's joint-limit code)
IK_STATUS_NAMES = {
    1: "E_DEGRADED",
    -1: "E_NO_CONVERGE",
    -2: "E_UNDEFINED",
    -3: "E_NOT_UP_TO_DATE",
    -4: "E_SIZE_MISMATCH",
    -5: "E_MAX_ITERATIONS_EXCEEDED",
    -6: "E_OUT_OF_RANGE",
    -7: "E_NOT_IMPLEMENTED",
    -8: "E_SVD_FAILED",
    -9: "E_EXCEED_JOITN_LIMIT",  # sic, the SDK's spelling
    -100: "E_GRADIENT_JOINTS_TOO_SMALL",
    -101: "E_INCREMENT_JOINTS_TOO_SMALL",
}


class ArxError(RobotError):
    """Something in the ARX arm or its SDK went wrong."""


class ArxConnectionError(ArxError):
    """The ARX arm could not be reached (SDK missing, CAN interface absent or down, arm unpowered, SDK stuck)."""


class ArxSdkError(ArxError):
    """The SDK's process died, or a call into the SDK did not return within its deadline (the process is ended)."""


class ArxEmergencyError(ArxError):
    """The SDK dropped the arm's position gain to zero (its emergency state): the arm is limp."""


class ArxIkError(ArxError):
    """The SDK's inverse kinematics found no joint solution for a target; the target was not sent."""


def ik_status_name(status: int) -> str:
    return IK_STATUS_NAMES.get(status, f"status {status}")
