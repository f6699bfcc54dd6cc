"""The docker images, the compose file and the robot-site guide, checked statically (base images cannot be pulled
here): every COPY source is in the build context, every pip extra exists, every `user` command and launch file
used exists, every deployment referenced loads (the ROS one as ros2 launch encodes it), the compose services'
builds exist and their routers' endpoints, robots, domain and policy agree, and colcon runs as scripts/build_ros
runs it. Each check is a function of the repository root returning its problems; `test_a_planted_fault_is_found`
plants a fault in a copy of the files and expects the check to name it."""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from test.conftest import REPO
from test.docker.dockerfiles import (
    arg_defaults,
    compose_services,
    copy_sources,
    docker_ignores,
    extras,
    ignore_patterns,
    keyword_args,
    option_values,
    pip_installs,
    pyproject_extras,
    run_commands,
    simple_commands,
    volume_map,
)
from user.cli.main import COMMANDS
from user.config.strict import ConfigError
from user.deploy.deployment import Deployment, load, resolve_path
from user.deploy.ros_launch import ros_launches

DOCKERFILES = ("docker/Dockerfile.ros", "docker/Dockerfile.learner")
COMPOSE = "docker/compose.yaml"
GUIDE = "docs/robot_site.md"
NEVER_IN_CONTEXT = (".venv", "build", "install", "log", "runs", "mutants", ".git")


def _entrypoint(root: Path, dockerfile: str) -> list[str]:
    found = keyword_args(root / dockerfile, "ENTRYPOINT")
    return found[-1] if found else []


def _service_dockerfile(root: Path, service: dict[str, Any]) -> str:
    build = service["build"]
    context = (root / "docker" / build["context"]).resolve()
    return str((context / build["dockerfile"]).relative_to(root.resolve()))


def invocations(root: Path) -> list[tuple[str, list[str], dict[str, Path]]]:
    """Every command line the images and compose run: (where, argv, bind mounts: container path -> host path)."""
    out: list[tuple[str, list[str], dict[str, Path]]] = []
    for dockerfile in DOCKERFILES:
        entry = _entrypoint(root, dockerfile)
        cmd = keyword_args(root / dockerfile, "CMD")[-1]
        out.append((dockerfile, [*entry, *cmd] if entry == ["user"] else cmd, {}))
    for name, service in compose_services(root / COMPOSE).items():
        entry = _entrypoint(root, _service_dockerfile(root, service))
        argv = [str(w) for w in service["command"]]
        mounts = volume_map(root / "docker", service)
        out.append((f"compose service {name}", [*entry, *argv] if entry == ["user"] else argv, mounts))
    return out


def _normalized(words: list[str], images: dict[str, list[str]]) -> list[str]:
    """A command as the program it runs: leading VAR=value and sudo dropped, `python3 -m user` and `docker run
    IMAGE ...` of our images as the `user ...` (or other) command inside."""
    while words and (re.fullmatch(r"\w+=\S*", words[0]) or words[0] in ("sudo", "exec")):
        words = words[1:]
    if words[:3] in (["python3", "-m", "user"], ["python", "-m", "user"]):
        return ["user", *words[3:]]
    image = next((w for w in words if w in images), None) if words[:2] == ["docker", "run"] else None
    if image is not None:
        rest = words[words.index(image) + 1 :]
        return ["user", *rest] if images[image] == ["user"] else rest
    return words


def guide_commands(root: Path) -> list[list[str]]:
    """The simple commands in the guide's code blocks, normalized."""
    services = compose_services(root / COMPOSE).values()
    images = {str(s["image"]): _entrypoint(root, _service_dockerfile(root, s)) for s in services}
    out = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", (root / GUIDE).read_text(), flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            out += [w for w in (_normalized(c, images) for c in simple_commands(line)) if w]
    return out


def problems_copy_sources(root: Path) -> list[str]:
    patterns = ignore_patterns(root / ".dockerignore")
    found = []
    for dockerfile in DOCKERFILES:
        for source in copy_sources(root / dockerfile):
            if not (root / source).exists() and not (any(c in source for c in "*?[") and list(root.glob(source))):
                found.append(f"{dockerfile}: COPY {source}: not in the build context")
            elif source not in (".", "./") and docker_ignores(patterns, source):
                found.append(f"{dockerfile}: COPY {source}: excluded by .dockerignore")
    return found


def problems_pip_extras(root: Path) -> list[str]:
    known = pyproject_extras(root / "pyproject.toml")
    found = []
    for dockerfile in DOCKERFILES:
        for args in pip_installs(root / dockerfile):
            found += [f"{dockerfile}: pip extra [{e}] is not in pyproject.toml" for e in extras(args) if e not in known]
    learner = [a for a in pip_installs(root / "docker/Dockerfile.learner") if {"learn", "sim"} <= set(extras(a))]
    if not any("constraints.txt" in option_values(a, "-c", "--constraint") for a in learner):
        found.append("docker/Dockerfile.learner: no `pip install -c constraints.txt .[learn,sim]`")
    return found


