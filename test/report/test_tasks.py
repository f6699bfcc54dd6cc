"""A run with one learner per task (issue 36, item 4): the report finds each learner's directory, shows the tasks
side by side with each one's time to 80 % success (counted only once the recent window is full), writes each
task's own report and links it, and does not call the learners' files missing at the top. A run with one learner
trained on several tasks: its episodes split by task, shown side by side in the same way, within its own report."""

from __future__ import annotations

import re
from pathlib import Path

from user.learner.csv_log import CsvLog
from user.learner.run_log import EPISODE_COLUMNS, EPISODES_CSV, POOLED
from user.report.overview import report_data
from user.report.run_dir import load_run
from user.report.tasks import TaskFigures, reached_s, task_figures
from user.report.write import write_report
from user.runtime.status import write_status

START = 1_700_000_000.0


def _episodes(task_dir: Path, robot: str, outcomes: list[bool], demos: int = 5) -> None:
    """`demos` demonstrations, then one online episode every 10 s with these outcomes."""
    task_dir.mkdir(parents=True)
    log = CsvLog(task_dir / EPISODES_CSV, EPISODE_COLUMNS)
    for i in range(demos + len(outcomes)):
        demo = i < demos
        log.append(
            {
                "wall_time": f"{START + 10.0 * (i + 1):.3f}",
                "elapsed_s": f"{10.0 * (i + 1):.3f}",
                "env_steps": 50 * (i + 1),
                "robot_id": robot,
                "episode_id": i,
                "steps": 50,
                "episode_return": "1.0",
                "success": int(demo or outcomes[i - demos]),
                "interventions": 0,
                "is_demo": int(demo),
            }
        )
    log.close()


def _two_task_run(tmp_path: Path) -> Path:
    run = tmp_path / "multi_task"
    (run / "logs").mkdir(parents=True)
    (run / "deployment.yaml").write_text("name: multi_task\nnodes: []\n")
    write_status("stopped", "", run / "logs" / "learner_peg.status")
    # peg: 10 successes at once (a window of 10 is not yet full), then 10 failures, then successes: the window of
    # 20 first holds 16 successes (80 %) at online episode 36 (2 demos + 36 online = 38th row: 380 s)
    _episodes(run / "peg", "franka_left", [True] * 10 + [False] * 10 + [True] * 16 + [True] * 4, demos=2)
    _episodes(run / "button", "franka_right", [True, False] * 20)  # 50 %: never reached
    (run / "robots").mkdir()  # a directory that is no task
    return run


def test_the_tasks_are_found_and_the_top_does_not_call_the_learners_files_missing(tmp_path: Path) -> None:
    run = _two_task_run(tmp_path)
    loaded = load_run(run)
    assert loaded.task_dirs == [run / "button", run / "peg"]
    assert not any("episodes.csv" in n or "progress.csv" in n or "buffer" in n for n in loaded.notes), loaded.notes
    data = report_data(loaded)
    assert [t.run.name for t in data.tasks] == ["button", "peg"]
    assert all(t.run.config_text == "name: multi_task\nnodes: []\n" for t in data.tasks)  # the deployment's
    assert [n.name for n in data.tasks[1].run.nodes] == ["learner_peg"]


def test_each_tasks_time_to_success_counts_from_a_full_window(tmp_path: Path) -> None:
    data = report_data(load_run(_two_task_run(tmp_path)))
    button, peg = data.tasks
    assert reached_s(peg) == 380.0  # not 30 s, when 10 of 10 had succeeded
    assert reached_s(button) is None
    figures = task_figures(peg)
    assert (figures.robots, figures.online_episodes, figures.demo_episodes) == ("franka_left", 40, 2)
    assert figures.reached_episodes == 36 and task_figures(button).reached_episodes is None
    assert figures.recent_success == 1.0
    assert task_figures(button).recent_success == 0.5


