"""The learner's door and its re-sent episodes (`user.learner.intake`): a transition or episode event passes only
when valid and of the topic's robot, a refused one is counted per cause; a re-sent episode is handed over whole at
its done step, a step 0 starts it afresh, and the oldest unfinished re-send goes when too many are open."""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np

from test.buffer import factories as f
from user.interfaces import default_codec
from user.interfaces.domain import Transition, transition_to_msg
from user.interfaces.episode_events import EpisodeEvent, EpisodeKind, episode_event_to_msg
from user.interfaces.refusals import Refusals
from user.learner.intake import Door, ResentEpisodes

CODEC = default_codec()


def _door() -> Door:
    return Door(Refusals(logging.getLogger("test.intake")), action_dim=f.ACTION_DIM)


def _small(robot: str, episode: int, steps: int) -> list[Transition]:
    """An episode whose actions are inside [-1, 1] (the door refuses others)."""
    return [replace(t, action=replace(t.action, data=t.action.data / steps)) for t in f.episode(robot, episode, steps)]


def test_the_door_lets_a_valid_transition_of_the_topic_s_robot_through() -> None:
    door, t = _door(), _small("arm", 3, 2)[0]
    passed = door.transition("arm", "/arm/transitions", transition_to_msg(t, CODEC))
    assert passed is not None and (passed.robot_id, passed.episode_id, passed.step) == ("arm", 3, 0)
    assert door.refusals.counts == {}


def test_the_door_refuses_and_counts_what_is_not_valid() -> None:
    door, t = _door(), _small("arm", 3, 2)[0]
    assert door.transition("other", "/other/transitions", transition_to_msg(t, CODEC)) is None  # another robot's
    nan = replace(t, action=replace(t.action, data=np.full(f.ACTION_DIM, np.nan, dtype=np.float32)))
    assert door.transition("arm", "/arm/transitions", transition_to_msg(nan, CODEC)) is None
    wide = replace(t, action=replace(t.action, data=np.zeros(f.ACTION_DIM + 1, dtype=np.float32)))
    assert door.transition("arm", "/arm/transitions", transition_to_msg(wide, CODEC)) is None  # not the policy's
    assert sum(door.refusals.counts.values()) == 3 and len(door.refusals.counts) == 3


def test_the_door_checks_episode_events() -> None:
    door = _door()
    end = EpisodeEvent("arm", "peg", 4, EpisodeKind.END, stamp_ns=1, steps=7)
    passed = door.episode_event("arm", episode_event_to_msg(end, CODEC))
    assert passed is not None and (passed.kind, passed.episode_id, passed.steps) == (EpisodeKind.END, 4, 7)
    assert door.episode_event("other", episode_event_to_msg(end, CODEC)) is None
    unknown = replace(episode_event_to_msg(end, CODEC), kind=9)
    assert door.episode_event("arm", unknown) is None
    assert door.refusals.counts == {"event.robot_id names another robot": 1, "event.kind is unknown": 1}


def test_a_resent_episode_is_handed_over_whole_at_its_done_step() -> None:
    resends, steps = ResentEpisodes(), _small("arm", 1, 3)
    assert resends.add(steps[0], b"0") is None and resends.add(steps[1], None) is None
    whole = resends.add(steps[2], b"2")
    assert whole is not None and whole.steps == steps and whole.payloads == [b"0", None, b"2"]
    assert resends.add(steps[1], None) is None  # gathered afresh: the handed-over one is no longer held


def test_a_step_0_starts_a_resent_episode_afresh() -> None:
    resends, steps = ResentEpisodes(), _small("arm", 1, 2)
    resends.add(steps[0], b"first")
    resends.add(steps[0], b"again")  # the robot re-sends from the start (a message of the first try was lost)
    whole = resends.add(steps[1], b"1")
    assert whole is not None and whole.payloads == [b"again", b"1"]


def test_the_oldest_unfinished_resend_goes_when_too_many_are_open() -> None:
    resends = ResentEpisodes(limit=2)
    first, second, third = (_small("arm", e, 2) for e in (1, 2, 3))
    for episode in (first, second, third):
        resends.add(episode[0], None)
    kept = resends.add(second[1], None)
    assert kept is not None and kept.steps == second
    dropped = resends.add(first[1], None)  # its step 0 was dropped: what is handed over is not the whole episode
    assert dropped is not None and dropped.steps == [first[1]]
