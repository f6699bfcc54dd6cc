"""`ActionGate`: freshest policy action, human override with flags, deadlines, episode tags."""

from __future__ import annotations

import threading

import numpy as np

from user.interfaces.domain import Action
from user.robot_loop.gate import SOURCE_HUMAN, SOURCE_POLICY, SOURCE_SCRIPTED, ActionGate


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _action(value: float, episode: int = 0, step: int = 0, version: int = 0, source: int = SOURCE_POLICY) -> Action:
    return Action("r", episode, step, np.full(7, value, np.float32), source=source, policy_version=version)


def test_nothing_fresh_means_hold() -> None:
    gate = ActionGate(0.1, 0.2, FakeClock())
    assert gate.choose() is None
    assert "no action received yet" in gate.stale_reason()


def test_policy_action_used_with_its_source_and_version() -> None:
    clock = FakeClock()
    gate = ActionGate(0.1, 0.2, clock)
    gate.feed_policy(_action(0.5, version=7, source=SOURCE_SCRIPTED))
    choice = gate.choose()
    assert choice is not None
    assert not choice.intervened and choice.source == SOURCE_SCRIPTED and choice.policy_version == 7
    np.testing.assert_array_equal(choice.data, np.full(7, 0.5, np.float32))
    clock.t += 0.11
    assert gate.choose() is None  # stale


def test_human_overrides_policy_and_keeps_the_overridden_version() -> None:
    clock = FakeClock()
    gate = ActionGate(0.1, 0.2, clock)
    gate.feed_policy(_action(0.5, version=3))
    gate.feed_intervention(_action(-0.25, source=SOURCE_HUMAN))
    choice = gate.choose()
    assert choice is not None and choice.intervened and choice.source == SOURCE_HUMAN
    assert choice.policy_version == 3
    np.testing.assert_array_equal(choice.data, np.full(7, -0.25, np.float32))
    assert choice.policy_data is not None and float(choice.policy_data[0]) == 0.5
    clock.t += 0.15  # policy stale, human still fresh: human alone, no policy version
    choice = gate.choose()
    assert choice is not None and choice.intervened and choice.policy_version == 0 and choice.policy_data is None
    clock.t += 0.1  # human released (deadman): nothing fresh
    assert gate.choose() is None
    gate.feed_policy(_action(0.1, version=4))
    choice = gate.choose()
    assert choice is not None and not choice.intervened and choice.source == SOURCE_POLICY


def test_actions_of_an_earlier_episode_are_dropped() -> None:
    gate = ActionGate(0.1, 0.2, FakeClock())
    gate.feed_policy(_action(0.5, episode=1))
    gate.start_episode(2)
    assert gate.choose() is None  # cleared at the boundary
    gate.feed_policy(_action(0.5, episode=1))
    assert gate.choose() is None and gate.stale_policy_actions == 1
    gate.feed_policy(_action(0.5, episode=2))
    assert gate.choose() is not None


def test_wait_for_policy_returns_on_the_tagged_action_or_its_deadline() -> None:
    gate = ActionGate(1.0, 1.0)
    gate.start_episode(5)
    assert not gate.wait_for_policy(5, 0, 0.01)
    feeder = threading.Timer(0.05, lambda: gate.feed_policy(_action(0.1, episode=5, step=0)))
    feeder.start()
    assert gate.wait_for_policy(5, 0, 5.0)
    feeder.join()
    assert not gate.wait_for_policy(5, 1, 0.01)  # the step-0 action does not answer step 1
    waker = threading.Timer(0.05, gate.wake)
    waker.start()
    assert not gate.wait_for_policy(5, 1, 5.0)  # woken early
    waker.join()


def test_lockstep_consumes_each_intervention_once_and_wakes_the_wait() -> None:
    gate = ActionGate(1.0, 1.0, lockstep=True)
    gate.feed_policy(_action(0.5, episode=0, step=0))
    gate.feed_intervention(_action(-0.5, source=SOURCE_HUMAN))
    first = gate.choose()
    assert first is not None and first.intervened
    second = gate.choose()
    assert second is not None and not second.intervened  # consumed: back to the policy
    feeder = threading.Timer(0.05, lambda: gate.feed_intervention(_action(-0.5, source=SOURCE_HUMAN)))
    feeder.start()
    assert gate.wait_for_policy(0, 1, 5.0)  # an intervention ends the wait for the step-1 policy action
    feeder.join()


def test_the_chunk_a_policy_action_was_played_from_goes_with_it_even_when_overridden() -> None:
    clock = FakeClock()
    gate = ActionGate(0.1, 0.2, clock)
    played = Action("r", 0, 4, np.zeros(7, np.float32), policy_version=2, chunk_seq=3, chunk_index=1)
    gate.feed_policy(played)
    choice = gate.choose()
    assert choice is not None and (choice.chunk_seq, choice.chunk_index, choice.policy_version) == (3, 1, 2)
    gate.feed_intervention(_action(-0.25, source=SOURCE_HUMAN))
    choice = gate.choose()
    assert choice is not None and choice.intervened and (choice.chunk_seq, choice.chunk_index) == (3, 1)
    clock.t += 0.15  # the policy action stale: the human's alone, from no chunk
    choice = gate.choose()
    assert choice is not None and (choice.chunk_seq, choice.chunk_index) == (0, 0)
