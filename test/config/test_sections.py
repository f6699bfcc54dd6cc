"""Typed sections: a section whose class the selected kind decides, and named sections of one class, parsed at load
with the strict loader's errors (key paths, near matches), listed leaf by leaf, and given back as plain data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pytest
import yaml

from user.config.describe import describe_settings
from user.config.kinds import Kind, Kinds
from user.config.plain import to_data
from user.config.sections import KindSection, NamedSections, resolve_sections, settings_of
from user.config.strict import ConfigError, from_mapping, setting
from user.robots.safety import SafetyConfig


@dataclass(frozen=True)
class Limits:
    low: tuple[float, float] = setting((0.0, 0.0), "lowest corner")
    speed: float = setting(1.0, "speed limit", min=0.0, max=2.0)


@dataclass(frozen=True)
class Arm:
    robot_id: str = setting("arm", "its name (given by the settings around it)")
    rate_hz: float = setting(10.0, "control rate", min=1.0, max=100.0)
    port: str = setting("can0", "bus interface")
    limits: Limits = setting(Limits(), "action limits")


@dataclass(frozen=True)
class Gripper:
    robot_id: str = setting("gripper", "its name")
    force_n: float = setting(20.0, "grasp force", min=1.0)
    limits: Limits = setting(Limits(), "action limits")


@dataclass(frozen=True)
class Camera:
    name: str = setting("", "camera name")
    kind: Literal["usb", "bus"] = setting("usb", "how it is reached")
    device: str = setting("0", "usb: device", when=("kind", "usb"))
    topic: str = setting("", "bus: topic", when=("kind", "bus"))
    width: int = setting(0, "image width", min=0)


DEVICES: Kinds[Kind] = Kinds(
    "device",
    {
        "arm": Kind(Arm),
        "gripper": Kind(Gripper),
        "limits": Kind("user.robots.safety:SafetyConfig"),  # imported when first needed
        "none": Kind(),  # a kind without settings
    },
)


@dataclass(frozen=True)
class Station:
    robot_id: str = setting("r1", "robot name")
    device: Literal["arm", "gripper", "limits", "none", "sim"] = setting("arm", "which device")
    rate_hz: float = setting(10.0, "control rate")
    hardware: object | None = setting(
        None,
        "the device's settings",
        when=("device", ("arm", "gripper", "limits", "none")),
        section=KindSection(DEVICES, shared=("robot_id", "rate_hz")),
    )
    extra: object | None = setting(None, "optional device settings", section=KindSection(DEVICES, optional=True))
    cameras: dict[str, Camera] = setting({}, "name -> camera", section=NamedSections(Camera, key="name"))

    def __post_init__(self) -> None:
        resolve_sections(self)


def load(**data: Any) -> Station:
    return from_mapping(Station, data, where="s.yaml")


def test_a_section_parses_into_the_class_of_the_selected_kind_with_the_shared_settings() -> None:
    arm = load(hardware={"port": "can1", "limits": {"low": [0.1, 0.2]}}, robot_id="r2", rate_hz=20)
    assert arm.hardware == Arm(robot_id="r2", rate_hz=20.0, port="can1", limits=Limits(low=(0.1, 0.2)))
    gripper = load(device="gripper", hardware={"force_n": 5})
    assert gripper.hardware == Gripper(robot_id="r1", force_n=5.0)
    assert load().hardware == Arm(robot_id="r1")  # left out: the selected class's defaults
    assert load(device="none").hardware is None and load(device="sim").hardware is None
    assert Station(hardware={"port": "can2"}).hardware == Arm(robot_id="r1", port="can2")  # made in code, too
    assert settings_of(load().hardware, Arm, "hardware").port == "can0"
    with pytest.raises(TypeError, match="hardware: expected Gripper, got Arm"):
        settings_of(load().hardware, Gripper, "hardware")


def test_an_optional_section_left_out_is_none() -> None:
    assert load().extra is None and load(extra={}).extra is None
    assert load(extra={"port": "x"}).extra == Arm(port="x")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"hardware": {"limits": {"low": [0.1, "x"]}}}, r"s.yaml: hardware.limits.low\[1\]: expected a number"),
        ({"hardware": {"limits": {"speed": 3.0}}}, "s.yaml: hardware.limits.speed: 3.0 is above the maximum 2.0"),
        ({"hardware": {"prot": "x"}}, "s.yaml: hardware: unknown key 'prot'; did you mean 'port'?"),
        ({"hardware": {"robot_id": "other"}}, "s.yaml: hardware.robot_id: set it as `robot_id` beside hardware"),
        ({"rate_hz": 500.0}, r"s.yaml: rate_hz \(given to hardware\): 500.0 is above the maximum 100.0"),
        ({"hardware": ["port"]}, "s.yaml: hardware: expected the Arm settings"),
        ({"device": "gripper", "hardware": {"port": "x"}}, "hardware: unknown key 'port'"),
        ({"device": "none", "hardware": {"port": "x"}}, "hardware: device 'none' has no settings here"),
        ({"device": "sim", "hardware": {}}, "hardware: a setting of device 'arm' or 'gripper' or 'limits' or 'none'"),
        ({"device": "limits", "hardware": {"gripper_max": 2.0}}, "hardware.gripper_max: 2.0 is above the maximum"),
        ({"cameras": {"w": {"width": -1}}}, "s.yaml: cameras.w.width: -1 is below the minimum 0"),
        ({"cameras": {"w": {"kind": "bus", "device": "1"}}}, "cameras.w.device: a setting of kind 'usb'"),
        ({"cameras": {"w": {"name": "v"}}}, "cameras.w.name: 'v' differs from its key; leave name out"),
        ({"cameras": {"w": {"widht": 3}}}, "cameras.w: unknown key 'widht'; did you mean 'width'?"),
        ({"cameras": ["w"]}, "cameras: expected a mapping of names to Camera settings"),
    ],
)
def test_a_wrong_value_in_a_section_is_refused_naming_its_path(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(**data)


def test_a_shared_setting_given_in_the_section_too_is_taken_when_it_says_the_same() -> None:
    assert load(robot_id="r3", hardware={"robot_id": "r3", "rate_hz": 10.0}).hardware == Arm(robot_id="r3")


def test_named_sections_take_their_name_from_their_key() -> None:
    station = load(cameras={"wrist": {"width": 64}, "top": {"kind": "bus", "topic": "/top"}, "side": None})
    assert station.cameras == {
        "wrist": Camera(name="wrist", width=64),
        "top": Camera(name="top", kind="bus", topic="/top"),
        "side": Camera(name="side"),
    }
    assert load(cameras={"w": {"name": "w"}}).cameras["w"].name == "w"


def test_settings_objects_given_in_code_must_fit() -> None:
    assert Station(hardware=Arm(robot_id="r1")).hardware == Arm(robot_id="r1")
    with pytest.raises(ConfigError, match="hardware.robot_id: set it as `robot_id` beside hardware"):
        Station(hardware=Arm(robot_id="other"))
    with pytest.raises(ConfigError, match="cameras.w.name: 'v' differs from its key 'w'"):
        Station(cameras={"w": Camera(name="v")})
    with pytest.raises(ConfigError, match="hardware: a setting of device 'arm'"):
        Station(device="sim", hardware={"port": "x"})


def test_a_dataclass_with_sections_must_resolve_them() -> None:
    @dataclass(frozen=True)
    class Forgetful:
        device: str = setting("arm", "which")
        hardware: object | None = setting(None, "settings", section=KindSection(DEVICES))

    with pytest.raises(TypeError, match="hardware: section not parsed; its dataclass must call resolve_sections"):
        from_mapping(Forgetful, {"hardware": {"port": "x"}}, where="f.yaml")


def test_every_leaf_of_every_kind_is_described_once_with_the_kinds_it_belongs_to() -> None:
    rows = {name: (tp, default, doc) for name, tp, default, doc in describe_settings(Station)}
    assert rows["hardware.port"] == ("str", "can0", "bus interface [only with device arm]")
    assert rows["hardware.force_n"] == ("float", 20.0, "grasp force [only with device gripper]")
    assert rows["hardware.limits.speed"] == ("float", 1.0, "speed limit [only with device arm or gripper]")
    assert rows["hardware.gripper_max"][2].endswith("[only with device limits]")
    assert "hardware.robot_id" not in rows and "hardware.rate_hz" not in rows  # the settings around it give them
    assert rows["extra.rate_hz"] == ("float", 10.0, "control rate [only with device arm]")  # not shared there
    assert rows["cameras.<name>.width"] == ("int", 0, "image width")
    assert rows["cameras.<name>.topic"] == ("str", "", "bus: topic [only with cameras.<name>.kind bus]")
    assert "cameras.<name>.name" not in rows  # the key gives it
    assert not any(tp.startswith(("dict", "object")) for tp, _, _ in rows.values())


def test_a_section_of_one_kind_only_combines_both_conditions() -> None:
    @dataclass(frozen=True)
    class Cell:
        mode: str = setting("real", "mode")
        device: str = setting("arm", "which")
        hardware: object | None = setting(
            None, "settings", when=("mode", "real"), section=KindSection(DEVICES, optional=True)
        )

        def __post_init__(self) -> None:
            resolve_sections(self)

    rows = {name: doc for name, _, _, doc in describe_settings(Cell)}
    assert rows["hardware.port"] == "bus interface [only with mode real and device arm]"


def test_kinds_name_their_classes_and_builders_lazily() -> None:
    assert DEVICES.names == ("arm", "gripper", "limits", "none")
    assert DEVICES.with_settings() == ("arm", "gripper", "limits")
    assert DEVICES.settings_class("limits") is SafetyConfig and DEVICES.settings_class("nothing") is None
    assert Kind(build="user.config.strict:from_mapping").builder() is from_mapping
    with pytest.raises(TypeError, match="names nothing that builds it"):
        Kind().builder()
    with pytest.raises(TypeError, match="'module:name'"):
        Kind("no_colon").settings_class()


def test_settings_go_back_to_the_data_they_are_loaded_from() -> None:
    station = load(
        robot_id="r2", hardware={"limits": {"low": [0.1, 0.2]}}, cameras={"w": {"kind": "bus", "topic": "/t"}}
    )
    data = to_data(station)
    assert data["hardware"]["limits"] == {"low": [0.1, 0.2], "speed": 1.0}
    assert data["cameras"]["w"] == {"name": "w", "kind": "bus", "topic": "/t", "width": 0}  # no usb `device`
    assert from_mapping(Station, data, where="again") == station
    assert yaml.safe_load(yaml.safe_dump(station.hardware)) == data["hardware"]  # a section dumps as its data
