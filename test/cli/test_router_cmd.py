"""`user router` starts without the learning stack: on a loaded machine, importing torch alone took longer than
bringup's start deadline for the router. Checked on a real router process (`python -X importtime -m user
router`), and on the command line's parser, which imports only the command it runs."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from test.conftest import free_port, wait_until
from user.bus.router import router_reachable
from user.cli.main import COMMANDS, command_of

HEAVY = ("torch", "numpy", "mujoco", "matplotlib", "tensorboard", "user.buffer", "user.learner", "user.algorithms")


def _top_level_imports(importtime_stderr: str) -> set[str]:
    """Every module `-X importtime` reported ("import time: self | cumulative | module")."""
    return {
        line.rsplit("|", 1)[1].strip() for line in importtime_stderr.splitlines() if line.startswith("import time:")
    }


def test_a_router_process_imports_no_learning_stack(tmp_path: Path) -> None:
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    report = tmp_path / "importtime.txt"  # a file, not a pipe: a long report must not block the router
    with open(report, "wb") as f:
        proc = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "user", "router", "--listen", endpoint],
            stdout=subprocess.DEVNULL,
            stderr=f,
        )
    try:
        assert wait_until(lambda: router_reachable([endpoint], 0.5), 60.0, 0.1)
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    err = report.read_text(errors="replace")
    assert proc.returncode == 0, err[-3000:]
    imported = _top_level_imports(err)
    assert "user.bus.router" in imported and "zenoh" in imported  # the report is the router's own
    assert not {m for m in imported if m.split(".")[0] in HEAVY or m.startswith(HEAVY)}


def test_the_parser_imports_only_the_command_it_runs() -> None:
    code = (
        "import sys\n"
        "from user.cli.main import build_parser, command_of\n"
        "argv = ['--log-level', 'DEBUG', 'router', '--listen', 'tcp/127.0.0.1:1']\n"
        "args = build_parser(command_of(argv)).parse_args(argv)\n"
        "assert args.func.__module__ == 'user.cli.router_cmd', args.func.__module__\n"
        f"print(sorted(m for m in sys.modules if m.startswith({HEAVY!r}) or m.startswith('user.cli.')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['user.cli.common', 'user.cli.main', 'user.cli.router_cmd']"


def test_the_command_is_found_after_global_options() -> None:
    assert command_of(["router", "--listen", "x"]) == "router"
    assert command_of(["--log-level", "DEBUG", "buffer", "info", "d"]) == "buffer"
    assert command_of(["--help"]) is None and command_of([]) is None
    assert command_of(["train-reward", "d", "--out", "o"]) == "train-reward"
    assert set(COMMANDS) == {
        "bringup",
        "node",
        "router",
        "bridge",
        "certs",
        "topic",
        "param",
        "service",
        "graph",
        "hardware",
        "buffer",
        "train-reward",
        "report",
        "view",
        "completion",
    }
