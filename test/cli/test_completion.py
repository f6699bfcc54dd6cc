"""`user completion bash`: the script, sourced in a real bash, completes commands and verbs from the parsers."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from test.conftest import REPO, user_cmd


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    proc = subprocess.run(user_cmd("completion", "bash"), capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    path = tmp_path_factory.mktemp("completion") / "user.bash"
    path.write_text(proc.stdout)
    return path


def complete(script: Path, *words: str) -> list[str]:
    """What bash offers for the command line `words` (the last one is being typed), with the script sourced."""
    bash = shutil.which("bash")
    assert bash is not None
    line = " ".join(f"'{w}'" for w in words)
    program = (
        f'source "$1"; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _user_complete; '
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    proc = subprocess.run([bash, "-c", program, "bash", str(script)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_it_registers_for_user(script: Path) -> None:
    assert "complete -o default -F _user_complete user" in script.read_text()


def test_commands_and_verbs_complete(script: Path) -> None:
    assert complete(script, "user", "to") == ["topic"]
    assert complete(script, "user", "topic", "e") == ["echo"]
    assert sorted(complete(script, "user", "param", "")) == ["--help", "get", "list", "set"]
    assert complete(script, "user", "--log-level", "DEBUG", "serv") == ["service"]  # global options skipped


def test_options_and_node_verbs_complete(script: Path) -> None:
    assert complete(script, "user", "topic", "echo", "/chatter", "--qos-r") == ["--qos-reliability"]
    assert {"list", "info", "talker"} <= set(complete(script, "user", "node", ""))
    assert complete(script, "user", "no-such-command", "x") == []


def test_zsh_script_loads_the_same_function_through_bashcompinit() -> None:
    proc = subprocess.run(user_cmd("completion", "zsh"), capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "bashcompinit" in proc.stdout and "_user_complete()" in proc.stdout
