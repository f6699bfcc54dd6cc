"""bench/vla_hg_dagger.py (issue 35's acceptance): its figures from a run's episodes.csv: demonstrations apart, the
mean intervened steps of the first and last 10 online episodes, the success of the last 20, the curve per 10."""

from __future__ import annotations

from pathlib import Path

import pytest

from test.helpers.bench_scripts import load

HEADER = "wall_time,elapsed_s,env_steps,robot_id,episode_id,steps,episode_return,success,interventions,is_demo\n"


def _run(tmp_path: Path, online: list[tuple[int, bool]]) -> Path:
    lines = [f"{1000 + i},{i},{10 * i},arm,{i},100,-1.0,True,0,True\n" for i in range(3)]  # demonstrations
    for i, (steps, success) in enumerate(online, start=3):
        lines.append(f"{1000 + i},{10.0 * i},{10 * i},arm,{i},100,-1.0,{success},{steps},False\n")
    (tmp_path / "episodes.csv").write_text(HEADER + "".join(lines))
    return tmp_path


def test_the_figures_of_a_run_that_meets_the_targets(tmp_path: Path) -> None:
    bench = load("vla_hg_dagger")
    online = [(40, False)] * 10 + [(20, True)] * 5 + [(10, True)] * 15  # 30 online episodes
    f = bench.figures(_run(tmp_path, online))
    assert (f.online_episodes, f.demos) == (30, 3)
    assert (f.interventions_first_10, f.interventions_last_10, f.success_last_20) == (40.0, 10.0, 1.0)
    assert f.met and [round(point[1], 1) for point in f.curve] == [40.0, 15.0, 10.0]
    assert [point[2] for point in f.curve] == [0.0, 1.0, 1.0]


def test_a_run_that_misses_either_target_does_not_meet_them(tmp_path: Path) -> None:
    bench = load("vla_hg_dagger")
    slow = [(40, True)] * 10 + [(25, True)] * 20  # interventions fell, but not to half
    assert not bench.figures(_run(tmp_path, slow)).met
    failing = [(40, True)] * 10 + [(5, i % 2 == 0) for i in range(20)]  # 50 % success
    assert not bench.figures(_run(tmp_path, failing)).met
    with pytest.raises(SystemExit, match="only 5 online episodes"):
        bench.figures(_run(tmp_path, [(1, True)] * 5))
