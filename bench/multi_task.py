"""Two tasks learning at once against each alone (issue 36's multi-task acceptance): every task of
config/multi_task.yaml (peg insertion on the left FR3, button press on the right, one learner per task) first runs
alone (the deployment's nodes of that task only), then all run together in one deployment; one after the other on
this machine. Each learner stops at 80 % success of its last 20 online episodes (`stop_after.success_rate`) or
after `--cap-s`. Printed per task: its time to 80 % success from its learner's start alone and together (read from
its run directory the way `user report` reads it: the first online episode after which a full window of 20
succeeded at 80 % or more), and the ratio together / alone (target <= 1.3).

With `--one-policy` "together" is config/multi_task_one_policy.yaml instead: ONE learner trains one policy
conditioned on the task on both arms (its run stops once every task's last 20 online episodes reached 80 %), and
each task's time to 80 % is read from that learner's episodes of the task.

Run: python3 bench/multi_task.py [--cap-s 900] [--only alone|together] [--tasks peg,button] [--one-policy]
                                 [--out DIR] [--keep] [--json PATH]
     python3 bench/multi_task.py --runs DIR   (only the figures of runs made before: DIR/<task>, DIR/together or
                                               DIR/one_policy)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from bringup import REPO, Bringup
from user.report.overview import report_data
from user.report.run_dir import load_run
from user.report.tasks import task_figures

CONFIG = REPO / "config" / "multi_task.yaml"
ONE_POLICY_CONFIG = REPO / "config" / "multi_task_one_policy.yaml"
TARGET_RATIO = 1.3  # together / alone, per task
TOGETHER = "together"
ONE_POLICY = "one_policy"


@dataclass
class TaskResult:
    task: str
    reached_s: float | None  # from the learner's start to 80 % success; None: not within the cap
    reached_episodes: int | None  # online episodes by then
    online_episodes: int
    recent_success: float | None  # of the last 20 online episodes at the end
    env_steps: int | None
    gradient_steps: int | None


def task_of(learner: dict[str, Any]) -> str:
    """A task's name: its learner's run sub-directory ({run_dir}/<task>)."""
    return Path(str(learner["params"]["run_dir"])).name


def task_nodes(deployment: dict[str, Any]) -> dict[str, set[str]]:
    """Task -> the names of its nodes: its learner, the rollouts taking its weights, its robots, and the experts and
    monitors of those robots."""
    nodes = deployment["nodes"]
    groups: dict[str, set[str]] = {}
    for learner in (n for n in nodes if n["kind"] == "learner"):
        p = learner["params"]
        robots = set(p["robots"])
        group = {learner["name"]}
        for node in nodes:
            if belongs(node, p["learner_id"], robots):
                group.add(node["name"])
        groups[task_of(learner)] = group
    return groups


def belongs(node: dict[str, Any], learner_id: str, robots: set[str]) -> bool:
    """A rollout taking the learner's weights, a robot or an expert of its robots, a monitor of its robots only."""
    q = node.get("params", {})
    kind = node["kind"]
    if kind == "rollout":
        return bool(q.get("weights_publisher") == learner_id)
    if kind in ("robot", "expert"):
        return q.get("robot_id") in robots
    return kind == "monitor" and set(q.get("robots", [])) <= robots


def deployment_for(tasks: list[str], cap_s: float) -> dict[str, Any]:
    """config/multi_task.yaml with only the nodes of `tasks`, each learner stopping at 80 % success or `cap_s`."""
    deployment: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    keep = set().union(*(task_nodes(deployment)[t] for t in tasks))
    deployment["nodes"] = [n for n in deployment["nodes"] if n["name"] in keep]
    for node in deployment["nodes"]:
        if node["kind"] == "learner":
            node["params"]["stop_after"] = {"success_rate": 0.8, "wall_time_s": cap_s}
    deployment["name"] = "_".join(tasks)
    return deployment


def robot_tasks(deployment: dict[str, Any]) -> dict[str, str]:
    """Learner run sub-directory (config/multi_task.yaml's task name) -> the task its robots do."""
    does = {n["params"]["robot_id"]: n["params"]["task"] for n in deployment["nodes"] if n["kind"] == "robot"}
    return {task_of(n): does[n["params"]["robots"][0]] for n in deployment["nodes"] if n["kind"] == "learner"}


def one_policy_deployment(cap_s: float) -> dict[str, Any]:
    """config/multi_task_one_policy.yaml, its learner stopping once every task reached 80 % (or at `cap_s`)."""
    deployment: dict[str, Any] = yaml.safe_load(ONE_POLICY_CONFIG.read_text())
    for node in deployment["nodes"]:
        if node["kind"] == "learner":
            node["params"]["stop_after"] = {"success_rate": 0.8, "wall_time_s": cap_s}
    return deployment


