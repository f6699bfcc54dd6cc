"""What a run writes about its progress: episode returns, lengths, success and interventions of the latest
online episodes in progress.csv and TensorBoard (per robot and pooled, and per task once one policy trains on two
or more), every episode in episodes.csv with its task, gradient steps named as such, and a progress.csv and an
episodes.csv of an older version continued without losing a row."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from test.buffer.factories import episode
from user.buffer import BufferConfig, ReplayBuffer
from user.buffer.episode_window import EpisodeOutcome
from user.interfaces.domain import Transition
from user.learner.checkpoint import LearnerCounters
from user.learner.csv_log import read_rows
from user.learner.progress import ProgressLog
from user.learner.run_log import EPISODE_COLUMNS, PROGRESS_COLUMNS, read_episodes
from user.learner.trainer import TrainerCounters

TRAINER = TrainerCounters(update_calls=5, gradient_steps=40, busy_s=1.0, idle_s=1.0, last={"critic_loss": 0.5})


def _outcome(robot: str, episode_id: int, ret: float, **kwargs: object) -> EpisodeOutcome:
    fields: dict[str, object] = {"steps": 10, "success": False, "interventions": 0, "is_demo": False, **kwargs}
    return EpisodeOutcome(robot, episode_id, episode_return=ret, **fields)  # type: ignore[arg-type]


def _feed(log: ProgressLog) -> None:
    """A demo (return 99, left out), then arm: -4, -2 (len 10, 20) and cart: 6 (a success, 3 interventions)."""
    log.episode(_outcome("arm", 0, 99.0, is_demo=True), env_steps=10, wall=log.run_start + 1.0)
    log.episode(_outcome("arm", 1, -4.0), env_steps=20, wall=log.run_start + 2.0)
    log.episode(_outcome("cart", 0, 6.0, success=True, interventions=3), env_steps=30, wall=log.run_start + 3.0)
    log.episode(_outcome("arm", 2, -2.0, steps=20), env_steps=50, wall=log.run_start + 4.0)


def test_progress_rows_show_how_the_latest_online_episodes_went(tmp_path: Path) -> None:
    log = ProgressLog(tmp_path, plot_every_s=1e9)
    try:
        log.write(1000.0, TRAINER, LearnerCounters(env_steps=0), 0, 0.0)  # no episode yet: empty figures
        _feed(log)
        log.write(1001.0, TRAINER, LearnerCounters(env_steps=50, episodes=4, successes=2), 50, 12.5)
        assert log.recent_values() == {
            "recent_return_mean": 0.0,
            "last_return": -2.0,
            "recent_length_mean": pytest.approx(40 / 3),
            "recent_online_success_rate": pytest.approx(1 / 3),
            "recent_interventions_mean": 1.0,
        }
    finally:
        log.close()
    before, after = read_rows(tmp_path / "progress.csv")
    assert before["recent_return_mean"] == "" and before["last_return"] == ""
    assert (after["recent_return_mean"], after["last_return"], after["recent_online_success_rate"]) == (
        "0",
        "-2",
        "0.333333",
    )
    assert (after["recent_length_mean"], after["recent_interventions_mean"]) == ("13.3333", "1")
    assert (after["env_steps"], after["gradient_steps"], after["gradient_steps_per_s"]) == ("50", "40", "12.500")
    assert "updates_per_s" not in after  # gradient steps are never called updates beside env steps


def test_every_episode_is_a_row_of_episodes_csv(tmp_path: Path) -> None:
    log = ProgressLog(tmp_path, plot_every_s=1e9)
    try:
        _feed(log)
    finally:
        log.close()
    rows = read_rows(tmp_path / "episodes.csv")
    assert [(r["robot_id"], r["episode_id"], r["episode_return"], r["is_demo"]) for r in rows] == [
        ("arm", "0", "99.0", "1"),
        ("arm", "1", "-4.0", "0"),
        ("cart", "0", "6.0", "0"),
        ("arm", "2", "-2.0", "0"),
    ]
    assert [(r["env_steps"], r["elapsed_s"], r["success"], r["interventions"]) for r in rows][2] == (
        "30",
        "3.000",
        "1",
        "3",
    )


def test_tensorboard_has_episode_figures_per_robot_and_pooled_against_env_steps(tmp_path: Path) -> None:
    log = ProgressLog(tmp_path, plot_every_s=1e9)
    try:
        _feed(log)
        log.write(1001.0, TRAINER, LearnerCounters(env_steps=50, episodes=4), 50, 12.5)
    finally:
        log.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()

    def last(tag: str) -> tuple[int, float]:
        event = events.Scalars(tag)[-1]
        return event.step, event.value

    assert last("episodes/pooled/return_mean") == (50, 0.0)
    assert last("episodes/robot/arm/return_mean") == (50, -3.0)
    assert last("episodes/robot/arm/length_mean") == (50, 15.0)
    assert last("episodes/robot/cart/success_rate") == (50, 1.0)
    assert last("episodes/robot/cart/interventions_mean") == (50, 3.0)
    assert last("episodes/pooled/last_return") == (50, -2.0)
    assert last("progress/gradient_steps_per_s") == (50, 12.5) and last("progress/gradient_steps") == (50, 40.0)
    assert "progress/updates_per_s" not in events.Tags()["scalars"]


OLD_COLUMNS = [c if c != "gradient_steps_per_s" else "updates_per_s" for c in PROGRESS_COLUMNS[:12]]


def test_a_progress_csv_of_an_older_version_is_continued_under_todays_columns(tmp_path: Path) -> None:
    path = tmp_path / "progress.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(OLD_COLUMNS)
        writer.writerow(["900.000", "100.000", "7", "1", "0", "0.0", "2", "16", "3.500", "1", "7", "0.5"])
    log = ProgressLog(tmp_path, plot_every_s=1e9)
    try:
        assert log.run_start == 800.0  # the run started when its first row says, not at this resume
        log.write(1000.0, TRAINER, LearnerCounters(env_steps=9), 9, 1.0)
    finally:
        log.close()
    with open(path, newline="", encoding="utf-8") as f:
        assert next(csv.reader(f)) == list(PROGRESS_COLUMNS)
    old, new = read_rows(path)
    assert (old["env_steps"], old["gradient_steps_per_s"], old["recent_return_mean"]) == ("7", "3.500", "")
    assert (new["env_steps"], new["gradient_steps_per_s"]) == ("9", "1.000")


def test_a_resumed_run_continues_elapsed_time_from_the_last_row(tmp_path: Path) -> None:
    """Issue 31: `elapsed_s` restarted at 0 on resume. It goes on from the last row's value: the time the run has
    run, over all its starts (the time it stood still is not counted)."""
    now = [50.0]
    first = ProgressLog(tmp_path, plot_every_s=1e9, clock=lambda: now[0])
    try:
        for wall in (1000.0, 1100.0):
            now[0] += 50.0
            first.write(wall, TRAINER, LearnerCounters(env_steps=5), 5, 0.0)
    finally:
        first.close()
    with open(tmp_path / "progress.csv", "a", encoding="utf-8") as f:
        f.write("1150.000,")  # a row the stop cut short: not whole, not continued from
    now[0] = 9000.0  # another process: its monotonic clock has nothing to do with the first one's
    resumed = ProgressLog(tmp_path, plot_every_s=1e9, clock=lambda: now[0])
    try:
        now[0] += 7.5
        resumed.write(5000.0, TRAINER, LearnerCounters(env_steps=9), 9, 0.0)
    finally:
        resumed.close()
    rows = read_rows(tmp_path / "progress.csv")
    assert [r["elapsed_s"] for r in rows if r["env_steps"]] == ["50.000", "100.000", "107.500"]
    assert resumed.run_start == 950.0  # the run's start is still the first row's


def test_outputs_that_fail_never_stop_the_run_and_come_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by the soak (issue 13): a full disk broke TensorBoard's writer, every stats report raised from then
    on, and the learner published no stats for the rest of the run and failed its stop. A failing output is now
    logged once, the rest are written, and the broken TensorBoard writer is opened anew at the next write."""
    import logging

    from user.learner.csv_log import CsvLog

    log = ProgressLog(tmp_path, plot_every_s=1e9)
    broken_tb = log._tb
    full = OSError(28, "No space left on device")
    real_append = CsvLog.append

    def no_space(self: CsvLog, row: object) -> None:
        raise full

    def dead_writer(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the event writer thread died")

    monkeypatch.setattr(CsvLog, "append", no_space)
    monkeypatch.setattr(broken_tb, "add_scalar", dead_writer)
    with caplog.at_level(logging.ERROR, logger="user.learner.progress"):
        for k in range(3):  # progress.csv fails every time, TensorBoard once: each is reported once
            log.write(1000.0 + k, TRAINER, LearnerCounters(env_steps=k), 0, 0.0)
            log.episode_stored(k)  # no index: nothing to write
    reported = [r.getMessage() for r in caplog.records]
    assert len(reported) == 2, reported
    assert any("progress.csv not written (OSError" in m for m in reported)
    assert any("TensorBoard not written (RuntimeError: the event writer thread died)" in m for m in reported)
    monkeypatch.setattr(CsvLog, "append", real_append)  # space again
    log.write(1010.0, TRAINER, LearnerCounters(env_steps=10), 0, 0.0)
    assert log._tb is not broken_tb  # a new writer
    log.close()
    assert [row["env_steps"] for row in read_rows(tmp_path / "progress.csv")] == ["10"]
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("progress/gradient_steps")] == [1, 2, 10]  # a new writer from write 2 on