def problems_commands(root: Path) -> list[str]:
    found = []
    lines = [(where, argv) for where, argv, _ in invocations(root)] + [(GUIDE, w) for w in guide_commands(root)]
    for where, argv in lines:
        if argv[:1] == ["user"] and (len(argv) < 2 or argv[1] not in COMMANDS):
            found.append(f"{where}: `{shlex.join(argv)}`: not a `user` command ({', '.join(COMMANDS)})")
        if argv[:2] == ["ros2", "launch"] and (argv[2:3] != ["user"] or not (root / "launch" / argv[3]).is_file()):
            found.append(f"{where}: `{shlex.join(argv)}`: no such launch file in launch/")
        for word in argv:
            path = re.search(r"(?:^|/|=)((?:scripts|docker|config|launch|docs)/[\w./-]+)", word)
            if path and not (root / path.group(1)).exists():
                found.append(f"{where}: {path.group(1)}: no such file")
    return found


def _config_path(root: Path, value: str, mounts: dict[str, Path]) -> Path:
    if value in mounts:
        return mounts[value]
    return resolve_path(value, [root / "config"]) if not value.startswith("/") else Path("/nonexistent") / value


def deployments(root: Path) -> dict[str, tuple[str, Deployment, list[str]]]:
    """compose service -> (runtime, its deployment, its argv); raises ConfigError for one that does not load."""
    out = {}
    for where, argv, mounts in invocations(root):
        if not where.startswith("compose"):
            continue
        if argv[:2] == ["user", "bringup"]:
            out[where] = ("zenoh", load(_config_path(root, argv[2], mounts)), argv)
        if argv[:2] == ["ros2", "launch"]:
            config = next(w.split(":=", 1)[1] for w in argv if w.startswith("config:="))
            out[where] = ("ros", load(_config_path(root, config, mounts)), argv)
    return out


def problems_deployments(root: Path, tmp: Path) -> list[str]:
    try:
        found = deployments(root)
    except ConfigError as exc:
        return [str(exc)]
    problems = (
        [] if {r for r, _, _ in found.values()} == {"zenoh", "ros"} else ["compose: a Zenoh and a ROS deployment"]
    )
    for where, (_, deployment, argv) in found.items():
        try:
            ros_launches(deployment, tmp)  # every node's params, checked and encoded as ros2 launch does
        except ConfigError as exc:
            problems.append(f"{where}: {exc}")
        sites = option_values(argv, "--site")
        problems += [
            f"{where}: --site {s}: not a site of {deployment.name}" for s in sites if s not in deployment.sites
        ]
    return problems


def problems_compose_builds(root: Path) -> list[str]:
    found = []
    for name, service in compose_services(root / COMPOSE).items():
        build = service.get("build")
        if not build:
            found.append(f"compose service {name}: no build")
            continue
        context = root / "docker" / build["context"]
        if not context.is_dir() or not (context / build["dockerfile"]).is_file():
            found.append(f"compose service {name}: build {build}: no such context or Dockerfile")
        if service.get("network_mode") != "host":
            found.append(f"compose service {name}: not on the host network (the endpoints below are 127.0.0.1)")
    return found


def problems_dockerignore(root: Path) -> list[str]:
    patterns = ignore_patterns(root / ".dockerignore")
    paths = [p for d in NEVER_IN_CONTEXT for p in (d, f"{d}/some/file")]
    return [f".dockerignore: {p} is not excluded" for p in paths if not docker_ignores(patterns, p)]


def _params(deployment: Deployment, kind: str) -> list[dict[str, Any]]:
    return [n.params for n in deployment.nodes if n.kind == kind]


def problems_wiring(root: Path) -> list[str]:
    services = {w.removeprefix("compose service "): argv for w, argv, _ in invocations(root)}
    found_deployments = deployments(root)
    (cloud,) = [(d, a) for r, d, a in found_deployments.values() if r == "zenoh"]
    (site,) = [d for r, d, _ in found_deployments.values() if r == "ros"]
    deployment, argv = cloud
    endpoints = {
        e for s in deployment.routers() if s.name in (option_values(argv, "--site") or [s.name]) for e in s.endpoints
    }
    router, bridge = services["router"], services["bridge"]
    problems = []
    if set(option_values(router, "--listen")) != endpoints:
        problems.append(f"router listens on {option_values(router, '--listen')}, the deployment's site on {endpoints}")
    if not set(option_values(bridge, "--router")) <= endpoints or not option_values(bridge, "--router"):
        problems.append(f"bridge dials {option_values(bridge, '--router')}, the cloud's router is {endpoints}")
    if option_values(bridge, "--domain") != [deployment.domain]:
        problems.append(
            f"bridge domain {option_values(bridge, '--domain')} is not {deployment.name}'s {deployment.domain!r}"
        )
    robots = {p["robot_id"] for p in _params(site, "robot")}
    bridged = {r for v in option_values(bridge, "--robots") for r in v.split(",")}
    learned = {r for p in _params(deployment, "learner") for r in p["robots"]}
    if not robots or bridged != robots or not robots <= learned:
        problems.append(f"robots: site {sorted(robots)}, bridged {sorted(bridged)}, learned {sorted(learned)}")
    learning = [p["learning"] for p in _params(deployment, "learner") + _params(site, "rollout")]
    if len(learning) < 2 or any(one != learning[0] for one in learning):
        problems.append("the robot site's rollout and the cloud's learner hold different policies")
    health = " ".join(map(str, compose_services(root / COMPOSE)["router"]["healthcheck"]["test"]))
    problems += [f"router healthcheck does not probe {e}" for e in endpoints if e.rsplit(":", 1)[1] not in health]
    return problems


