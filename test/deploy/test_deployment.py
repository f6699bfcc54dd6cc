"""Deployment YAML: every shipped config loads; mistakes are errors naming key and file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from user.cli.main import main
from user.config.flat import flatten, unflatten
from user.config.strict import ConfigError
from user.deploy.commands import launches
from user.deploy.deployment import CONFIG_DIR, load, resolve_path

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", sorted((REPO / "config").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_load(path: Path) -> None:
    deployment = load(path)
    assert deployment.nodes


def test_default_is_found_by_name() -> None:
    assert load().name == "default"
    assert load("talker_listener").name == "talker_listener"
    assert CONFIG_DIR == REPO / "config"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "deploy.yaml"
    path.write_text(text)
    return path


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: x\nnodes:\n  - name: a\n    kind: talker\n    respwn: true\n")
    with pytest.raises(ConfigError) as err:
        load(path)
    assert str(path) in str(err.value) and "'respwn'" in str(err.value) and "nodes[0]" in str(err.value)


def test_unknown_top_level_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown key 'robots'"):
        load(_write(tmp_path, "name: x\nnodes: []\nrobots: []\n"))


def test_unknown_kind_and_duplicate_names(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown node kind 'talkr'"):
        load(_write(tmp_path, "name: x\nnodes:\n  - {name: a, kind: talkr}\n"))
    with pytest.raises(ConfigError, match="used twice"):
        load(_write(tmp_path, "name: x\nnodes:\n  - {name: a, kind: talker}\n  - {name: a, kind: listener}\n"))


def test_missing_file_is_clear() -> None:
    with pytest.raises(ConfigError, match="no such deployment file"):
        load("does_not_exist")


def test_a_missing_name_lists_the_deployment_names_and_says_a_path_works(tmp_path: Path) -> None:
    """Issue 31, item 9b: `user bringup nosuch` named the file it did not find but not the ones that exist."""
    (tmp_path / "lab_one.yaml").write_text("name: lab_one\nnodes: []\n")
    with pytest.raises(ConfigError) as err:
        resolve_path("nosuch", [tmp_path])
    message = str(err.value)
    shipped = sorted(p.stem for p in (REPO / "config").glob("*.yaml"))
    names = message.split("the names there: ", 1)[1].split(" (", 1)[0]
    assert names.split(", ") == sorted([*shipped, "lab_one"])
    assert message.startswith("nosuch: ") and str(tmp_path) in message and str(CONFIG_DIR) in message
    assert "a path to a deployment YAML works too" in message


def test_bringup_of_a_missing_name_lists_the_names_and_starts_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert main(["bringup", "nosuch", "--run-dir", str(tmp_path / "run")]) == 2
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert line.startswith("nosuch: no such deployment file") and "\n" not in line
    assert "the names there: " in line and "default, " in line and "talker_listener" in line
    assert not (tmp_path / "run").exists()


def test_launches_keep_parameters_nested(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "name: x\nnodes:\n  - name: a\n    kind: talker\n    params: {rate_hz: 5.0, nested: {k: 1}}\n"
        "    respawn: true\n",
    )
    (launch,) = launches(load(path))
    assert launch.parameters == {"rate_hz": 5.0, "nested": {"k": 1}}
    dotted = _write(tmp_path, "name: y\nnodes:\n  - {name: a, kind: talker, params: {rate_hz: 5.0, nested.k: 1}}\n")
    assert launches(load(dotted))[0].parameters == launch.parameters  # a dotted key is the same setting
    assert launch.respawn and launch.kind == "talker" and launch.name == "a"
    argv = launch.zenoh_command()
    assert argv[1:5] == ["-m", "user", "node", "talker"]
    assert unflatten(flatten({"a": {"b": {"c": 1}}, "d": 2})) == {"a": {"b": {"c": 1}}, "d": 2}
