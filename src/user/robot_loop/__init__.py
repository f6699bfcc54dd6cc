"""The ROS-free core of the robot node: action gating, observations, episodes and transitions.

`ActionGate` picks each period's action (a fresh human intervention overrides the policy), `Observer`
turns the robot's state into an `Observation`, `ChunkPlayer` plays a rollout's action chunks step by step (a
newer chunk taking over where it starts), a `Scorer` says reward / success / done, and `ControlLoop`
ties them into episodes: it resets, steps, assembles `Transition`s and emits `EpisodeEvent`s. The robot
node (`user.nodes.robot`) only moves these objects on and off the bus.
"""

from user.interfaces.episode_events import EpisodeEvent, EpisodeKind, episode_event_to_msg
from user.robot_loop.chunk_player import Chunk, ChunkPlayer, PlayedAction
from user.robot_loop.control_loop import ControlLoop, TickResult
from user.robot_loop.gate import ActionGate, GatedAction
from user.robot_loop.observe import Observer
from user.robot_loop.privileged import PrivilegedStateError, arm_and_task_state
from user.robot_loop.scoring import GymScorer, Score, Scorer, TaskScorer

__all__ = [
    "ActionGate",
    "Chunk",
    "ChunkPlayer",
    "ControlLoop",
    "EpisodeEvent",
    "EpisodeKind",
    "GatedAction",
    "GymScorer",
    "Observer",
    "PlayedAction",
    "PrivilegedStateError",
    "Score",
    "Scorer",
    "TaskScorer",
    "TickResult",
    "arm_and_task_state",
    "episode_event_to_msg",
]
