"""The supervisor's router start (`user.deploy.supervisor`): its deadline comes from the deployment
(`router.start_timeout_s`), and Ctrl-C while waiting for it does not wait the deadline out."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from test.conftest import free_port
from user.config.strict import ConfigError
from user.deploy.deployment import Deployment, load
from user.deploy.sites import Site
from user.deploy.supervisor import BringupError, Supervisor


class SilentRouter(Supervisor):
    """A supervisor whose router process never answers (a machine too loaded to start it in time)."""

    def router_argv(self, site: Site) -> list[str]:
        return [sys.executable, "-c", "import time; time.sleep(600)"]


def _deployment(tmp_path: Path, timeout_s: float) -> Deployment:
    path = tmp_path / "d.yaml"
    path.write_text(
        f"name: x\nrouter: {{endpoints: [tcp/127.0.0.1:{free_port()}], start: always, start_timeout_s: {timeout_s}}}\n"
        "nodes: []\n"
    )
    return load(path)


def test_the_router_start_deadline_is_the_deployments(tmp_path: Path) -> None:
    supervisor = SilentRouter(_deployment(tmp_path, 1.5), tmp_path / "logs")
    supervisor.log_dir.mkdir()
    try:
        with pytest.raises(BringupError, match=r"did not come up on .* within router.start_timeout_s \(1.5 s\)"):
            supervisor.start_router()
    finally:
        supervisor.shutdown()
    assert supervisor.router is not None and not supervisor.router.alive()


def test_ctrl_c_while_the_router_starts_ends_the_wait(tmp_path: Path) -> None:
    supervisor = SilentRouter(_deployment(tmp_path, 600.0), tmp_path / "logs")
    supervisor.log_dir.mkdir()
    supervisor.stop_event.set()
    try:
        supervisor.start()  # returns at the first look instead of after 600 s, and starts no node
    finally:
        supervisor.shutdown()
    assert supervisor.children == []


def test_the_router_deadline_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text("name: x\nrouter: {start_timeout_s: 0.0}\nnodes: []\n")
    with pytest.raises(ConfigError, match=r"router.start_timeout_s: 0.0 is below the minimum 0.1"):
        load(path)
