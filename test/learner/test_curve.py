"""learning_curve.png's data: return and success of the latest online episodes per robot and of all robots,
against env steps and wall time, the learner's gradient steps/s, and where the demonstrations end."""

from __future__ import annotations

from pathlib import Path

from test.learner.test_progress import _feed
from user.learner.curve import POOLED, CurvePoint, curve_data
from user.learner.progress import ProgressLog

RUN_START = 1000.0


def _episode(
    env_steps: int, elapsed: float, robot: str, ret: float, *, success: int = 0, demo: int = 0
) -> dict[str, str]:
    values = (env_steps, elapsed, robot, 0, 5, ret, success, 0, demo)
    names = ("env_steps", "elapsed_s", "robot_id", "episode_id", "steps", "episode_return", "success")
    return dict(zip((*names, "interventions", "is_demo"), map(str, values), strict=True))


EPISODES = [
    _episode(5, 1.0, "arm", 50.0, success=1, demo=1),
    _episode(10, 2.0, "arm", 40.0, success=1, demo=1),  # the demonstrations end here
    _episode(15, 3.0, "arm", -10.0),
    _episode(20, 4.5, "cart", 2.0, success=1),
    {"env_steps": "25", "elapsed_s": "5.0", "robot_id": "arm"},  # cut short by a kill: skipped
    _episode(30, 6.0, "arm", -6.0, success=1),
]


def test_the_curve_has_a_line_per_robot_and_for_all_robots_and_marks_where_demos_end() -> None:
    progress = [
        {"wall_time": "1002.5", "env_steps": "12", "gradient_steps_per_s": "3.0"},
        {"wall_time": "1007.0", "env_steps": "30", "gradient_steps_per_s": "9.5"},
    ]
    data = curve_data(EPISODES, progress, RUN_START, window=2)
    arm, cart, pooled = data.series
    assert (arm.label, cart.label, pooled.label) == ("arm", "cart", POOLED)
    assert data.demo_end == CurvePoint(10, 2.0)
    assert arm.at == [CurvePoint(15, 3.0), CurvePoint(30, 6.0)]  # online episodes only: demos left out
    assert arm.mean_return == [-10.0, -8.0] and arm.success_rate == [0.0, 0.5]
    assert cart.at == [CurvePoint(20, 4.5)] and cart.mean_return == [2.0]
    assert [a.env_steps for a in pooled.at] == [15, 20, 30]
    assert pooled.mean_return == [-10.0, -4.0, -2.0]  # a window of 2: (2 - 6) / 2 at the end
    assert pooled.success_rate == [0.0, 0.5, 1.0]
    assert data.rate_at == [CurvePoint(12, 2.5), CurvePoint(30, 7.0)] and data.gradient_steps_per_s == [3.0, 9.5]


def test_without_demonstrations_there_is_no_mark() -> None:
    assert curve_data(EPISODES[2:], [], RUN_START).demo_end is None


def test_the_run_draws_its_curve_from_its_episodes(tmp_path: Path) -> None:
    log = ProgressLog(tmp_path, plot_every_s=1e9)
    log.close()
    assert not (tmp_path / "learning_curve.png").exists()  # nothing to draw yet
    log = ProgressLog(tmp_path, plot_every_s=1e9)
    try:
        _feed(log)
        out = log.plot()
    finally:
        log.close()
    assert out == tmp_path / "learning_curve.png" and out.stat().st_size > 0
