"""The setup guides in docs/: every `sh runs-here` block runs for real against the driver tests' stand-ins and
reaches the state it promises; every YAML snippet is valid settings of the node kind it names; every `user ...`
line parses with the CLI's parser (and the parameters of `user node KIND -p ...` are valid settings of KIND).
The notation of runnable blocks is in docs/README.md and test/docs/blocks.py.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from test.conftest import wait_until
from test.docs.blocks import DOCS, Block, GuideSyntaxError, blocks, steps, user_commands
from test.docs.session import GuideCheckError, GuideSession
from test.docs.standins import STANDINS
from user.bus.base import Bus
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ENV_DOMAIN, ZenohSettings
from user.cli.main import build_parser, command_of
from user.cli.node_cmd import NODE_VERBS, parse_params
from user.config.strict import ConfigError, from_mapping
from user.deploy.deployment import Deployment, NodeConfig
from user.runtime.kinds import load_kind

pytestmark = pytest.mark.timeout(240)

GUIDES = ("franka_libfranka.md", "franka_ros2.md", "arx.md", "realsense.md", "spacemouse.md", "pedal.md")
OTHER_PAGES = ("robot_site.md",)  # written elsewhere; listed in the index, not checked here
YAML_LANGS = ("yaml", "yml")
ROS2_PARAMS = "ros2-params"  # a YAML block of another package's ROS 2 parameter file, not a node of ours
SUBSCRIBE_TIMEOUT_S = 20.0  # a background `user topic echo` until it listens (it discovers the type first)


def guide_blocks(name: str) -> list[Block]:
    return blocks(DOCS / name)


def all_blocks() -> list[Block]:
    return [block for name in GUIDES for block in guide_blocks(name)]


# ---- the index --------------------------------------------------------------------------------------------


def test_the_index_links_every_page_and_every_page_exists() -> None:
    index = (DOCS / "README.md").read_text()
    linked = set(re.findall(r"\]\(([a-z_0-9]+\.md)\)", index))
    assert linked >= {*GUIDES, *OTHER_PAGES}, linked
    assert {p.name for p in DOCS.glob("*.md")} - {"README.md"} <= linked  # no page left out of the index
    for name in linked:
        assert (DOCS / name).is_file(), name


def test_every_guide_has_the_sections_of_a_guide() -> None:
    for name in GUIDES:
        headings = re.findall(r"^##+ (.+)$", (DOCS / name).read_text(), re.MULTILINE)
        for needed in ("What you need", "Troubleshooting"):
            assert needed in headings, f"{name}: no section {needed!r}"
        assert any(h.startswith(("Run", "Check")) for h in headings), f"{name}: no Run/Check section"


# ---- command lines and YAML snippets ------------------------------------------------------------------------


def check_command(argv: list[str], where: str) -> None:
    """`user ARGV` parses; `user node KIND -p ...` parameters are valid settings of KIND."""
    try:
        args = build_parser(command_of(argv)).parse_args(argv)
    except SystemExit as exc:
        raise AssertionError(f"{where}: `user {' '.join(argv)}` does not parse (exit {exc.code})") from None
    if argv[0] != "node" or args.kind in NODE_VERBS or args.kind is None or args.list or args.describe:
        return
    params = parse_params(args)
    try:
        from_mapping(load_kind(args.kind).Params, params, where=where)
    except ConfigError as exc:
        raise AssertionError(f"{where}: `user {' '.join(argv)}`: {exc}") from None


def test_every_user_command_in_the_guides_parses() -> None:
    checked = 0
    for block in all_blocks():
        if block.lang in ("sh", "bash"):
            for argv in user_commands(block):
                check_command(argv, block.where)
                checked += 1
    assert checked >= 20  # the guides are full of them: a parser that finds none is broken


def test_a_wrong_command_or_setting_fails_the_check() -> None:
    with pytest.raises(AssertionError, match="does not parse"):
        check_command(["topic", "echo"], "x.md:1")  # no topic
    with pytest.raises(AssertionError, match="unknown key 'hosst'"):
        check_command(["node", "robot", "-p", "driver:=franka", "-p", "hosst:=1.2.3.4"], "x.md:1")
    with pytest.raises(AssertionError, match="driver franka needs host"):
        check_command(["node", "robot", "-p", "driver:=franka", "-p", "reward:=external"], "x.md:1")


def node_entries(data: Any, where: str) -> list[dict[str, Any]]:
    """The node entries of a snippet: a deployment (`nodes:`), a list of nodes, or one node (`kind:`)."""
    if isinstance(data, dict) and "nodes" in data:
        from_mapping(Deployment, data, where=where)  # the deployment's own keys, placement, sites
        entries = data["nodes"]
    elif isinstance(data, list):
        entries = data
    elif isinstance(data, dict) and "kind" in data:
        entries = [data]
    else:
        raise AssertionError(f"{where}: a YAML snippet that names no node kind (give `kind:` and `params:`)")
    return list(entries)


def check_yaml(text: str, where: str) -> int:
    """Each node entry of the snippet is a valid node, with valid settings of its kind; how many there were."""
    entries = node_entries(yaml.safe_load(text), where)
    for entry in entries:
        node = from_mapping(NodeConfig, entry, where=where)
        from_mapping(load_kind(node.kind).Params, node.params, where=f"{where}: node {node.name!r} ({node.kind})")
    return len(entries)


def check_ros2_params(text: str, where: str) -> int:
    """A `yaml ros2-params` snippet (another package's parameter file): node -> {ros__parameters: mapping}."""
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or not data:
        raise AssertionError(f"{where}: a ros2-params snippet must map node names to their parameters")
    for node, params in data.items():
        if not isinstance(params, dict) or set(params) != {"ros__parameters"} or not params["ros__parameters"]:
            raise AssertionError(f"{where}: {node}: a ros2-params entry holds exactly `ros__parameters:` (a mapping)")
    return len(data)


def test_every_yaml_snippet_is_valid_settings_of_its_node_kind() -> None:
    snippets = [block for block in all_blocks() if block.lang in YAML_LANGS]
    assert len(snippets) >= 10
    for block in snippets:
        check = check_ros2_params if ROS2_PARAMS in block.flags else check_yaml
        assert check(block.text, block.where) >= 1


def test_a_ros2_params_snippet_is_checked_for_its_shape() -> None:
    assert check_ros2_params("ctrl:\n  ros__parameters:\n    gain: 1.0\n", "x.md:1") == 1
    with pytest.raises(AssertionError, match="exactly `ros__parameters:`"):
        check_ros2_params("ctrl:\n  ros_parameters:\n    gain: 1.0\n", "x.md:1")


def test_a_wrong_yaml_snippet_fails_the_check() -> None:
    good = "- name: pedal\n  kind: pedal\n  params: {source: keyboard, tty_path: /dev/tty}\n"
    assert check_yaml(good, "x.md:1") == 1
    with pytest.raises(ConfigError, match="device_path: a setting of source 'evdev'"):
        check_yaml(good.replace("tty_path: /dev/tty", "device_path: /dev/input/event0"), "x.md:1")
    with pytest.raises(ConfigError, match="unknown node kind"):
        check_yaml(good.replace("kind: pedal", "kind: pedals"), "x.md:1")
    with pytest.raises(AssertionError, match="names no node kind"):
        check_yaml("source: keyboard\n", "x.md:1")


# ---- the runnable blocks ----------------------------------------------------------------------------------


@pytest.fixture
def guide_env(zenoh_env: dict[str, str]) -> dict[str, str]:
    """The environment of a guide's commands: the test router, a domain of the guide's own, `user` on PATH."""
    env = dict(zenoh_env)
    env[ENV_DOMAIN] = f"docs_{uuid.uuid4().hex[:8]}"
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture
def guide_bus(router_endpoint: str, guide_env: dict[str, str]) -> Iterator[Callable[[str], Bus]]:
    """Buses in the guide's domain (stand-ins, the subscriber probe); all closed at teardown."""
    buses: list[ZenohBus] = []

    def make(name: str) -> Bus:
        bus = ZenohBus(name, ZenohSettings(router=[router_endpoint], domain=guide_env[ENV_DOMAIN]))
        buses.append(bus)
        return bus

    yield make
    for bus in buses:
        bus.close()


def run_guide(name: str, env: dict[str, str], tmp_path: Path, make_bus: Callable[[str], Bus]) -> None:
    """Every runnable block of guide `name`, in order, in one session; closed (Ctrl-C) at the end."""
    runnable = [block for block in guide_blocks(name) if block.runs_here]
    probe = make_bus("docs_probe")

    def subscribed(topic: str) -> bool:
        return wait_until(lambda: probe.count_subscribers(topic, 0.3) > 0, SUBSCRIBE_TIMEOUT_S, 0.05)

    session = GuideSession(env, tmp_path, tmp_path, subscribed)
    try:
        for block in runnable:
            session.run_block(block)
    finally:
        session.close()


@pytest.mark.parametrize("guide", GUIDES)
def test_the_runnable_blocks_of_a_guide_reach_their_expected_state(
    guide: str, guide_env: dict[str, str], guide_bus: Callable[[str], Bus], tmp_path: Path
) -> None:
    runnable = [block for block in guide_blocks(guide) if block.runs_here]
    assert runnable, f"{guide}: no runnable block"
    assert all(step.expect for block in runnable for step in steps(block)), f"{guide}: a step promises nothing"
    standins = [make(guide_bus) for make in STANDINS.get(guide, ())]
    try:
        run_guide(guide, guide_env, tmp_path, guide_bus)
    finally:
        for node in standins:
            node.destroy()


# ---- the runner fails when a block does not do what it promises --------------------------------------------


def fake_guide(tmp_path: Path, body: str) -> Block:
    path = tmp_path / "fake.md"
    path.write_text(f"# Fake\n\n```sh runs-here\n{body}\n```\n")
    (block,) = blocks(path)
    return block


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("user node --list   # -> no_such_kind", "did not print 'no_such_kind'"),
        ("user node robot -p driver:=franka   # -> running", "exited with code 2, expected 0"),
        ("user node --list   # (exits 1) -> robot", "exited with code 0, expected 1"),
        ("user node robot -p driver:=franka   # (keeps running) -> running", r"never printed 'running' \(exited\)"),
        ("user node robot -p host:=$NOT_PRINTED   # -> x", r"uses \$NOT_PRINTED"),
        ("# press s -> x", "no command keeps running"),
    ],
)
def test_a_block_that_does_not_reach_its_state_fails(
    body: str, message: str, guide_env: dict[str, str], tmp_path: Path
) -> None:
    session = GuideSession(guide_env, tmp_path, tmp_path)
    with pytest.raises(GuideCheckError, match=message):
        try:
            session.run_block(fake_guide(tmp_path, body))
        finally:
            session.close()


def test_a_captured_value_reaches_later_commands_and_keys_reach_the_terminal(
    guide_env: dict[str, str], tmp_path: Path
) -> None:
    body = (
        "user node robot --describe   # -> robot_id ($TYPE, default\n"
        "user node pedal --name pedal_$TYPE -p source:=keyboard   # (keeps running) -> node pedal_str (pedal) running\n"
        "# press s -> pedal0: KEY_A (reward 1.00)"
    )
    session = GuideSession(guide_env, tmp_path, tmp_path)
    try:
        session.run_block(fake_guide(tmp_path, body))
    finally:
        session.close()
    assert session.env["TYPE"] == "str"


def test_bad_notation_is_refused() -> None:
    block = Block(DOCS / "x.md", 1, "sh", ("runs-here",), "user topic echo /x --once &   # (keeps running) -> a")
    with pytest.raises(GuideSyntaxError, match="background command"):
        steps(block)
