"""Report data made in memory: the rows and buffer figures of a long run, without running one."""

from __future__ import annotations

from pathlib import Path

from user.buffer.info import BufferInfo
from user.learner.run_log import EpisodeRow, ProgressRow, Table
from user.report.buffer_summary import BufferSummary, RobotComposition
from user.report.overview import ReportData, report_data
from user.report.run_dir import RunData

ROBOTS = ["arm_a", "arm_b", "franka_left", "franka_right"]
# The report page's sections (their ids), in order, as user.report.page's docstring lists them.
SECTIONS = ("overview", "missing", "learning-curves", "robots", "pipeline", "buffer", "nodes", "configuration")


def long_run(tmp_path: Path) -> ReportData:
    """An hour of four robots with returns in the millions and 252,492 transitions in the buffer (its learner's
    last progress row, written a while before, counted fewer)."""
    episodes, progress = [], []
    for i in range(400):
        episodes.append(EpisodeRow(wall_time=1000.0 + 9 * i, elapsed_s=9.0 * i, env_steps=633 * i,
                                   robot_id=ROBOTS[i % len(ROBOTS)], episode_id=i, steps=63,
                                   episode_return=-12345.6 * i, success=i % 4 == 0, interventions=i % 5,
                                   is_demo=i < 40))  # fmt: skip
        progress.append(ProgressRow(wall_time=1000.0 + 9 * i, elapsed_s=9.0 * i, env_steps=633 * i, episodes=i,
                                    successes=i // 4, update_calls=10 * i, gradient_steps=12000 * i,
                                    gradient_steps_per_s=1234.4, policy_version=i, buffer_transitions=630 * i,
                                    idle_fraction=0.5, recent_return_mean=None,
                                    recent_online_success_rate=None))  # fmt: skip
    run = RunData(tmp_path / "default", Table(tmp_path / "episodes.csv", True, episodes),
                  Table(tmp_path / "progress.csv", True, progress))  # fmt: skip
    info = BufferInfo(str(tmp_path / "default" / "buffer"), transitions=252_492, episodes=400, demo_transitions=25_200,
                      intervened_transitions=8000, success_rate=0.25, online_success_rate=0.2, segments_closed=100,
                      segments_open=1, bytes_on_disk=123_456_789)  # fmt: skip
    robots = {r: RobotComposition(100, 10, 6300, 56_823, 2000) for r in ROBOTS}
    run.buffer = BufferSummary(info, robots, 100_000_000, 23_456_789)
    return report_data(run)
