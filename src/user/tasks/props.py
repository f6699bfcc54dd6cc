"""Small builders for task scenery on an `MjsBody`: boxes, free objects, trays, a square hole, buttons."""

from __future__ import annotations

import math
from collections.abc import Sequence

import mujoco

Rgba = Sequence[float]
BOX = mujoco.mjtGeom.mjGEOM_BOX


def add_box(
    body: mujoco.MjsBody, name: str, half: Sequence[float], pos: Sequence[float], rgba: Rgba, **attrs: object
) -> mujoco.MjsGeom:
    """A box geom; extra keyword attributes (friction, mass, condim, ...) are set on it."""
    geom = body.add_geom(name=name, type=BOX, size=list(half), pos=list(pos), rgba=list(rgba))
    for key, value in attrs.items():
        setattr(geom, key, value)
    return geom


def add_fixture(world: mujoco.MjsBody, name: str) -> mujoco.MjsBody:
    """A body fixed to the world that a task can move between episodes (a mocap body)."""
    return world.add_body(name=name, mocap=True)


def add_free_box(
    world: mujoco.MjsBody, name: str, *, half: Sequence[float], mass: float, rgba: Rgba, friction: Sequence[float]
) -> mujoco.MjsBody:
    """A free-floating box object (one geom named like the body), placed at reset."""
    body = world.add_body(name=name)
    body.add_freejoint(name=f"{name}_free")
    add_box(body, name, half, (0.0, 0.0, 0.0), rgba, mass=mass, friction=list(friction), condim=4)
    return body


def add_tray(world: mujoco.MjsBody, name: str, *, inner_half: float, wall: float, height: float, rgba: Rgba) -> None:
    """A square tray (floor + four walls) on a fixture body `name`; its floor top is at z = wall."""
    body = add_fixture(world, name)
    outer = inner_half + wall
    add_box(body, f"{name}_floor", (outer, outer, wall / 2), (0.0, 0.0, wall / 2), rgba)
    mid = inner_half + wall / 2
    hz = height / 2
    for i, (x, y, hx, hy) in enumerate(
        (
            (mid, 0.0, wall / 2, outer),
            (-mid, 0.0, wall / 2, outer),
            (0.0, mid, inner_half, wall / 2),
            (0.0, -mid, inner_half, wall / 2),
        )
    ):
        add_box(body, f"{name}_wall{i}", (hx, hy, hz), (x, y, hz), rgba)


def add_square_hole(
    world: mujoco.MjsBody,
    name: str,
    *,
    hole_half: float,
    outer_half: float,
    height: float,
    depth: float,
    rgba: Rgba,
    chamfer: float = 0.0,
) -> None:
    """A block on fixture body `name` with a square hole (side 2 * hole_half) of `depth` from its top at `height`.

    `chamfer` > 0 bevels the hole's rim at 45 degrees: the opening at the top is 2 * (hole_half + chamfer)
    wide and narrows to the hole over the top `chamfer` metres, like a machined or printed fixture.
    """
    if not 0.0 <= chamfer < min(depth, outer_half - hole_half):
        raise ValueError(f"chamfer {chamfer} must be >= 0 and less than the hole depth and the wall thickness")
    body = add_fixture(world, name)
    _add_ring(body, f"{name}_wall", inner=hole_half, outer=outer_half, z0=0.0, z1=height - chamfer, rgba=rgba)
    if chamfer > 0.0:
        _add_ring(
            body, f"{name}_rim", inner=hole_half + chamfer, outer=outer_half, z0=height - chamfer, z1=height, rgba=rgba
        )
        # Four slanted boxes whose inner faces are the bevel planes; each fills the triangle between the
        # lower wall, the rim block and the bevel (its back half lies inside that solid material).
        along = hole_half + chamfer
        size_n, size_s = chamfer / (2.0 * math.sqrt(2.0)), chamfer / math.sqrt(2.0)
        offset = hole_half + 0.75 * chamfer
        z = height - 0.75 * chamfer
        c, s = math.cos(math.pi / 8), math.sin(math.pi / 8)  # quaternion of a 45 degree turn
        bevels = (
            ((offset, 0.0, z), (size_n, along, size_s), (c, 0.0, s, 0.0)),
            ((-offset, 0.0, z), (size_n, along, size_s), (c, 0.0, -s, 0.0)),
            ((0.0, offset, z), (along, size_n, size_s), (c, -s, 0.0, 0.0)),
            ((0.0, -offset, z), (along, size_n, size_s), (c, s, 0.0, 0.0)),
        )
        for i, (pos, half, quat) in enumerate(bevels):
            add_box(body, f"{name}_bevel{i}", half, pos, rgba, quat=list(quat))
    floor = height - depth
    add_box(body, f"{name}_floor", (hole_half, hole_half, floor / 2), (0.0, 0.0, floor / 2), rgba)


def _add_ring(
    body: mujoco.MjsBody, prefix: str, *, inner: float, outer: float, z0: float, z1: float, rgba: Rgba
) -> None:
    """Four boxes forming a square frame (inner and outer half sides) between heights z0 and z1."""
    mid, side, hz = (inner + outer) / 2, (outer - inner) / 2, (z1 - z0) / 2
    walls = ((mid, 0.0, side, outer), (-mid, 0.0, side, outer), (0.0, mid, inner, side), (0.0, -mid, inner, side))
    for i, (x, y, hx, hy) in enumerate(walls):
        add_box(body, f"{prefix}{i}", (hx, hy, hz), (x, y, z0 + hz), rgba)


def add_button(
    world: mujoco.MjsBody, name: str, *, radius: float, base_height: float, travel: float, stiffness: float, rgba: Rgba
) -> None:
    """A push button: fixture `name` (grey base) with a sprung cap body `{name}_cap` on slide joint `{name}_joint`.

    The cap's top is at base_height + 0.02 when released (held there by a preloaded spring); pressing moves it
    down by up to `travel`.
    """
    body = add_fixture(world, name)
    add_box(
        body,
        f"{name}_base",
        (radius + 0.01, radius + 0.01, base_height / 2),
        (0.0, 0.0, base_height / 2),
        (0.3, 0.3, 0.3, 1.0),
    )
    cap = body.add_body(name=f"{name}_cap", pos=[0.0, 0.0, base_height + 0.01])
    cap.add_joint(
        name=f"{name}_joint",
        type=mujoco.mjtJoint.mjJNT_SLIDE,
        axis=[0.0, 0.0, 1.0],
        range=[-travel, 0.0],
        limited=mujoco.mjtLimited.mjLIMITED_TRUE,
        stiffness=stiffness,
        springref=0.01,  # preload: the cap rests against its upper stop
        damping=2.0 * (stiffness * 0.05) ** 0.5,
    )
    cap.add_geom(
        name=f"{name}_cap",
        type=mujoco.mjtGeom.mjGEOM_CYLINDER,
        size=[radius, 0.01, 0.0],
        rgba=list(rgba),
        mass=0.05,
    )
