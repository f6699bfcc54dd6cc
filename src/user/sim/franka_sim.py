"""`FrankaSim`: the physics-level simulated FR3 (an `ArmSim` with franky-sim's FR3 model)."""

from __future__ import annotations

from user.sim.arm_sim import ArmSim, ArmSimConfig
from user.sim.franka_model import fr3_model
from user.tasks.base import Task


class FrankaSim(ArmSim):
    """The FR3 + hand under operational-space control in a MuJoCo scene with an optional task."""

    def __init__(self, task: Task | None = None, config: ArmSimConfig | None = None, visual: str = "lowpoly") -> None:
        super().__init__(fr3_model(visual), task, config or ArmSimConfig())
