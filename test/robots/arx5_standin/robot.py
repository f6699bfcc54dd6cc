"""An `ArxSdkRobot` whose SDK process imports the stand-in `arx5_interface` in this folder (see its docstring)."""

from __future__ import annotations

from pathlib import Path

import pytest

from user.robots import arx_sdk
from user.robots.arx_sdk import ArxSdkConfig, ArxSdkRobot
from user.robots.safety import SafetyConfig

STANDIN = str(Path(__file__).resolve().parent)


def standin_robot(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    arm: str = "",
    safety: SafetyConfig | None = None,
    **settings: object,
) -> ArxSdkRobot:
    """A robot on CAN interface `can0` (made to exist under `tmp_path`); `arm`: ARX5_STANDIN, e.g.
    "arm_gripper_readout=-3.4"; `settings`: more `ArxSdkConfig` fields."""
    (tmp_path / "net" / "can0").mkdir(parents=True)
    monkeypatch.setattr(arx_sdk, "SYS_NET", tmp_path / "net")
    monkeypatch.setenv("ARX5_STANDIN", arm)
    config = ArxSdkConfig(interface="can0", control_rate_hz=100.0, safety=safety or SafetyConfig(), **settings)  # type: ignore[arg-type]
    return ArxSdkRobot(config, sdk_path=(STANDIN,))
