"""The expert node's settings: the task's parameters are the selected task's typed config, checked at load."""

from __future__ import annotations

import pytest

from user.config.strict import ConfigError, from_mapping
from user.nodes.expert import ExpertParams
from user.tasks.pick_place import PickPlaceConfig


def test_task_params_load_into_the_selected_tasks_config() -> None:
    p = from_mapping(ExpertParams, {"task": "pick_place", "task_params": {"cube_side": 0.05}}, where="expert")
    assert isinstance(p.task_params, PickPlaceConfig) and p.task_params.cube_side == 0.05
    assert from_mapping(ExpertParams, {"task": "pick_place"}, where="expert").task_params is None


def test_a_wrong_task_setting_is_refused_naming_its_path() -> None:
    with pytest.raises(ConfigError, match=r"task_params: unknown key 'cube_sid'; did you mean 'cube_side'\?"):
        from_mapping(ExpertParams, {"task": "pick_place", "task_params": {"cube_sid": 0.05}}, where="expert")
    with pytest.raises(ConfigError, match=r"task_params.clearance"):
        from_mapping(ExpertParams, {"task": "peg_insertion", "task_params": {"clearance": "wide"}}, where="expert")
