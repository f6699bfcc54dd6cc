"""launch/bringup.launch.py builds the deployment's nodes as launch_ros Node actions.

ROS 2's launch and launch_ros cannot be installed here, so they are replaced by recorders with the
same names and call signatures; what is checked is the mapping from the deployment to Node arguments,
which is the part of the launch file that is ours.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from test.conftest import REPO


class Recorder:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs


class LaunchConfiguration(Recorder):
    values: dict[str, str] = {}

    def perform(self, _context: Any) -> str:
        return LaunchConfiguration.values.get(self.args[0], "")


def _stand_ins(share: Path) -> dict[str, types.ModuleType]:
    mods = {
        name: types.ModuleType(name)
        for name in (
            "launch",
            "launch.actions",
            "launch.substitutions",
            "launch_ros",
            "launch_ros.actions",
            "ament_index_python",
            "ament_index_python.packages",
        )
    }
    mods["launch"].LaunchDescription = Recorder  # type: ignore[attr-defined]
    mods["launch.actions"].DeclareLaunchArgument = Recorder  # type: ignore[attr-defined]
    mods["launch.actions"].OpaqueFunction = Recorder  # type: ignore[attr-defined]
    mods["launch.substitutions"].LaunchConfiguration = LaunchConfiguration  # type: ignore[attr-defined]
    mods["launch_ros.actions"].Node = Recorder  # type: ignore[attr-defined]
    mods["ament_index_python.packages"].get_package_share_directory = lambda pkg: str(share / pkg)  # type: ignore[attr-defined]
    return mods


@pytest.fixture
def launch_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    share = tmp_path / "share"
    (share / "user" / "config").mkdir(parents=True)
    (share / "user" / "config" / "installed.yaml").write_text(
        "name: installed\nnodes:\n  - name: talker_a\n    kind: talker\n    params: {rate_hz: 4.0}\n"
        "    respawn: true\n    respawn_delay_s: 2.0\n    env: {FOO: bar}\n"
        "  - name: listener_a\n    kind: listener\n"
    )
    for name, mod in _stand_ins(share).items():
        monkeypatch.setitem(sys.modules, name, mod)
    spec = importlib.util.spec_from_file_location("bringup_launch", REPO / "launch" / "bringup.launch.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.RUN_DIR = tmp_path / "run"  # type: ignore[attr-defined]
    return module


def _nodes(launch_module: Any, config: str, run_dir: Path | None = None) -> list[Recorder]:
    description = launch_module.generate_launch_description()
    *declares, opaque = description.args[0]
    assert [d.args[0] for d in declares] == ["config", "run_dir", "resume"]
    assert declares[0].kwargs["default_value"].endswith("config/default.yaml")
    LaunchConfiguration.values = {"config": config, "run_dir": str(run_dir or launch_module.RUN_DIR)}
    return opaque.kwargs["function"](context=None)


def test_installed_config_by_name_becomes_node_actions(launch_module: Any) -> None:
    talker, listener = _nodes(launch_module, "installed")
    assert talker.kwargs["package"] == "user" and talker.kwargs["executable"] == "user_node"
    assert talker.kwargs["name"] == "talker_a" and talker.kwargs["arguments"] == ["talker"]
    assert talker.kwargs["parameters"] == [{"rate_hz": 4.0}]
    assert talker.kwargs["respawn"] is True and talker.kwargs["respawn_delay"] == 2.0
    assert talker.kwargs["additional_env"] == {"FOO": "bar"}
    assert listener.kwargs["name"] == "listener_a" and listener.kwargs["parameters"] == [{}]


def test_same_node_set_as_user_bringup(launch_module: Any) -> None:
    from user.deploy.commands import launches
    from user.deploy.deployment import load

    path = REPO / "config" / "talker_listener.yaml"
    nodes = _nodes(launch_module, str(path))
    expected = launches(load(path))
    assert [(n.kwargs["name"], n.kwargs["arguments"][0], n.kwargs["parameters"][0]) for n in nodes] == [
        (e.name, e.kind, e.parameters) for e in expected
    ]
