"""The chunk player: chunks played step by step, newer ones taking over at the step they cover and older ones never
again, bad or stale chunks refused with a reason, a hold (None) where no chunk covers the step."""

from __future__ import annotations

import re
import threading

import numpy as np
import numpy.typing as npt
import pytest

from test.conftest import wait_until
from user.robot_loop.chunk_player import Chunk, ChunkPlayer, ChunkPlayerError, PlayedAction, Refusal

A = 3  # action size


def chunk(start: int, seq: int, h: int = 5, *, episode: int = 0, version: int = 1) -> Chunk:
    """Actions that tell their chunk and index: (seq / 1000, index / 100, 0)."""
    actions = np.zeros((h, A), dtype=np.float32)
    actions[:, 0], actions[:, 1] = seq / 1000, np.arange(h) / 100
    return Chunk(episode, start, actions, version, seq)


def played(player: ChunkPlayer, step: int, episode: int = 0) -> tuple[int, int, bool]:
    got = player.action_for(episode, step)
    assert got is not None, f"step {step} held"
    assert got.action[:2].tolist() == pytest.approx([got.seq / 1000, got.index / 100])
    return got.seq, got.index, got.switched


def test_a_chunk_is_played_step_by_step_and_a_step_past_its_end_holds() -> None:
    player = ChunkPlayer(A)
    assert player.action_for(0, 0) is None  # nothing yet: hold
    source = chunk(1, seq=7, h=3, version=4)
    assert player.offer(source).accepted
    source.actions[:] = 0.5  # the sender reuses its buffer: the player has its own copy
    got = player.action_for(0, 1)
    assert isinstance(got, PlayedAction) and (got.seq, got.index, got.switched, got.policy_version) == (7, 0, False, 4)
    assert got.action.dtype == np.float32 and got.action.shape == (A,)
    got.action[:] = 9.0  # the caller's copy
    assert [played(player, s) for s in (2, 3)] == [(7, 1, False), (7, 2, False)]
    assert player.action_for(0, 3) is not None  # the same step asked again (a held period)
    assert player.action_for(0, 4) is None and player.action_for(0, 5) is None
    stats = player.stats()
    assert (stats.periods_without_action, stats.switches, stats.accepted, stats.held, stats.refused) == (3, 0, 1, 1, {})


def test_a_newer_chunk_takes_over_at_the_step_it_covers() -> None:
    player = ChunkPlayer(A)
    player.offer(chunk(0, seq=1, h=8))
    assert played(player, 0) == (1, 0, False)
    player.offer(chunk(3, seq=2, h=8))  # computed while chunk 1 plays: starts at step 3
    assert [played(player, s) for s in (1, 2)] == [(1, 1, False), (1, 2, False)]
    assert played(player, 3) == (2, 0, True)
    assert played(player, 3) == (2, 0, True)  # asked again: still the switch step, counted once
    assert played(player, 4) == (2, 1, False)
    player.offer(chunk(4, seq=3, h=8))  # late (a longer delay than estimated): takes over at once, mid-chunk
    assert played(player, 5) == (3, 1, True)
    player.offer(chunk(4, seq=4, h=8))  # the same start, sent later: newer
    assert played(player, 6) == (4, 2, True)
    assert player.stats().switches == 3


def test_chunks_arriving_ahead_take_over_in_turn() -> None:
    player = ChunkPlayer(A)
    for c in (chunk(0, 1, h=10), chunk(6, 3, h=10), chunk(3, 2, h=10)):  # out of order on the link
        assert player.offer(c).accepted
    assert [played(player, s)[:2] for s in range(8)] == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2), (3, 0), (3, 1)]


def test_the_player_never_goes_back_to_an_older_chunk() -> None:
    player = ChunkPlayer(A)
    player.offer(chunk(0, seq=1, h=10))
    player.offer(chunk(2, seq=2, h=2))
    assert [played(player, s)[0] for s in range(4)] == [1, 1, 2, 2]
    assert player.action_for(0, 4) is None  # chunk 2 is over; chunk 1 still covers step 4 but is older: hold
    older = player.offer(chunk(1, seq=9, h=10))  # a lower start is older, whatever its seq
    assert older.refusal is Refusal.NOT_NEWER and "not newer than the chunk playing" in older.message
    assert player.offer(chunk(2, seq=2, h=8)).refusal is Refusal.NOT_NEWER  # the one playing, again
    assert player.action_for(0, 5) is None
    player.offer(chunk(6, seq=3, h=2))
    assert player.offer(chunk(6, seq=3, h=4)).refusal is Refusal.NOT_NEWER  # a duplicate of one held
    assert played(player, 6) == (3, 0, True)
    assert player.stats().periods_without_action == 2