def results(run: Path, names: dict[str, str] | None = None) -> list[TaskResult]:
    """Each task's figures from the run directory `run` (the report's reading); `names` renames tasks (a learner's
    run sub-directory -> the task its robots do)."""
    found = []
    for task in report_data(load_run(run)).tasks:
        f = task_figures(task)
        found.append(
            TaskResult(
                (names or {}).get(f.task, f.task),
                f.reached_s,
                f.reached_episodes,
                f.online_episodes,
                f.recent_success,
                f.env_steps,
                f.gradient_steps,
            )
        )
    return found


def run_deployment(deployment: dict[str, Any], run: Path, cap_s: float) -> None:
    config = run.with_suffix(".yaml")
    run.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(deployment, sort_keys=False))
    print(f"[{deployment['name']}] user bringup {config} --run-dir {run}", flush=True)
    bringup = Bringup(config, run, run.with_suffix(".log"))
    deadline = time.monotonic() + cap_s + 300.0  # the learners stop themselves; this only guards a hang
    while bringup.alive() and time.monotonic() < deadline:
        time.sleep(2.0)
    bringup.stop_and_report(deployment["name"])


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)


def _seconds(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.0f} s"


def slower(alone: TaskResult | None, together: TaskResult | None) -> float | None:
    """Time to 80 % together / alone; None unless both reached it."""
    if alone is None or together is None or alone.reached_s is None or together.reached_s is None:
        return None
    return together.reached_s / alone.reached_s


def report(alone: dict[str, TaskResult], together: dict[str, TaskResult]) -> bool:
    print(
        "\n| task | time to 80 % alone | together | together / alone | online episodes to 80 % alone / together "
        "| online episodes in all, alone / together |"
    )
    print("|---|---|---|---|---|---|")
    met = True
    for task in sorted(set(alone) | set(together)):
        a, t = alone.get(task), together.get(task)
        ratio = slower(a, t)
        met = met and ratio is not None and ratio <= TARGET_RATIO
        print(
            f"| {task} | {_seconds(a.reached_s if a else None)} | {_seconds(t.reached_s if t else None)} | "
            f"{'-' if ratio is None else f'{ratio:.2f}x'} | {_n(a.reached_episodes if a else None)} / "
            f"{_n(t.reached_episodes if t else None)} | {_n(a.online_episodes if a else None)} / "
            f"{_n(t.online_episodes if t else None)} |"
        )
    print(f"\ntarget: each task together <= {TARGET_RATIO}x its time alone: {'met' if met else 'NOT met'}")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cap-s", type=float, default=900.0, help="each learner stops after this long at most")
    parser.add_argument("--only", choices=("alone", TOGETHER), help="run only the tasks alone, or only together")
    parser.add_argument("--tasks", help="comma-separated tasks to run alone (default: every task)")
    parser.add_argument("--out", type=Path, help="make the runs here (DIR/<task>, DIR/together; kept)")
    parser.add_argument("--runs", type=Path, help="read the figures of runs made before (DIR/<task>, DIR/together)")
    parser.add_argument("--keep", action="store_true", help="keep the run directories")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--one-policy", action="store_true", help="together: one learner, one policy conditioned on the task"
    )
    args = parser.parse_args()
    shipped = yaml.safe_load(CONFIG.read_text())
    names = robot_tasks(shipped)
    tasks = sorted(task_nodes(shipped))
    alone_tasks = args.tasks.split(",") if args.tasks else tasks
    unknown = sorted(set(alone_tasks) - set(tasks))
    if unknown:
        parser.error(f"--tasks: no task {', '.join(unknown)} in {CONFIG.name} (its tasks: {', '.join(tasks)})")
    root = args.runs or args.out or Path(tempfile.mkdtemp(prefix="multi_task_"))
    if args.runs is None:
        if args.only != TOGETHER:
            for task in alone_tasks:
                run_deployment(deployment_for([task], args.cap_s), root / task, args.cap_s)
        if args.only != "alone" and args.one_policy:
            run_deployment(one_policy_deployment(args.cap_s), root / ONE_POLICY, args.cap_s)
        elif args.only != "alone":
            run_deployment(deployment_for(tasks, args.cap_s), root / TOGETHER, args.cap_s)
    alone = {r.task: r for task in tasks if (root / task).is_dir() for r in results(root / task, names)}
    both = root / (ONE_POLICY if args.one_policy else TOGETHER)
    together = {r.task: r for r in results(both, names)} if both.is_dir() else {}
    met = report(alone, together)
    if args.json:
        figures = {"alone": [asdict(r) for r in alone.values()], "together": [asdict(r) for r in together.values()]}
        args.json.write_text(json.dumps({**figures, "met": met}, indent=2))
    if args.runs is None and args.out is None and not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"runs in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
