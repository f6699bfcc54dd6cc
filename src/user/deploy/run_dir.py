"""A deployment's run directory: where its nodes keep what a run produces (buffer, checkpoints, logs,
progress) and what `user bringup --resume RUN_DIR` continues from.

Parameters and `log_dir` may contain `{run_dir}` (and `{name}`); `bind` substitutes them. A fresh run takes
`runs/<name>`, or `runs/<name>-2`, `-3` ... when that already holds a run, so a new run never writes into an
old one by accident. The deployment as started is saved as `deployment.yaml` in the run directory; a resume
reloads it from there unless another config is given.

On resume, robots continue their episode numbering after the highest episode id stored in the run's buffer
(`buffer/`), so no episode id is used twice in one buffer, or at the next id a robot saved in its `state_dir`
when that is larger (an episode it started but the learner never stored keeps its id): the id logged is the id
the robot starts at.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import yaml

from user.deploy.deployment import Deployment, NodeConfig

_log = logging.getLogger("user.bringup")

SAVED_DEPLOYMENT = "deployment.yaml"
BUFFER_DIR = "buffer"


def fresh_run_dir(deployment: Deployment, root: Path = Path("runs")) -> Path:
    """`runs/<name>`, or the first `runs/<name>-<n>` that does not exist yet or is empty."""
    candidate = root / deployment.name
    n = 1
    while candidate.exists() and any(candidate.iterdir()):
        n += 1
        candidate = root / f"{deployment.name}-{n}"
    return candidate


def _substitute(value: Any, mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        for key, text in mapping.items():
            value = value.replace("{" + key + "}", text)
        return value
    if isinstance(value, dict):
        return {k: _substitute(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, mapping) for v in value]
    return value


def bind(deployment: Deployment, run_dir: Path) -> Deployment:
    """The deployment with `{run_dir}` and `{name}` filled in everywhere (parameters, env, log_dir)."""
    mapping = {"run_dir": str(run_dir), "name": deployment.name}
    nodes = [
        dataclasses.replace(n, params=_substitute(n.params, mapping), env=_substitute(n.env, mapping))
        for n in deployment.nodes
    ]
    return dataclasses.replace(deployment, nodes=nodes, log_dir=_substitute(deployment.log_dir, mapping))


def save(deployment: Deployment, run_dir: Path) -> Path:
    """Write the (unbound) deployment into the run directory, once: a resume reads it back."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / SAVED_DEPLOYMENT
    if not path.exists():
        path.write_text(yaml.safe_dump(dataclasses.asdict(deployment), sort_keys=False), encoding="utf-8")
    return path


def continue_episode_ids(deployment: Deployment, run_dir: Path) -> Deployment:
    """Robots start after their highest episode id stored in the run's buffer, or at the id they saved in their
    `state_dir` when that is larger (neither: unchanged); each robot's first id is logged once."""
    stored: dict[str, int] = {}
    for buffer_dir in buffer_dirs(deployment, run_dir):
        for robot, last in _stored_last_ids(buffer_dir).items():
            stored[robot] = max(last, stored.get(robot, last))
    nodes: list[NodeConfig] = []
    for node in deployment.nodes:
        robot_id = node.params.get("robot_id")
        first = _first_episode_id(node, stored) if node.kind == "robot" and isinstance(robot_id, str) else None
        if first is None:
            nodes.append(node)
            continue
        nodes.append(dataclasses.replace(node, params={**node.params, "first_episode_id": first}))
        _log.info("%s continues at episode %d", robot_id, first)
    return dataclasses.replace(deployment, nodes=nodes)


def buffer_dirs(deployment: Deployment, run_dir: Path) -> list[Path]:
    """The buffers of a (bound) deployment's run: the run directory's own, and every learner's under its `run_dir`
    (one learner per task: {run_dir}/<task>/buffer)."""
    found = [run_dir / BUFFER_DIR]
    for node in deployment.nodes:
        own = node.params.get("run_dir") if node.kind == "learner" else None
        if isinstance(own, str) and own and Path(own) / BUFFER_DIR not in found:
            found.append(Path(own) / BUFFER_DIR)
    return found


def _stored_last_ids(buffer_dir: Path) -> dict[str, int]:
    """Each robot's highest episode id stored in the buffer at `buffer_dir` (none without a buffer)."""
    from user.buffer.index import INDEX_FILE
    from user.buffer.replay import ReplayBuffer  # the buffer stack only when resuming

    if not (buffer_dir / INDEX_FILE).exists():
        return {}
    try:
        with ReplayBuffer.open(buffer_dir, read_only=True) as buf:
            robots = buf.info().robots
    except Exception as exc:  # no index yet (the learner never stored an episode): nothing to continue
        _log.info("no stored episodes to continue from in %s (%s)", buffer_dir, exc)
        return {}
    return {robot_id: info.last_episode_id for robot_id, info in robots.items()}


def _first_episode_id(node: NodeConfig, stored: dict[str, int]) -> int | None:
    """The id robot `node` starts at: after its last stored episode or the id it saved, whichever is larger;
    None when neither is known (it starts where its configuration says)."""
    from user.robot_loop.episode_ids import EpisodeIdStateError, saved_next_id  # the robot loop only when resuming

    robot_id = str(node.params["robot_id"])
    last = stored.get(robot_id)
    candidates = [] if last is None else [last + 1]
    state_dir = node.params.get("state_dir")
    if state_dir:
        try:
            saved = saved_next_id(Path(state_dir), robot_id)
        except EpisodeIdStateError as exc:  # the robot refuses to start with the same message
            _log.warning("%s", exc)
            saved = None
        if saved is not None:
            candidates.append(saved)
    return max(candidates) if candidates else None
