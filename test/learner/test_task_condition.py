"""One policy for several tasks: each state a one-hot of its task and the task's own state padded to the policy's
size, the same in the rollout, the learner's buffer and the fleet's admission; what does not fit is refused."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from test.buffer import factories as f
from user.buffer import BufferConfig, RateLimiterConfig, ReplayBuffer, SamplerConfig, StorageConfig
from user.config.strict import ConfigError
from user.fleet import PolicySpec
from user.interfaces.domain import Observation, Transition
from user.learner.config import LearningConfig, PacingConfig
from user.learner.session import LearningSession
from user.learner.session_config import SessionConfig
from user.learner.task_condition import TaskConditioner, TaskConditionError
from user.policies.mlp import MLPPolicyConfig

TASKS = ("peg_insertion", "button_press")


def _named(obs: Observation, task: str, own: int, privileged: int = 2) -> Observation:
    """`obs` as a robot doing `task` sends it: `own` entries the policy may see, then `privileged` task/ ones."""
    state = np.concatenate([np.arange(1, own + 1, dtype=np.float32), np.full(privileged, 99.0, np.float32)])
    names = (*(f"s{i}" for i in range(own)), *(f"task/obj/{i}" for i in range(privileged)))
    return replace(obs, task=task, state=state, state_names=names)


def _step(robot: str, task: str, own: int, at: tuple[int, int], success: bool = False) -> Transition:
    """Step at[1] of episode at[0] (of 3 steps) of `robot` doing `task`."""
    t = f.transition(robot, at[0], at[1], 3, images=False, success=success)
    return replace(
        t, observation=_named(t.observation, task, own), next_observation=_named(t.next_observation, task, own)
    )


def test_the_state_is_the_task_s_one_hot_then_its_own_state_padded() -> None:
    cond = TaskConditioner(TASKS, 8, ("task/",))
    obs = _named(f.observation("a", 0, 0, images=False), "button_press", 4)
    out = cond.state(obs.state, obs.state_names, obs.task)
    np.testing.assert_array_equal(out, [0, 1, 1, 2, 3, 4, 0, 0])
    peg = cond.observation(_named(obs, "peg_insertion", 6))
    np.testing.assert_array_equal(peg.state, [1, 0, 1, 2, 3, 4, 5, 6])
    assert peg.state_names == cond.names and cond.names[:2] == (
        "condition/task/peg_insertion",
        "condition/task/button_press",
    )


def test_an_unknown_task_or_too_much_state_is_refused_by_name() -> None:
    cond = TaskConditioner(TASKS, 8, ("task/",))
    obs = f.observation("a", 0, 0, images=False)
    with pytest.raises(TaskConditionError, match="'pick_place' is not one the policy is conditioned on"):
        cond.observation(_named(obs, "pick_place", 3))
    with pytest.raises(TaskConditionError, match="button_press: 7 state entries; the policy holds 6"):
        cond.observation(_named(obs, "button_press", 7))


def test_settings_that_cannot_condition_are_refused_at_start() -> None:
    with pytest.raises(ConfigError, match="distinct"):
        LearningConfig(mlp=MLPPolicyConfig(state_dim=8, action_dim=4), tasks=("a", "a"))
    with pytest.raises(ConfigError, match="no room"):
        LearningConfig(mlp=MLPPolicyConfig(state_dim=2, action_dim=4), tasks=TASKS)
    assert LearningConfig(mlp=MLPPolicyConfig(state_dim=8, action_dim=4)).conditioner() is None


def test_the_buffer_batches_both_tasks_conditioned_and_keeps_what_robots_sent(tmp_path: Path) -> None:
    learning = LearningConfig(mlp=MLPPolicyConfig(state_dim=9, action_dim=4), tasks=TASKS)
    cond = learning.conditioner()
    assert cond is not None
    config = BufferConfig(storage=StorageConfig(cache_size=4), rate_limiter=RateLimiterConfig(min_size=1),
                          batch_size=64, prefetch=0)  # fmt: skip
    with ReplayBuffer.open(tmp_path, config, read_as=cond.transition) as buf:
        for e in range(3):  # more than the cache holds: rows read back from disk are conditioned too
            for s in range(3):
                buf.add(_step("left", "peg_insertion", 7, (e, s)))
                buf.add(_step("right", "button_press", 5, (e, s)))
        batch = buf.sample()
        assert batch.state.shape == (64, 9) and batch.state_names == cond.names
        hot = batch.state[:, :2]
        assert {tuple(r) for r in hot.tolist()} == {(1.0, 0.0), (0.0, 1.0)}  # both tasks in one batch
        peg = batch.state[hot[:, 0] == 1.0]
        np.testing.assert_array_equal(peg[0, 2:], [1, 2, 3, 4, 5, 6, 7])
        button = batch.state[hot[:, 1] == 1.0]
        np.testing.assert_array_equal(button[0, 2:], [1, 2, 3, 4, 5, 0, 0])
        assert float(batch.next_state.max()) < 99.0  # the privileged entries are not the policy's
    with ReplayBuffer.open(tmp_path, config, read_only=True) as raw:  # the segments hold what the robots sent
        sent = raw.get([0, 3])  # episode 0 of each robot, stored as each completed
        assert [len(t.observation.state) for t in sent] == [9, 7] and sent[0].observation.task == "peg_insertion"


def test_admission_names_the_task_a_robot_does_not_fit_with() -> None:
    learning = LearningConfig(mlp=MLPPolicyConfig(state_dim=9, action_dim=4), tasks=TASKS)
    spec = PolicySpec.of(learning, 4)
    obs = f.observation("a", 0, 0, images=False)
    assert spec.observation_mismatch(_named(obs, "button_press", 5)) is None
    refused = spec.observation_mismatch(_named(obs, "stacking", 5))
    assert refused is not None and refused.field == "task" and "stacking" in refused.detail
    too_long = spec.observation_mismatch(_named(obs, "peg_insertion", 8))
    assert too_long is not None and too_long.field == "task" and "8 state entries" in too_long.detail


def _session(tmp_path: Path) -> LearningSession:
    learning = LearningConfig(mlp=MLPPolicyConfig(state_dim=9, action_dim=4), tasks=TASKS)
    return LearningSession(
        SessionConfig(
            run_dir=str(tmp_path),
            learning=learning,
            pacing=PacingConfig(mode="sync", min_transitions=10_000),  # nothing trains
            buffer=BufferConfig(prefetch=0, sampler=SamplerConfig(balance_tasks=True)),
            checkpoint_period_s=0.0,
            tensorboard=False,
        )
    )


def test_the_learner_refuses_a_transition_of_a_task_it_does_not_know_and_stores_nothing(tmp_path: Path) -> None:
    session = _session(tmp_path)
    try:
        with pytest.raises(TaskConditionError, match="stacking"):
            stranger = _step("left", "peg_insertion", 7, (0, 0))
            session.add(replace(stranger, observation=_named(stranger.observation, "stacking", 3)))
        for s in range(3):
            session.add(_step("left", "peg_insertion", 7, (0, s)))
        assert len(session.buffer) == 3 and session.counters.env_steps == 3
        assert {k: v for k, v in session.report().values.items() if k.startswith("task_share/")} == {
            "task_share/peg_insertion": 1.0
        }
        for s in range(3):
            session.add(_step("right", "button_press", 5, (0, s)))
        shares = {k: v for k, v in session.report().values.items() if k.startswith("task_share/")}
        assert shares == {"task_share/peg_insertion": 0.5, "task_share/button_press": 0.5}  # both failing so far
    finally:
        session.close()


def test_the_learner_is_as_good_as_its_worst_task(tmp_path: Path) -> None:
    """What `stop_after.success_rate` reads: the lowest task's recent success, over the fewest episodes."""
    session = _session(tmp_path)
    try:
        for s in range(3):
            session.add(_step("left", "peg_insertion", 7, (0, s), success=True))
        assert session.recent_success() == (None, 0)  # button press has no episode yet
        for e in range(2):
            for s in range(3):
                session.add(_step("right", "button_press", 5, (e, s), success=e == 1))
        assert session.recent_success() == (0.5, 1)  # peg 1 of 1, button 1 of 2
        values = session.report().values
        assert (values["task_success/peg_insertion"], values["task_success/button_press"]) == (1.0, 0.5)
    finally:
        session.close()
