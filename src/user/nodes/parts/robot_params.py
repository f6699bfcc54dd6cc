"""The `robot` node's settings: the robot (its driver and that driver's settings, `DriverSpec`) and how the node
runs it (episodes, resets, the outbox, what it publishes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from user.config.strict import ConfigError, setting
from user.robot_loop.driver_spec import DriverSpec
from user.robots.estop import ESTOP_TOPIC


@dataclass(frozen=True)
class RobotNodeParams(DriverSpec):
    """The robot (its driver and that driver's settings, `DriverSpec`) and how the node runs it."""

    jpeg_quality: int = setting(90, "JPEG quality of camera images", min=1, max=100)
    seed: int = setting(0, "episode n (its id) resets with seed + n; -1 = unseeded", min=-1)
    first_episode_id: int = setting(0, "id of the first episode (ids increase by one per episode)", min=0)
    state_dir: str = setting(
        "",
        "keep the next episode id in <state_dir>/<robot_id>.episode.json, so that a restarted node continues "
        "its ids (from the larger of this and first_episode_id), and the outbox's unacknowledged episodes in "
        "<state_dir>/<robot_id>.outbox/, so that it still delivers them; empty = every start begins afresh",
    )
    auto_reset: bool = setting(True, "start the next episode as soon as one ends (else wait for the reset service)")
    action_timeout_s: float = setting(1.0, "fast mode: longest wait for the policy's action for a step, s", min=0.001)
    intervention_deadline_s: float = setting(0.25, "a human action overrides the policy for this long, s", min=0.001)
    reset_timeout_s: float = setting(10.0, "reset service: longest wait for the control loop to reset, s", min=0.1)
    namespace: str = setting("", "topic prefix; empty = /<robot_id>")
    estop_topic: str = setting(ESTOP_TOPIC, "e-stop topic (std_msgs/Bool, latched); arms only")
    wait_for_consumer_s: float = setting(
        0.0, "before the first episode, wait up to this long for a subscriber of the transitions topic", min=0.0
    )
    outbox_episodes: int = setting(
        20, "completed episodes kept until the learner acknowledges them (re-sent if not); 0 = no outbox", min=0
    )
    outbox_resend_s: float = setting(5.0, "re-send an unacknowledged episode after this long, s", min=0.1)
    credit_topic: str = setting(
        "/data_credit",
        "not real time: wait on the learner's credit here while ahead of its update-to-data ratio (real time: "
        "never); empty: never wait",
    )
    embodiment_in_state: bool = setting(False, "append the embodiment id to the state (one policy, several arm types)")
    clock_topic: str = setting(
        "",
        "publish the robot's clock here each step (rosgraph_msgs/Clock; a simulated arm's is simulation time: set "
        "/clock and use_sim_time for rviz); empty = none",
    )
    world_position: tuple[float, float, float] = setting(
        (0.0, 0.0, 0.0), "where rviz and Foxglove draw this robot's base in the `world` frame, m"
    )
    actions_from: Literal["actions", "chunks"] = setting(
        "actions",
        "actions: the policy's action for each step on <ns>/action; chunks: whole action chunks on <ns>/action_chunk "
        "played here step by step (real-time chunking at the edge: a rollout far away with send: chunks)",
    )
    human_reward_topic: str = setting(
        "",
        "an EPISODE_END press for this robot (or for every robot) on this topic (user/msg/HumanReward, e.g. the "
        "pedal's /human_reward) ends the running episode after its next step; empty = presses do not end episodes",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.namespace and not self.namespace.startswith("/"):
            raise ConfigError(f"namespace must start with '/', got {self.namespace!r}")
