"""`continue_episode_ids`: on resume each robot is told the id it will really start at, after its last stored
episode or at the id it saved (an episode started but never stored), and that id is logged once; the robot
node's own start then agrees with it and says nothing more."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from test.buffer.factories import episode
from user.buffer import BufferConfig, ReplayBuffer
from user.deploy.deployment import Deployment, NodeConfig
from user.deploy.run_dir import continue_episode_ids
from user.robot_loop.episode_ids import DurableEpisodeIds


def _deployment(state_dir: Path) -> Deployment:
    robot = {"driver": "sim_franka", "state_dir": str(state_dir)}
    return Deployment(
        name="test",
        nodes=[
            NodeConfig(name="learner", kind="learner", params={"robots": ["left", "right"]}),
            NodeConfig(name="left", kind="robot", params={"robot_id": "left", **robot}),
            NodeConfig(name="right", kind="robot", params={"robot_id": "right", **robot}),
            NodeConfig(name="stranger", kind="robot", params={"robot_id": "stranger", **robot}),
        ],
    )


def _store(run: Path, robot: str, episode_ids: range) -> None:
    with ReplayBuffer.open(run / "buffer", BufferConfig(prefetch=0)) as buf:
        for e in episode_ids:
            for t in episode(robot, e, 2, images=False):
                buf.add(t)


def _first_ids(deployment: Deployment) -> dict[str, int | None]:
    return {n.name: n.params.get("first_episode_id") for n in deployment.nodes if n.kind == "robot"}


def test_a_robot_continues_at_the_id_it_saved_when_an_episode_was_started_but_not_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run, state = tmp_path / "run", tmp_path / "run" / "robots"
    _store(run, "left", range(5))  # left: episodes 0..4 stored
    _store(run, "right", range(3))  # right: episodes 0..2 stored
    left = DurableEpisodeIds(state, "left")
    for _ in range(6):  # left took ids 0..5; episode 5 was cut short by the stop and never stored
        left.take()
    right = DurableEpisodeIds(state, "right")
    for _ in range(3):  # right took ids 0..2, all stored
        right.take()
    with caplog.at_level(logging.INFO, logger="user.bringup"):
        resumed = continue_episode_ids(_deployment(state), run)
    assert _first_ids(resumed) == {"left": 6, "right": 3, "stranger": None}
    said = [r.getMessage() for r in caplog.records if "continues at episode" in r.getMessage()]
    assert said == ["left continues at episode 6", "right continues at episode 3"]
    for robot, node in (("left", resumed.nodes[1]), ("right", resumed.nodes[2])):
        ids = DurableEpisodeIds(state, robot, node.params["first_episode_id"])  # what the robot node does
        assert ids.next_id == node.params["first_episode_id"]  # the id logged is the id used
        assert not (ids.saved is not None and ids.saved > node.params["first_episode_id"])  # no second message


def test_the_buffer_decides_when_no_id_was_saved_and_a_damaged_saved_id_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run, state = tmp_path / "run", tmp_path / "run" / "robots"
    _store(run, "left", range(4))
    state.mkdir(parents=True)
    (state / "right.episode.json").write_text("{not json")
    (state / "stranger.episode.json").write_text('{"robot_id": "stranger", "next_episode_id": 7}')
    with caplog.at_level(logging.INFO, logger="user.bringup"):
        resumed = continue_episode_ids(_deployment(state), run)
    assert _first_ids(resumed) == {"left": 4, "right": None, "stranger": 7}  # stranger: saved, nothing stored
    assert any("right" in r.getMessage() and "unreadable" in r.getMessage() for r in caplog.records)
    assert not list(state.glob("left*"))  # reading the saved ids creates nothing


def test_with_a_learner_per_task_each_robot_continues_after_its_own_learners_buffer(tmp_path: Path) -> None:
    run, state = tmp_path / "run", tmp_path / "run" / "robots"
    _store(run / "peg", "left", range(5))
    _store(run / "button", "right", range(2))
    robot = {"driver": "sim_franka", "state_dir": str(state)}
    deployment = Deployment(
        name="tasks",
        nodes=[
            NodeConfig(name="learner_peg", kind="learner", params={"robots": ["left"], "run_dir": f"{run}/peg"}),
            NodeConfig(name="learner_button", kind="learner", params={"robots": ["right"], "run_dir": f"{run}/button"}),
            NodeConfig(name="left", kind="robot", params={"robot_id": "left", **robot}),
            NodeConfig(name="right", kind="robot", params={"robot_id": "right", **robot}),
        ],
    )
    assert _first_ids(continue_episode_ids(deployment, run)) == {"left": 5, "right": 2}
