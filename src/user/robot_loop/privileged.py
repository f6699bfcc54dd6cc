"""Names of observation state entries, and privileged simulator state carried inside an observation.

An observation's `state` is the arm's state vector, then the task's extras, then (only when the robot
node is asked to: `privileged_state: true`, simulation only) the task's full `TaskState`, flattened.
Every entry is named in `state_names`:

- arm: `tcp_x .. tcp_qw`, `tcp_vx .. tcp_wz`, `gripper`, and `f_x .. t_z` when a wrench is measured
  (positional `s<i>` for robots whose state vector has another layout, e.g. gym envs);
- extras: `extra/<key>/<i>`;
- privileged: `task/obj/<name>/pose/<i>`, `task/obj/<name>/vel/<i>`, `task/val/<key>/<shape>/<i>` where
  `<shape>` is the array shape joined by `x` (empty for a scalar).

The scripted expert (`user.nodes.expert`) needs the privileged part: tasks decide from object poses that a
real camera-based policy never sees. `arm_and_task_state` rebuilds what `Task.scripted_expert` takes.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import numpy.typing as npt

from user.robots.base import ArmState
from user.tasks.base import ObjectState, TaskState

F32 = npt.NDArray[np.float32]
TCP_NAMES = ("tcp_x", "tcp_y", "tcp_z", "tcp_qx", "tcp_qy", "tcp_qz", "tcp_qw")
VEL_NAMES = ("tcp_vx", "tcp_vy", "tcp_vz", "tcp_wx", "tcp_wy", "tcp_wz")
WRENCH_NAMES = ("f_x", "f_y", "f_z", "t_x", "t_y", "t_z")
ARM_NAMES = (*TCP_NAMES, *VEL_NAMES, "gripper")


class PrivilegedStateError(ValueError):
    """An observation lacks the entries needed to rebuild the arm or task state."""


def arm_state_names(arm: ArmState, vector: F32) -> tuple[str, ...]:
    """Names of `vector` (= `arm.vector()`): the standard layout when it matches, else `s<i>`."""
    names = ARM_NAMES + (WRENCH_NAMES if arm.wrench is not None else ())
    if len(names) == len(vector) and type(arm).vector is ArmState.vector:
        return names
    return tuple(f"s{i}" for i in range(len(vector)))


def flatten_extras(extras: dict[str, F32]) -> tuple[F32, tuple[str, ...]]:
    values: list[F32] = []
    names: list[str] = []
    for key in sorted(extras):
        flat = np.asarray(extras[key], dtype=np.float32).ravel()
        values.append(flat)
        names.extend(f"extra/{key}/{i}" for i in range(flat.size))
    return _concat(values), tuple(names)


def flatten_task_state(state: TaskState) -> tuple[F32, tuple[str, ...]]:
    values: list[F32] = []
    names: list[str] = []
    for name in sorted(state.objects):
        obj = state.objects[name]
        for part, arr in (("pose", obj.pose), ("vel", obj.velocity)):
            flat = np.asarray(arr, dtype=np.float32).ravel()
            values.append(flat)
            names.extend(f"task/obj/{name}/{part}/{i}" for i in range(flat.size))
    for key in sorted(state.values):
        value: F32 = np.asarray(state.values[key], dtype=np.float32)
        shape = "x".join(str(d) for d in value.shape)
        values.append(value.reshape(-1))
        names.extend(f"task/val/{key}/{shape}/{i}" for i in range(value.size))
    return _concat(values), tuple(names)


def _concat(values: list[F32]) -> F32:
    out: F32 = np.concatenate(values).astype(np.float32) if values else np.zeros(0, np.float32)
    return out


def arm_and_task_state(state: npt.ArrayLike, names: tuple[str, ...] | list[str]) -> tuple[ArmState, TaskState]:
    """Rebuild the arm state (TCP pose, velocity, gripper) and the privileged task state of an observation."""
    vec = np.asarray(state, dtype=np.float64)
    if len(names) != vec.size:
        raise PrivilegedStateError(f"observation has {vec.size} state entries but {len(names)} names")
    index = {n: i for i, n in enumerate(names)}
    missing = [n for n in ARM_NAMES if n not in index]
    if missing:
        raise PrivilegedStateError(f"observation state lacks the arm entries {', '.join(missing[:3])} ...")
    arm = ArmState(
        stamp_ns=0,
        tcp_pose=np.array([vec[index[n]] for n in TCP_NAMES]),
        tcp_velocity=np.array([vec[index[n]] for n in VEL_NAMES]),
        joint_positions=np.zeros(0),
        joint_velocities=np.zeros(0),
        gripper=float(vec[index["gripper"]]),
    )
    parts: dict[tuple[str, ...], list[tuple[int, float]]] = defaultdict(list)
    for i, name in enumerate(names):
        if name.startswith("task/"):
            fields = name.split("/")
            parts[tuple(fields[:-1])].append((int(fields[-1]), float(vec[i])))
    if not parts:
        raise PrivilegedStateError(
            "observation carries no privileged task state; start the robot node with privileged_state:=true"
        )
    poses: dict[str, dict[str, npt.NDArray[np.float64]]] = defaultdict(dict)
    values: dict[str, npt.NDArray[np.float64]] = {}
    for head, entries in parts.items():
        flat = np.array([v for _, v in sorted(entries)], dtype=np.float64)
        if head[1] == "obj":
            poses[head[2]][head[3]] = flat
        else:
            shape = tuple(int(d) for d in head[3].split("x")) if head[3] else ()
            values[head[2]] = flat.reshape(shape)
    objects = {name: ObjectState(p["pose"], p["vel"]) for name, p in poses.items()}
    return arm, TaskState(objects=objects, values=values)
