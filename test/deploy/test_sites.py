"""Sites and their security (issue 15): a router per site joined router to router over TLS with mutual
authentication; the routers refuse a weights message from anyone but the learner's identity; a peer without a
certificate of the deployment's CA cannot join; the placement rule keeps per-step traffic in its site."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zenoh

from test.conftest import free_port, user_cmd, wait_until
from user.bus.base import RouterUnreachableError
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings
from user.config.strict import ConfigError, from_mapping
from user.deploy.deployment import Deployment, load
from user.deploy.site_env import owned_at
from user.deploy.sites import SiteConfig, next_hop
from user.security.certs import issue
from user.security.zenoh_files import access_control, tls, write

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


def _collect(bus: ZenohBus, topic: str) -> list[bytes]:
    got: list[bytes] = []
    lock = threading.Lock()

    def on(payload: bytes) -> None:
        with lock:
            got.append(payload)

    bus.create_subscription(topic, STRING, on)
    return got


def test_a_run_across_three_secured_sites_refuses_forged_weights_and_peers_without_certificates(
    secured: tuple[Deployment, dict[str, int], Path], tmp_path: Path
) -> None:
    _, ports, certs = secured
    endpoint = {site: f"tls/127.0.0.1:{port}" for site, port in ports.items()}
    probe = _bus("probe", endpoint["lab_b"], certs, tmp_path)
    rogue = _bus("rogue", endpoint["lab_a"], certs, tmp_path)
    try:
        weights = _collect(probe, "/policy/weights")
        chatter = _collect(probe, "/lab_a/chatter")
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


def test_the_access_control_allows_the_owner_and_the_hop_toward_it(tmp_path: Path) -> None:
    ports = {"cloud": 1, "lab_a": 2, "lab_b": 3}
    deployment = _load_owned_by_talker(_sites_yaml(tmp_path, ports, tmp_path / "certs"))
    everyone = deployment.identities()
    assert set(everyone) == {"router.cloud", "router.lab_a", "router.lab_b", "learner", "lab_talker", "rogue", "probe"}
    for site, allowed in (("cloud", {"learner"}), ("lab_a", {"learner", "router.cloud"})):
        owned = [o for o in owned_at(deployment, site) if o.topic == "/policy/weights"]
        assert [(o.topic, set(o.allowed)) for o in owned] == [("/policy/weights", allowed)]
        acl = access_control(owned, everyone, deployment.domain)
        assert acl["enabled"] is True
        assert acl["rules"][0]["key_exprs"] == ["sec/policy/weights"]
        assert acl["rules"][1]["key_exprs"] == ["sec/policy/weights/@adv/**"]  # the latched cache's replies
        assert set(acl["subjects"][0]["cert_common_names"]) == set(everyone) - allowed


def test_next_hop_follows_the_links() -> None:
    sites = {
        "cloud": SiteConfig(endpoints=["tcp/a:1"]),
        "lab_a": SiteConfig(endpoints=["tcp/b:1"], connect=["cloud"]),
        "far": SiteConfig(endpoints=["tcp/c:1"], connect=["lab_a"]),
    }
    assert next_hop(sites, "far", "cloud") == "lab_a"
    assert next_hop(sites, "lab_a", "cloud") == "cloud"
    assert next_hop(sites, "cloud", "far") == "lab_a"
    assert next_hop(sites, "cloud", "cloud") is None


def _mapping(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "name": "x",
        "sites": {
            "cloud": {"endpoints": ["tcp/127.0.0.1:1"]},
            "lab": {"endpoints": ["tcp/127.0.0.1:2"], "connect": ["cloud"]},
        },
        "nodes": [
            {"name": "arm", "kind": "robot", "site": "lab", "params": {"robot_id": "arm"}},
            {"name": "rollout", "kind": "rollout", "site": "lab", "params": {"robots": ["arm"]}},
        ],
    }
    base.update(changes)
    return base


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"nodes": [{"name": "a", "kind": "talker", "site": "mars"}]}, "node 'a': site 'mars' is not one of sites"),
        ({"sites": {"cloud": {"endpoints": []}}}, "sites.cloud.endpoints: a site needs at least one endpoint"),
        ({"sites": {"cloud": {"endpoints": ["tcp/h:1"], "connect": ["moon"]}}}, "'moon' is not another site"),
        (
            {"sites": {"a": {"endpoints": ["tcp/h:1"]}, "b": {"endpoints": ["tcp/h:2"]}}, "nodes": []},
            "not every site is linked to the others",
        ),
        ({"sites": {}}, "node 'arm': site 'lab' given but the deployment has no `sites`"),
        ({"security": {"certs_dir": "/c"}}, "these router endpoints are not tls/: tcp/127.0.0.1:1, tcp/127.0.0.1:2"),
        (
            {
                "security": {"certs_dir": "/c", "owners": {"/w": "nobody"}},
                "sites": {"c": {"endpoints": ["tls/h:1"]}},
                "nodes": [],
            },
            "'/w' is owned by 'nobody', which is not a node",
        ),
    ],
)
def test_bad_sites_are_refused_naming_the_key(change: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        from_mapping(Deployment, _mapping(**change), where="d.yaml")


def test_the_placement_rule_keeps_a_robots_step_loop_in_its_site() -> None:
    nodes = [
        {"name": "arm", "kind": "robot", "site": "lab", "params": {"robot_id": "arm"}},
        {"name": "rollout", "kind": "rollout", "site": "cloud", "params": {"robots": ["arm"]}},
        {"name": "expert", "kind": "expert", "site": "cloud", "params": {"robot_id": "arm"}},
        {"name": "learner", "kind": "learner", "site": "cloud", "params": {"robots": ["arm"]}},  # crosses: fine
    ]
    with pytest.raises(ConfigError) as info:
        from_mapping(Deployment, _mapping(nodes=nodes), where="d.yaml")
    text = str(info.value)
    assert "rollout 'rollout' (site 'cloud') drives robot 'arm' (site 'lab')" in text
    assert "expert 'expert' (site 'cloud') drives robot 'arm' (site 'lab')" in text
    assert "learner" not in text
    from_mapping(Deployment, _mapping(), where="d.yaml")  # rollout beside its robot: accepted


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
            got = _collect(probe, "/policy/weights")  # from the cloud host's learner, through its router link
            assert wait_until(lambda: len(got) >= 2, 30.0)
        finally:
            probe.close()
    finally:
        codes = (lab.stop(), cloud.stop())
    assert codes == (0, 0), (cloud.text(), lab.text())
    bad = subprocess.run(user_cmd("bringup", str(path), "--site", "moon"), capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--site moon: not a site of three_sites" in bad.stderr


def test_robots_own_their_data_and_learners_their_answers(tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(
        """name: owned
sites:
  cloud: {endpoints: [tcp/127.0.0.1:1]}
  lab: {endpoints: [tcp/127.0.0.1:2], connect: [cloud]}
nodes:
  - {name: learner, kind: learner, site: cloud, params: {robots: [arm], weights_topic: /w}}
  - {name: arm_node, kind: robot, site: lab, params: {robot_id: arm}}
"""
    )
    deployment = load(path)
    at_cloud = {o.topic: set(o.allowed) for o in owned_at(deployment, "cloud")}
    assert at_cloud == {
        "/w": {"learner"},
        "/arm/episode_acks": {"learner"},
        "/arm/transitions": {"arm_node", "router.lab"},
        "/arm/transitions/replay": {"arm_node", "router.lab"},
        "/arm/episode_events": {"arm_node", "router.lab"},
    }
    at_lab = {o.topic: set(o.allowed) for o in owned_at(deployment, "lab")}
    assert at_lab["/arm/transitions"] == {"arm_node"} and at_lab["/w"] == {"learner", "router.cloud"}


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