def _events(run_dir: Path) -> EventAccumulator:
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    return events


def _feed_tasks(log: ProgressLog) -> None:
    """arm on peg: -4 (a success), -2; cart on button: a demo (99, left out), then 6 with 3 interventions."""
    log.episode(_outcome("arm", 0, -4.0, task="peg", success=True), env_steps=10, wall=log.run_start + 1.0)
    log.episode(_outcome("cart", 0, 99.0, task="button", is_demo=True), env_steps=20, wall=log.run_start + 2.0)
    log.episode(_outcome("cart", 1, 6.0, task="button", interventions=3), env_steps=30, wall=log.run_start + 3.0)
    log.episode(_outcome("arm", 1, -2.0, task="peg", steps=20), env_steps=50, wall=log.run_start + 4.0)


def test_each_episode_row_says_its_task(tmp_path: Path) -> None:
    log = ProgressLog(tmp_path, plot_every_s=1e9)
    try:
        _feed_tasks(log)
    finally:
        log.close()
    rows = read_rows(tmp_path / "episodes.csv")
    assert [(r["robot_id"], r["task"], r["episode_id"]) for r in rows] == [
        ("arm", "peg", "0"),
        ("cart", "button", "0"),
        ("cart", "button", "1"),
        ("arm", "peg", "1"),
    ]


