"""Smoke test of bench/learner.py: `--quick` runs end to end and prints every row (timings are never checked)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from test.conftest import REPO

BENCH = REPO / "bench" / "learner.py"
UPDATE_ROWS = [f"{p}, {n} critics, cpu" for p in ("state MLP", "image CNN") for n in (2, 10)]
RATIO_LINES = [
    "cpu   state MLP: 10 vs 2 critics",
    "cpu   image CNN: 10 vs 2 critics",
    "cpu   2 critics: image CNN vs state MLP",
    "cpu   10 critics: image CNN vs state MLP",
]


def run_bench(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow  # ~33 s on the shared 2-core machine; with two torch threads there it took ~5 min under load
@pytest.mark.timeout(600)
def test_quick_run_prints_every_row() -> None:
    proc = run_bench("--quick", "--device", "cpu", "--threads", "1", timeout=590)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "torch threads 1 of" in out and "1 camera 16x16 RGB" in out
    for row in UPDATE_ROWS + RATIO_LINES:
        assert row in out, f"missing {row!r} in:\n{out}"
    ensemble = [r for r in (line.split() for line in out.splitlines()) if len(r) == 8 and r[0] in ("state", "CNN")]
    assert [(r[0], r[2], r[3]) for r in ensemble] == [
        ("state", "2", "cpu"),
        ("state", "10", "cpu"),
        ("CNN", "2", "cpu"),
        ("CNN", "10", "cpu"),
    ], out
    assert all(r[-1].endswith("x") for r in ensemble), out


def test_cuda_without_gpu_is_a_clear_error() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    proc = run_bench("--device", "cuda", timeout=120)
    assert proc.returncode != 0
    assert "torch sees no GPU" in proc.stderr
