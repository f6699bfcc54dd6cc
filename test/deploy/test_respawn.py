"""What a node's exit means (`user.deploy.respawn`), the rules both launchers apply: a configuration error is never
respawned, a clean exit is a finish (never respawned), respawns stop at the limit, the count resets after a healthy
period, a late start is a failure, and a required node gone for good stops the deployment. Driven by a clock of the
test's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from user.deploy.commands import NodeLaunch, launches
from user.deploy.deployment import load
from user.deploy.respawn import NodeLife, Outcome, RunCompletion, Verdict, describe_exit


def _launch(tmp_path: Path, settings: str = "") -> NodeLaunch:
    path = tmp_path / "d.yaml"
    path.write_text(f"name: x\nnodes:\n  - {{name: arm, kind: talker{settings}}}\n")
    (launch,) = launches(load(path))
    return launch


def _life(tmp_path: Path, settings: str = "") -> NodeLife:
    life = NodeLife(_launch(tmp_path, settings))
    life.started(0.0)
    return life


def test_the_new_settings_have_these_defaults(tmp_path: Path) -> None:
    launch = _launch(tmp_path)
    assert (launch.required, launch.respawn_reset_s, launch.start_timeout_s) == (True, 60.0, 120.0)
    assert load(tmp_path / "d.yaml").router.start_timeout_s == 30.0


def test_a_configuration_error_is_never_respawned_and_its_reason_is_in_the_line(tmp_path: Path) -> None:
    life = _life(tmp_path, ", respawn: true, max_respawns: -1")
    verdict = life.exited(2, "node arm: rate_hz: -1.0 is below the minimum 0.0", 5.0)
    assert verdict.outcome is Outcome.GONE and verdict.stops_deployment
    assert verdict.line == (
        "arm exited with code 2 (configuration error): node arm: rate_hz: -1.0 is below the minimum 0.0; "
        "not respawned: the same configuration fails the same way; it is required: stopping the deployment"
    )
    assert life.respawns == 0


def test_an_optional_node_gone_for_good_does_not_stop_the_deployment(tmp_path: Path) -> None:
    verdict = _life(tmp_path, ", required: false").exited(2, "bad", 1.0)
    assert verdict.outcome is Outcome.GONE and not verdict.stops_deployment
    assert verdict.line.endswith("; it is optional: the rest runs on")


def test_respawns_up_to_the_limit_then_gone(tmp_path: Path) -> None:
    life = _life(tmp_path, ", respawn: true, max_respawns: 2, respawn_delay_s: 0.5, respawn_reset_s: 10.0")
    first = life.exited(1, "RuntimeError: boom", 1.0)
    assert first.outcome is Outcome.RESPAWN and first.delay_s == 0.5 and not first.stops_deployment
    assert first.line == "arm exited with code 1 (failed): RuntimeError: boom; respawning in 0.5 s (respawn 1 of 2)"
    life.started(1.5)
    second = life.exited(-9, "", 2.0)
    assert second.outcome is Outcome.RESPAWN and second.line.startswith("arm exited with signal SIGKILL; respawning")
    life.started(2.5)
    third = life.exited(4, "no Zenoh router reachable", 3.0)
    assert third.outcome is Outcome.GONE and third.stops_deployment
    assert "not respawned (gave up after 2 respawns)" in third.line
    assert life.respawns == 2


def test_no_respawn_a_failure_is_gone_a_clean_exit_finished(tmp_path: Path) -> None:
    assert (
        _life(tmp_path)
        .exited(1, "", 1.0)
        .line.endswith("not respawned (respawn is off); it is required: stopping the deployment")
    )
    finished = _life(tmp_path).exited(0, "", 1.0)
    assert finished.outcome is Outcome.FINISHED and not finished.stops_deployment


def test_a_node_that_finished_is_not_respawned_even_with_respawn_set(tmp_path: Path) -> None:
    """Issue 31, item 9d: an expert past its `until_episode` finishes (exit code 0); the default deployment's experts
    have `respawn: true` (for a crash), which must neither start it again nor count its finish as a failure."""
    life = _life(tmp_path, ", respawn: true, max_respawns: -1, respawn_delay_s: 0.0")
    assert life.exited(0, "", 1.0) == Verdict(Outcome.FINISHED, "arm exited with code 0; it finished")
    assert life.respawns == 0
    life.started(2.0)
    assert life.exited(1, "", 3.0).outcome is Outcome.RESPAWN  # a crash is still respawned
    experts = [n for n in launches(load("default")) if n.kind == "expert"]
    assert experts and all(e.respawn for e in experts)
    for expert in experts:
        verdict = NodeLife(expert).exited(0, "", 1.0)
        assert verdict.outcome is Outcome.FINISHED and not verdict.stops_deployment


def test_the_respawn_count_resets_after_a_healthy_period(tmp_path: Path) -> None:
    life = _life(tmp_path, ", respawn: true, max_respawns: 1, respawn_delay_s: 0.0, respawn_reset_s: 5.0")
    assert life.exited(-9, "", 1.0).outcome is Outcome.RESPAWN
    life.started(1.0)
    assert not life.reset_if_healthy(5.9)  # ran 4.9 s: not yet
    assert life.reset_if_healthy(6.0) and life.respawns == 0
    assert not life.reset_if_healthy(7.0)  # nothing left to reset
    assert life.exited(-9, "", 7.0).outcome is Outcome.RESPAWN  # the limit applies afresh
    life.started(7.0)
    assert life.exited(-9, "", 8.0).outcome is Outcome.GONE  # 1 s of running: no reset, the limit of 1 is used up


def test_an_exit_after_a_healthy_period_resets_the_count_itself(tmp_path: Path) -> None:
    """The ROS launch file has no poll loop: the reset happens when the exit is judged."""
    life = _life(tmp_path, ", respawn: true, max_respawns: 1, respawn_reset_s: 5.0")
    life.exited(-9, "", 1.0)
    life.started(2.0)
    verdict = life.exited(-9, "", 7.0)
    assert verdict.outcome is Outcome.RESPAWN and life.respawns == 1


def test_a_late_start_is_overdue_once_and_its_exit_is_a_failure(tmp_path: Path) -> None:
    life = _life(tmp_path, ", start_timeout_s: 3.0, respawn: true, max_respawns: 1, respawn_reset_s: 1.0")
    assert not life.overdue(2.9)
    assert life.overdue(3.0)
    assert not life.overdue(4.0)  # reported once
    assert not life.reset_if_healthy(10.0)  # never ran: nothing healthy about it
    verdict = life.exited(0, "", 10.0)  # it stopped cleanly on the launcher's SIGINT: still a failed start
    assert verdict.outcome is Outcome.RESPAWN
    assert verdict.line.startswith("arm exited with code 0 after it did not report running within 3 s")
    life.started(11.0)
    assert life.reported_running(12.5) == pytest.approx(1.5)
    assert not life.overdue(20.0)


def test_a_late_start_without_respawn_is_gone(tmp_path: Path) -> None:
    life = _life(tmp_path, ", start_timeout_s: 1.0")
    assert life.overdue(1.0)
    assert life.exited(0, "", 2.0).outcome is Outcome.GONE


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (0, "code 0"),
        (1, "code 1 (failed)"),
        (2, "code 2 (configuration error)"),
        (3, "code 3 (shutdown took too long)"),
        (4, "code 4 (something it needs did not answer)"),
        (7, "code 7"),
        (-2, "signal SIGINT"),
        (-9, "signal SIGKILL"),
        (-200, "signal 200"),
        (None, "an unknown status"),
    ],
)
def test_exits_are_described(code: int | None, text: str) -> None:
    assert describe_exit(code) == text


def test_a_life_before_its_first_start(tmp_path: Path) -> None:
    life = NodeLife(_launch(tmp_path, ", start_timeout_s: 1.0"))
    assert (life.respawns, life.started_at, life.running, life.start_overdue) == (0, None, False, False)
    assert not life.overdue(1000.0) and not life.reset_if_healthy(1000.0)
    assert life.reported_running(5.0) == 0.0
    assert life.exited(0, "", 1.0) == Verdict(Outcome.FINISHED, "arm exited with code 0; it finished")


def test_deadlines_count_from_the_start_not_from_zero(tmp_path: Path) -> None:
    life = NodeLife(_launch(tmp_path, ", start_timeout_s: 3.0, respawn: true, respawn_reset_s: 5.0"))
    life.started(10.0)
    assert not life.overdue(12.0) and life.overdue(13.0)
    life.started(20.0)
    assert life.reported_running(21.0) == 1.0 and not life.overdue(30.0)


def test_unlimited_respawns_say_no_limit(tmp_path: Path) -> None:
    life = _life(tmp_path, ", respawn: true, max_respawns: -1, respawn_delay_s: 0.0")
    assert life.exited(1, "", 1.0).line == "arm exited with code 1 (failed); respawning in 0.0 s (respawn 1)"


def test_a_respawned_node_that_never_started_is_not_healthy(tmp_path: Path) -> None:
    life = _life(tmp_path, ", respawn: true, max_respawns: 2, start_timeout_s: 1.0, respawn_reset_s: 1.0")
    assert life.exited(1, "", 0.5).outcome is Outcome.RESPAWN
    life.started(1.0)
    assert life.overdue(2.0)
    assert not life.reset_if_healthy(50.0) and life.respawns == 1  # a node stuck starting is not healthy


@pytest.mark.parametrize("settings", [", respawn: true, max_respawns: -1", ", required: false", ""])
def test_a_completed_run_stops_the_deployment_and_is_never_respawned(tmp_path: Path, settings: str) -> None:
    life = _life(tmp_path, settings)
    verdict = life.exited(5, "2 episodes stored (stop_after.episodes 2)", 9.0)
    assert verdict.outcome is Outcome.COMPLETE and verdict.stops_deployment and life.respawns == 0
    assert verdict.line == (
        "arm exited with code 5 (the run is complete): 2 episodes stored (stop_after.episodes 2); "
        "stopping the deployment"
    )


def test_with_a_learner_per_task_the_run_is_complete_when_every_learner_is(tmp_path: Path) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text(
        "name: x\nnodes:\n"
        "  - {name: learner_a, kind: learner, respawn: true}\n"
        "  - {name: learner_b, kind: learner, respawn: true}\n"
        "  - {name: arm, kind: talker}\n"
    )
    found = launches(load(path))
    completion = RunCompletion.of(found)
    assert completion.learners == ["learner_a", "learner_b"]
    lives = {launch.name: NodeLife(launch, completion) for launch in found}
    for life in lives.values():
        life.started(0.0)
    first = lives["learner_a"].exited(5, "success 0.80 (stop_after.success_rate 0.8)", 9.0)
    assert first.outcome is Outcome.FINISHED and not first.stops_deployment and lives["learner_a"].respawns == 0
    assert first.line == (
        "learner_a exited with code 5 (the run is complete): success 0.80 (stop_after.success_rate 0.8); "
        "the run goes on until learner_b complete too"
    )
    last = lives["learner_b"].exited(5, "", 20.0)
    assert last.outcome is Outcome.COMPLETE and last.stops_deployment
    assert last.line == "learner_b exited with code 5 (the run is complete); stopping the deployment"