def test_with_two_tasks_each_tasks_window_is_given_and_in_tensorboard(tmp_path: Path) -> None:
    log = ProgressLog(tmp_path, plot_every_s=1e9)
    try:
        log.episode(_outcome("arm", 0, -6.0, task="peg", steps=30), env_steps=5, wall=log.run_start + 0.5)
        assert log.task_figures() == {}  # one task: its window is the pooled one
        log.write(1000.0, TRAINER, LearnerCounters(env_steps=10, episodes=1), 10, 1.0)
        log.episode(_outcome("cart", 0, 99.0, task="button", is_demo=True), env_steps=20, wall=log.run_start + 2.0)
        assert list(log.task_figures()) == ["peg"]  # two tasks stored (one a demo): button has no window yet
        _feed_tasks(log)
        tasks = log.task_figures()
        log.write(1001.0, TRAINER, LearnerCounters(env_steps=50, episodes=6), 50, 12.5)
    finally:
        log.close()
    assert list(tasks) == ["button", "peg"]
    assert (tasks["peg"].episodes, tasks["peg"].mean_return, tasks["peg"].success_rate) == (3, -4.0, 1 / 3)
    assert (tasks["button"].episodes, tasks["button"].mean_interventions) == (1, 3.0)
    events = _events(tmp_path)
    assert [(e.step, e.value) for e in events.Scalars("episodes/task/peg/return_mean")] == [(50, -4.0)]
    assert [(e.step, e.value) for e in events.Scalars("episodes/task/peg/length_mean")] == [(50, 20.0)]
    assert [(e.step, e.value) for e in events.Scalars("episodes/task/button/last_return")] == [(50, 6.0)]
    assert [e.step for e in events.Scalars("episodes/pooled/return_mean")] == [10, 50]


