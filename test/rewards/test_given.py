"""What a reward node gave each step (`user.rewards.given`): known steps give back their outcome (None: not
forwarded), only the latest episodes are kept, and episodes ended early by an outcome are remembered."""

from __future__ import annotations

from user.rewards.given import GivenOutcomes
from user.rewards.online import Outcome

DONE = Outcome(1.0, True, True, False)


def test_a_step_given_before_gives_back_its_outcome() -> None:
    given = GivenOutcomes()
    given.remember(3, 0, Outcome(0.5, False, False, False))
    given.remember(3, 1, None)  # refused: not forwarded
    assert given.known(3, 0) and given.outcome(3, 0) == Outcome(0.5, False, False, False)
    assert given.known(3, 1) and given.outcome(3, 1) is None
    assert not given.known(3, 2) and not given.known(4, 0)


def test_only_the_latest_episodes_are_kept() -> None:
    given = GivenOutcomes(episodes=2)
    for episode in (1, 2, 3):
        given.remember(episode, 0, DONE)
    assert not given.known(1, 0) and given.known(2, 0) and given.known(3, 0)
    given.remember(2, 1, DONE)  # a step of a kept episode keeps it, adds no episode
    assert given.known(2, 0) and given.known(3, 0)


def test_episodes_ended_by_an_outcome_are_remembered_for_the_latest_episodes() -> None:
    given = GivenOutcomes(episodes=2)
    given.end(1)
    assert given.ended(1) and not given.ended(2)
    given.end(2)
    given.end(3)
    assert not given.ended(1) and given.ended(2) and given.ended(3)
