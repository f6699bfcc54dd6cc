"""A deployment's run directory: where its nodes keep what a run produces (buffer, checkpoints, logs,
progress) and what `user bringup --resume RUN_DIR` continues from.

Parameters and `log_dir` may contain `{run_dir}` (and `{name}`); `bind` substitutes them. A fresh run takes
`runs/<name>`, or `runs/<name>-2`, `-3` ... when that already holds a run, so a new run never writes into an
old one by accident. The deployment as started is saved as `deployment.yaml` in the run directory; a resume
reloads it from there unless another config is given.

On resume, robots continue their episode numbering after the highest episode id stored in the run's buffer
(`buffer/`), so no episode id is used twice in one buffer.
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
    """Robots start after their highest episode id stored in the run's buffer (no buffer: unchanged)."""
    buffer_dir = run_dir / BUFFER_DIR
    from user.buffer.index import INDEX_FILE
    from user.buffer.replay import ReplayBuffer  # the buffer stack only when resuming

    if not (buffer_dir / INDEX_FILE).exists():
        return deployment

    try:
        with ReplayBuffer.open(buffer_dir, read_only=True) as buf:
            robots = buf.info().robots
    except Exception as exc:  # no index yet (the learner never stored an episode): nothing to continue
        _log.info("no stored episodes to continue from in %s (%s)", buffer_dir, exc)
        return deployment
    nodes: list[NodeConfig] = []
    for node in deployment.nodes:
        robot_id = node.params.get("robot_id")
        if node.kind == "robot" and robot_id in robots:
            first = robots[robot_id].last_episode_id + 1
            nodes.append(dataclasses.replace(node, params={**node.params, "first_episode_id": first}))
            _log.info("%s continues at episode %d", robot_id, first)
        else:
            nodes.append(node)
    return dataclasses.replace(deployment, nodes=nodes)
