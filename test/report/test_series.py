"""What the report computes from a run's rows: per-robot rates over online episodes only (demonstrations counted
apart), each online episode's intervened steps in stored order, and the learner's timing with rows that lack a
figure (the curves: test/learner/test_run_log.py)."""

from __future__ import annotations

import pytest

from user.learner.run_log import EpisodeRow, ProgressRow
from user.report.series import interventions, robot_rates, timing


def _episode(robot: str, episode_id: int, env_steps: int, ret: float, **kwargs: object) -> EpisodeRow:
    fields: dict[str, object] = {"steps": 10, "success": False, "interventions": 0, "is_demo": False, **kwargs}
    return EpisodeRow(wall_time=1000.0 + env_steps, elapsed_s=float(env_steps), env_steps=env_steps, robot_id=robot,
                      episode_id=episode_id, episode_return=ret, **fields)  # type: ignore[arg-type]  # fmt: skip


def _progress(wall: float, env_steps: int, gradient_steps: int, idle: float | None) -> ProgressRow:
    return ProgressRow(wall_time=wall, elapsed_s=wall - 100.0, env_steps=env_steps, episodes=0, successes=0,
                       update_calls=gradient_steps, gradient_steps=gradient_steps, gradient_steps_per_s=2.0,
                       policy_version=gradient_steps // 10, buffer_transitions=env_steps, idle_fraction=idle,
                       recent_return_mean=None, recent_online_success_rate=None)  # fmt: skip


EPISODES = [
    _episode("arm", 0, 10, 50.0, is_demo=True, success=True),
    _episode("arm", 1, 20, -4.0, interventions=4),
    _episode("cart", 0, 30, 6.0, success=True, steps=20),
    _episode("arm", 2, 40, -2.0, interventions=1),
]


def test_rates_are_over_online_episodes_with_demonstrations_apart() -> None:
    arm, cart = robot_rates(EPISODES)
    assert (arm.robot_id, arm.demo_episodes, arm.online_episodes, arm.online_successes) == ("arm", 1, 2, 0)
    assert arm.success_rate == 0.0 and arm.intervention_rate == pytest.approx(5 / 20)
    assert arm.intervened_episodes == 2
    assert (cart.success_rate, cart.intervention_rate, cart.online_steps) == (1.0, 0.0, 20)
    (only_demo,) = robot_rates(EPISODES[:1])
    assert only_demo.success_rate is None and only_demo.intervention_rate is None


def test_timing_from_the_run_start_and_idle_only_where_recorded() -> None:
    t = timing([_progress(101.0, 0, 0, None), _progress(103.0, 50, 40, 0.25)], run_start=100.0)
    assert t.seconds == [1.0, 3.0] and t.policy_version == [0, 4]
    assert t.idle_recorded == [(3.0, 0.25)]
    assert t.updates_per_step == pytest.approx(40 / 50)
    assert timing([], None).updates_per_step is None


def test_intervened_steps_per_online_episode_in_stored_order() -> None:
    """HG-DAgger's measure: a person corrects less as the policy learns; the first and last windows compare."""
    rows = [_episode("arm", 0, 5, 0.0, is_demo=True, interventions=9)]  # a demonstration: not counted
    rows += [_episode("arm" if i % 2 else "cart", i + 1, 10 * (i + 1), 0.0, interventions=12 - i) for i in range(12)]
    series = interventions(rows)
    assert series.steps == [12 - i for i in range(12)]
    assert series.robot_ids[:2] == ["cart", "arm"]
    first, last = series.first_and_last(10)  # type: ignore[misc]
    assert first == pytest.approx(sum(range(3, 13)) / 10) and last == pytest.approx(sum(range(1, 11)) / 10)
    assert series.first_and_last(13) is None
    assert series.moving_mean(3)[:4] == pytest.approx([12.0, 11.5, 11.0, 10.0])
