"""The task column: codes in first-seen order, the same whether the columns grew episode by episode (`extend`) or
were bulk-loaded from the index on open (`extend_tuples`), and views that stay consistent snapshots."""

import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from test.buffer.factories import episode
from user.buffer import BufferConfig, RateLimiterConfig, ReplayBuffer, StorageConfig
from user.buffer.columns import Columns
from user.buffer.errors import CorruptRowError, IndexDamagedError
from user.buffer.rows import TransitionRow
from user.interfaces.domain import Transition

TASKS = ["place", "place", "stack", "place", "pick", "stack", "pick", "pick"]  # not in sorted order


def _row(index: int, task: str) -> TransitionRow:
    return TransitionRow(
        index=index, segment_id=1, offset=index, length=1, episode=index, robot_id="a", task=task, episode_id=index,
        step=0, policy_version=0, wall_ns=index, sim_ns=index, reward=0.0, terminated=False, truncated=True,
        intervened=False, is_demo=False, success=False,
    )  # fmt: skip


def _tuple(row: TransitionRow) -> tuple[object, ...]:
    """`row` as the index's bulk load reads it (`rows.COLUMN_SELECT`)."""
    return (
        row.index, row.segment_id, row.offset, row.length, row.episode, row.step, row.policy_version, row.wall_ns,
        row.reward, int(row.is_demo), int(row.intervened), int(row.done), int(row.success), row.task,
    )  # fmt: skip


def test_task_codes_follow_first_appearance() -> None:
    cols = Columns(capacity=2)
    cols.extend([_row(i, t) for i, t in enumerate(TASKS[:3])])
    cols.extend([_row(i + 3, t) for i, t in enumerate(TASKS[3:])])
    view = cols.view()
    assert view.tasks == ("place", "stack", "pick")
    assert view.task.dtype == np.int32
    assert view.task.tolist() == [0, 0, 1, 0, 2, 1, 2, 2]


@pytest.mark.parametrize("split", [0, 1, 3, 5, 8])
def test_bulk_loaded_codes_equal_the_codes_of_rows_added_one_by_one(split: int) -> None:
    """A reopened buffer (bulk load, maybe continued by new episodes) numbers its tasks as the running one did."""
    rows = [_row(i, t) for i, t in enumerate(TASKS)]
    running = Columns(capacity=2)
    for row in rows:
        running.extend([row])
    reopened = Columns(capacity=2)
    reopened.extend_tuples([_tuple(r) for r in rows[:split]])
    reopened.extend(rows[split:])
    a, b = running.view(), reopened.view()
    assert a.tasks == b.tasks == ("place", "stack", "pick")
    assert np.array_equal(a.task, b.task) and np.array_equal(a.done, b.done)


def test_a_view_keeps_the_tasks_of_its_own_rows() -> None:
    cols = Columns()
    cols.extend([_row(0, "pick")])
    before = cols.view()
    cols.extend([_row(1, "place")])
    assert before.tasks == ("pick",) and before.task.tolist() == [0]
    assert cols.view().tasks == ("pick", "place") and cols.view().task.tolist() == [0, 1]


def test_rows_that_fail_to_load_leave_no_task_name_behind() -> None:
    cols = Columns()
    cols.extend([_row(0, "pick")])
    with pytest.raises(CorruptRowError):
        cols.extend([_row(2, "place")])  # not contiguous
    bad = _tuple(_row(1, "place"))
    with pytest.raises(ValueError, match="invalid literal"):
        cols.extend_tuples([(*bad[:5], "x", *bad[6:])])  # a step that is no number: a damaged index
    assert cols.view().tasks == ("pick",) and len(cols) == 1


@pytest.mark.parametrize("names", [[b"\x15"], ["pick", 7], [None]])
def test_a_task_name_that_is_not_text_is_a_type_error(names: list[object]) -> None:
    """The storage turns it into an `IndexDamagedError` naming the index (a page overwritten by anything)."""
    rows = [(*_tuple(_row(i, "t"))[:-1], name) for i, name in enumerate(names)]
    with pytest.raises(TypeError):
        Columns().extend_tuples(rows)


def _tasked(steps: list[Transition], task: str) -> list[Transition]:
    return [
        replace(
            t, observation=replace(t.observation, task=task), next_observation=replace(t.next_observation, task=task)
        )
        for t in steps
    ]


def test_a_reopened_buffer_has_the_task_codes_of_the_running_one(tmp_path: Path) -> None:
    config = BufferConfig(
        storage=StorageConfig(segment_max_episodes=2),
        rate_limiter=RateLimiterConfig(min_size=1),
        batch_size=4,
        prefetch=0,
    )
    plan = ["place", "pick", "place", "stack", "pick"]
    with ReplayBuffer.open(tmp_path, config) as buf:
        for e, task in enumerate(plan):
            for t in _tasked(episode("a", e, steps=e + 1, images=False), task):
                buf.add(t)
        running = buf.storage.view()
    with ReplayBuffer.open(tmp_path, config, read_only=True) as ro:
        reopened = ro.storage.view()
    assert running.tasks == reopened.tasks == ("place", "pick", "stack")
    expected = [code for e, code in enumerate([0, 1, 0, 2, 1]) for _ in range(e + 1)]
    assert running.task.tolist() == reopened.task.tolist() == expected


def test_a_task_overwritten_with_bytes_is_a_damaged_index_on_open(tmp_path: Path) -> None:
    config = BufferConfig(rate_limiter=RateLimiterConfig(min_size=1), prefetch=0)
    with ReplayBuffer.open(tmp_path, config) as buf:
        for t in episode("a", 0, steps=3, images=False):
            buf.add(t)
    db = sqlite3.connect(tmp_path / "index.sqlite3")
    db.execute("PRAGMA ignore_check_constraints = ON")
    db.execute("UPDATE transitions SET task = X'15' WHERE idx = 1")
    db.commit()
    db.close()
    with pytest.raises(IndexDamagedError, match=r"transition rows from 0 on do not load \(task b'\\x15' is not text\)"):
        ReplayBuffer.open(tmp_path, config, read_only=True)
