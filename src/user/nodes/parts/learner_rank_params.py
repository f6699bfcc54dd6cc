"""A learner rank's settings under ros2 launch, read without ROS: every rank of a learner with `ranks` runs the
node's `user_node learner --ros-args ...` command line (torchrun is the launch file's `prefix`), but only the lead
becomes a ROS node; the others read the same settings from the parameter file launch_ros wrote for the node
(`--params-file`, `{<node name> or /**: {ros__parameters: {dotted.name: value}}}`), decoded as the node decodes
its ROS parameters (`user.bus.ros_params.decode`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from user.bus.ros_params import decode, ros_params
from user.config.flat import flatten


class RankParamsError(ValueError):
    """The command line names no readable parameter file of the node."""


class _ParamsLoader(yaml.SafeLoader):
    """Safe YAML, plus the tuples launch_ros writes for array parameters (it dumps its normalized values, tuples,
    with PyYAML's default dumper: `!!python/tuple`), read as lists as rcl's own parser reads them."""


_ParamsLoader.add_constructor(
    "tag:yaml.org,2002:python/tuple",
    lambda loader, node: loader.construct_sequence(node),  # type: ignore[arg-type]
)


def _ros_args(argv: list[str]) -> list[str]:
    return argv[argv.index("--ros-args") + 1 :] if "--ros-args" in argv else []


def node_name(argv: list[str], default: str = "learner") -> str:
    """The node's name as launch_ros remaps it (`-r __node:=NAME`, or `__name:=`), else `default`."""
    args = _ros_args(argv)
    for i, arg in enumerate(args):
        rule = args[i + 1] if arg in ("-r", "--remap") and i + 1 < len(args) else arg
        for key in ("__node:=", "__name:="):
            if rule.startswith(key):
                return rule[len(key) :]
    return default


def params_files(argv: list[str]) -> list[Path]:
    """Every `--params-file FILE` of the ROS arguments, in order (later ones win, as in rcl)."""
    args = _ros_args(argv)
    return [Path(args[i + 1]) for i, arg in enumerate(args) if arg == "--params-file" and i + 1 < len(args)]


def rank_params(argv: list[str]) -> tuple[str, dict[str, Any]]:
    """(node name, nested learner settings) from the node's command line and the parameter files it names."""
    from user.nodes.learner import LearnerParams

    name = node_name(argv)
    files = params_files(argv)
    if not files:
        raise RankParamsError(f"no --params-file in the command line of node {name!r}: {' '.join(argv)}")
    flat: dict[str, Any] = {}
    for path in files:
        try:
            document = yaml.load(path.read_text(encoding="utf-8"), Loader=_ParamsLoader) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise RankParamsError(f"node {name!r}: cannot read its parameter file {path}: {exc}") from exc
        if not isinstance(document, dict):
            raise RankParamsError(f"node {name!r}: {path} is not a mapping of node names to parameters")
        for key in ("/**", name, f"/{name}"):  # launch_ros names the node when its name is fully given
            section = document.get(key)
            if isinstance(section, dict) and isinstance(section.get("ros__parameters"), dict):
                flat.update(flatten(section["ros__parameters"]))
    if not flat:
        raise RankParamsError(f"node {name!r}: no ros__parameters for it in {', '.join(map(str, files))}")
    return name, decode(ros_params(LearnerParams), flat)
