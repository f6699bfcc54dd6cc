"""The rules of sites and their security (issue 15), without processes: site names, links and placements are
checked when a deployment loads, the placement rule keeps a robot's step loop in its site, the link path toward
an owner, and what each router's access control lets through."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from test.deploy.test_sites import _load_owned_by_talker, _sites_yaml
from user.bus.zenoh_config import ENV_CONFIG, ENV_DOMAIN, ENV_MODE, ENV_ROUTER
from user.config.strict import ConfigError, from_mapping
from user.deploy.deployment import Deployment, load
from user.deploy.site_env import node_env, owned_at, router_config
from user.deploy.sites import SiteConfig, next_hop, resolve
from user.security.certs import issue
from user.security.zenoh_files import Owned, SecurityConfig, access_control, tls, write


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
        (
            {"nodes": [{"name": "a", "kind": "talker", "site": "mars"}]},
            "node 'a': site 'mars' is not one of sites (cloud, lab)",
        ),
        (
            {"sites": {"a-b": {"endpoints": ["tcp/h:1"]}}, "nodes": []},
            "sites: invalid site name 'a-b' (letters, digits and '_')",
        ),
        ({"sites": {"cloud": {"endpoints": []}}}, "sites.cloud.endpoints: a site needs at least one endpoint"),
        (
            {
                "sites": {"cloud": {"endpoints": ["tcp/h:1"], "connect": ["moon"]}, "lab": {"endpoints": ["tcp/h:2"]}},
                "nodes": [],
            },
            "sites.cloud.connect: 'moon' is not another site (known: cloud, lab)",
        ),
        (
            {"sites": {"a": {"endpoints": ["tcp/h:1"]}, "b": {"endpoints": ["tcp/h:2"]}}, "nodes": []},
            "sites: not every site is linked to the others (through `connect`, in either direction)",
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
    assert str(info.value) == (
        "d.yaml: rollout 'rollout' (site 'cloud') drives robot 'arm' (site 'lab'); expert 'expert' (site 'cloud') "
        "drives robot 'arm' (site 'lab'): its observations and actions would cross sites at every step. Place it in "
        "the robot's site (each site may have its own rollout), or send it chunks (rollout send: chunks, robot "
        "actions_from: chunks); only transitions, weights, stats, rewards and commands cross sites"
    )
    from_mapping(Deployment, _mapping(), where="d.yaml")  # rollout beside its robot: accepted
    unnamed = [{"name": "arm2", "kind": "robot", "site": "lab", "params": {}},  # its robot id is its node name
               {"name": "teleop", "kind": "teleop", "site": "cloud", "params": {"robot_id": "arm2"}}]  # fmt: skip
    with pytest.raises(ConfigError, match=r"teleop 'teleop' \(site 'cloud'\) drives robot 'arm2' \(site 'lab'\)"):
        from_mapping(Deployment, _mapping(nodes=unnamed), where="d.yaml")


def test_a_rollout_sending_chunks_may_drive_a_robot_that_plays_them_from_another_site() -> None:
    """Real-time chunking: the chunks arrive ahead of the steps they are for, so the rollout may be on a cloud GPU;
    a rollout and a robot that do not agree on chunks are refused wherever they are (the robot would never act)."""
    arm = {"name": "arm", "kind": "robot", "site": "lab", "params": {"robot_id": "arm", "actions_from": "chunks"}}
    rollout = {"name": "rollout", "kind": "rollout", "site": "cloud", "params": {"robots": ["arm"], "send": "chunks"}}
    from_mapping(Deployment, _mapping(nodes=[arm, rollout]), where="d.yaml")
    plain = {**rollout, "site": "lab", "params": {"robots": ["arm"]}}
    with pytest.raises(ConfigError, match=r"rollout 'rollout' sends single actions to robot 'arm', which plays chunks"):
        from_mapping(Deployment, _mapping(nodes=[arm, plain], placement="warn"), where="d.yaml")
    single = {**arm, "params": {"robot_id": "arm"}}
    with pytest.raises(ConfigError, match=r"sends chunks to robot 'arm', which plays single actions"):
        from_mapping(Deployment, _mapping(nodes=[single, rollout]), where="d.yaml")


def test_a_warned_placement_starts(caplog: pytest.LogCaptureFixture) -> None:
    nodes = [
        {"name": "arm", "kind": "robot", "site": "lab", "params": {"robot_id": "arm"}},
        {"name": "rollout", "kind": "rollout", "site": "cloud", "params": {"robots": ["arm"]}},
    ]
    with caplog.at_level("WARNING"):
        from_mapping(Deployment, _mapping(nodes=nodes, placement="warn"), where="d.yaml")
    assert "rollout 'rollout' (site 'cloud') drives robot 'arm'" in caplog.text


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


def test_each_site_router_listens_for_its_nodes_and_links_and_dials_its_neighbours() -> None:
    sites = {
        "cloud": SiteConfig(endpoints=["tcp/127.0.0.1:1"], link=["tls/0.0.0.0:9"], dial=["tls/203.0.113.5:9"]),
        "lab": SiteConfig(endpoints=["tcp/127.0.0.1:2"], connect=["cloud"], start_timeout_s=7.0),
        "far": SiteConfig(endpoints=["tcp/127.0.0.1:3"], link=["tcp/0.0.0.0:8"], connect=["lab"]),
    }
    resolved = {s.name: s for s in resolve(sites, ["tcp/x:0"], 1.0)}
    assert resolved["cloud"].listen == ["tcp/127.0.0.1:1", "tls/0.0.0.0:9"] and resolved["cloud"].connect == []
    assert resolved["lab"].listen == ["tcp/127.0.0.1:2"] and resolved["lab"].connect == ["tls/203.0.113.5:9"]
    assert resolved["far"].connect == ["tcp/127.0.0.1:2"]  # lab has no link: its endpoints
    assert resolved["lab"].endpoints == ["tcp/127.0.0.1:2"] and resolved["lab"].start_timeout_s == 7.0
    assert resolved["lab"].identity == "router.lab" and resolved["lab"].label == "router of site lab"
    (single,) = resolve({}, ["tcp/127.0.0.1:7447"], 30.0)
    assert (single.name, single.listen, single.connect, single.identity) == (
        "",
        ["tcp/127.0.0.1:7447"],
        [],
        "router.main",
    )
    assert single.label == "Zenoh router" and single.start_timeout_s == 30.0


def _secured(tmp_path: Path) -> Deployment:
    ports = {"cloud": 11, "lab_a": 12, "lab_b": 13}
    deployment = _load_owned_by_talker(_sites_yaml(tmp_path, ports, tmp_path / "certs"))
    issue(tmp_path / "certs", deployment.identities())
    return deployment


def test_a_secured_node_gets_its_identity_client_mode_and_its_sites_router(tmp_path: Path) -> None:
    deployment = _secured(tmp_path)
    lab = next(s for s in deployment.routers() if s.name == "lab_a")
    env = node_env(deployment, lab, "lab_talker", tmp_path / "zenoh")
    assert env[ENV_ROUTER] == lab.endpoints[0] and env[ENV_DOMAIN] == "sec" and env[ENV_MODE] == "client"
    config = json.loads(Path(env[ENV_CONFIG]).read_text())
    block = config["transport"]["link"]["tls"]
    assert block == {
        "root_ca_certificate": str(tmp_path / "certs" / "ca.pem"),
        "listen_certificate": str(tmp_path / "certs" / "lab_talker.pem"),
        "listen_private_key": str(tmp_path / "certs" / "lab_talker.key"),
        "connect_certificate": str(tmp_path / "certs" / "lab_talker.pem"),
        "connect_private_key": str(tmp_path / "certs" / "lab_talker.key"),
        "enable_mtls": True,
    }
    router = json.loads(Path(str(router_config(deployment, lab, tmp_path / "zenoh"))).read_text())
    assert router["transport"]["link"]["tls"]["listen_certificate"].endswith("router.lab_a.pem")
    assert router["access_control"]["enabled"] is True and router["access_control"]["default_permission"] == "allow"
    weights = router["access_control"]["subjects"][[r["key_exprs"] for r in router["access_control"]["rules"]
                                                   ].index(["sec/policy/weights"]) // 2]  # fmt: skip
    assert "lab_talker" in weights["cert_common_names"] and "learner" not in weights["cert_common_names"]


def test_an_unsecured_node_gets_only_its_router_and_domain(tmp_path: Path) -> None:
    deployment = load(_sites_yaml(tmp_path, {"cloud": 1, "lab_a": 2, "lab_b": 3}, None))
    cloud = next(s for s in deployment.routers() if s.name == "cloud")
    assert node_env(deployment, cloud, "learner", tmp_path) == {ENV_ROUTER: "tcp/127.0.0.1:1", ENV_DOMAIN: "sec"}
    assert router_config(deployment, cloud, tmp_path) is None
    assert not deployment.security.enabled and not list(tmp_path.glob("*.json5"))


def test_a_missing_certificate_is_named(tmp_path: Path) -> None:
    deployment = _secured(tmp_path)
    (tmp_path / "certs" / "lab_talker.key").unlink()
    lab = next(s for s in deployment.routers() if s.name == "lab_a")
    with pytest.raises(ConfigError, match=r"lab_talker.key is missing; make it with `user certs --deployment FILE`"):
        node_env(deployment, lab, "lab_talker", tmp_path / "zenoh")
    with pytest.raises(ConfigError, match=r"ca.pem is missing"):
        tls(tmp_path / "nowhere", "learner")


def test_an_acl_denies_messages_and_cache_replies_to_all_but_the_allowed() -> None:
    owned = [Owned("/w", frozenset({"learner"})), Owned("/arm/transitions", frozenset({"arm", "router.lab"}))]
    acl = access_control(owned, ["learner", "arm", "router.lab", "rogue"], "")
    assert acl["rules"] == [
        {"id": "owned_0", "permission": "deny", "flows": ["ingress"], "messages": ["put", "delete"],
         "key_exprs": ["w"]},
        {"id": "owned_cache_0", "permission": "deny", "flows": ["ingress"], "messages": ["declare_queryable", "reply"],
         "key_exprs": ["w/@adv/**"]},
        {"id": "owned_1", "permission": "deny", "flows": ["ingress"], "messages": ["put", "delete"],
         "key_exprs": ["arm/transitions"]},
        {"id": "owned_cache_1", "permission": "deny", "flows": ["ingress"], "messages": ["declare_queryable", "reply"],
         "key_exprs": ["arm/transitions/@adv/**"]},
    ]  # fmt: skip
    assert acl["subjects"] == [
        {"id": "not_owner_0", "cert_common_names": ["arm", "rogue", "router.lab"]},
        {"id": "not_owner_1", "cert_common_names": ["learner", "rogue"]},
    ]
    assert acl["policies"] == [
        {"id": "policy_0", "rules": ["owned_0", "owned_cache_0"], "subjects": ["not_owner_0"]},
        {"id": "policy_1", "rules": ["owned_1", "owned_cache_1"], "subjects": ["not_owner_1"]},
    ]
    assert access_control([], ["x"], "d")["enabled"] is False


def test_security_is_on_with_a_certs_dir_only() -> None:
    assert not SecurityConfig().enabled and SecurityConfig(certs_dir="c").enabled


def test_written_config_files_are_json(tmp_path: Path) -> None:
    path = write(tmp_path / "a" / "b.json5", {"x": [1, True]})
    assert json.loads(path.read_text()) == {"x": [1, True]}


def test_a_robot_that_may_join_owns_its_data_at_every_site(tmp_path: Path) -> None:
    """Issue 36: admission is the deployment's, the routers' access control included. A robot that may join under its
    own certificate (an identity a learner's admit pattern matches) owns its data wherever it joins: no other node,
    robot or operator can forge it; its receipts are its learner's."""
    path = tmp_path / "d.yaml"
    path.write_text(
        """name: joining
sites:
  cloud: {endpoints: [tcp/127.0.0.1:1]}
  lab: {endpoints: [tcp/127.0.0.1:2], connect: [cloud]}
  lab2: {endpoints: [tcp/127.0.0.1:3], connect: [cloud]}
security: {identities: [arm_j, ops]}
nodes:
  - {name: learner, kind: learner, site: cloud, params: {robots: [arm], admit: ["arm_*"]}}
  - {name: arm_node, kind: robot, site: lab, params: {robot_id: arm}}
"""
    )
    deployment = load(path)
    at_cloud = {o.topic: set(o.allowed) for o in owned_at(deployment, "cloud")}
    for topic in ("transitions", "transitions/replay", "episode_events"):
        assert at_cloud[f"/arm_j/{topic}"] == {"arm_j", "router.lab", "router.lab2"}
    assert at_cloud["/arm_j/episode_acks"] == {"learner"}
    assert at_cloud["/arm/transitions"] == {"arm_node", "router.lab"}  # a named robot: as before
    assert not any(topic.startswith("/ops/") for topic in at_cloud)  # ops matches no admit pattern
    at_lab = {o.topic: set(o.allowed) for o in owned_at(deployment, "lab")}
    assert at_lab["/arm_j/transitions"] == {"arm_j", "router.cloud", "router.lab2"}
    assert at_lab["/arm_j/episode_acks"] == {"learner", "router.cloud"}
    acl = access_control(owned_at(deployment, "cloud"), deployment.identities(), deployment.domain)
    denied = {
        tuple(rule["key_exprs"]): set(subject["cert_common_names"])
        for rule, subject in zip(acl["rules"][::2], acl["subjects"], strict=True)
    }
    assert {"arm_node", "ops", "learner"} <= denied[("arm_j/transitions",)]  # another robot cannot forge its data
    assert "arm_j" in denied[("arm/transitions",)]  # nor can it forge another's
