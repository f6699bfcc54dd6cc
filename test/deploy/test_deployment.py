"""Deployment YAML: every shipped config loads; mistakes are errors naming key and file."""

from __future__ import annotations

from pathlib import Path

import pytest

from user.config.flat import flatten, unflatten
from user.config.strict import ConfigError
from user.deploy.commands import launches
from user.deploy.deployment import CONFIG_DIR, load

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


def test_launches_flatten_parameters_for_ros(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "name: x\nnodes:\n  - name: a\n    kind: talker\n    params: {rate_hz: 5.0, nested: {k: 1}}\n"
        "    respawn: true\n",
    )
    (launch,) = launches(load(path))
    assert launch.parameters == {"rate_hz": 5.0, "nested.k": 1}
    assert launch.respawn and launch.kind == "talker" and launch.name == "a"
    argv = launch.zenoh_command()
    assert argv[1:5] == ["-m", "user", "node", "talker"]
    assert unflatten(flatten({"a": {"b": {"c": 1}}, "d": 2})) == {"a": {"b": {"c": 1}}, "d": 2}