def problems_colcon(root: Path) -> list[str]:
    """Dockerfile.ros builds as scripts/build_ros does: the same colcon options and -D settings, colcon.meta's."""
    (colcon,) = [c for c in run_commands(root / "docker/Dockerfile.ros") if c[:2] == ["colcon", "build"]]
    script = (root / "scripts/build_ros").read_text()
    wanted = set(re.findall(r"(--packages-select \w+|--event-handlers \S+)", script))
    wanted |= {f"-D{name}=" for name in re.findall(r"-D(\w+)=", script)}
    meta = yaml.safe_load((root / "colcon.meta").read_text())["names"]["user"]["cmake-args"]
    text = " ".join(colcon)
    found = [f"Dockerfile.ros: colcon build lacks {w}" for w in sorted(wanted) if w not in text]
    found += [f"Dockerfile.ros: colcon build lacks colcon.meta's {m}" for m in meta if m not in text]
    if "$BUILD_TESTING" in text and arg_defaults(root / "docker/Dockerfile.ros").get("BUILD_TESTING") not in (
        "ON",
        "OFF",
    ):
        found.append("Dockerfile.ros: ARG BUILD_TESTING needs a default, ON or OFF")
    return found


CHECKS: dict[str, Callable[[Path, Path], list[str]]] = {
    "copy_sources": lambda root, tmp: problems_copy_sources(root),
    "pip_extras": lambda root, tmp: problems_pip_extras(root),
    "commands": lambda root, tmp: problems_commands(root),
    "deployments": problems_deployments,
    "compose_builds": lambda root, tmp: problems_compose_builds(root),
    "dockerignore": lambda root, tmp: problems_dockerignore(root),
    "wiring": lambda root, tmp: problems_wiring(root),
    "colcon": lambda root, tmp: problems_colcon(root),
}


@pytest.mark.parametrize("check", CHECKS)
def test_the_docker_files_pass(check: str, tmp_path: Path) -> None:
    assert CHECKS[check](REPO, tmp_path) == []


COPIED = ("docker", "docs", "config", "launch", "scripts", ".dockerignore", "pyproject.toml", "colcon.meta")
# check -> (file, text in it, its replacement): each plants one fault the check must report
FAULTS = {
    "copy_sources": ("docker/Dockerfile.ros", "COPY docker/humble-requirements.txt", "COPY docker/gone.txt"),
    "pip_extras": ("docker/Dockerfile.learner", '".[learn,sim]" \\', '".[learn,sim,gpu]" \\'),
    "commands": ("docker/compose.yaml", '["user", "bridge"', '["user", "bridges"'),
    "deployments": ("docker/robot_site.yaml", "control_rate_hz: 10.0", "control_rate_hz: fast"),
    "compose_builds": (
        "docker/compose.yaml",
        "dockerfile: docker/Dockerfile.ros",
        "dockerfile: docker/Dockerfile.rosx",
    ),
    "dockerignore": (".dockerignore", "\nruns\n", "\n"),
    "wiring": ("docker/compose.yaml", '"--domain", "compose"', '"--domain", "other"'),
    "colcon": ("docker/Dockerfile.ros", "--packages-select user", "--packages-up-to user"),
}


def _copy_of_repo(tmp: Path) -> Path:
    root = tmp / "repo"
    root.mkdir()
    for entry in REPO.iterdir():
        if entry.name in COPIED:
            (shutil.copytree if entry.is_dir() else shutil.copy)(entry, root / entry.name)
        elif entry.name not in (".venv", ".git", "runs", "build", "install", "log"):
            (root / entry.name).symlink_to(entry)
    return root


@pytest.mark.parametrize("check", FAULTS)
def test_a_planted_fault_is_found(check: str, tmp_path: Path) -> None:
    root = _copy_of_repo(tmp_path)
    name, old, new = FAULTS[check]
    text = (root / name).read_text()
    assert old in text, f"{name} no longer holds {old!r}: update FAULTS"
    (root / name).write_text(text.replace(old, new))
    assert CHECKS[check](root, tmp_path) != []


def test_the_guide_uses_the_images_and_the_bridge() -> None:
    """The guide shows the whole path: rosdep, the pins, colcon, ros2 launch, the bridge and compose."""
    commands = [shlex.join(c) for c in guide_commands(REPO)]
    for wanted in ("rosdep install", "humble-requirements.txt", "colcon build", "ros2 launch user", "user bridge"):
        assert any(wanted in c for c in commands), f"{GUIDE} never runs {wanted!r}"
    assert any(c.startswith("docker compose -f docker/compose.yaml") for c in commands)