def test_the_report_shows_the_tasks_side_by_side_and_links_each_tasks_own(tmp_path: Path) -> None:
    run = _two_task_run(tmp_path)
    files = write_report(run)
    page = files.html.read_text()
    assert '<section id="tasks">' in page and '<section id="learning-curves">' not in page
    assert "<td>peg</td><td>franka_left</td>" in page and "<td>380 s</td><td class=n>36</td>" in page, page
    assert "<td>button</td><td>franka_right</td>" in page and "<td>not reached</td>" in page
    assert '<a href="peg/report.html">peg</a>' in page and '<a href="button/report.html">button</a>' in page
    assert files.png is not None and files.png.read_bytes().startswith(b"\x89PNG")
    for task, robot in (("peg", "franka_left"), ("button", "franka_right")):
        own = (run / task / "report.html").read_text()
        assert f"<td>{robot}</td>" in own and '<section id="learning-curves">' in own
    assert any(line.startswith("peg: progress.csv is missing") for line in files.notes), files.notes


def _one_learner_run(tmp_path: Path) -> Path:
    """One learner's episodes.csv, a row every 10 s: demonstrations of peg and button, then online episodes of
    peg (franka_left) and button (franka_right) in turn. Peg: 10 successes, 10 failures, 20 successes: its window
    of 20 first holds 16 successes at its online episode 36, row 2 * 36 + 2 (from 0): 750 s. Button: 4 failures,
    then successes: 16 of its first 20 (a full window), row 2 * 20 + 3: 440 s."""
    run = tmp_path / "one_learner"
    run.mkdir()
    (run / "deployment.yaml").write_text("name: one_learner\nnodes: []\n")
    peg = [True] * 10 + [False] * 10 + [True] * 20
    button = [False] * 4 + [True] * 36
    rows = [("franka_left", "peg", True, True), ("franka_right", "button", True, True)] * 2
    for p, b in zip(peg, button, strict=True):
        rows += [("franka_left", "peg", p, False), ("franka_right", "button", b, False)]
    log = CsvLog(run / EPISODES_CSV, EPISODE_COLUMNS)
    for i, (robot, task, success, demo) in enumerate(rows):
        log.append(
            {
                "wall_time": f"{START + 10.0 * (i + 1):.3f}",
                "elapsed_s": f"{10.0 * (i + 1):.3f}",
                "env_steps": 50 * (i + 1),
                "robot_id": robot,
                "task": task,
                "episode_id": i,
                "steps": 50,
                "episode_return": "1.0",
                "success": int(success),
                "interventions": 0,
                "is_demo": int(demo),
            }
        )
    log.close()
    return run


def test_one_learners_episodes_of_two_tasks_are_each_tasks_with_its_time_to_success(tmp_path: Path) -> None:
    data = report_data(load_run(_one_learner_run(tmp_path)))
    assert not data.learner_per_task and [t.name for t in data.tasks] == ["button", "peg"]
    assert [s.label for s in data.curves.series] == ["franka_left", "franka_right", "task button", "task peg", POOLED]
    button, peg = (task_figures(t) for t in data.tasks)
    assert peg == TaskFigures("peg", "franka_left", 40, 2, 1.0, 750.0, 36, None, None)
    assert button == TaskFigures("button", "franka_right", 40, 2, 1.0, 440.0, 20, None, None)
    assert all(t.tasks == [] for t in data.tasks)


def test_one_learners_report_shows_its_tasks_side_by_side_within_its_own_sections(tmp_path: Path) -> None:
    run = _one_learner_run(tmp_path)
    files = write_report(run)
    page = files.html.read_text()
    assert re.findall(r'<section id="([a-z-]+)">', page) == [
        "overview", "missing", "learning-curves", "tasks", "robots", "pipeline", "buffer", "nodes", "configuration",
    ]  # fmt: skip
    tasks = page.split('<section id="tasks">', 1)[1].split("</section>", 1)[0]
    assert (
        "<td>peg</td><td>franka_left</td><td>40 online, 2 demonstrations</td><td>100%</td><td>750 s</td>"
        "<td class=n>36</td><td>-</td><td>-</td>" in tasks
    ), tasks
    assert "<td>button</td><td>franka_right</td>" in tasks and "<td>440 s</td><td class=n>20</td>" in tasks
    assert "One learner trains one policy on every task" in tasks and "<a href" not in tasks
    assert sorted(p.name for p in run.iterdir()) == ["deployment.yaml", "episodes.csv", "report.html", "report.png"]
