"""Settings as ROS 2 parameters (no ROS needed): types, dotted names, encoding for launch, and back."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from test.conftest import REPO
from user.bus.parameters import ParameterRefusedError, ParameterStore
from user.bus.ros_params import ParamKind, decode, encode, kind_of, ros_params
from user.config.flat import flatten
from user.config.strict import ConfigError, from_mapping, setting
from user.deploy.deployment import load
from user.runtime.kinds import KINDS, load_kind

CONFIGS = sorted((REPO / "config").glob("*.yaml"))


@pytest.mark.parametrize(
    ("annotation", "kind"),
    [
        (bool, ParamKind.BOOL),
        (int, ParamKind.INTEGER),
        (float, ParamKind.DOUBLE),
        (str, ParamKind.STRING),
        (Literal["a", "b"], ParamKind.STRING),
        (float | None, ParamKind.DOUBLE),
        (list[str], ParamKind.STRING_ARRAY),
        (tuple[int, ...], ParamKind.INTEGER_ARRAY),
        (tuple[float, float, float], ParamKind.DOUBLE_ARRAY),
        (tuple[int, int, int, int] | None, ParamKind.INTEGER_ARRAY),
        (list[bool], ParamKind.BOOL_ARRAY),
        (dict[str, Any], ParamKind.YAML),
        (dict[str, str], ParamKind.YAML),
        (list[tuple[float, str]], ParamKind.YAML),
        (tuple[int, str], ParamKind.YAML),
        (Any, ParamKind.YAML),
    ],
)
def test_each_annotation_has_its_ros_type(annotation: Any, kind: ParamKind) -> None:
    assert kind_of(annotation) is kind


@dataclass(frozen=True)
class Inner:
    gamma: float = setting(0.99, "discount", min=0.0, max=1.0)
    hidden: tuple[int, ...] = setting((256, 256), "layer widths")
    lr: float = setting(3e-4, "learning rate", live=True)


@dataclass(frozen=True)
class Outer:
    algorithm: Literal["sac", "bc"] = setting("sac", "which algorithm")
    steps: int = setting(1, "steps", min=1)
    sac: Inner = setting(Inner(), "SAC settings")
    robots: list[str] = setting([], "robot ids")
    target: float | None = setting(None, "None: automatic")
    extras: dict[str, Any] = setting({"k": [1, 2]}, "free-form")
    presses: list[tuple[float, str]] = setting([], "scripted presses")


def test_nested_settings_become_dotted_typed_described_parameters() -> None:
    table = {p.name: p for p in ros_params(Outer)}
    assert list(table) == [
        "algorithm",
        "steps",
        "sac.gamma",
        "sac.hidden",
        "sac.lr",
        "robots",
        "target",
        "extras",
        "presses",
    ]
    gamma = table["sac.gamma"]
    assert (gamma.kind, gamma.default, gamma.description) == (ParamKind.DOUBLE, 0.99, "discount")
    assert (gamma.minimum, gamma.maximum, gamma.read_only) == (0.0, 1.0, True)
    assert table["sac.lr"].read_only is False  # live
    assert table["algorithm"].constraints == "one of: sac, bc"
    assert table["sac.hidden"].default == [256, 256]  # arrays are lists
    assert table["robots"].default is None and table["robots"].kind is ParamKind.STRING_ARRAY  # empty: typed, unset
    assert table["target"].default is None and table["target"].kind is ParamKind.DOUBLE
    assert (table["extras"].kind, table["extras"].default) == (ParamKind.YAML, "{k: [1, 2]}")
    assert table["extras"].description.endswith("(YAML)")


def test_encode_then_decode_gives_back_the_same_settings() -> None:
    given = {
        "algorithm": "bc",
        "steps": 3,
        "sac": {"gamma": 1, "hidden": (64,)},
        "robots": ["a", "b"],
        "target": -7,
        "extras": {"cams": {"wrist": {"fps": 30}}},
        "presses": [[0.5, "success"], [1.0, "failure"]],
    }
    flat = encode(Outer, given, where="test")
    assert flat["sac.gamma"] == 1.0 and isinstance(flat["sac.gamma"], float)  # an int given for a double
    assert flat["sac.hidden"] == [64] and flat["target"] == -7.0
    assert isinstance(flat["extras"], str) and isinstance(flat["presses"], str)
    assert "sac.lr" not in flat  # only what was given travels; the node declares the rest from defaults
    assert from_mapping(Outer, decode(ros_params(Outer), flat), where="t") == from_mapping(Outer, given, where="t")


def test_encode_refuses_bad_settings_before_anything_starts() -> None:
    with pytest.raises(ConfigError, match=r"node 'x': sac: unknown key 'gama'"):
        encode(Outer, {"sac": {"gama": 0.9}}, where="node 'x'")
    with pytest.raises(ConfigError, match="steps: 0 is below the minimum 1"):
        encode(Outer, {"steps": 0}, where="node 'x'")
    assert "target" not in encode(Outer, {"target": None}, where="x")  # null is the default: left out
    assert "robots" not in encode(Outer, {"robots": []}, where="x")  # empty is the default: left out
    with pytest.raises(ConfigError, match="sac.hidden: an empty or null value cannot be passed"):
        encode(Outer, {"sac": {"hidden": []}}, where="x")


def test_bad_yaml_text_in_a_parameter_names_it() -> None:
    with pytest.raises(ConfigError, match="extras: not valid YAML"):
        decode(ros_params(Outer), {"extras": "{unclosed: ["})


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_node_setting_is_a_described_ros_parameter(kind: str) -> None:
    spec = load_kind(kind).Params
    params = ros_params(spec)
    assert params, kind
    for param in params:
        assert param.description.strip(), f"{kind}: {param.name} has no description"
        assert "." not in param.name.split(".")[-1]
    assert len({p.name for p in params}) == len(params)


def _node_specs(path: Path) -> list[tuple[str, type, dict[str, Any]]]:
    return [(n.name, load_kind(n.kind).Params, n.params) for n in load(path).nodes]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_shipped_deployment_travels_as_ros_parameters_unchanged(path: Path) -> None:
    """What `ros2 launch` passes is exactly what `user bringup` passes, once the node reads it back."""
    from user.deploy.run_dir import bind

    deployment = bind(load(path), Path("/tmp/run"))
    for node in deployment.nodes:
        spec = load_kind(node.kind).Params
        flat = encode(spec, node.params, where=node.name)
        for name, value in flat.items():
            assert isinstance(value, bool | int | float | str | list), f"{path.name}: {node.name}.{name}={value!r}"
            if isinstance(value, list):
                assert len({type(v) for v in value}) <= 1, f"{path.name}: {node.name}.{name} mixes types"
        back = from_mapping(spec, decode(ros_params(spec), flat), where=node.name)
        assert back == from_mapping(spec, node.params, where=node.name), f"{path.name}: {node.name}"


def test_flatten_keeps_empty_mappings_and_inverts() -> None:
    nested = {"a": {"b": {"c": 1}}, "d": 2, "e": {}}
    assert flatten(nested) == {"a.b.c": 1, "d": 2, "e": {}}


def test_the_store_applies_live_changes_only() -> None:
    applied: list[Outer] = []
    store = ParameterStore(Outer, Outer(), applied.append, "parameters of node 'n'")
    new = store.apply({"sac.lr": 1e-3})
    assert new.sac.lr == 1e-3 and applied == [new] and store.values is new
    assert store.current()["sac.lr"] == 1e-3
    with pytest.raises(ParameterRefusedError, match="parameters of node 'n': steps is read-only"):
        store.apply({"steps": 2})
    assert store.values is new and len(applied) == 1
    assert dataclasses.replace(Outer(), sac=Inner(lr=1e-3)) == store.values


@dataclass(frozen=True)
class Choosing:
    algorithm: Literal["sac", "bc"] = setting("sac", "which algorithm")
    sac: Inner = setting(Inner(), "algorithm sac: its settings", when=("algorithm", "sac"))
    bc: Inner = setting(Inner(), "algorithm bc: its settings", when=("algorithm", "bc"))


def test_a_live_change_leaves_the_settings_of_other_kinds_out() -> None:
    store = ParameterStore(Choosing, Choosing(algorithm="bc"), lambda _new: None, "parameters of node 'n'")
    assert "sac.lr" in store.current()  # declared (ros2 param list shows it), though not in use
    new = store.apply({"bc.lr": 1e-3})
    assert new.bc.lr == 1e-3 and new.algorithm == "bc"
    with pytest.raises(ParameterRefusedError, match="sac: a setting of algorithm 'sac', but algorithm 'bc'"):
        store.apply({"sac.lr": 1e-3})


def test_a_setting_of_one_kind_says_so_in_its_descriptor() -> None:
    table = {p.name: p for p in ros_params(Choosing)}
    assert table["sac.gamma"].constraints.startswith("only with algorithm sac")
    assert table["bc.lr"].constraints == "only with algorithm bc"
    assert table["algorithm"].constraints == "one of: sac, bc"
