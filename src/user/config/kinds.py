"""Tables of kinds: one table per kind of thing (robot drivers, tasks), each kind's name -> its settings class and
what builds it.

A kind may name its settings class and its builder as "module:attribute", imported when first asked for, so that a
table costs nothing to import: a robot node's settings name every driver's settings class without loading any
driver, and a kind whose module needs an SDK or a simulator loads it only when that kind is used or described. A
table in the package that holds its kinds names the classes themselves.
A settings section whose class the selected kind decides (`user.config.sections.KindSection`) reads its class
from such a table.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar


@dataclass(frozen=True)
class Kind:
    """One kind: the dataclass its settings parse into and what builds the thing from them."""

    settings: type[Any] | str | None = None  # the settings dataclass or its "module:Class"; None: no settings section
    build: Callable[..., Any] | str | None = None  # what builds the thing or its "module:name" (arguments: the table's)

    def settings_class(self) -> type[Any] | None:
        """The settings dataclass (imported now), or None for a kind without settings."""
        cls = load_attribute(self.settings) if isinstance(self.settings, str) else self.settings
        if cls is not None and not isinstance(cls, type):
            raise TypeError(f"{self.settings} is not a class")
        return cls

    def builder(self) -> Callable[..., Any]:
        """What builds the thing (imported now)."""
        built = load_attribute(self.build) if isinstance(self.build, str) else self.build
        if not callable(built):
            raise TypeError(f"{self.build!r}: this kind names nothing that builds it")
        return built


K = TypeVar("K", bound=Kind)


class Kinds(Mapping[str, K], Generic[K]):
    """The kinds of one thing by name, e.g. `Kinds("driver", {"franka": Kind(...), ...})`.

    `what` names the thing in messages ("driver 'x' is not one of ..."); the table is read-only and keeps the
    order it was given in (the order `user node KIND --describe` lists the kinds' settings in)."""

    def __init__(self, what: str, kinds: Mapping[str, K]) -> None:
        self.what = what
        self._kinds = dict(kinds)

    def __getitem__(self, name: str) -> K:
        return self._kinds[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._kinds)

    def __len__(self) -> int:
        return len(self._kinds)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._kinds)

    def with_settings(self) -> tuple[str, ...]:
        """The kinds that have a settings section."""
        return tuple(name for name, kind in self._kinds.items() if kind.settings is not None)

    def settings_class(self, name: str) -> type[Any] | None:
        """The settings class of kind `name`; None for an unknown kind or one without settings."""
        kind = self._kinds.get(name)
        return kind.settings_class() if kind is not None else None


def load_attribute(target: str) -> Any:
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        raise TypeError(f"{target!r}: name a module attribute as 'module:name'")
    return getattr(importlib.import_module(module), attr)
