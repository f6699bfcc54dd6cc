"""Sites and their security (issue 15): a router per site joined router to router over TLS with mutual
authentication; the routers refuse a weights message from anyone but the learner's identity; a peer without a
certificate of the deployment's CA cannot join; the placement rule keeps per-step traffic in its site."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zenoh

from test.conftest import free_port, user_cmd, wait_until
from test.helpers.collect import collect
from user.bus.base import RouterUnreachableError
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings
from user.deploy.deployment import Deployment, load
from user.security.certs import issue
from user.security.zenoh_files import tls, write

STRING = "std_msgs/msg/String"
START_S = 90.0


def _sites_yaml(tmp_path: Path, ports: dict[str, int], certs: Path | None) -> Path:
    scheme = "tls" if certs else "tcp"
    security = f"security: {{certs_dir: {certs}, identities: [rogue, probe]}}\n" if certs else ""
    path = tmp_path / "sites.yaml"
    path.write_text(
        f"""name: three_sites
domain: sec
log_dir: {tmp_path}/logs
{security}sites:
  cloud: {{endpoints: [{scheme}/127.0.0.1:{ports["cloud"]}]}}
  lab_a: {{endpoints: [{scheme}/127.0.0.1:{ports["lab_a"]}], connect: [cloud]}}
  lab_b: {{endpoints: [{scheme}/127.0.0.1:{ports["lab_b"]}], connect: [cloud]}}
nodes:
  - name: learner
    kind: talker
    site: cloud
    params: {{topic: /policy/weights, rate_hz: 10.0, text: from_learner}}
  - name: lab_talker
    kind: talker
    site: lab_a
    params: {{topic: /lab_a/chatter, rate_hz: 10.0, text: from_lab_a}}
