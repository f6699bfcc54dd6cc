"""Tasks by name: the table of task kinds (each task's config class and the class that builds it) and `make_task`.

A task's settings go through the strict loader (unknown keys are errors): `make_task` takes the task's config or the
data of one, and the robot node's `task_params` parse into the config of the task its `task` selects, at load
(`user.config.sections.KindSection` over `TASKS`).
"""

from __future__ import annotations

from collections.abc import Mapping

from user.config import Kind, Kinds, from_mapping
from user.tasks.base import ActionScale, Task, TaskError
from user.tasks.button_press import ButtonPress, ButtonPressConfig
from user.tasks.peg_insertion import PegInsertion, PegInsertionConfig
from user.tasks.pick_place import PickPlace, PickPlaceConfig

TASKS: Kinds[Kind] = Kinds(
    "task",
    {
        PegInsertion.name: Kind(PegInsertionConfig, PegInsertion),
        PickPlace.name: Kind(PickPlaceConfig, PickPlace),
        ButtonPress.name: Kind(ButtonPressConfig, ButtonPress),
    },
)


def make_task(name: str, params: object = None, scale: ActionScale | None = None) -> Task:
    """The task called `name`, configured by `params`: its config (the class `TASKS` names for it), or the data of
    one (a mapping of that class's keys); None: the config's defaults."""
    kind = TASKS.get(name)
    cls = kind.settings_class() if kind is not None else None
    if kind is None or cls is None:
        raise TaskError(f"unknown task {name!r}; known tasks: {', '.join(sorted(TASKS))}")
    if params is None or isinstance(params, Mapping):
        params = from_mapping(cls, dict(params or {}), where=name)
    elif not isinstance(params, cls):
        raise TaskError(f"task {name}: expected a {cls.__name__} or its settings, got {type(params).__name__}")
    task: Task = kind.builder()(params, scale or ActionScale())
    return task
