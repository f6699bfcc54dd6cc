"""Embodiment ids: arms of one type share one, sim and real alike; observations carry it (and, when asked,
their state does, for a policy shared by several arm types)."""

from __future__ import annotations

import numpy as np
import pytest

from user.robot_loop.observe import Observer, ObserverConfig
from user.robots import embodiments
from user.robots.base import ArmState


def test_arm_families_map_to_their_ids() -> None:
    assert embodiments.embodiment_of("franka") == embodiments.FRANKA
    assert embodiments.embodiment_of("arx_l5") == embodiments.embodiment_of("ARX_X5") == embodiments.ARX
    assert embodiments.embodiment_of("gym:Pendulum-v1") == embodiments.GENERIC
    assert len({embodiments.GENERIC, embodiments.FRANKA, embodiments.ARX}) == 3


def test_sim_arms_announce_their_embodiment() -> None:
    pytest.importorskip("mujoco")
    from user.sim.robot import SimArxRobot, SimFrankaRobot, arx_config

    assert SimFrankaRobot().descriptor.embodiment_id == embodiments.FRANKA
    assert SimArxRobot(arx_config("button_press")).descriptor.embodiment_id == embodiments.ARX


def test_the_state_carries_the_embodiment_when_asked() -> None:
    arm = ArmState(0, np.zeros(7), np.zeros(6), np.zeros(7), np.zeros(7), 0.5)
    plain = Observer(ObserverConfig("r", "t", embodiments.ARX)).observe(arm, 0, 0, 0)
    tagged = Observer(ObserverConfig("r", "t", embodiments.ARX, embodiment_in_state=True)).observe(arm, 0, 0, 0)
    assert plain.embodiment_id == tagged.embodiment_id == embodiments.ARX
    assert tagged.state.shape[0] == plain.state.shape[0] + 1
    assert tagged.state_names[-1] == "embodiment/id" and tagged.state[-1] == embodiments.ARX