def test_a_chunk_that_ends_before_the_step_reached_is_refused_as_late() -> None:
    player = ChunkPlayer(A)
    player.offer(chunk(0, seq=1, h=20))
    for s in range(10):
        played(player, s)
    late = player.offer(chunk(3, seq=2, h=5))  # steps 3..7, the robot is at step 9
    assert late.refusal is Refusal.LATE and "robot is at step 9" in late.message
    assert played(player, 10) == (1, 10, False)  # the older one goes on rather than a hold


@pytest.mark.parametrize(
    ("actions", "reason", "message"),
    [
        (np.full((4, A), np.nan, dtype=np.float32), Refusal.NON_FINITE, "NaN or inf"),
        (np.array([[0.0, np.inf, 0.0]] * 4, dtype=np.float32), Refusal.NON_FINITE, "NaN or inf"),
        (np.full((4, A), 1.5, dtype=np.float32), Refusal.OUT_OF_RANGE, r"reach 1.5, outside \[-1, 1\]"),
        (np.zeros((4, A + 1), dtype=np.float32), Refusal.BAD_SHAPE, r"must be \(H, 3\) floats, got float32 \(4, 4\)"),
        (np.zeros(A, dtype=np.float32), Refusal.BAD_SHAPE, r"got float32 \(3,\)"),
        (np.zeros((0, A), dtype=np.float32), Refusal.BAD_SHAPE, r"\(0, 3\)"),
        (np.zeros((4, A), dtype=np.int64), Refusal.BAD_SHAPE, "got int64"),
        ([[0.0, 0.0, 0.0], [0.0]], Refusal.BAD_SHAPE, "no \\(H, A\\) array"),
    ],
)
def test_bad_actions_are_refused_with_a_reason_and_never_played(
    actions: npt.NDArray[np.float32], reason: Refusal, message: str
) -> None:
    player = ChunkPlayer(A)
    got = player.offer(Chunk(0, 0, actions, 1, 1))
    assert got.refusal is reason and not got.accepted
    assert re.search(message, got.message), got.message
    assert player.action_for(0, 0) is None
    assert player.stats().refused == {reason: 1} and player.stats().accepted == 0


def test_a_negative_start_is_refused() -> None:
    got = ChunkPlayer(A).offer(chunk(-1, seq=1))
    assert got.refusal is Refusal.BAD_SHAPE and "start_step must be 0 or more, got -1" in got.message


def test_episodes_chunks_of_an_earlier_episode_are_dropped() -> None:
    player = ChunkPlayer(A)
    player.start_episode(4)
    player.offer(chunk(0, seq=1, episode=4, h=10))
    player.offer(chunk(0, seq=1, episode=5, h=10))  # ahead of the robot (kept until episode 5 starts)
    assert played(player, 0, episode=4) == (1, 0, False)
    player.start_episode(5)
    old = player.offer(chunk(2, seq=2, episode=4))
    assert old.refusal is Refusal.OLD_EPISODE and "already plays episode 5" in old.message
    assert played(player, 0, episode=5) == (1, 0, False)  # steps start again, no switch across episodes
    player.start_episode(6)
    assert player.action_for(6, 1) is None  # episode 5's chunk is gone


def test_misuse_by_the_control_loop_is_an_error() -> None:
    player = ChunkPlayer(A)
    player.offer(chunk(0, seq=1))
    played(player, 3)
    with pytest.raises(ChunkPlayerError, match="step 2 asked after step 3 of episode 0"):
        player.action_for(0, 2)
    with pytest.raises(ChunkPlayerError, match="asked for episode 1 but the player plays episode 0"):
        player.action_for(1, 4)
    with pytest.raises(ValueError, match="action_dim must be 1 or more"):
        ChunkPlayer(0)


def test_chunks_offered_from_a_bus_thread_while_the_loop_plays() -> None:
    player = ChunkPlayer(A)
    player.offer(chunk(0, seq=0, h=6))

    def bus() -> None:
        for seq in range(1, 200):
            player.offer(chunk(seq, seq, h=6))

    thread = threading.Thread(target=bus, daemon=True)
    thread.start()
    seqs = []
    for step in range(200):
        got = player.action_for(0, step)
        if got is not None:
            assert got.action[:2].tolist() == pytest.approx([got.seq / 1000, got.index / 100])
            seqs.append(got.seq)
    assert wait_until(lambda: not thread.is_alive(), timeout_s=10.0)
    assert seqs == sorted(seqs)  # never back to an older chunk
    stats = player.stats()
    assert stats.accepted + sum(stats.refused.values()) == 200
    assert set(stats.refused) <= {Refusal.NOT_NEWER, Refusal.LATE}


def test_superseded_chunks_are_let_go() -> None:
    player = ChunkPlayer(A)
    for step in range(100):
        player.offer(chunk(step, seq=step, h=6))
        played(player, step)
    player.offer(chunk(101, seq=101, h=6))
    assert player.stats().held == 2  # the one playing and the one waiting
