"""The benchmarks under bench/ as the tests use them: run as a script (`run_bench`) or imported as a module (`load`;
bench modules import their neighbours, e.g. bench/bringup.py, by name)."""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
from types import ModuleType

from test.conftest import REPO

BENCH_DIR = REPO / "bench"


def run_bench(name: str, *args: str, timeout: float) -> str:
    """bench/<name>.py run with `args`; its standard output, the run having succeeded."""
    proc = subprocess.run(
        [sys.executable, str(BENCH_DIR / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=os.environ,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@functools.cache
def load(name: str) -> ModuleType:
    """bench/<name>.py as a module, once."""
    sys.path.insert(0, str(BENCH_DIR))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH_DIR / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH_DIR))
