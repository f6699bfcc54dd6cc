"""The report's buffer figures come from one state of the index: beside a learner that stores an episode while
the report reads, the per-robot rows still add up to the totals (they were read in two states before)."""

from __future__ import annotations

from pathlib import Path

import pytest

from test.buffer.factories import episode
from user.buffer import BufferConfig, ReplayBuffer
from user.buffer.index import Index
from user.report import buffer_summary
from user.report.buffer_summary import RobotComposition, load_buffer


def test_per_robot_rows_add_up_to_the_totals_while_a_learner_stores_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "buffer"
    learner = ReplayBuffer.open(path, BufferConfig(prefetch=0))
    try:
        for e in range(3):
            learner.add_episode(episode("arm", e, 4, demo=e == 0, images=False))
        read = buffer_summary.composition

        def stored_meanwhile(index: Index) -> dict[str, RobotComposition]:
            learner.add_episode(episode("cart", 0, 5, images=False))  # committed between the report's reads
            return read(index)

        monkeypatch.setattr(buffer_summary, "composition", stored_meanwhile)
        summary = load_buffer(path)
    finally:
        learner.close()
    assert sum(r.transitions for r in summary.robots.values()) == summary.info.transitions == 12
    assert sum(r.episodes for r in summary.robots.values()) == summary.info.episodes == 3
    assert sorted(summary.robots) == ["arm"]
    monkeypatch.undo()
    assert load_buffer(path).info.transitions == 17  # the episode stored meanwhile is there for the next report