"""
    )
    return path


def _load_owned_by_talker(path: Path) -> Deployment:
    """The talker named learner owns /policy/weights through `security.owners` (a talker is not a learner kind)."""
    text = path.read_text().replace(
        "identities: [rogue, probe]", "identities: [rogue, probe], owners: {/policy/weights: learner}"
    )
    path.write_text(text)
    return load(path)


def _bus(name: str, endpoint: str, certs: Path | None, tmp_path: Path) -> ZenohBus:
    config = None
    if certs is not None:
        config = str(write(tmp_path / f"{name}.json5", {"transport": {"link": {"tls": tls(certs, name)}}}))
    settings = ZenohSettings(router=[endpoint], config_file=config, mode="client", domain="sec", router_timeout_s=5)
    return ZenohBus(name, settings)


class Running:
    """`user bringup` of a deployment, stopped with SIGINT."""

    def __init__(self, path: Path, tmp_path: Path, *sites: str) -> None:
        self.out = tmp_path / f"bringup_{'_'.join(sites) or 'all'}.out"
        extra = [arg for site in sites for arg in ("--site", site)]
        with open(self.out, "wb") as f:
            self.proc = subprocess.Popen(
                user_cmd("bringup", str(path), "--run-dir", str(tmp_path / "run"), *extra),
                stdout=f,
                stderr=subprocess.STDOUT,
            )

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(60)


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[tuple[Deployment, dict[str, int], Path]]:
    ports = {site: free_port() for site in ("cloud", "lab_a", "lab_b")}
    certs = tmp_path / "certs"
    deployment = _load_owned_by_talker(_sites_yaml(tmp_path, ports, certs))
    made = subprocess.run(
        user_cmd("certs", str(certs), "--deployment", str(tmp_path / "sites.yaml")), capture_output=True, timeout=60
    )
    assert made.returncode == 0, made.stderr.decode()
    run = Running(tmp_path / "sites.yaml", tmp_path)
    try:
        assert wait_until(lambda: "lab_talker is running" in run.text(), START_S), run.text()
        yield deployment, ports, certs
    finally:
        assert run.stop() == 0, run.text()


def test_a_run_across_three_secured_sites_refuses_forged_weights_and_peers_without_certificates(
    secured: tuple[Deployment, dict[str, int], Path], tmp_path: Path
) -> None:
    _, ports, certs = secured
    endpoint = {site: f"tls/127.0.0.1:{port}" for site, port in ports.items()}
    probe = _bus("probe", endpoint["lab_b"], certs, tmp_path)
    rogue = _bus("rogue", endpoint["lab_a"], certs, tmp_path)
    try:
        weights = collect(probe, "/policy/weights", STRING)
        chatter = collect(probe, "/lab_a/chatter", STRING)
        # the learner's messages cross cloud -> lab_b, lab_a's cross lab_a -> cloud -> lab_b
        assert wait_until(lambda: len(weights) >= 3 and len(chatter) >= 3, 30.0), (weights, chatter)
        forged = rogue.create_publisher("/policy/weights", STRING)
        allowed = rogue.create_publisher("/lab_a/chatter", STRING)
        for _ in range(20):
            forged.publish(b"\x00\x01\x00\x00\x07\x00\x00\x00forged\x00")
            allowed.publish(b"\x00\x01\x00\x00\x06\x00\x00\x00rogue\x00")
            time.sleep(0.05)
        assert wait_until(lambda: any(b"rogue" in m for m in list(chatter)), 10.0)  # the rogue's link works
        time.sleep(0.5)
        assert not any(b"forged" in m for m in list(weights))  # refused by lab_a's router
        assert any(b"from_learner" in m for m in list(weights))
    finally:
        rogue.close()
        probe.close()
    # no certificate: cannot join any site
    for site_endpoint in endpoint.values():
        with pytest.raises((RouterUnreachableError, zenoh.ZError)):
            ZenohBus("stranger", ZenohSettings(router=[site_endpoint], mode="client", router_timeout_s=2))
    # a certificate from another CA: cannot join either
    other = tmp_path / "other_ca"
    issue(other, ["probe"])
    with pytest.raises((RouterUnreachableError, zenoh.ZError)):
        _bus("probe", endpoint["lab_a"], other, tmp_path)


def test_bringup_of_one_site_starts_only_its_router_and_nodes(tmp_path: Path) -> None:
    ports = {site: free_port() for site in ("cloud", "lab_a", "lab_b")}
    path = _sites_yaml(tmp_path, ports, None)
    cloud = Running(path, tmp_path, "cloud")
    lab = Running(path, tmp_path, "lab_a", "lab_b")
    try:
        assert wait_until(lambda: "learner is running" in cloud.text(), START_S), cloud.text()
        assert wait_until(lambda: "lab_talker is running" in lab.text(), START_S), lab.text()
        assert "lab_talker" not in cloud.text() and "started learner" not in lab.text()
        assert "router.cloud" in cloud.text() and "router.lab_a" not in cloud.text()
        probe = ZenohBus("probe", ZenohSettings(router=[f"tcp/127.0.0.1:{ports['lab_b']}"], domain="sec"))
        try:
            got = collect(probe, "/policy/weights", STRING)  # from the cloud host's learner, through its router link
            assert wait_until(lambda: len(got) >= 2, 30.0)
        finally:
            probe.close()
    finally:
        codes = (lab.stop(), cloud.stop())
    assert codes == (0, 0), (cloud.text(), lab.text())
    bad = subprocess.run(user_cmd("bringup", str(path), "--site", "moon"), capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--site moon: not a site of three_sites" in bad.stderr


def test_user_graph_shows_the_links_topics_cross_with_their_rates(tmp_path: Path) -> None:
    ports = {site: free_port() for site in ("cloud", "lab_a", "lab_b")}
    path = _sites_yaml(tmp_path, ports, None)
    text = path.read_text() + (
        "  - {name: cloud_listener, kind: listener, site: cloud, params: {topic: /lab_a/chatter}}\n"
        "  - {name: lab_listener, kind: listener, site: lab_a, params: {topic: /lab_a/chatter}}\n"
        "  - {name: local_talker, kind: talker, site: lab_b, params: {topic: /lab_b/local, rate_hz: 5.0}}\n"
        "  - {name: local_listener, kind: listener, site: lab_b, params: {topic: /lab_b/local}}\n"
    )
    path.write_text(text)
    run = Running(path, tmp_path)
    try:
        assert wait_until(lambda: "local_listener is running" in run.text(), START_S), run.text()
        env = dict(os.environ, USER_ZENOH_ROUTER=f"tcp/127.0.0.1:{ports['lab_b']}", USER_DOMAIN="sec")
        graph = subprocess.run(user_cmd("graph", "--deployment", str(path), "--window", "2"),
                               env=env, capture_output=True, text=True, timeout=90)  # fmt: skip
    finally:
        assert run.stop() == 0, run.text()
    assert graph.returncode == 0, graph.stderr
    lines = {line.split()[0]: line for line in graph.stdout.splitlines() if line.startswith("/")}
    chatter = lines["/lab_a/chatter"]
    assert "lab_talker" in chatter and "cloud_listener,lab_listener" in chatter and "lab_a -> cloud" in chatter
    assert "within lab_b" in lines["/lab_b/local"]
    rate = float(lines["/lab_a/chatter"].split()[4])
    assert rate > 0  # measured, not announced: the talker publishes at 10 Hz
