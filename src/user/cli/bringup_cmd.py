"""`user bringup [CONFIG]`: start a whole deployment on the Zenoh runtime.

Before anything starts (no process, no run directory): the deployment file and every node's settings are checked
(`user.deploy.node_params`), and a deployment whose nodes are already alive in its domain is refused
(`user.deploy.running_check`): one run of a deployment per domain.

Exit codes: 0 when every node ran and stopped cleanly, 1 when a node failed for good (a required one stops the
deployment) or did not stop cleanly, 2 when the deployment file or a node's settings are wrong (one line naming
the file, the node and the key) or the deployment already runs in its domain.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path

from user.config.strict import ConfigError
from user.deploy.deployment import Deployment, load, resolve_path
from user.deploy.node_params import check_node_params
from user.deploy.run_dir import SAVED_DEPLOYMENT, bind, continue_episode_ids, fresh_run_dir, save
from user.deploy.running_check import DeploymentRunningError, check_not_running
from user.deploy.supervisor import BringupError, Supervisor, sites_here
from user.runtime.kinds import UnknownNodeKindError
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
    p.add_argument(
        "--domain",
        metavar="NAME",
        help="run in this domain instead of the deployment's `domain:` (a second run beside a running one)",
    )
    p.set_defaults(func=run)


def _deployment(args: argparse.Namespace) -> tuple[Deployment, Path]:
    """The deployment to start (with `--domain` applied) and the file it came from."""
    resume: Path | None = args.resume
    if resume is not None and not (resume / SAVED_DEPLOYMENT).is_file():
        raise ConfigError(f"{resume}: not a run directory (no {SAVED_DEPLOYMENT})")
    source = resolve_path(args.config or (resume / SAVED_DEPLOYMENT if resume is not None else None))
    deployment = load(source)
    if args.domain is not None:
        deployment = dataclasses.replace(deployment, domain=args.domain)  # checked again as `domain:` is
    return deployment, source


def run(args: argparse.Namespace) -> int:
    resume: Path | None = args.resume
    try:
        deployment, source = _deployment(args)
        run_dir = resume or args.run_dir or fresh_run_dir(deployment)
        bound = bind(deployment, run_dir)
        check_node_params(bound, source)
        check_not_running(bound, sites_here(bound, args.site))
    except (ConfigError, UnknownNodeKindError, BringupError, DeploymentRunningError) as exc:
        _log.error("%s", exc)
        return EXIT_CONFIG_ERROR
    try:
        save(deployment, run_dir)
    except OSError as exc:
        _log.error("cannot write the run directory %s: %s", run_dir, exc.strerror or exc)
        return EXIT_FAILED
    if resume is not None:
        bound = continue_episode_ids(bound, run_dir)
    _log.info("%s %s in %s", "resuming" if resume else "starting", deployment.name, run_dir)
    code = Supervisor(bound, args.log_dir, args.site).run()
    _log.info("%s", closing_hint(run_dir))
    return code


def closing_hint(run_dir: Path) -> str:
    """What a person wants after the run: where its results are and how to continue it."""
    return (
        f"the run is in {run_dir} (progress.csv, logs/, buffer/, checkpoints/); "
        f"`user report {run_dir}` summarises it; `user bringup --resume {run_dir}` continues it"
    )
