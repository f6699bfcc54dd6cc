"""bench/multi_task.py (issue 36, item 4): config/multi_task.yaml splits into its tasks, every node in exactly one;
each task alone and both together pass the checks `user bringup` makes; the figures are read from a run directory
as the report reads them, and the ratio together / alone decides the target."""

from __future__ import annotations

from pathlib import Path

import yaml

from test.helpers.bench_scripts import load
from test.report.test_tasks import _two_task_run
from user.deploy.deployment import load as load_deployment
from user.deploy.node_params import check_node_params
from user.deploy.run_dir import bind


def test_the_deployment_splits_into_its_tasks_every_node_in_one() -> None:
    bench = load("multi_task")
    deployment = yaml.safe_load(bench.CONFIG.read_text())
    groups = bench.task_nodes(deployment)
    assert groups == {
        "peg": {"learner_peg", "rollout_peg", "expert_left", "franka_left", "monitor_peg"},
        "button": {"learner_button", "rollout_button", "expert_right", "franka_right", "monitor_button"},
    }
    assert groups["peg"] | groups["button"] == {n["name"] for n in deployment["nodes"]}


def test_each_task_alone_and_both_together_pass_the_checks(tmp_path: Path) -> None:
    bench = load("multi_task")
    for tasks in (["peg"], ["button"], ["button", "peg"]):
        deployment = bench.deployment_for(tasks, 600.0)
        learners = [n for n in deployment["nodes"] if n["kind"] == "learner"]
        assert len(learners) == len(tasks)
        assert all(n["params"]["stop_after"] == {"success_rate": 0.8, "wall_time_s": 600.0} for n in learners)
        path = tmp_path / f"{deployment['name']}.yaml"
        path.write_text(yaml.safe_dump(deployment))
        check_node_params(bind(load_deployment(path), tmp_path / "run"), path)


def test_the_figures_come_from_the_run_directory_and_decide_the_target(tmp_path: Path, capsys: object) -> None:
    bench = load("multi_task")
    found = {r.task: r for r in bench.results(_two_task_run(tmp_path))}
    assert found["peg"].reached_s == 380.0 and found["button"].reached_s is None
    alone = {"peg": bench.TaskResult("peg", 300.0, 30, 40, 0.8, None, None)}
    assert bench.slower(alone["peg"], found["peg"]) == 380.0 / 300.0
    assert bench.report(alone, {"peg": found["peg"]})  # 1.27x: within 1.3x
    assert not bench.report({"peg": bench.TaskResult("peg", 290.0, 30, 40, 0.8, None, None)}, {"peg": found["peg"]})
    assert not bench.report(alone, found)  # button reached neither alone nor together


def test_the_one_policy_run_passes_the_checks_and_its_tasks_match_the_alone_runs(tmp_path: Path) -> None:
    bench = load("multi_task")
    assert bench.robot_tasks(yaml.safe_load(bench.CONFIG.read_text())) == {
        "peg": "peg_insertion",
        "button": "button_press",
    }
    deployment = bench.one_policy_deployment(600.0)
    learners = [n for n in deployment["nodes"] if n["kind"] == "learner"]
    assert len(learners) == 1 and learners[0]["params"]["learning"]["tasks"] == ["peg_insertion", "button_press"]
    assert learners[0]["params"]["stop_after"] == {"success_rate": 0.8, "wall_time_s": 600.0}
    path = tmp_path / "one_policy.yaml"
    path.write_text(yaml.safe_dump(deployment))
    check_node_params(bind(load_deployment(path), tmp_path / "run"), path)
