"""The real drivers of `build_driver`: `franka` end to end against franky-sim (the libfranka protocol over
loopback, MuJoCo behind it), the rule and external scorers, cameras from config, and the settings errors.

franky-sim is started once for this module by the fixture of the libfranka driver's tests (skipped, with
the reason, where it cannot run). The ready pose of the simulated FR3 puts the TCP at about (0.307, 0, 0.487).
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from test.conftest import wait_until
from test.robots.test_franka_libfranka import sim_host  # noqa: F401 - the franky-sim fixture, used by name
from test.robots.test_franka_ros import DEFAULTS as FRANKA_ROS2
from test.robots.test_franka_ros import START as ROS_START
from test.robots.test_franka_ros import Franka2StandIn
from user.bus.parameters import ParameterStore
from user.bus.zenoh_bus import ZenohBus
from user.config.strict import ConfigError, from_mapping
from user.interfaces.domain import Action, Transition, action_to_msg, observation_from_msg, transition_from_msg
from user.nodes.parts.robot_params import RobotNodeParams
from user.nodes.robot import RobotNode
from user.rewards.rule import RuleReward, RuleRewardConfig
from user.robot_loop import ActionGate, ControlLoop, Observer
from user.robot_loop.driver_spec import DriverError, DriverSpec
from user.robot_loop.drivers import REAL_MAX_STEPS, DriverBundle, build_driver
from user.robot_loop.gate import SOURCE_POLICY
from user.robot_loop.observe import ObserverConfig
from user.robot_loop.scoring import ExternalScorer, RuleScorer
from user.robots.arm import ArmRobot
from user.robots.arx_sdk import ArxSdkConfig
from user.robots.base import ArmState
from user.robots.safety import SafetyConfig
from user.runtime.diagnostics import ERROR, OK, Status
from user.runtime.node import Node, started
from user.sim.arx_sim import ARX_TASK_PARAMS
from user.tasks.pick_place import PickPlace, PickPlaceConfig

pytestmark = pytest.mark.timeout(60)

READY_X, READY_Z = 0.307, 0.487  # TCP of the simulated FR3 at its home joints (m, base frame)
TARGET = (READY_X + 0.05, 0.0, READY_Z)  # 5 cm along +x from the start
STEP_M = 0.02  # safety scaling: an action of 1 moves the target 2 cm


def spec(**settings: Any) -> DriverSpec:
    """Driver settings as a deployment file gives them (checked at load, errors as `ConfigError`)."""
    return from_mapping(DriverSpec, settings, where="robot.yaml")


def franka_spec(address: str, **changes: Any) -> DriverSpec:
    """The libfranka driver's settings; a change to None leaves that key out."""
    settings: dict[str, Any] = {
        "driver": "franka",
        "robot_id": "fr",
        "host": address,
        "task": "reach",
        "reward": "rule",
        "rule": {"target_position": list(TARGET), "position_tolerance_m": 0.01, "scale": 0.05},
        "hardware": {"ignore_realtime": True, "safety": {"max_translation_per_step_m": STEP_M}},
    }
    settings.update(changes)
    return spec(**{key: value for key, value in settings.items() if value is not None})


def act(dx: float) -> np.ndarray:
    a = np.zeros(7, np.float32)
    a[0], a[6] = dx, 1.0
    return a


class Driven:
    """A `ControlLoop` over a bundle, fed one policy action per tick (the gate's freshness on a fake clock)."""

    def __init__(self, bundle: DriverBundle) -> None:
        self.bundle = bundle
        self.now = 0.0
        self.gate = ActionGate(0.2, 0.2, lambda: self.now)
        observer = Observer(ObserverConfig("fr", bundle.task), bundle.extras, bundle.privileged, bundle.frames)
        self.loop = ControlLoop(bundle.robot, bundle.scorer, observer, self.gate, seed=None)

    def tick(self, dx: float) -> Transition:
        obs = self.loop.observation
        assert obs is not None
        self.now += 0.1
        self.gate.feed_policy(Action("fr", obs.episode_id, obs.step, act(dx), policy_version=1), self.now)
        result = self.loop.tick(self.now)
        assert result.transition is not None
        return result.transition


