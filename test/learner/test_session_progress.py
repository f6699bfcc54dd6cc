"""The session writes how each stored episode went (streamed, ended by the robot, or re-sent whole) into the
progress files and the stats message (each robot's episode counts, the set update-to-data ratio), and a resumed
session shows the stored episodes' figures and counts at once."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from test.buffer import factories as f
from test.conftest import wait_until
from test.learner.test_session import _learning
from user.buffer.config import BufferConfig
from user.interfaces.domain import Transition
from user.learner.config import PacingConfig
from user.learner.csv_log import read_rows
from user.learner.session import LearningSession
from user.learner.session_config import SessionConfig

pytestmark = pytest.mark.timeout(60)


def _config(run: Path) -> SessionConfig:
    return SessionConfig(
        run_dir=str(run),
        learning=_learning(),
        pacing=PacingConfig(mode="sync", min_transitions=10_000),  # nothing trains: only counting is tested
        buffer=BufferConfig(prefetch=0),
        checkpoint_period_s=0.0,
    )


def _session(run: Path) -> LearningSession:
    return LearningSession(_config(run))


def _rewarded(robot: str, episode_id: int, rewards: list[float], **kwargs: object) -> list[Transition]:
    steps = f.episode(robot, episode_id, len(rewards), images=False, **kwargs)
    return [replace(t, reward=r) for t, r in zip(steps, rewards, strict=True)]


def test_episode_returns_reach_progress_csv_episodes_csv_and_the_stats(tmp_path: Path) -> None:
    session = _session(tmp_path)
    try:
        for t in _rewarded("arm", 0, [9.0, 9.0], demo=True):  # a demonstration: listed, never averaged in
            session.add(t)
        for t in _rewarded("arm", 1, [-1.0, -2.0, -3.0]):  # streamed, done at its last step
            session.add(t)
        cut = _rewarded("cart", 0, [0.5, 0.5, 0.5, 0.5], success=True)
        for t in [*cut[:-1], replace(cut[-1], terminated=False, truncated=False)]:
            session.add(t)
        assert session.end_episode("cart", 0, 4) is not None  # ended by the robot (an operator reset)
        assert session.add_episode(_rewarded("arm", 2, [4.0], intervened=True)) is True  # re-sent whole
        values = session.report().values
    finally:
        session.close()
    assert values["recent_return_mean"] == pytest.approx((-6.0 + 2.0 + 4.0) / 3)
    assert values["last_return"] == 4.0 and values["recent_length_mean"] == pytest.approx(8 / 3)
    assert values["recent_online_success_rate"] == pytest.approx(1 / 3)
    assert values["recent_interventions_mean"] == pytest.approx(1 / 3)
    counts = {k: v for k, v in values.items() if k.startswith(("episodes/", "demos/"))}
    assert counts == {"episodes/arm": 2.0, "demos/arm": 1.0, "episodes/cart": 1.0, "demos/cart": 0.0}
    assert values["updates_per_step_set"] == PacingConfig().updates_per_step  # what a monitor compares with
    (row,) = read_rows(tmp_path / "progress.csv")
    assert (row["recent_return_mean"], row["last_return"], row["env_steps"]) == ("0", "4", "10")
    episodes = read_rows(tmp_path / "episodes.csv")
    assert [(e["robot_id"], e["episode_return"], e["env_steps"], e["is_demo"]) for e in episodes] == [
        ("arm", "18.0", "2", "1"),
        ("arm", "-6.0", "5", "0"),
        ("cart", "2.0", "9", "0"),
        ("arm", "4.0", "10", "0"),
    ]


def test_a_resumed_session_shows_the_stored_episodes_at_once(tmp_path: Path) -> None:
    session = _session(tmp_path)
    try:
        for e, ret in enumerate([-5.0, -1.0]):
            session.add_episode(_rewarded("arm", e, [ret, 0.0]))
    finally:
        session.close()
    resumed = _session(tmp_path)
    try:
        assert resumed.resumed
        values = resumed.report().values
    finally:
        resumed.close()
    assert (values["recent_return_mean"], values["last_return"]) == (-3.0, -1.0)
    assert (values["episodes/arm"], values["demos/arm"]) == (2.0, 0.0)  # counted over the whole run, not from 0


def _episodes_then_rows(session: LearningSession) -> None:
    for t in _rewarded("arm", 0, [1.0, 2.0]):
        session.add(t)
    for _ in range(3):
        session.report()


def test_tensorboard_and_the_curve_redraw_can_be_switched_off(tmp_path: Path) -> None:
    """`tensorboard: false` writes no event files; `curve_period_s: 0` draws the curve only when the run ends."""
    config = replace(_config(tmp_path), curve_period_s=0.001)
    loud = LearningSession(replace(config, run_dir=str(tmp_path / "loud")))
    try:
        _episodes_then_rows(loud)
        assert wait_until((tmp_path / "loud" / "learning_curve.png").exists, 30.0)
        assert (tmp_path / "loud" / "tensorboard").is_dir()
    finally:
        loud.close()
    quiet = LearningSession(replace(config, run_dir=str(tmp_path / "quiet"), tensorboard=False, curve_period_s=0.0))
    try:
        _episodes_then_rows(quiet)
        assert (tmp_path / "quiet" / "progress.csv").exists()
        assert not (tmp_path / "quiet" / "tensorboard").exists()
        assert not (tmp_path / "quiet" / "learning_curve.png").exists()
    finally:
        quiet.close()
    assert (tmp_path / "quiet" / "learning_curve.png").exists()  # drawn once, at the end
