"""The light commands start without the learning and simulation stack, and no command prints PyOpenGL's note.

Each command runs in a fresh interpreter through a small wrapper around `user.cli.main.main` that writes, once
`main` has returned, every module the process imported. No timing is asserted here; the start-up times are in
the issue's report."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from test.conftest import REPO, free_port, wait_until
from user.bus.router import router_reachable
from user.cli.main import COMMANDS, build_parser

HEAVY = {"torch", "mujoco", "matplotlib", "tensorboard", "OpenGL"}
OPENGL_NOTE = "OpenGL_accelerate"

# argv[1]: the file for the module list; argv[2:]: the command line of `user`.
WRAPPER = """
import json, sys
from user.cli.main import main
try:
    code = main(sys.argv[2:])
except SystemExit as exc:
    code = exc.code
with open(sys.argv[1], "w") as f:
    json.dump(sorted(sys.modules), f)
raise SystemExit(code)
"""


def _wrapped(report: Path, *args: str) -> list[str]:
    return [sys.executable, "-c", WRAPPER, str(report), *args]


def _modules(report: Path) -> set[str]:
    names = json.loads(report.read_text())
    assert isinstance(names, list)
    return {str(name) for name in names}


def run_user(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[set[str], str]:
    """Run `user ARGS` to its end: the modules it imported, and its stdout and stderr together."""
    report = tmp_path / "modules.json"
    proc = subprocess.run(_wrapped(report, *args), capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    return _modules(report), output


def heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in HEAVY}


@pytest.mark.parametrize("args", [("--help",), ("topic", "--help"), ("router", "--help")], ids=" ".join)
def test_help_imports_no_heavy_module(tmp_path: Path, args: tuple[str, ...]) -> None:
    modules, output = run_user(tmp_path, *args)
    assert "usage: user" in output
    assert not heavy(modules)
    assert OPENGL_NOTE not in output


def test_the_command_list_imports_no_command_module(tmp_path: Path) -> None:
    modules, output = run_user(tmp_path, "--help")
    assert not {m for m in modules if m.startswith("user.cli.") and m.endswith("_cmd")}
    text = " ".join(output.split())  # argparse wraps the help lines
    for name, entry in COMMANDS.items():
        assert f" {name} {entry.help} " in text


@pytest.mark.parametrize(
    "verb",
    [
        ("list", "--timeout", "0.2"),
        ("echo", "/startup_probe", "std_msgs/msg/String", "--timeout", "0.2"),
        ("hz", "/startup_probe", "--count", "1", "--timeout", "0.2"),
        ("pub", "/startup_probe", "std_msgs/msg/String", "{data: hi}", "--once", "--wait-matching", "0"),
    ],
    ids=lambda verb: verb[0],
)
def test_topic_verbs_import_no_heavy_module(tmp_path: Path, zenoh_env: dict[str, str], verb: tuple[str, ...]) -> None:
    modules, output = run_user(tmp_path, "topic", *verb, env=zenoh_env)
    assert "user.cli.topic_cmd" in modules and "zenoh" in modules  # the verb really ran
    assert not heavy(modules)
    assert OPENGL_NOTE not in output


@pytest.mark.parametrize(
    "args",
    [
        ("topic", "bw", "/startup_probe", "--count", "1", "--timeout", "0.2"),
        ("node", "list", "--timeout", "0.2"),
        ("service", "list", "--timeout", "0.2"),
        ("param", "set", "--help"),
        ("service", "call", "--help"),
        ("completion", "--help"),
    ],
    ids=" ".join,
)
def test_inspection_verbs_import_no_heavy_module(
    tmp_path: Path, zenoh_env: dict[str, str], args: tuple[str, ...]
) -> None:
    modules, output = run_user(tmp_path, *args, env=zenoh_env)
    assert COMMANDS[args[0]].module in modules  # the command really ran
    assert not heavy(modules)
    assert OPENGL_NOTE not in output


def test_a_running_router_imports_no_heavy_module(tmp_path: Path) -> None:
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    report, log = tmp_path / "modules.json", tmp_path / "router.log"
    with open(log, "wb") as out:  # a file, not a pipe: the router must never block on its output
        proc = subprocess.Popen(_wrapped(report, "router", "--listen", endpoint), stdout=out, stderr=out, cwd=REPO)
    try:
        assert wait_until(lambda: router_reachable([endpoint], 0.5), 60.0, 0.1), log.read_text()
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    output = log.read_text()
    assert proc.returncode == 0, output[-3000:]
    modules = _modules(report)
    assert "user.bus.router" in modules
    assert not heavy(modules)
    assert OPENGL_NOTE not in output


def test_a_command_that_imports_pyopengl_does_not_print_its_note(tmp_path: Path) -> None:
    modules, output = run_user(tmp_path, "node", "robot", "--describe")
    assert "OpenGL" in modules  # the robot node's simulator brought PyOpenGL in: the note would be logged
    assert OPENGL_NOTE not in output


def test_the_command_table_gives_the_help_line_of_each_command_module() -> None:
    """`user --help` reads the table; `user COMMAND` the module: both say the same."""
    listing = build_parser(None).format_help()
    for name in COMMANDS:
        assert build_parser(name).format_help() == listing, name
