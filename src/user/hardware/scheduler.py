"""Place node groups on the resources the registry found: robot -> rollout -> learner.

Rules, in the order a robot-learning deployment needs them:

- a group that drives robots runs at their site (rollout next to the robot, DESIGN.md section 4), so
  all its robots must share one site, and each robot is driven by one group only;
- cameras a group reads must exist and, when the group has a site, be at it;
- a group that needs an accelerator gets one of its own (at its site when it has one, else anywhere,
  largest memory first), or the CPU when it allows that fallback.

Groups bound to a site are placed first, so a site-local GPU goes to the rollout that needs it before
a learner that can run anywhere takes it. A group that cannot be placed is reported with every
resource it lacks, and all the other groups are still placed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from user.config.strict import ConfigError, from_mapping
from user.hardware.descriptor import ResourceDescriptor
from user.hardware.errors import HardwareError

_GIB = 2**30

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Placement:
    """What one node group needs."""

    group: str  # node group name, e.g. "rollout_left", "learner"
    needs_robot_ids: tuple[str, ...] = ()  # robots the group drives; it runs at their site
    needs_camera_ids: tuple[str, ...] = ()  # cameras the group reads
    needs_accelerator: bool = False  # needs a GPU of its own (learner, on-robot VLA inference)
    min_accelerator_memory_bytes: int = 0  # the smallest GPU that will do
    cpu_fallback: bool = False  # with needs_accelerator: run on the CPU when no GPU fits
    site: str | None = None  # pin to a site; None: the site of its robots, else anywhere

    def __post_init__(self) -> None:
        if not self.group:
            raise ConfigError("a placement needs a group name")
        if self.min_accelerator_memory_bytes < 0:
            raise ConfigError(f"group {self.group!r}: min_accelerator_memory_bytes must be >= 0")
        object.__setattr__(self, "needs_robot_ids", tuple(self.needs_robot_ids))
        object.__setattr__(self, "needs_camera_ids", tuple(self.needs_camera_ids))


@dataclass(frozen=True)
class PlacementPlan:
    """A placement file: the groups of a deployment and what each needs."""

    placements: list[Placement]  # placed in this order, site-bound groups first

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for p in self.placements:
            if p.group in seen:
                raise ConfigError(f"group {p.group!r} is listed twice")
            seen.add(p.group)


def load_plan(data: Any, where: str) -> PlacementPlan:
    """A `PlacementPlan` from YAML data; `ConfigError` names `where` and the offending key."""
    return from_mapping(PlacementPlan, data, where=where)


@dataclass(frozen=True)
class Assignment:
    """Where a group runs and what it holds."""

    group: str
    site: str | None  # None: no constraint, run it anywhere
    robots: tuple[str, ...] = ()
    cameras: tuple[str, ...] = ()
    accelerator: str | None = None  # resource id of its GPU; None: CPU
    notes: tuple[str, ...] = ()  # decisions an operator should know about (e.g. CPU fallback)

    def describe(self) -> str:
        parts = [f"site {self.site}" if self.site else "any site"]
        if self.robots:
            parts.append("robots " + ", ".join(self.robots))
        if self.cameras:
            parts.append("cameras " + ", ".join(self.cameras))
        parts.append(f"accelerator {self.accelerator}" if self.accelerator else "CPU")
        text = f"{self.group}: " + "; ".join(parts)
        return text + (f" ({'; '.join(self.notes)})" if self.notes else "")


@dataclass(frozen=True)
class Shortfall:
    """One thing a group lacks."""

    group: str
    resource: str  # the resource id, or a description such as "an accelerator with >= 40.0 GiB"
    reason: str  # why it does not fit, in an operator's words

    def describe(self) -> str:
        return f"{self.group}: {self.resource} - {self.reason}"


@dataclass(frozen=True)
class Schedule:
    """The outcome: assignments of the groups that could be placed, shortfalls of those that could not."""

    assignments: dict[str, Assignment] = field(default_factory=dict)
    shortfalls: tuple[Shortfall, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.shortfalls

    @property
    def unplaced(self) -> list[str]:
        return sorted({s.group for s in self.shortfalls})

    @property
    def missing_resources(self) -> list[str]:
        return sorted({s.resource for s in self.shortfalls})


class MissingResourceError(HardwareError):
    """Some groups cannot be placed. `schedule` still holds the assignments of all the others."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        lines = [f"cannot place {len(schedule.unplaced)} group(s): {', '.join(schedule.unplaced)}"]
        lines += [f"  - {s.describe()}" for s in schedule.shortfalls]
        if schedule.assignments:
            lines.append(f"placed: {', '.join(sorted(schedule.assignments))}")
        super().__init__("\n".join(lines))

    @property
    def missing(self) -> list[str]:
        """Every missing resource (ids, or descriptions for unnamed needs such as an accelerator)."""
        return self.schedule.missing_resources


def _gib(n: int) -> str:
    return f"{n / _GIB:.1f} GiB"


