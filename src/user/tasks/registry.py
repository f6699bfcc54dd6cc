"""Tasks by name, each built from a config mapping through the strict loader (unknown keys are errors)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from user.config import from_mapping
from user.tasks.base import ActionScale, Task, TaskError
from user.tasks.button_press import ButtonPress, ButtonPressConfig
from user.tasks.peg_insertion import PegInsertion, PegInsertionConfig
from user.tasks.pick_place import PickPlace, PickPlaceConfig


def _peg(params: Mapping[str, Any], scale: ActionScale) -> Task:
    return PegInsertion(from_mapping(PegInsertionConfig, dict(params), where="peg_insertion"), scale)


def _pick(params: Mapping[str, Any], scale: ActionScale) -> Task:
    return PickPlace(from_mapping(PickPlaceConfig, dict(params), where="pick_place"), scale)


def _button(params: Mapping[str, Any], scale: ActionScale) -> Task:
    return ButtonPress(from_mapping(ButtonPressConfig, dict(params), where="button_press"), scale)


TASKS: dict[str, Callable[[Mapping[str, Any], ActionScale], Task]] = {
    PegInsertion.name: _peg,
    PickPlace.name: _pick,
    ButtonPress.name: _button,
}


def make_task(name: str, params: Mapping[str, Any] | None = None, scale: ActionScale | None = None) -> Task:
    """The task called `name`, configured by `params` (keys of its config dataclass)."""
    try:
        factory = TASKS[name]
    except KeyError:
        raise TaskError(f"unknown task {name!r}; known tasks: {', '.join(sorted(TASKS))}") from None
    return factory(params or {}, scale or ActionScale())
