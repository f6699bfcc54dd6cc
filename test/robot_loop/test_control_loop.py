"""`ControlLoop` on the simulated Franka (fast mode, no cameras): episodes, transitions, flags, ids."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from user.interfaces.domain import Action, Observation
from user.robot_loop import ActionGate, ControlLoop, EpisodeKind, Observer, TaskScorer, arm_and_task_state
from user.robot_loop.control_loop import NoEpisodeError
from user.robot_loop.episode_ids import EpisodeIdError, EpisodeIds
from user.robot_loop.gate import SOURCE_HOLD, SOURCE_HUMAN, SOURCE_SCRIPTED
from user.robot_loop.observe import ObserverConfig
from user.robot_loop.privileged import ARM_NAMES
from user.robots.safety import SafetyConfig
from user.sim import SimCameraConfig, SimFrankaRobot, SimRobotConfig


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _loop(robot: SimFrankaRobot, clock: FakeClock, max_steps: int | None = None, seed: int | None = 0) -> ControlLoop:
    assert robot.task is not None
    observer = Observer(
        ObserverConfig("arm", "button_press"), extras=robot.observation_extras, privileged=robot.task_state
    )
    gate = ActionGate(0.1, 0.1, clock)
    scorer = TaskScorer(robot.task, robot.task_state, max_steps)
    return ControlLoop(robot, scorer, observer, gate, seed=seed, episode_ids=EpisodeIds(10))


def _expert(robot: SimFrankaRobot, obs: Observation, version: int = 1) -> Action:
    assert robot.task is not None
    arm, state = arm_and_task_state(obs.state, obs.state_names)
    data = robot.task.scripted_expert(arm, state)
    return Action("arm", obs.episode_id, obs.step, data, source=SOURCE_SCRIPTED, policy_version=version)


def test_expert_episodes_end_with_success_and_consistent_transitions(robot: SimFrankaRobot) -> None:
    clock = FakeClock()
    loop = _loop(robot, clock)
    for expected_id in (10, 11):
        obs, events = loop.reset()
        assert [e.kind for e in events] == [EpisodeKind.START] and events[0].episode_id == expected_id
        assert obs.step == 0 and obs.episode_id == expected_id
        transitions = []
        end = None
        while end is None:
            loop.gate.feed_policy(_expert(robot, obs))
            result = loop.tick()
            assert result.transition is not None
            t = result.transition
            assert t.observation is obs  # the observation the action was chosen in
            assert t.next_observation.step == obs.step + 1
            assert t.action.step == obs.step and t.action.source == SOURCE_SCRIPTED and t.is_demo
            assert not t.action.intervened and t.action.policy_version == 1
            transitions.append(t)
            obs, end = result.observation, result.ended
            clock.t += 0.01
        last = transitions[-1]
        assert last.terminated and last.success and not last.truncated
        assert not any(t.done for t in transitions[:-1])
        assert end.kind == EpisodeKind.END and end.success and end.steps == len(transitions)
        assert end.episode_return == pytest.approx(sum(t.reward for t in transitions), rel=1e-6)
        assert end.interventions == 0
    with pytest.raises(NoEpisodeError):
        loop.tick()


def test_observation_state_layout_and_privileged_roundtrip(robot: SimFrankaRobot) -> None:
    loop = _loop(robot, FakeClock())
    obs, _ = loop.reset()
    assert obs.state_names[: len(ARM_NAMES)] == ARM_NAMES
    assert [n for n in obs.state_names if n.startswith("extra/")] == [
        *(f"extra/target_color/{i}" for i in range(3)),
        *(f"extra/tool_to_target/{i}" for i in range(3)),
    ]
    arm, state = arm_and_task_state(obs.state, obs.state_names)
    truth = robot.task_state()
    np.testing.assert_allclose(arm.tcp_pose, robot.state().tcp_pose, atol=1e-6)
    for key, value in truth.values.items():
        np.testing.assert_allclose(state.values[key], value, atol=1e-6)
    assert robot.task is not None
    np.testing.assert_allclose(
        robot.task.scripted_expert(arm, state), robot.task.scripted_expert(robot.state(), truth), atol=1e-4
    )


def test_truncation_at_the_episode_length(robot: SimFrankaRobot) -> None:
    loop = _loop(robot, FakeClock(), max_steps=3)
    obs, _ = loop.reset()
    results = []
    for _ in range(3):
        loop.gate.feed_policy(Action("arm", obs.episode_id, obs.step, np.zeros(7, np.float32)))
        results.append(loop.tick())
        obs = results[-1].observation
    flags = [(r.transition.terminated, r.transition.truncated) for r in results if r.transition]
    assert flags == [(False, False), (False, False), (False, True)]
    assert results[-1].ended is not None and not results[-1].ended.success and results[-1].ended.steps == 3


def test_transitions_store_the_chosen_action_not_the_safety_filtered_one() -> None:
    limited = SimFrankaRobot(
        SimRobotConfig(
            robot_id="arm", task="button_press", cameras=SimCameraConfig(names=()), safety=SafetyConfig(gripper_max=0.0)
        )
    )
    limited.connect()
    try:
        loop = _loop(limited, FakeClock())
        obs, _ = loop.reset()
        chosen = np.array([0.5, 0.0, 3.0, 0.0, 0.0, 0.0, 1.0], np.float32)  # dz beyond the action space
        loop.gate.feed_policy(Action("arm", obs.episode_id, obs.step, chosen))
        t = loop.tick().transition
        assert t is not None and t.action.source != SOURCE_HOLD
        # the policy asked for an open gripper; the robot kept it closed (gripper_max 0); dz is clipped to +1
        np.testing.assert_allclose(t.action.data, [0.5, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0])
        assert limited.gripper_target == 0.0
        loop.gate.feed_policy(Action("arm", obs.episode_id, 1, np.full(7, np.nan, np.float32)))
        held = loop.tick().transition
        assert held is not None and held.action.source == SOURCE_HOLD and not np.any(held.action.data)
    finally:
        limited.close()


def test_a_requested_end_truncates_the_running_episode_after_its_next_step(robot: SimFrankaRobot) -> None:
    loop = _loop(robot, FakeClock(), max_steps=50)
    assert not loop.request_end()  # nothing running yet
    obs, _ = loop.reset()
    old = obs.episode_id

    def step() -> Any:
        loop.gate.feed_policy(Action("arm", obs.episode_id, obs.step, np.zeros(7, np.float32)))
        return loop.tick()

    first = step()
    obs = first.observation
    assert first.transition is not None and not first.transition.done
    assert not loop.request_end(old + 5)  # another episode's request does nothing
    assert loop.request_end(old)
    second = step()
    assert second.transition is not None and second.transition.truncated and not second.transition.terminated
    assert second.ended is not None and second.ended.steps == 2 and loop.ended_by_request == 1
    assert not loop.in_episode and not loop.request_end(old)
    obs, _ = loop.reset()
    third = step()  # a new episode is not affected by the old request
    assert third.transition is not None and not third.transition.done


def test_intervention_overrides_and_is_flagged_for_exactly_those_steps(robot: SimFrankaRobot) -> None:
    clock = FakeClock()
    loop = _loop(robot, clock, max_steps=8)
    obs, _ = loop.reset()
    human = np.array([0, 0, 0.5, 0, 0, 0, -1], np.float32)
    human_steps = {2, 3, 5}
    end = None
    seen = []
    while end is None:
        loop.gate.feed_policy(_expert(robot, obs, version=4))
        if obs.step in human_steps:
            loop.gate.feed_intervention(Action("arm", 0, 0, human, intervened=True, source=SOURCE_HUMAN))
        result = loop.tick()
        t = result.transition
        assert t is not None
        seen.append(t)
        obs, end = result.observation, result.ended
        clock.t += 0.2  # longer than the intervention deadline: each intervention covers one step
    assert {t.step for t in seen if t.action.intervened} == human_steps
    for t in seen:
        assert t.action.policy_version == 4
        if t.action.intervened:
            assert t.action.source == SOURCE_HUMAN and not t.is_demo
            np.testing.assert_allclose(t.action.data, human, atol=1e-6)  # as the person chose it
        else:
            assert t.action.source == SOURCE_SCRIPTED
    assert end.interventions == 3


def test_no_fresh_action_holds_without_a_transition(robot: SimFrankaRobot) -> None:
    clock = FakeClock()
    loop = _loop(robot, clock)
    obs, _ = loop.reset()
    result = loop.tick()
    assert result.held and result.transition is None and result.observation.step == 0
    assert loop.held_ticks == 1
    loop.gate.feed_policy(Action("arm", obs.episode_id, 0, np.zeros(7, np.float32)))
    result = loop.tick()
    assert result.transition is not None and result.transition.step == 0 and result.observation.step == 1


def test_estopped_robot_step_is_recorded_as_hold(robot: SimFrankaRobot) -> None:
    loop = _loop(robot, FakeClock())
    obs, _ = loop.reset()
    robot.estop("test")
    loop.gate.feed_policy(Action("arm", obs.episode_id, 0, np.full(7, 0.5, np.float32)))
    result = loop.tick()
    assert result.transition is not None and result.transition.action.source == SOURCE_HOLD
    np.testing.assert_array_equal(result.transition.action.data, np.zeros(7, np.float32))


def test_reset_mid_episode_ends_it_and_seeds_repeat(robot: SimFrankaRobot) -> None:
    loop = _loop(robot, FakeClock(), seed=5)
    first, _ = loop.reset()
    _, events = loop.reset(seed=15)  # operator reset with the seed of episode 10 (seed 5 + its id)
    assert [e.kind for e in events] == [EpisodeKind.END, EpisodeKind.START]
    assert events[0].episode_id == 10 and events[1].episode_id == 11 and events[0].steps == 0
    again = loop.observation
    assert again is not None
    np.testing.assert_allclose(again.state, first.state, atol=1e-6)


class FailingIds(EpisodeIds):
    """Ids whose next one cannot be kept (a full disk under a `DurableEpisodeIds`)."""

    def __init__(self, first: int) -> None:
        super().__init__(first)
        self.fail = False

    def _keep(self, next_id: int) -> None:
        if self.fail:
            raise EpisodeIdError("cannot save the next episode id: No space left on device")


def test_an_id_that_cannot_be_kept_starts_nothing_and_ends_nothing(robot: SimFrankaRobot) -> None:
    observer = Observer(ObserverConfig("arm", "button_press"), privileged=robot.task_state)
    assert robot.task is not None
    ids = FailingIds(3)
    loop = ControlLoop(robot, TaskScorer(robot.task, robot.task_state), observer, ActionGate(0.1, 0.1), episode_ids=ids)
    obs, _ = loop.reset()
    ids.fail = True
    with pytest.raises(EpisodeIdError):
        loop.reset()
    assert loop.in_episode and loop.episode_id == 3 and loop.observation is obs  # the running episode goes on
    ids.fail = False
    _, events = loop.reset()
    assert [(e.kind, e.episode_id) for e in events] == [(EpisodeKind.END, 3), (EpisodeKind.START, 4)]


def test_a_continued_loop_does_not_repeat_the_start_states_of_earlier_episodes(robot: SimFrankaRobot) -> None:
    """The seed schedule follows the episode id: a robot that continues at id 12 after a restart starts where
    episode 12 would have, not where episode 0 (seed + 0) did, so no demonstration is driven again."""
    observer = Observer(ObserverConfig("arm", "button_press"), privileged=robot.task_state)
    assert robot.task is not None
    scorer = TaskScorer(robot.task, robot.task_state)
    fresh = ControlLoop(robot, scorer, observer, ActionGate(0.1, 0.1), seed=5, episode_ids=EpisodeIds(0))
    first_run, _ = fresh.reset()
    continued = ControlLoop(robot, scorer, observer, ActionGate(0.1, 0.1), seed=5, episode_ids=EpisodeIds(12))
    after_restart, _ = continued.reset()
    assert after_restart.episode_id == 12
    assert not np.allclose(after_restart.state, first_run.state, atol=1e-6)
    same, _ = fresh.reset(seed=5 + 12)
    np.testing.assert_allclose(after_restart.state, same.state, atol=1e-6)


def test_end_episode_ends_the_running_one_once(robot: SimFrankaRobot) -> None:
    loop = _loop(robot, FakeClock())
    assert loop.end_episode() is None
    loop.reset()
    ended = loop.end_episode()
    assert ended is not None and ended.kind == EpisodeKind.END and ended.episode_id == 10
    assert loop.end_episode() is None and not loop.in_episode
    _, events = loop.reset()
    assert [e.kind for e in events] == [EpisodeKind.START]