def test_with_one_task_nothing_per_task_is_written(tmp_path: Path) -> None:
    log = ProgressLog(tmp_path, plot_every_s=1e9)
    try:
        _feed(log)  # every episode of task ""
        log.write(1001.0, TRAINER, LearnerCounters(env_steps=50, episodes=4), 50, 12.5)
        assert log.task_figures() == {}
    finally:
        log.close()
    scalars = _events(tmp_path).Tags()["scalars"]
    assert "episodes/pooled/return_mean" in scalars and "episodes/robot/arm/return_mean" in scalars
    assert [t for t in scalars if t.startswith("episodes/task/")] == []


OLD_EPISODE_COLUMNS = [c for c in EPISODE_COLUMNS if c != "task"]


def test_an_episodes_csv_of_an_older_version_is_continued_under_todays_columns(tmp_path: Path) -> None:
    path = tmp_path / "episodes.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(OLD_EPISODE_COLUMNS)
        writer.writerow(["900.000", "100.000", "7", "arm", "3", "7", "-1.5", "1", "0", "0"])
    log = ProgressLog(tmp_path, plot_every_s=1e9)
    try:
        log.episode(_outcome("arm", 4, 2.0, task="peg"), env_steps=9, wall=log.run_start + 1.0)
    finally:
        log.close()
    with open(path, newline="", encoding="utf-8") as f:
        assert next(csv.reader(f)) == list(EPISODE_COLUMNS)
    table = read_episodes(tmp_path)
    assert table.problems == []
    assert [(r.robot_id, r.task, r.episode_id, r.episode_return, r.success) for r in table.rows] == [
        ("arm", "", 3, -1.5, True),  # not recorded then
        ("arm", "peg", 4, 2.0, False),
    ]


def _tasked(robot: str, episode_id: int, task: str, *, demo: bool = False) -> list[Transition]:
    steps = episode(robot, episode_id, 3, images=False, demo=demo, success=not demo)
    return [replace(t, observation=replace(t.observation, task=task)) for t in steps]


def test_a_resumed_run_has_its_tasks_windows_from_the_buffer_at_once(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path / "buffer", BufferConfig(prefetch=0)) as buf:
        buf.add_episode(_tasked("arm", 0, "peg"))
        buf.add_episode(_tasked("cart", 0, "button", demo=True))
        log = ProgressLog(tmp_path, plot_every_s=1e9, index=buf.storage.index, tensorboard=False)
        try:
            figures = log.task_figures()
            buf.add_episode(_tasked("cart", 1, "button"))
            log.episode_stored(env_steps=9)
            after = log.task_figures()
        finally:
            log.close()
    assert list(figures) == ["peg"] and figures["peg"].success_rate == 1.0  # two tasks stored: peg's window
    assert list(after) == ["button", "peg"] and after["button"].episodes == 1
    assert [(r.robot_id, r.task, r.env_steps) for r in read_episodes(tmp_path).rows] == [("cart", "button", 9)]
