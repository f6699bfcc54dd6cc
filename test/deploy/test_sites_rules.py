"""The rules of sites and their security (issue 15), without processes: site names, links and placements are
checked when a deployment loads, the placement rule keeps a robot's step loop in its site, the link path toward
an owner, and what each router's access control lets through."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from test.deploy.test_sites import _load_owned_by_talker, _sites_yaml
from user.config.strict import ConfigError, from_mapping
from user.deploy.deployment import Deployment, load
from user.deploy.site_env import owned_at
from user.deploy.sites import SiteConfig, next_hop
from user.security.zenoh_files import access_control


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
