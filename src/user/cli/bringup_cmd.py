"""`user bringup [CONFIG]`: start a whole deployment on the Zenoh runtime.

Exit codes: 0 when every node ran and stopped cleanly, 1 when a node failed for good (a required one stops the
deployment) or did not stop cleanly, 2 when the deployment file is wrong (one line naming the file and the key).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from user.config.strict import ConfigError
from user.deploy.deployment import load
from user.deploy.run_dir import SAVED_DEPLOYMENT, bind, continue_episode_ids, fresh_run_dir, save
from user.deploy.supervisor import BringupError, Supervisor
from user.runtime.status import EXIT_CONFIG_ERROR, EXIT_FAILED

_log = logging.getLogger("user.bringup")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("bringup", help="start every node of a deployment, each in its own process")
    p.add_argument("config", nargs="?", help="deployment YAML (a path, or a name in config/; default: default)")
    p.add_argument("--log-dir", type=Path, help="where node log files go (default from the deployment)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--run-dir", type=Path, help="run directory (default: a fresh runs/<name>, runs/<name>-2 ...)")
    where.add_argument(
        "--resume",
        type=Path,
        metavar="RUN_DIR",
        help="continue the run in RUN_DIR: its buffer, checkpoints and (unless CONFIG is given) its deployment",
    )
    p.add_argument(
        "--site",
        action="append",
        metavar="SITE",
        help="start only this site's router and nodes (repeatable; default: every site, all on this host)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    resume: Path | None = args.resume
    try:
        if resume is not None and not (resume / SAVED_DEPLOYMENT).is_file():
            raise ConfigError(f"{resume}: not a run directory (no {SAVED_DEPLOYMENT})")
        config = args.config or (resume / SAVED_DEPLOYMENT if resume is not None else None)
        deployment = load(config)
    except ConfigError as exc:
        _log.error("%s", exc)
        return EXIT_CONFIG_ERROR
    run_dir = resume or args.run_dir or fresh_run_dir(deployment)
    try:
        save(deployment, run_dir)
    except OSError as exc:
        _log.error("cannot write the run directory %s: %s", run_dir, exc.strerror or exc)
        return EXIT_FAILED
    bound = bind(deployment, run_dir)
    if resume is not None:
        bound = continue_episode_ids(bound, run_dir)
    _log.info("%s %s in %s", "resuming" if resume else "starting", deployment.name, run_dir)
    try:
        supervisor = Supervisor(bound, args.log_dir, args.site)
    except BringupError as exc:
        _log.error("%s", exc)
        return EXIT_CONFIG_ERROR
    return supervisor.run()
