"""A scripted "human" for HG-DAgger tests: takes over when the robot goes wrong, hands back when it agrees."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass
class InterventionGate:
    """A scripted human: takes over when the robot's action is `threshold` away from the expert's, hands
    back after `hold` steps of agreement."""

    threshold: float = 0.5  # L-inf distance between robot and expert actions that triggers a takeover
    hold: int = 3  # steps the expert keeps control once it took over
    _left: int = 0

    def decide(self, robot_action: npt.NDArray[np.float32], expert_action: npt.NDArray[np.float32]) -> bool:
        """Whether the expert acts this step."""
        if float(np.max(np.abs(robot_action - expert_action))) > self.threshold:
            self._left = self.hold
        if self._left > 0:
            self._left -= 1
            return True
        return False

    def reset(self) -> None:
        self._left = 0
