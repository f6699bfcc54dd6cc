"""A run's CSV files read back as typed rows: what the learner's ProgressLog writes reads back whole; a missing or
empty file is an empty table; a row that cannot be read is skipped and named (file, line, column), the rest kept;
a progress.csv of an older version (`updates_per_s`) still reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from user.buffer.episode_window import EpisodeOutcome
from user.learner.checkpoint import LearnerCounters
from user.learner.progress import ProgressLog
from user.learner.trainer import TrainerCounters
from user.report.errors import MalformedRowError
from user.report.tables import parse_episode, read_episodes, read_progress

EPISODE_HEADER = (
    "wall_time,elapsed_s,env_steps,robot_id,episode_id,steps,episode_return,success,interventions,is_demo\n"
)


def _outcome(robot: str, episode_id: int, ret: float, **kwargs: object) -> EpisodeOutcome:
    fields: dict[str, object] = {"steps": 10, "success": False, "interventions": 0, "is_demo": False, **kwargs}
    return EpisodeOutcome(robot, episode_id, episode_return=ret, **fields)  # type: ignore[arg-type]


def test_rows_the_learner_writes_read_back_whole(tmp_path: Path) -> None:
    log = ProgressLog(tmp_path, plot_every_s=1e9)
    outcomes = [
        _outcome("arm", 0, 9.5, is_demo=True),
        _outcome("arm", 1, -4.25, interventions=3),
        _outcome("cart", 0, 6.0, success=True, steps=7),
    ]
    try:
        log.write(1000.0, TrainerCounters(), LearnerCounters(), 0, 0.0)  # before any episode: empty window cells
        for i, outcome in enumerate(outcomes):
            log.episode(outcome, env_steps=10 * (i + 1), wall=log.run_start + i + 1.0)
        trainer = TrainerCounters(update_calls=5, gradient_steps=40, busy_s=3.0, idle_s=1.0)
        log.write(1001.0, trainer, LearnerCounters(env_steps=30, episodes=3, successes=1, policy_version=4), 27, 12.5)
    finally:
        log.close()
    episodes, progress = read_episodes(tmp_path), read_progress(tmp_path)
    assert episodes.present and episodes.problems == [] and progress.problems == []
    back = [EpisodeOutcome(r.robot_id, r.episode_id, r.steps, r.episode_return, r.success, r.interventions, r.is_demo)
            for r in episodes.rows]  # fmt: skip
    assert back == outcomes
    assert [r.env_steps for r in episodes.rows] == [10, 20, 30]
    assert [r.elapsed_s for r in episodes.rows] == pytest.approx([1.0, 2.0, 3.0])
    first, last = progress.rows
    assert first.recent_return_mean is None and first.idle_fraction == 1.0  # nothing done yet: all idle
    assert (last.env_steps, last.gradient_steps, last.update_calls, last.policy_version) == (30, 40, 5, 4)
    assert (last.gradient_steps_per_s, last.buffer_transitions, last.idle_fraction) == (12.5, 27, 0.25)
    assert last.recent_return_mean == pytest.approx((-4.25 + 6.0) / 2)


def test_a_missing_file_is_an_empty_table_that_says_so(tmp_path: Path) -> None:
    table = read_episodes(tmp_path)
    assert not table.present and table.rows == [] and table.problems == []
    (tmp_path / "episodes.csv").write_text("")
    empty = read_episodes(tmp_path)
    assert empty.present and empty.rows == [] and empty.problems == []
    (tmp_path / "episodes.csv").write_text(EPISODE_HEADER)
    assert read_episodes(tmp_path).rows == []


def test_a_malformed_row_is_named_by_file_line_and_column_and_the_others_are_kept(tmp_path: Path) -> None:
    (tmp_path / "episodes.csv").write_text(
        EPISODE_HEADER
        + "10.0,1.0,15,arm,0,15,-1.5,0,0,1\n"
        + "11.0,2.0,30,arm,1,15,oops,0,0,0\n"  # line 3: not a number
        + "12.0,3.0,45,arm,2,15,-2.5,yes,0,0\n"  # line 4: not a 0/1 flag
        + "13.0,4.0,60,arm,3,15,-3.5,1,2,0\n"
        + "14.0,5.0,75,arm,4,15,-4"  # line 6: cut mid-row (a run killed while writing)
    )
    table = read_episodes(tmp_path)
    assert [r.episode_id for r in table.rows] == [0, 3]
    assert table.problems == [
        "episodes.csv line 3: column 'episode_return': 'oops' is not a number",
        "episodes.csv line 4: column 'success': 'yes' is not 0 or 1",
        "episodes.csv line 6: column 'success' is missing (the row ends early)",
    ]


def test_parse_episode_raises_a_typed_error_naming_where(tmp_path: Path) -> None:
    row = dict.fromkeys(EPISODE_HEADER.strip().split(","), "1")
    row["env_steps"] = "1.5"
    with pytest.raises(MalformedRowError, match=r"^here line 9: column 'env_steps': '1.5' is not an integer$"):
        parse_episode(row, "here line 9")


def test_an_older_progress_file_reads_under_todays_names(tmp_path: Path) -> None:
    (tmp_path / "progress.csv").write_text(
        "wall_time,elapsed_s,env_steps,episodes,successes,recent_success_rate,update_calls,gradient_steps,"
        "updates_per_s,policy_version,buffer_transitions\n"
        "100.0,1.0,64,2,1,0.5,3,6,2.5,1,64\n"
    )
    (row,) = read_progress(tmp_path).rows
    assert row.gradient_steps_per_s == 2.5 and row.gradient_steps == 6
    assert row.idle_fraction is None and row.recent_online_success_rate is None  # not recorded then