class _Placer:
    """Placement state of one `schedule()` call: which resources are taken, by whom."""

    def __init__(self, resources: Iterable[ResourceDescriptor]) -> None:
        self.by_id: dict[str, ResourceDescriptor] = {r.resource_id: r for r in resources}
        self.taken: dict[str, str] = {}  # resource id -> group holding it

    def place(self, p: Placement) -> Assignment | list[Shortfall]:
        short: list[Shortfall] = []
        site = self._site(p, short)
        for rid in p.needs_robot_ids:
            self._check(p, rid, "robot", site, short)
        for cid in p.needs_camera_ids:
            self._check(p, cid, "camera", site, short, exclusive=False)
        accelerator, notes = self._accelerator(p, site, short) if p.needs_accelerator else (None, ())
        if short:
            return short
        for rid in p.needs_robot_ids:
            self.taken[rid] = p.group
        if accelerator is not None:
            self.taken[accelerator.resource_id] = p.group
            site = site or accelerator.site
        return Assignment(
            group=p.group,
            site=site,
            robots=p.needs_robot_ids,
            cameras=p.needs_camera_ids,
            accelerator=accelerator.resource_id if accelerator else None,
            notes=notes,
        )

    def _site(self, p: Placement, short: list[Shortfall]) -> str | None:
        """The group's site: pinned, else the one its robots share."""
        sites = sorted({self.by_id[r].site for r in p.needs_robot_ids if r in self.by_id})
        if len(sites) > 1:
            short.append(
                Shortfall(p.group, ", ".join(p.needs_robot_ids), f"robots are at different sites ({', '.join(sites)})")
            )
        if p.site is not None:
            return p.site
        return sites[0] if len(sites) == 1 else None

    def _check(
        self, p: Placement, rid: str, kind: str, site: str | None, short: list[Shortfall], *, exclusive: bool = True
    ) -> None:
        found = self.by_id.get(rid)
        if found is None:
            short.append(Shortfall(p.group, rid, f"no {kind} {rid!r} is announced"))
        elif found.kind != kind:
            short.append(Shortfall(p.group, rid, f"{rid!r} is a {found.kind}, not a {kind}"))
        elif site is not None and found.site != site:
            short.append(Shortfall(p.group, rid, f"{kind} {rid!r} is at site {found.site!r}, the group at {site!r}"))
        elif exclusive and rid in self.taken:
            short.append(Shortfall(p.group, rid, f"{kind} {rid!r} is already used by group {self.taken[rid]!r}"))

    def _accelerator(
        self, p: Placement, site: str | None, short: list[Shortfall]
    ) -> tuple[ResourceDescriptor | None, tuple[str, ...]]:
        fits = [
            r
            for r in self.by_id.values()
            if r.kind == "accelerator"
            and r.resource_id not in self.taken
            and (site is None or r.site == site)
            and r.memory_bytes >= p.min_accelerator_memory_bytes
        ]
        if fits:
            return max(fits, key=lambda r: (r.memory_bytes, r.compute_units, r.resource_id)), ()
        need = "an accelerator"
        if p.min_accelerator_memory_bytes:
            need += f" with >= {_gib(p.min_accelerator_memory_bytes)}"
        if site is not None:
            need += f" at site {site!r}"
        if p.cpu_fallback:
            _log.warning(
                "group %s: no free %s; running it on the CPU (cpu_fallback)", p.group, need.removeprefix("an ")
            )
            return None, (f"CPU fallback: no free {need.removeprefix('an ')}",)
        short.append(Shortfall(p.group, need, self._why_no_accelerator(p, site)))
        return None, ()

    def _why_no_accelerator(self, p: Placement, site: str | None) -> str:
        gpus = [r for r in self.by_id.values() if r.kind == "accelerator"]
        if not gpus:
            return "no accelerator is announced (set cpu_fallback: true to run on the CPU)"
        at_site = [r for r in gpus if site is None or r.site == site]
        if not at_site:
            return f"accelerators are announced only at {', '.join(sorted({r.site for r in gpus}))}"
        free = [r for r in at_site if r.resource_id not in self.taken]
        if not free:
            return "every matching accelerator is used by " + ", ".join(
                sorted({self.taken[r.resource_id] for r in at_site})
            )
        return f"the largest free one has {_gib(max(r.memory_bytes for r in free))}"


def _order(placements: Sequence[Placement]) -> list[Placement]:
    """Site-bound groups (robots or a pinned site) first, keeping the given order within each class."""
    return sorted(placements, key=lambda p: 0 if (p.needs_robot_ids or p.site is not None) else 1)


def schedule(placements: Sequence[Placement], resources: Iterable[ResourceDescriptor]) -> Schedule:
    """Place every group that can be placed; report what the others lack. Never raises for shortfalls."""
    placer = _Placer(resources)
    assignments: dict[str, Assignment] = {}
    shortfalls: list[Shortfall] = []
    for p in _order(placements):
        outcome = placer.place(p)
        if isinstance(outcome, Assignment):
            assignments[p.group] = outcome
        else:
            shortfalls.extend(outcome)
    ordered = {p.group: assignments[p.group] for p in placements if p.group in assignments}
    return Schedule(assignments=ordered, shortfalls=tuple(shortfalls))


def place(placements: Sequence[Placement], resources: Iterable[ResourceDescriptor]) -> dict[str, Assignment]:
    """Assignments of all groups, or `MissingResourceError` naming every missing resource (with the
    assignments of the groups that could be placed in `error.schedule`)."""
    result = schedule(placements, resources)
    if not result.complete:
        raise MissingResourceError(result)
    return result.assignments
