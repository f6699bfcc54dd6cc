"""A run's log files: their columns in the order written; read back as typed rows (what the learner's ProgressLog
writes reads back whole; a missing or empty file is an empty table; a row that cannot be read is skipped and named
by file, line and column, the rest kept; a progress.csv of an older version (`updates_per_s`) and an episodes.csv
without its task column still read); and the learning curve over episodes.csv: return and success of the latest
online episodes per robot, per task (when there are several) and of all robots, against env steps and wall time,
and where the demonstrations end."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import pytest

from user.buffer.episode_window import RECENT_EPISODES, EpisodeOutcome
from user.learner.checkpoint import LearnerCounters
from user.learner.progress import ProgressLog
from user.learner.run_log import (
    EPISODE_COLUMNS,
    POOLED,
    PROGRESS_COLUMNS,
    CurvePoint,
    EpisodeRow,
    MalformedRowError,
    curves,
    parse_episode,
    read_episodes,
    read_progress,
    started_at,
)
from user.learner.trainer import TrainerCounters

EPISODE_HEADER = (
    "wall_time,elapsed_s,env_steps,robot_id,task,episode_id,steps,episode_return,success,interventions,is_demo\n"
)
OLD_EPISODE_HEADER = EPISODE_HEADER.replace("task,", "")  # episodes.csv before it said each episode's task
RUN_START = 1000.0


def _outcome(robot: str, episode_id: int, ret: float, **kwargs: object) -> EpisodeOutcome:
    fields: dict[str, object] = {"steps": 10, "success": False, "interventions": 0, "is_demo": False, **kwargs}
    return EpisodeOutcome(robot, episode_id, episode_return=ret, **fields)  # type: ignore[arg-type]


def test_the_columns_are_those_written_in_the_order_written() -> None:
    assert tuple(EPISODE_HEADER.strip().split(",")) == EPISODE_COLUMNS
    assert PROGRESS_COLUMNS == (
        "wall_time", "elapsed_s", "env_steps", "episodes", "successes", "recent_success_rate", "update_calls",
        "gradient_steps", "gradient_steps_per_s", "policy_version", "buffer_transitions", "idle_fraction",
        "buffer_wait_fraction", "recent_return_mean", "last_return", "recent_length_mean",
        "recent_online_success_rate", "recent_interventions_mean",
    )  # fmt: skip


def test_rows_the_learner_writes_read_back_whole(tmp_path: Path) -> None:
    log = ProgressLog(tmp_path, plot_every_s=1e9)
    outcomes = [
        _outcome("arm", 0, 9.5, is_demo=True, task="peg"),
        _outcome("arm", 1, -4.25, interventions=3, task="peg"),
        _outcome("cart", 0, 6.0, success=True, steps=7, task="button, v2"),  # a comma: quoted
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
    assert [r.outcome() for r in episodes.rows] == outcomes
    assert [r.env_steps for r in episodes.rows] == [10, 20, 30]
    assert [r.elapsed_s for r in episodes.rows] == pytest.approx([1.0, 2.0, 3.0])
    assert started_at(episodes.rows) == pytest.approx(log.run_start, abs=1e-3) and started_at([]) is None
    first, last = progress.rows
    assert first.recent_return_mean is None and first.idle_fraction == 1.0  # nothing done yet: all idle
    assert (last.env_steps, last.gradient_steps, last.update_calls, last.policy_version) == (30, 40, 5, 4)
    assert (last.gradient_steps_per_s, last.buffer_transitions, last.idle_fraction) == (12.5, 27, 0.25)
    assert last.recent_return_mean == pytest.approx((-4.25 + 6.0) / 2)
    assert None not in asdict(last).values()  # every column written is read


def test_a_missing_file_is_an_empty_table_that_says_so(tmp_path: Path) -> None:
    table = read_episodes(tmp_path)
    assert not table.present and table.rows == [] and table.problems == []
    assert table.present is False and table.path == tmp_path / "episodes.csv"
    (tmp_path / "episodes.csv").write_text("")
    empty = read_episodes(tmp_path)
    assert empty.present and empty.rows == [] and empty.problems == []
    assert empty.path == tmp_path / "episodes.csv"
    (tmp_path / "episodes.csv").write_text(EPISODE_HEADER)
    assert read_episodes(tmp_path).rows == []


def test_a_malformed_row_is_named_by_file_line_and_column_and_the_others_are_kept(tmp_path: Path) -> None:
    (tmp_path / "episodes.csv").write_text(
        EPISODE_HEADER
        + "10.0,1.0,15,arm,peg,0,15,-1.5,0,0,1\n"
        + "11.0,2.0,30,arm,peg,1,15,oops,0,0,0\n"  # line 3: not a number
        + "12.0,3.0,45,arm,peg,2,15,-2.5,yes,0,0\n"  # line 4: not a 0/1 flag
        + "13.0,4.0,60,arm,peg,3,15,-3.5,1,2,0\n"
        + "14.0,5.0,75,arm,peg,4,15,-4"  # line 6: cut mid-row (a run killed while writing)
    )
    table = read_episodes(tmp_path)
    assert [r.episode_id for r in table.rows] == [0, 3]
    assert table.problems == [
        "episodes.csv line 3: column 'episode_return': 'oops' is not a number",
        "episodes.csv line 4: column 'success': 'yes' is not 0 or 1",
        "episodes.csv line 6: column 'success' is missing (the row ends early)",
    ]


def test_bytes_that_are_not_utf8_are_read_as_replacement_characters(tmp_path: Path) -> None:
    (tmp_path / "episodes.csv").write_bytes(EPISODE_HEADER.encode() + b"10.0,1.0,15,arm\xff,,0,15,-1.5,0,0,0\r\n")
    (row,) = read_episodes(tmp_path).rows
    assert row.robot_id == "arm\ufffd"


def test_a_file_the_csv_reader_gives_up_on_keeps_the_rows_before_and_says_why(tmp_path: Path) -> None:
    (tmp_path / "episodes.csv").write_text(
        EPISODE_HEADER
        + "10.0,1.0,15,arm,peg,0,15,-1.5,0,0,0\n"
        + "11.0,2.0,30,"
        + "x" * 200_000
        + ",peg,1,15,-2.5,0,0,0\n"  # a cell over the csv module's size limit
    )
    table = read_episodes(tmp_path)
    assert [r.episode_id for r in table.rows] == [0]
    (problem,) = table.problems
    assert problem.startswith("episodes.csv: cannot be read (field larger than field limit")


def test_parse_episode_raises_a_typed_error_naming_where(tmp_path: Path) -> None:
    row = dict.fromkeys(EPISODE_HEADER.strip().split(","), "1")
    row["env_steps"] = "1.5"
    with pytest.raises(MalformedRowError, match=r"^here line 9: column 'env_steps': '1.5' is not an integer$"):
        parse_episode(row, "here line 9")


def test_an_older_episodes_file_reads_with_no_task_and_a_row_cut_before_its_task_is_named(tmp_path: Path) -> None:
    (tmp_path / "episodes.csv").write_text(OLD_EPISODE_HEADER + "10.0,1.0,15,arm,0,15,-1.5,1,2,0\n")
    (row,) = read_episodes(tmp_path).rows
    assert row == EpisodeRow(wall_time=10.0, elapsed_s=1.0, env_steps=15, robot_id="arm", task="", episode_id=0,
                             steps=15, episode_return=-1.5, success=True, interventions=2, is_demo=False)  # fmt: skip
    (tmp_path / "episodes.csv").write_text(EPISODE_HEADER + "10.0,1.0,15,arm,peg,0,15,-1.5,1,2,0\n11.0,2.0,30,arm\n")
    table = read_episodes(tmp_path)
    assert [r.task for r in table.rows] == ["peg"]
    assert table.problems == ["episodes.csv line 3: column 'task' is missing (the row ends early)"]


def test_an_older_progress_file_reads_under_todays_names(tmp_path: Path) -> None:
    (tmp_path / "progress.csv").write_text(
        "wall_time,elapsed_s,env_steps,episodes,successes,recent_success_rate,update_calls,gradient_steps,"
        "updates_per_s,policy_version,buffer_transitions\n"
        "100.0,1.0,64,2,1,0.5,3,6,2.5,1,64\n"
    )
    (row,) = read_progress(tmp_path).rows
    assert row.gradient_steps_per_s == 2.5 and row.gradient_steps == 6
    assert row.idle_fraction is None and row.recent_online_success_rate is None  # not recorded then


def test_a_malformed_progress_row_is_named_by_file_line_and_column(tmp_path: Path) -> None:
    header = ",".join(PROGRESS_COLUMNS[:11])
    (tmp_path / "progress.csv").write_text(f"{header}\n100.0,1.0,64,2,1,0.5,3,6,2.5,1,64\n101.0,2.0,x\n")
    table = read_progress(tmp_path)
    assert [r.env_steps for r in table.rows] == [64]
    assert table.problems == ["progress.csv line 3: column 'env_steps': 'x' is not an integer"]


def _line(
    env_steps: int, elapsed: float, robot: str, ret: float, *, success: int = 0, demo: int = 0, task: str = "peg"
) -> str:
    """A line of episodes.csv."""
    cells = (RUN_START + elapsed, elapsed, env_steps, robot, task, 0, 5, ret, success, 0, demo)
    return ",".join(map(str, cells)) + "\r\n"


def test_the_curve_has_a_line_per_robot_and_for_all_robots_and_marks_where_demos_end(tmp_path: Path) -> None:
    (tmp_path / "episodes.csv").write_text(
        EPISODE_HEADER
        + _line(5, 1.0, "arm", 50.0, success=1, demo=1)
        + _line(10, 2.0, "arm", 40.0, success=1, demo=1)  # the demonstrations end here
        + _line(15, 3.0, "arm", -10.0)
        + _line(20, 4.5, "cart", 2.0, success=1)
        + "1005.0,5.0,25,arm\r\n"  # cut short by a kill, the rows after it appended by the resumed run: skipped
        + _line(30, 6.0, "arm", -6.0, success=1),
        newline="",
    )
    data = curves(read_episodes(tmp_path).rows, window=2)
    arm, cart, pooled = data.series
    assert (arm.label, cart.label, pooled.label) == ("arm", "cart", POOLED)
    assert data.demo_end == CurvePoint(10, 2.0)
    assert arm.at == [CurvePoint(15, 3.0), CurvePoint(30, 6.0)]  # online episodes only: demos left out
    assert arm.mean_return == [-10.0, -8.0] and arm.success_rate == [0.0, 0.5]
    assert cart.at == [CurvePoint(20, 4.5)] and cart.mean_return == [2.0]
    assert [a.env_steps for a in pooled.at] == [15, 20, 30]
    assert pooled.mean_return == [-10.0, -4.0, -2.0]  # a window of 2: (2 - 6) / 2 at the end
    assert pooled.success_rate == [0.0, 0.5, 1.0]


def _episode(robot: str, episode_id: int, env_steps: int, ret: float, **kwargs: object) -> EpisodeRow:
    fields: dict[str, object] = {"steps": 10, "success": False, "interventions": 0, "is_demo": False, **kwargs}
    return EpisodeRow(wall_time=1000.0 + env_steps, elapsed_s=float(env_steps), env_steps=env_steps, robot_id=robot,
                      episode_id=episode_id, episode_return=ret, **fields)  # type: ignore[arg-type]  # fmt: skip


EPISODES = [
    _episode("arm", 0, 10, 50.0, is_demo=True, success=True),
    _episode("arm", 1, 20, -4.0, interventions=4),
    _episode("cart", 0, 30, 6.0, success=True, steps=20),
    _episode("arm", 2, 40, -2.0, interventions=1),
]


def test_curves_have_a_series_per_robot_then_all_robots_and_mark_the_demos_end() -> None:
    data = curves(EPISODES, window=2)
    assert [s.label for s in data.series] == ["arm", "cart", POOLED] and data.window == 2
    arm, cart, pooled = data.series
    assert [a.env_steps for a in arm.at] == [20, 40] and arm.mean_return == [-4.0, -3.0]
    assert cart.success_rate == [1.0]
    assert pooled.mean_return == [-4.0, 1.0, 2.0]  # the latest 2 online episodes of all robots
    assert data.demo_end is not None and data.demo_end.env_steps == 10


def test_without_online_episodes_the_pooled_series_is_there_only_when_asked_for() -> None:
    assert curves(EPISODES[:1]).series == []  # demonstrations only: nothing learned to draw (the report)
    (pooled,) = curves(EPISODES[:1], pooled_when_empty=True).series  # learning_curve.png: an empty line
    assert pooled.label == POOLED and pooled.at == []


def test_without_demonstrations_there_is_no_mark() -> None:
    assert curves(EPISODES[1:]).demo_end is None


def test_the_demos_end_at_the_latest_demonstration_and_the_window_is_the_recent_one() -> None:
    again = replace(_episode("cart", 5, 10, 1.0, is_demo=True), elapsed_s=50.0)  # at the first one's env steps
    data = curves([*EPISODES, again])
    assert data.demo_end == CurvePoint(10, 50.0) and data.window == RECENT_EPISODES
    assert data.series[-1].label == "all robots"


TASK_EPISODES = [
    replace(_episode("arm", 0, 10, 50.0, is_demo=True, success=True), task="peg"),
    replace(_episode("arm", 1, 20, -4.0, success=True), task="peg"),
    replace(_episode("cart", 0, 30, 6.0), task="button"),
    replace(_episode("arm", 2, 40, -2.0), task="peg"),
    replace(_episode("arm", 3, 50, 8.0, success=True), task="button"),  # a robot that changed task
]


def test_episodes_of_several_tasks_have_a_series_per_task_between_the_robots_and_all_robots() -> None:
    data = curves(TASK_EPISODES, window=2)
    assert [s.label for s in data.series] == ["arm", "cart", "task button", "task peg", POOLED]
    assert [s.task for s in data.series] == [None, None, "button", "peg", None]
    _, _, button, peg, pooled = data.series
    assert [a.env_steps for a in peg.at] == [20, 40] and peg.mean_return == [-4.0, -3.0]
    assert peg.success_rate == [1.0, 0.5]
    assert [a.env_steps for a in button.at] == [30, 50] and button.mean_return == [6.0, 7.0]
    assert button.success_rate == [0.0, 0.5]
    assert pooled.mean_return == [-4.0, 1.0, 2.0, 3.0]  # every task's: the latest 2 online episodes of all robots


def test_a_demonstration_of_a_second_task_is_enough_for_series_per_task() -> None:
    """Demonstrations show which tasks the policy is trained on; the task with none online has no series yet."""
    data = curves([*TASK_EPISODES[:2], replace(TASK_EPISODES[2], is_demo=True)], window=2)  # button: a demo only
    assert [s.label for s in data.series] == ["arm", "task peg", POOLED]
    assert [s.label for s in curves([*TASK_EPISODES[:2], TASK_EPISODES[3]], window=2).series] == ["arm", POOLED]
