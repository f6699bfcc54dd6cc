"""`PoseWindow`: the franka_ros2 TCP pose stream kept cheaply, and the TCP velocity estimated over a window.

franka_robot_state_broadcaster publishes `current_pose` at the controller manager's rate (1 kHz in
franka_bringup's controllers.yaml), with the measured O_T_EE; it publishes no measured twist (only
`desired_end_effector_twist`) and no Jacobian on a standard-typed topic. Differencing the last two poses
(1 ms apart) multiplies the pose noise by 1000; differencing over the control period (`window_s`, 100 ms at
10 Hz) gives the mean velocity over the step the policy sees, with the noise divided by the window.

The receive side stores the CDR bytes only (no decoding at 1 kHz): `add` is an append and a trim, so a
1 kHz topic costs one cheap callback per message. Poses are decoded when the state is read (the control
rate), two per read.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from user.interfaces.stamps import from_time
from user.robots import rotations

_NS = 1e-9
MAX_GAP_S = 1.0  # two poses further apart than this (by stamp) give no velocity


@dataclass(frozen=True)
class RawSample:
    """One message as it arrived: receive time (monotonic s) and its CDR bytes."""

    received: float
    payload: bytes


class PoseWindow:
    """The latest pose message and the newest one at least `window_s` older (by receive time)."""

    def __init__(self, window_s: float) -> None:
        if not (window_s > 0.0 and math.isfinite(window_s)):
            raise ValueError(f"window_s must be a positive number of seconds, got {window_s!r}")
        self.window_s = window_s
        self._lock = threading.Lock()
        self._samples: deque[RawSample] = deque()

    def add(self, sample: RawSample) -> None:
        """Keep `sample`; drop the samples older than the one that already spans the window."""
        with self._lock:
            samples = self._samples
            samples.append(sample)
            while len(samples) > 2 and sample.received - samples[1].received >= self.window_s:
                samples.popleft()

    def clear(self) -> None:
        with self._lock:
            self._samples.clear()

    def ends(self) -> tuple[RawSample, RawSample] | None:
        """(oldest kept, latest); None before the first sample."""
        with self._lock:
            if not self._samples:
                return None
            return self._samples[0], self._samples[-1]


def velocity(
    first: Any, last: Any, pose_vector: Callable[[Any], npt.NDArray[np.float64]], min_dt_s: float
) -> npt.NDArray[np.float64]:
    """(6,) linear + angular TCP velocity between two PoseStamped messages, by their header stamps; zeros
    when they are less than `min_dt_s` or more than `MAX_GAP_S` apart (too little history, or a gap)."""
    dt = (from_time(last.header.stamp) - from_time(first.header.stamp)) * _NS
    if not (min_dt_s <= dt <= MAX_GAP_S):
        return np.zeros(6)
    a, b = pose_vector(first.pose), pose_vector(last.pose)
    angular = rotations.to_rotvec(
        rotations.multiply(rotations.normalize(b[3:]), rotations.conjugate(rotations.normalize(a[3:])))
    )
    return np.concatenate([(b[:3] - a[:3]) / dt, angular / dt])
