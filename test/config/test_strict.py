"""The strict config loader: unknown keys, wrong types and bounds are errors that say where."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from user.config.describe import describe_settings
from user.config.strict import ConfigError, from_mapping, inactive_settings, load_yaml, setting


@dataclass
class Inner:
    gain: float = setting(1.0, "a gain", min=0.0, max=10.0)
    mode: Literal["fast", "real_time"] = "fast"


@dataclass
class Outer:
    name: str
    inner: Inner = field(default_factory=Inner)
    items: list[Inner] = field(default_factory=list)
    tags: dict[str, int] = field(default_factory=dict)
    size: tuple[int, int] = (1, 2)
    limit: int | None = None
    flag: bool = setting(False, "a flag")


def test_builds_nested_dataclasses() -> None:
    cfg = from_mapping(
        Outer,
        {
            "name": "a",
            "inner": {"gain": 2},
            "items": [{"mode": "real_time"}],
            "tags": {"x": 1},
            "size": [3, 4],
        },
        where="f.yaml",
    )
    assert cfg.inner.gain == 2.0 and isinstance(cfg.inner.gain, float)
    assert cfg.items[0].mode == "real_time"
    assert cfg.tags == {"x": 1} and cfg.size == (3, 4) and cfg.limit is None


def test_unknown_key_names_key_path_and_file() -> None:
    with pytest.raises(ConfigError) as err:
        from_mapping(Outer, {"name": "a", "items": [{"gian": 1.0}]}, where="cfg/run.yaml")
    text = str(err.value)
    assert "cfg/run.yaml" in text and "items[0]" in text and "'gian'" in text and "gain" in text


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({}, "name: required key is missing"),
        ({"name": 3}, "expected a string"),
        ({"name": "a", "flag": 1}, "expected true or false"),
        ({"name": "a", "limit": 1.5}, "expected an integer"),
        ({"name": "a", "inner": {"gain": -1}}, "below the minimum"),
        ({"name": "a", "inner": {"gain": 11}}, "above the maximum"),
        ({"name": "a", "inner": {"mode": "slow"}}, "is not one of"),
        ({"name": "a", "size": [1, 2, 3]}, "expected 2 items"),
        ({"name": "a", "items": {"gain": 1}}, "expected a list"),
        ({"name": "a", "tags": [1]}, "expected a mapping"),
    ],
)
def test_bad_values_are_refused(data: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        from_mapping(Outer, data, where="x.yaml")


def test_post_init_errors_carry_the_location() -> None:
    @dataclass
    class Checked:
        rate: float = 1.0

        def __post_init__(self) -> None:
            if self.rate == 0:
                raise ValueError("rate must not be zero")

    with pytest.raises(ConfigError, match=r"^x.yaml: rate must not be zero$"):
        from_mapping(Checked, {"rate": 0}, where="x.yaml")


def test_yaml_errors_name_the_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="bad.yaml: not valid YAML"):
        load_yaml(bad)
    with pytest.raises(ConfigError, match="missing.yaml: cannot read"):
        load_yaml(tmp_path / "missing.yaml")


def test_describe_settings_lists_docs() -> None:
    rows = {name: (default, doc) for name, _tp, default, doc in describe_settings(Inner)}
    assert rows["gain"] == (1.0, "a gain")


@dataclass(frozen=True)
class Gains:
    kp: float = setting(1.0, "gain")


@dataclass(frozen=True)
class Chooser:
    kind: Literal["a", "b", "c"] = setting("a", "which kind")
    a: Gains = setting(Gains(), "kind a: its settings", when=("kind", "a"))
    b: Gains = setting(Gains(), "kind b: its settings", when=("kind", "b"))
    shared: int = setting(0, "kinds b and c", when=("kind", ("b", "c")))
    common: int = setting(0, "every kind")


@dataclass(frozen=True)
class Section:
    chooser: Chooser = setting(Chooser(kind="b", b=Gains(kp=3.0)), "the choice")
    maybe: Gains | None = setting(None, "optional gains")
    rate: float = setting(2.0, "a rate")


def test_describe_settings_lists_nested_settings_one_per_line_under_dotted_names() -> None:
    rows = {name: (tp, default, doc) for name, tp, default, doc in describe_settings(Section)}
    assert list(rows) == [
        "chooser.kind",
        "chooser.a.kp",
        "chooser.b.kp",
        "chooser.shared",
        "chooser.common",
        "maybe.kp",
        "rate",
    ]
    assert rows["chooser.kind"] == ("Literal['a', 'b', 'c']", "b", "which kind")  # the section's default
    assert rows["chooser.b.kp"] == ("float", 3.0, "gain [only with chooser.kind b]")
    assert rows["chooser.a.kp"] == ("float", 1.0, "gain [only with chooser.kind a]")
    assert rows["chooser.shared"] == ("int", 0, "kinds b and c [only with chooser.kind b or c]")
    assert rows["maybe.kp"] == ("float", 1.0, "gain")  # an optional section: its class's defaults
    assert rows["rate"] == ("float", 2.0, "a rate")
    types = {name: tp for name, tp, _, _ in describe_settings(Outer)}
    assert (types["size"], types["limit"], types["inner.gain"]) == ("tuple[int, int]", "int | None", "float")


def test_a_setting_of_the_selected_kind_is_taken() -> None:
    assert from_mapping(Chooser, {"a": {"kp": 2.0}}, where="f.yaml").a.kp == 2.0  # kind a is the default
    got = from_mapping(Chooser, {"kind": "b", "b": {"kp": 3.0}, "shared": 4}, where="f.yaml")
    assert (got.b.kp, got.shared) == (3.0, 4)
    assert from_mapping(Chooser, {"kind": "c", "shared": 5, "common": 1}, where="f.yaml").shared == 5


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"b": {"kp": 2.0}},
            "f.yaml: b: a setting of kind 'b', but kind 'a' is selected (remove it, or select kind: b)",
        ),
        ({"kind": "b", "a": {}}, "f.yaml: a: a setting of kind 'a', but kind 'b' is selected"),
        ({"kind": "a", "shared": 1}, "f.yaml: shared: a setting of kind 'b' or 'c', but kind 'a' is selected"),
        ({"kind": "c", "b": {"kp": 1.0}}, "f.yaml: b: a setting of kind 'b', but kind 'c' is selected"),
    ],
)
def test_a_setting_of_another_kind_is_an_error_naming_it(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_mapping(Chooser, data, where="f.yaml")
    assert str(err.value).startswith(message)


def test_a_nested_choice_names_the_whole_path() -> None:
    @dataclass(frozen=True)
    class Holder:
        inner: Chooser = setting(Chooser(), "the choice")

    with pytest.raises(ConfigError, match=r"^f.yaml: inner.b: a setting of kind 'b', but kind 'a' is selected"):
        from_mapping(Holder, {"inner": {"b": {}}}, where="f.yaml")


def test_inactive_settings_are_those_of_the_kinds_not_selected() -> None:
    assert inactive_settings(Chooser()) == ["b", "shared"]
    assert inactive_settings(Chooser(kind="b")) == ["a"]
    assert inactive_settings(Chooser(kind="c")) == ["a", "b"]


def test_when_must_name_a_field_of_the_same_settings() -> None:
    @dataclass(frozen=True)
    class Broken:
        x: int = setting(0, "x", when=("nothing", "a"))

    with pytest.raises(TypeError, match="'nothing'"):
        from_mapping(Broken, {"x": 1}, where="f.yaml")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"name: caf\xe9\n", "not UTF-8 text: byte 0xe9 at line 1 (offset 9); save the file as UTF-8"),
        (b"a: 1\nb: \xff\xfe\n", "not UTF-8 text: byte 0xff at line 2 (offset 8)"),
        (
            b"a: [1,\n  - 2\n",
            "not valid YAML: expected the node content, but found '-' (while parsing a flow node) at line 2, column 3",
        ),
    ],
)
def test_an_unreadable_file_is_one_config_error_line(tmp_path, content: bytes, message: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "c.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as err:
        load_yaml(path)
    assert str(err.value).startswith(f"{path}: {message}")
    assert "\n" not in str(err.value)


def test_utf8_text_beyond_ascii_is_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "c.yaml"
    path.write_bytes("name: café\n".encode())
    assert load_yaml(path) == {"name": "café"}