@pytest.fixture
def driven(sim_host: str, request: pytest.FixtureRequest) -> Iterator[Driven]:  # noqa: F811 - fixture by name
    changes = getattr(request, "param", {})
    bundle = build_driver(franka_spec(sim_host, **changes))
    bundle.connect()
    try:
        yield Driven(bundle)
    finally:
        bundle.close()


def test_rule_reward_rises_as_the_tcp_approaches_the_target_and_success_ends_the_episode(driven: Driven) -> None:
    assert isinstance(driven.bundle.scorer, RuleScorer) and driven.bundle.scorer.max_steps == REAL_MAX_STEPS
    assert driven.bundle.extras is None and driven.bundle.privileged is None and driven.bundle.frames is None
    obs, _ = driven.loop.reset()
    assert obs.task == "reach" and abs(obs.state[0] - READY_X) < 0.005
    rewards, last = [], None
    for dx in [0.5] * 5 + [0.0] * 20:  # 1 cm per step for 5 steps, then hold the target until success
        last = driven.tick(dx)
        rewards.append(last.reward)
        if last.terminated:
            break
    assert last is not None and last.terminated and last.success and not last.truncated
    assert not driven.loop.in_episode
    assert all(b > a for a, b in itertools.pairwise(rewards[:5])), rewards  # closer each step
    assert rewards[-1] > 0.8 and rewards[0] < 0.6
    distance = np.linalg.norm(last.next_observation.state[:3] - np.array(TARGET))
    assert distance <= 0.01


@pytest.mark.parametrize(
    "driven",
    [{"hardware": {"ignore_realtime": True, "safety": {"workspace_max": [0.30, 0.35, 0.55]}}}],
    indirect=True,
)
def test_an_action_out_of_the_workspace_is_held(driven: Driven) -> None:
    start = driven.loop.reset()[0].state.copy()
    assert start[0] > 0.30  # the ready pose is already past this box's +x face: +x must not move it
    arm = driven.bundle.robot
    assert isinstance(arm, ArmRobot)
    target = arm.target_pose
    rewards = []
    for _ in range(4):
        t = driven.tick(1.0)
        assert t.action.data[0] == 1.0 and not t.terminated  # stored as chosen; the filter kept the target
        rewards.append(t.reward)
    assert arm.target_pose is not None and target is not None
    np.testing.assert_allclose(arm.target_pose, target, rtol=0, atol=1e-9)  # the +x asked for never reached it
    now = driven.loop.observation
    assert now is not None and np.linalg.norm(now.state[:3] - start[:3]) < 2e-3  # the impedance settles ~1 mm
    assert max(rewards) - min(rewards) < 0.02  # the 1 cm per step asked for earned nothing


def test_external_scorer_gives_zero_and_only_the_step_limit_ends_an_episode(sim_host: str) -> None:  # noqa: F811
    bundle = build_driver(franka_spec(sim_host, reward="external", rule=None, max_steps=3))
    assert isinstance(bundle.scorer, ExternalScorer) and bundle.scorer.max_steps == 3
    bundle.connect()
    try:
        driven = Driven(bundle)
        driven.loop.reset()
        steps = [driven.tick(0.5) for _ in range(3)]
    finally:
        bundle.close()
    assert [t.reward for t in steps] == [0.0, 0.0, 0.0]
    assert not any(t.success or t.terminated for t in steps)
    assert [t.truncated for t in steps] == [False, False, True]


