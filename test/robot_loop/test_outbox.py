"""EpisodeOutbox: completed episodes are kept until acknowledged, re-sent when no receipt came, bounded."""

from __future__ import annotations

import logging

import pytest

from user.robot_loop.outbox import EpisodeOutbox, Resend


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _episode(box: EpisodeOutbox, episode_id: int, steps: int = 3) -> None:
    for k in range(steps):
        box.add(episode_id, f"{episode_id}:{k}", done=k == steps - 1)


def test_unacknowledged_episodes_are_resent_whole_after_the_delay() -> None:
    clock = Clock()
    box = EpisodeOutbox(max_episodes=5, resend_after_s=2.0, clock=clock)
    box.acknowledge(-1)  # a learner that acknowledges exists
    _episode(box, 7)
    box.add(8, "8:0", done=False)  # still being recorded: never due
    assert box.due() == []
    clock.t = 2.5
    assert box.due() == [Resend(7, ["7:0", "7:1", "7:2"], after_restart=False)]
    assert box.due() == []  # not again before another delay
    clock.t = 5.0
    assert [r.episode_id for r in box.due()] == [7] and box.resent == 2
    assert box.acknowledge(7) and box.pending() == [] and box.acknowledged == 1
    clock.t = 10.0
    assert box.due() == []


def test_an_acknowledged_episode_is_never_resent() -> None:
    clock = Clock()
    box = EpisodeOutbox(resend_after_s=1.0, clock=clock)
    box.acknowledge(-1)
    _episode(box, 1)
    assert box.acknowledge(1) and not box.acknowledge(1) and box.acknowledged == 1
    clock.t = 5.0
    assert box.due() == [] and box.pending() == []


def test_a_receipt_that_comes_before_the_episode_completes_here_is_applied_when_it_does() -> None:
    """The robot publishes the done step before it adds it here: the learner's receipt may come in between. It
    used to be dropped, and the episode re-sent (with a warning) though the learner had it."""
    clock = Clock()
    box = EpisodeOutbox(resend_after_s=1.0, clock=clock)
    box.add(1, "1:0", done=False)
    assert not box.acknowledge(1)  # not complete here yet: remembered
    assert box.pending() == [] and box.acknowledged == 0
    box.add(1, "1:1", done=True)
    assert box.pending() == [] and box.acknowledged == 1
    box.acknowledge(2)  # an episode that has not even begun here (a one-step episode)
    box.add(2, "2:0", done=True)
    box.add(3, "3:0", done=False)
    box.acknowledge(3)
    assert box.end_early(3, lambda m: f"{m}:truncated")  # an operator reset, its receipt already here
    _episode(box, 4)  # no receipt: held as before
    clock.t = 5.0
    assert [r.episode_id for r in box.due()] == [4] and box.acknowledged == 3


def test_a_receipt_that_does_not_come_is_a_warning_for_each_episode(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    box = EpisodeOutbox(resend_after_s=2.0, clock=clock)
    box.acknowledge(-1)
    _episode(box, 7)
    _episode(box, 8, steps=2)
    clock.t = 2.0
    with caplog.at_level(logging.INFO, logger="user.robot_loop.outbox"):
        assert [r.after_restart for r in box.due()] == [False, False]
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, "no receipt for episode 7 from the learner within 2 s: re-sending its 3 transitions"),
        (logging.WARNING, "no receipt for episode 8 from the learner within 2 s: re-sending its 2 transitions"),
    ]


def test_a_full_outbox_gives_up_the_oldest_loudly(caplog: pytest.LogCaptureFixture) -> None:
    box = EpisodeOutbox(max_episodes=2, resend_after_s=1.0, clock=Clock())
    box.acknowledge(-1)
    with caplog.at_level(logging.ERROR, logger="user.robot_loop.outbox"):
        for e in range(4):
            _episode(box, e)
    assert box.pending() == [1, 2, 3]  # max_episodes completed + the one that was being recorded
    assert box.given_up == 1
    assert any("gave up episode 0" in r.getMessage() for r in caplog.records)


def test_bad_size_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        EpisodeOutbox(max_episodes=0)


def test_without_any_receipt_nothing_is_resent_or_complained_about(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    box = EpisodeOutbox(max_episodes=2, resend_after_s=1.0, clock=clock)
    with caplog.at_level(logging.ERROR, logger="user.robot_loop.outbox"):
        for e in range(5):
            _episode(box, e)
    clock.t = 10.0
    assert box.due() == [] and box.given_up == 0 and not caplog.records


def test_an_episode_ended_without_a_done_step_is_dropped_when_the_next_begins() -> None:
    clock = Clock()
    box = EpisodeOutbox(resend_after_s=1.0, clock=clock)
    box.acknowledge(-1)
    box.add(1, "1:0", done=False)  # operator reset: episode 1 never gets its done step
    _episode(box, 2)
    clock.t = 5.0
    assert [r.episode_id for r in box.due()] == [2]


def test_an_episode_ended_early_is_kept_whole_with_its_last_step_truncated() -> None:
    clock = Clock()
    box = EpisodeOutbox(resend_after_s=1.0, clock=clock)
    box.acknowledge(-1)
    box.add(1, "1:0", done=False)
    box.add(1, "1:1", done=False)  # operator reset here: no done step
    assert box.pending() == []
    assert box.end_early(1, lambda m: f"{m}:truncated")
    assert not box.end_early(1, lambda m: f"{m}:again")  # ended once
    assert not box.end_early(7, lambda m: m)  # not held
    _episode(box, 2)
    assert box.pending() == [1, 2]
    clock.t = 5.0
    assert [(r.episode_id, r.messages) for r in box.due()] == [
        (1, ["1:0", "1:1:truncated"]),
        (2, ["2:0", "2:1", "2:2"]),
    ]
    assert box.acknowledge(1)
