"""config/foxglove_layout.json: a valid Foxglove layout whose panels name topics and fields the default deployment
has. The default deployment's topics are taken from its nodes, not from a list: its robot nodes run here (in this
process, with config/default.yaml's parameters) and announce what they publish, and the learner's stats topic is its
`stats_topic` setting as default.yaml leaves it."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from test.conftest import REPO, wait_until
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings
from user.config.strict import from_mapping
from user.deploy.deployment import load
from user.interfaces.codec import default_codec
from user.runtime.kinds import load_kind
from user.runtime.node import started

pytestmark = pytest.mark.timeout(240)

LAYOUT = REPO / "config" / "foxglove_layout.json"
DEFAULT = REPO / "config" / "default.yaml"
# Standard ROS 2 topics the layout shows when a site publishes them (a ROS 2 site's diagnostic_aggregator, through
# the bridge); no node of the default deployment does.
ROS_SITE_TOPICS = {"/diagnostics": "diagnostic_msgs/msg/DiagnosticArray"}
PANEL_KINDS = {"3D", "Image", "Plot", "RawMessages"}


def _layout() -> dict[str, Any]:
    return dict(json.loads(LAYOUT.read_text(encoding="utf-8")))


def _leaves(tree: Any) -> Iterator[str]:
    if isinstance(tree, str):
        yield tree
    else:
        yield from _leaves(tree["first"])
        yield from _leaves(tree["second"])


def named_paths(layout: dict[str, Any]) -> list[str]:
    """Every topic or message path ("/topic.field[i]") a panel of the layout names."""
    paths: list[str] = []
    for panel_id, config in layout["configById"].items():
        kind = panel_id.split("!")[0]
        if kind == "Plot":
            paths += [p["value"] for p in config["paths"]]
        elif kind == "RawMessages":
            paths.append(config["topicPath"])
        elif kind == "3D":
            paths += list(config.get("topics", {}))
        elif kind == "Image" and config["imageMode"].get("imageTopic"):
            paths.append(config["imageMode"]["imageTopic"])
    return paths


def split_path(path: str) -> tuple[str, list[str]]:
    """ "/a/b.position[3].x" -> ("/a/b", ["position", "x"])."""
    topic, _, fields = path.partition(".")
    return topic, [re.sub(r"\[\d+\]$", "", f) for f in fields.split(".")] if fields else []


def has_fields(typename: str, fields: list[str]) -> bool:
    """Whether the chain of `fields` exists in messages of `typename` (through arrays of messages too)."""
    fielddefs = default_codec().typestore.fielddefs
    current: str | None = typename
    for name in fields:
        members: dict[str, Any] = dict(fielddefs[current][1]) if current is not None else {}
        if name not in members:
            return False
        kind, detail = members[name]
        if kind.name in ("SEQUENCE", "ARRAY"):  # (element (kind, detail), length)
            kind, detail = detail[0]
        current = str(detail) if kind.name == "NAME" else None
    return True


@pytest.fixture(scope="module")
def default_topics(router_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Topic -> type of the default deployment: announced by its robot nodes running here, plus the learner's stats."""
    deployment = load(DEFAULT)
    run_dir = tmp_path_factory.mktemp("default_run")
    settings = ZenohSettings(router=[router_endpoint], domain=f"layout_{uuid.uuid4().hex[:8]}")
    watcher = ZenohBus("layout_watcher", settings)
    nodes, topics = [], {}
    try:
        for node in deployment.nodes:
            params = {
                k: v.replace("{run_dir}", str(run_dir)) if isinstance(v, str) else v for k, v in node.params.items()
            }
            cls = load_kind(node.kind)
            if node.kind == "robot":
                params["wait_for_consumer_s"] = 0.0  # nothing consumes here; what it publishes is the same
                nodes.append(started(cls(ZenohBus(node.name, settings, params))))
            elif node.kind == "learner":
                stats = from_mapping(cls.Params, params, where=node.name).stats_topic
                topics[stats] = "user/msg/TrainingStats"
        robots = [n.params["robot_id"] for n in deployment.nodes if n.kind == "robot"]
        assert robots, "the default deployment has no robot"
        assert wait_until(lambda: all(f"/{r}/joint_states" in watcher.topic_names_and_types(0.3) for r in robots), 60)
        for topic, types in watcher.topic_names_and_types(1.0).items():
            topics[topic] = types[0]
        yield topics
    finally:
        for running in nodes:
            running.destroy()
            running.bus.close()
        watcher.close()


def test_the_layout_is_a_foxglove_layout_with_the_panels_asked_for() -> None:
    layout = _layout()
    assert set(layout) >= {"configById", "layout"}
    panels = list(_leaves(layout["layout"]))
    assert sorted(panels) == sorted(layout["configById"]), "every panel placed once, and every placed one configured"
    assert {p.split("!")[0] for p in panels} == PANEL_KINDS


def test_every_topic_and_field_the_layout_names_exists_in_the_default_deployment(
    default_topics: dict[str, str],
) -> None:
    known = {**default_topics, **ROS_SITE_TOPICS}
    for path in named_paths(_layout()):
        topic, fields = split_path(path)
        assert topic in known, f"the layout names {topic}, which the default deployment does not have"
        assert has_fields(known[topic], fields), f"{path}: no such field in {known[topic]}"


def test_the_layout_shows_every_robot_of_the_default_deployment_and_the_learner(
    default_topics: dict[str, str],
) -> None:
    topics = {split_path(p)[0] for p in named_paths(_layout())}
    robots = {t.split("/")[1] for t, typ in default_topics.items() if typ == "sensor_msgs/msg/JointState"}
    assert robots and all(f"/{r}/joint_states" in topics for r in robots)
    assert any(typ == "user/msg/TrainingStats" and t in topics for t, typ in default_topics.items())