def test_scorers_without_a_robot() -> None:
    pose = np.array([*TARGET, 1.0, 0.0, 0.0, 0.0])
    arm = ArmState(1, pose, np.zeros(6), np.zeros(7), np.zeros(7), 1.0)
    external = ExternalScorer(7).score(arm)
    assert (external.reward, external.success, external.terminated, external.truncated) == (0.0, False, False, False)
    at_target = RuleScorer(RuleReward(RuleRewardConfig(target_position=TARGET)), 7).score(arm)
    assert at_target.reward == pytest.approx(1.0) and at_target.success and at_target.terminated
    with pytest.raises(ValueError, match="mode 'step'"):
        RuleScorer(RuleReward(RuleRewardConfig(mode="terminal")), 7)


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short MJPG file the OpenCV camera plays in a loop (this machine has no camera)."""
    path = tmp_path_factory.mktemp("video") / "wrist.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 30.0, (64, 48))
    for i in range(10):
        writer.write(np.full((48, 64, 3), 20 * i, np.uint8))
    writer.release()
    return path


def test_robot_node_runs_a_real_franka_with_a_camera_and_external_reward(
    sim_host: str,  # noqa: F811
    video: Path,
    make_bus: Callable[..., ZenohBus],
) -> None:
    robot = f"fr_{uuid.uuid4().hex[:6]}"
    probe = Node(make_bus("probe"))
    got: list[Transition] = []
    lock = threading.Lock()
    actions = probe.create_publisher(f"/{robot}/action", "user/msg/Action")

    def on_observation(msg: Any) -> None:  # a policy: a small +x step for every observation
        obs = observation_from_msg(msg)
        action = Action(robot, obs.episode_id, obs.step, act(0.2), source=SOURCE_POLICY, policy_version=1)
        actions.publish(action_to_msg(action, probe.codec))

    def on_transition(msg: Any) -> None:
        with lock:
            got.append(transition_from_msg(msg))

    probe.create_subscription(f"/{robot}/observation", "user/msg/Observation", on_observation)
    probe.create_subscription(f"/{robot}/transitions", "user/msg/Transition", on_transition)
    params = {
        "robot_id": robot,
        "driver": "franka",
        "host": sim_host,
        "task": "reach",
        "reward": "external",
        "max_steps": 4,
        "control_rate_hz": 10.0,
        "hardware": {"ignore_realtime": True},
        "camera_configs": {"wrist": {"driver": "opencv", "device": str(video), "loop": True, "max_age_s": 1.0}},
        "wait_for_consumer_s": 5.0,  # so the probe sees the first episode from its first step
    }
    node = started(RobotNode(make_bus("robot", params)))
    try:
        assert node.bundle.cameras == ("wrist",) and node.announcer is not None
        assert wait_until(lambda: len(got) >= 9, 15.0), (node.failed, len(got))
    finally:
        node.destroy()
    assert node.failed is None
    with lock:  # the first episode seen from its start (a slow start may cut into the very first one)
        start = next(t.episode_id for t in got if t.step == 0)
        first = [t for t in got if t.episode_id == start]
    assert [t.step for t in first] == [0, 1, 2, 3]
    assert [t.truncated for t in first] == [False, False, False, True]
    assert all(t.reward == 0.0 and not t.terminated and not t.success for t in first)
    for t in first:
        assert [img.camera for img in t.next_observation.images] == ["wrist"]
        assert t.next_observation.images[0].format == "jpeg" and t.next_observation.images[0].data
    # it moved along +x (4 steps of at most 4 mm; a step whose action came late holds, so ask for less)
    assert first[-1].next_observation.state[0] > first[0].observation.state[0] + 0.002


def test_the_robot_s_diagnostics_show_its_real_cameras_health(
    sim_host: str,  # noqa: F811
    video: Path,
    make_bus: Callable[..., ZenohBus],
) -> None:
    """A real camera's own health (`Camera.health`: frames, errors, a dead stream and why) is in the robot node's
    `/diagnostics`, beside the images its observations carried."""
    robot = f"fr_{uuid.uuid4().hex[:6]}"
    looping = {"driver": "opencv", "device": str(video), "loop": True, "max_age_s": 1.0, "dead_after_periods": 300}
    params = {
        "robot_id": robot,
        "driver": "franka",
        "host": sim_host,
        "task": "reach",
        "reward": "external",
        "control_rate_hz": 10.0,
        "hardware": {"ignore_realtime": True},
        "camera_configs": {"wrist": looping, "front": {"driver": "opencv", "device": str(video), "loop": False}},
    }
    node = started(RobotNode(make_bus("robot", params)))

    def camera(name: str) -> Status:
        (status,) = [s for s in node.diagnostics() if s.name == f"{robot}: camera {name}"]
        return status

    try:
        assert wait_until(lambda: camera("wrist").values["frames"] > 10, 15.0), camera("wrist")  # it looped
        assert wait_until(lambda: camera("front").level == ERROR, 15.0), camera("front")
        wrist, front = camera("wrist"), camera("front")
    finally:
        node.destroy()
    assert node.failed is None
    assert wrist.level == OK and wrist.values["errors"] == 0 and wrist.values["last_error"] == ""
    assert wrist.values["rate_hz"] > 0.0 and wrist.values["age_s"] != ""
    assert front.message.startswith("dead: stream ended") and "reached its end" in front.message, front.message
    assert front.values["frames"] == 10 and front.hardware_id == "front"


def test_robot_node_runs_franka_ros_with_a_rule_reward(make_bus: Callable[..., ZenohBus], topic: str) -> None:
    """franka_ros connects in the control thread (it waits for franka_ros2's state over the bus)."""
    robot = f"fr_{uuid.uuid4().hex[:6]}"
    standin = Franka2StandIn(make_bus("franka_ros2_standin"), topic)
    target = (float(ROS_START[0]) + 0.03, float(ROS_START[1]), float(ROS_START[2]))
    probe = Node(make_bus("probe"))
    got: list[Transition] = []
    lock = threading.Lock()
    actions = probe.create_publisher(f"/{robot}/action", "user/msg/Action")

    def on_observation(msg: Any) -> None:  # a policy: 1 cm along +x per step
        obs = observation_from_msg(msg)
        action = Action(robot, obs.episode_id, obs.step, act(0.5), source=SOURCE_POLICY, policy_version=1)
        actions.publish(action_to_msg(action, probe.codec))

    def on_transition(msg: Any) -> None:
        with lock:
            got.append(transition_from_msg(msg))

    probe.create_subscription(f"/{robot}/observation", "user/msg/Observation", on_observation)
    probe.create_subscription(f"/{robot}/transitions", "user/msg/Transition", on_transition)
    hardware = {
        "target_topic": topic + FRANKA_ROS2.target_topic,
        "pose_topic": topic + FRANKA_ROS2.pose_topic,
        "joint_states_topic": topic + FRANKA_ROS2.joint_states_topic,
        "wrench_topic": topic + FRANKA_ROS2.wrench_topic,
        "gripper_joint_states_topic": topic + FRANKA_ROS2.gripper_joint_states_topic,
        "state_timeout_s": 0.3,
    }
    params = {
        "robot_id": robot,
        "driver": "franka_ros",
        "reward": "rule",
        "rule": {"target_position": list(target), "position_tolerance_m": 0.006},
        "max_steps": 20,
        "control_rate_hz": 20.0,
        "hardware": hardware,
    }
    node = started(RobotNode(make_bus("robot", params)))
    try:
        assert node.bundle.connects_over_bus
        assert wait_until(lambda: any(t.terminated for t in list(got)), 12.0), (node.failed, len(got))
    finally:
        node.destroy()
    assert node.failed is None and standin.targets
    with lock:
        episode = [t for t in got if t.episode_id == got[0].episode_id]
    assert episode[-1].terminated and episode[-1].success and len(episode) < 20
    rewards = [t.reward for t in episode]
    assert rewards[-1] > rewards[0] + 0.2, rewards


# ---- settings errors (no robot needed) --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"host": ""}, "needs host: the IP address"),
        ({"reward": "task", "rule": None}, "a real robot has no task"),
        ({"reward": "external"}, "robot.yaml: rule: a setting of reward 'rule', but reward 'external' is selected"),
        ({"hardware": {"hostname": "x"}}, "hardware: unknown key 'hostname'"),
        ({"hardware": {"robot_id": "other"}}, "hardware.robot_id: set it as `robot_id` beside hardware"),
        ({"hardware": {"controller": "torque"}}, "hardware.controller: 'torque' is not one of"),
        ({"hardware": {"safety": {"workspace_min": [0.3, "x", 0.1]}}}, r"hardware.safety.workspace_min\[1\]: expected"),
        ({"hardware": {"safety": {"gripper": 0.0}}}, "hardware.safety: unknown key 'gripper'; did you mean"),
        ({"control_rate_hz": 1001.0}, "control_rate_hz: 1001.0 is above the maximum"),
        ({"rule": {"target_position": [0.5, 0.0]}}, "rule"),
        ({"rule": {"mode": "terminal"}}, "rule mode 'terminal'"),
        ({"camera_configs": {"wrist": {"driver": "source"}}}, "driver 'source' is for simulators"),
        ({"camera_configs": {"wrist": {"driver": "bus"}}}, "camera_configs.wrist: .*needs a topic"),
        ({"camera_configs": {"wrist": {"name": "front", "driver": "realsense"}}}, "differs from its key"),
        ({"cameras": True}, "cameras: a setting of driver 'sim_franka' or 'sim_arx', but driver 'franka' is selected"),
        ({"privileged_state": True}, "privileged_state: a setting of driver 'sim_franka' or 'sim_arx'"),
        ({"realtime": False}, "realtime: false is a simulator setting"),
        ({"safety": {"gripper_max": 0.0}}, "safety: a setting of driver 'sim_franka' or 'sim_arx'"),
        ({"driver": "franka_ros"}, "host: a setting of driver 'franka', but driver 'franka_ros' is selected"),
        ({"driver": "arx", "host": None, "hardware": {"interface": 3}}, "hardware.interface: expected a string"),
        (
            {"driver": "arx", "host": None, "hardware": None, "control_rate_hz": 200.0},
            r"control_rate_hz \(given to hardware\): 200.0",
        ),
        ({"camera_configs": {"wrist": {"driver": "realsense", "widht": 640}}}, "camera_configs.wrist: unknown key"),
        ({"camera_configs": {"wrist": {"driver": "realsense", "width": -1}}}, "camera_configs.wrist.width: -1 is"),
        ({"driver": "nonsense"}, "driver: 'nonsense' is not one of 'sim_franka'"),
    ],
)
def test_wrong_real_driver_settings_are_clear_errors(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        franka_spec("172.16.0.2", **changes)


@pytest.mark.parametrize(
    ("key", "value", "owner"),
    [
        ("host", "10.0.0.2", "driver 'franka'"),
        ("camera_configs", {"w": {}}, "driver 'franka' or 'franka_ros' or 'arx'"),
        ("hardware", {"x": 1}, "driver 'franka' or 'franka_ros' or 'arx'"),
        ("rule", {"scale": 0.1}, "reward 'rule'"),
        ("gym_env", "Pendulum-v1", "driver 'gym'"),
    ],
)
def test_sim_drivers_refuse_settings_of_other_drivers(key: str, value: Any, owner: str) -> None:
    spec(driver="sim_franka", robot_id="s")
    with pytest.raises(ConfigError, match=rf"robot.yaml: {key}: a setting of {owner}, but .* is selected"):
        spec(driver="sim_franka", robot_id="s", **{key: value})


def test_sim_drivers_keep_their_task_reward_and_gym_takes_no_arm_settings() -> None:
    with pytest.raises(ConfigError, match="for real drivers"):
        spec(driver="gym", robot_id="g", gym_env="Pendulum-v1", reward="external")
    with pytest.raises(ConfigError, match="driver gym needs gym_env"):
        spec(driver="gym", robot_id="g")
    for key, value in (("task", "reach"), ("cameras", True), ("task_params", {"chamfer": 0.0})):
        with pytest.raises(ConfigError, match=f"{key}: a setting of driver 'sim_franka' .*but driver 'gym'"):
            spec(driver="gym", robot_id="g", gym_env="Pendulum-v1", **{key: value})


def test_sim_arm_safety_settings_go_on_top_of_the_defaults() -> None:
    robot = build_driver(
        spec(driver="sim_franka", robot_id="s", safety={"gripper_max": 0.0, "workspace_min": [0.3, -0.3, 0.1]})
    )
    limits = robot.robot.safety.config  # type: ignore[attr-defined]
    assert limits.gripper_max == 0.0 and limits.workspace_min == (0.3, -0.3, 0.1)
    assert limits.workspace_max == SafetyConfig().workspace_max  # untouched settings keep their defaults
    with pytest.raises(ConfigError, match="robot.yaml: safety: unknown key 'gripper'"):  # refused at load
        spec(driver="sim_franka", robot_id="s", safety={"gripper": 0.0})
    with pytest.raises(ConfigError, match="safety: gripper_min 0.5 is above gripper_max 0.2"):
        spec(driver="sim_franka", robot_id="s", safety={"gripper_min": 0.5, "gripper_max": 0.2})
    with pytest.raises(ConfigError, match="safety: a setting of driver 'sim_franka' or 'sim_arx', but driver 'gym'"):
        spec(driver="gym", robot_id="g", gym_env="Pendulum-v1", safety={"gripper_max": 0.0})


def test_sim_task_params_parse_into_the_config_of_the_selected_task() -> None:
    settings = spec(driver="sim_franka", robot_id="s", task="pick_place", task_params={"cube_side": 0.03})
    assert isinstance(settings.task_params, PickPlaceConfig) and settings.task_params.cube_side == 0.03
    task = build_driver(settings).robot.task  # type: ignore[attr-defined]
    assert isinstance(task, PickPlace) and task.config == settings.task_params
    with pytest.raises(ConfigError, match="robot.yaml: task_params.cube_side: expected a number, got 'big'"):
        spec(driver="sim_franka", robot_id="s", task="pick_place", task_params={"cube_side": "big"})
    with pytest.raises(ConfigError, match="task_params: unknown key 'clearance'"):  # a key of peg_insertion's
        spec(driver="sim_franka", robot_id="s", task="pick_place", task_params={"clearance": 0.001})
    with pytest.raises(ConfigError, match="driver sim_franka needs a task .*: one of peg_insertion, .*not 'reach'"):
        spec(driver="sim_franka", robot_id="s", task="reach")
    arx = build_driver(spec(driver="sim_arx", robot_id="a", task="pick_place")).robot.task  # type: ignore[attr-defined]
    assert arx.config.tray_x == ARX_TASK_PARAMS["pick_place"]["tray_x"]  # none given: the ARX cell's own layout


def test_robot_node_params_check_the_driver_settings_at_load() -> None:
    good = {"driver": "arx", "reward": "external", "hardware": {"interface": "can1"}}
    params = from_mapping(RobotNodeParams, good, where="a.yaml")
    assert isinstance(params.hardware, ArxSdkConfig) and params.hardware.interface == "can1"  # typed at load
    assert (params.hardware.robot_id, params.hardware.control_rate_hz) == (params.robot_id, params.control_rate_hz)
    assert isinstance(params, DriverSpec)  # the node's parameters are the driver's settings, not a copy
    with pytest.raises(ConfigError, match=r"a.yaml: driver franka needs host"):
        from_mapping(RobotNodeParams, {"driver": "franka", "reward": "external"}, where="a.yaml")
    with pytest.raises(ConfigError, match="camera_configs.wrist: .*resize"):
        bad_camera = {"wrist": {"driver": "realsense", "resize": [0, 10]}}
        from_mapping(RobotNodeParams, {**good, "camera_configs": bad_camera}, where="a.yaml")


def test_typed_sections_go_back_as_the_node_s_ros_parameters() -> None:
    """A running node gives its settings back as ROS parameters (`hardware`, `camera_configs` and `task_params` as
    YAML text) and checks a change against them: they must load again to the same settings."""
    real = {
        "driver": "franka",
        "host": "172.16.0.2",
        "reward": "external",
        "hardware": {"controller": "waypoint", "safety": {"gripper_max": 0.5}},
        "camera_configs": {"wrist": {"driver": "realsense", "width": 640}, "top": {"driver": "bus", "topic": "/t"}},
    }
    for settings in (real, {"driver": "sim_arx", "task": "pick_place", "task_params": {"cube_side": 0.03}}):
        params = from_mapping(RobotNodeParams, settings, where="a.yaml")
        store = ParameterStore(RobotNodeParams, params, lambda new: None, "robot")
        assert store.check({}) == params


def test_franka_ros_and_bus_cameras_need_a_node() -> None:
    with pytest.raises(DriverError, match="build it in a node"):
        build_driver(spec(driver="franka_ros", robot_id="fr", reward="external"))
    camera = {"wrist": {"driver": "bus", "topic": "/camera/color/image_raw"}}
    with pytest.raises(DriverError, match="build it in a node"):
        build_driver(franka_spec("172.16.0.2", camera_configs=camera))


def test_building_a_real_driver_loads_no_hardware_sdk() -> None:
    code = (
        "import sys\n"
        "from user.robot_loop.driver_spec import DriverSpec\n"
        "from user.robot_loop.drivers import build_driver\n"
        "import user.nodes.robot\n"
        "assert 'cv2' not in sys.modules, 'cv2 at import'\n"
        "build_driver(DriverSpec(driver='franka', robot_id='fr', host='172.16.0.2', reward='external'))\n"
        "build_driver(DriverSpec(driver='arx', robot_id='a', reward='external'))\n"
        "loaded = [m for m in ('franky', 'arx5_interface', 'pyrealsense2', 'cv2') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
