"""`SimRobotConfig` loads from deployment-style mappings through the strict loader."""

from __future__ import annotations

import pytest

from user.config import ConfigError, from_mapping
from user.sim.robot import SimFrankaRobot, SimRobotConfig
from user.tasks import PickPlace


def test_nested_settings_load_and_reach_the_robot() -> None:
    cfg = from_mapping(
        SimRobotConfig,
        {
            "robot_id": "franka_a",
            "task": "pick_place",
            "task_params": {"cube_side": 0.035},
            "cameras": {"names": ["front"], "width": 64, "height": 64},
            "sim": {
                "control_rate_hz": 10.0,
                "scene": {"timestep": 0.001},
                "controller": {"position_stiffness": 2000.0},
            },
            "safety": {"max_translation_per_step_m": 0.01},
        },
        where="test.yaml",
    )
    robot = SimFrankaRobot(cfg)
    assert robot.descriptor.robot_id == "franka_a" and robot.descriptor.cameras == ("front",)
    assert isinstance(robot.task, PickPlace) and robot.task.config.cube_side == 0.035
    assert robot.task.scale.translation_m == 0.01  # the expert acts in the robot's action scale
    robot.connect()
    try:
        assert robot.sim.substeps == 100  # 10 Hz at 1 kHz physics
    finally:
        robot.close()


def test_misplaced_or_out_of_range_settings_are_errors() -> None:
    with pytest.raises(ConfigError, match="unknown key 'timestep'"):
        from_mapping(SimRobotConfig, {"sim": {"timestep": 0.001}}, where="test.yaml")
    with pytest.raises(ConfigError, match="above the maximum"):
        from_mapping(SimRobotConfig, {"sim": {"scene": {"timestep": 0.01}}}, where="test.yaml")
    with pytest.raises(ConfigError, match="not one of"):
        from_mapping(SimRobotConfig, {"cameras": {"mode": "async"}}, where="test.yaml")
