"""`SimRobotConfig` loads from deployment-style mappings through the strict loader."""

from __future__ import annotations

import pytest

from user.config import ConfigError, from_mapping
from user.sim.arx_sim import ARX_TASK_PARAMS
from user.sim.cameras import SimCameraConfig
from user.sim.robot import SimArxRobot, SimFrankaRobot, SimRobotConfig, arx_config
from user.tasks import PickPlace, PickPlaceConfig


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
    assert isinstance(cfg.task_params, PickPlaceConfig) and cfg.task_params.cube_side == 0.035  # parsed at load
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


def test_task_params_are_checked_against_the_selected_task_s_config_at_load() -> None:
    with pytest.raises(ConfigError, match=r"task_params: unknown key 'cube_sid'; did you mean 'cube_side'\?"):
        from_mapping(SimRobotConfig, {"task": "pick_place", "task_params": {"cube_sid": 0.05}}, where="test.yaml")
    with pytest.raises(ConfigError, match=r"task_params: unknown key 'clearance'"):  # a key of peg_insertion's
        from_mapping(SimRobotConfig, {"task": "pick_place", "task_params": {"clearance": 0.001}}, where="test.yaml")
    with pytest.raises(ConfigError, match=r"test.yaml: task_params.cube_side: expected a number, got 'big'"):
        from_mapping(SimRobotConfig, {"task": "pick_place", "task_params": {"cube_side": "big"}}, where="test.yaml")
    with pytest.raises(ConfigError, match="task_params: task '' has no settings here"):
        from_mapping(SimRobotConfig, {"task": "", "task_params": {"cube_side": 0.03}}, where="test.yaml")
    assert from_mapping(SimRobotConfig, {"task": "pick_place"}, where="test.yaml").task_params is None
    assert (
        from_mapping(SimRobotConfig, {"task": "pick_place", "task_params": {}}, where="test.yaml").task_params is None
    )


def test_an_arx_arm_without_task_params_lays_its_task_out_for_the_arx() -> None:
    no_cameras = SimCameraConfig(names=())
    arx = SimArxRobot(arx_config("pick_place", cameras=no_cameras))
    assert arx.config.task_params is None and isinstance(arx.task, PickPlace)
    assert arx.task.config == from_mapping(PickPlaceConfig, ARX_TASK_PARAMS["pick_place"], where="arx")
    given = SimArxRobot(arx_config("pick_place", cameras=no_cameras, task_params={"cube_side": 0.03}))
    assert isinstance(given.task, PickPlace) and given.task.config == PickPlaceConfig(cube_side=0.03)  # not the layout
    franka = SimFrankaRobot(SimRobotConfig(task="pick_place", cameras=no_cameras))
    assert isinstance(franka.task, PickPlace) and franka.task.config == PickPlaceConfig()
