"""Every third-party module src/user imports is declared where each install path reads it: package.xml (a rosdep
key, or a `pip:` list of what has none) for rosdep on a robot PC, pyproject.toml (dependencies or an extra) for
pip; and what Dockerfile.ros leaves to pip instead of rosdep is pinned in docker/humble-requirements.txt as
constraints.txt pins it (unless a line says why not), with numpy below 2. As in test_docker_files, each check
returns its problems and `test_a_planted_fault_is_found` shows that it finds a planted one."""

from __future__ import annotations

import ast
import importlib.metadata
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.version import Version

from test.conftest import REPO
from test.docker.dockerfiles import (
    arg_defaults,
    canonical,
    constraint_pins,
    imported_modules,
    option_values,
    package_xml,
    pip_installs,
    pyproject_requirements,
    requirements,
    run_commands,
)

HUMBLE_PINS = "docker/humble-requirements.txt"
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
# module -> (its pip distribution, its rosdep key; None: no key, so package.xml lists the distribution after `pip:`)
MODULES: dict[str, tuple[str, str | None]] = {
    "numpy": ("numpy", "python3-numpy"),
    "yaml": ("PyYAML", "python3-yaml"),
    "cv2": ("opencv-python-headless", "python3-opencv"),
    "cryptography": ("cryptography", "python3-cryptography"),
    "matplotlib": ("matplotlib", "python3-matplotlib"),
    "torch": ("torch", "python3-torch"),
    "rosbags": ("rosbags", "python3-rosbags-pip"),
    "gymnasium": ("gymnasium", "python3-gymnasium-pip"),
    "mujoco": ("mujoco", "python3-mujoco-pip"),
    "evdev": ("evdev", "python3-evdev"),
    "pyrealsense2": ("pyrealsense2", "python3-pyrealsense2-pip"),
    "zenoh": ("eclipse-zenoh", None),
    "mcap": ("mcap", None),
    "foxglove": ("foxglove-sdk", None),
    "franky_sim": ("franky-sim", None),
    "arx5_interface": ("arx5-interface", None),
    "franky": ("franky-control", None),
    "pyspacemouse": ("pyspacemouse", None),
    "torchvision": ("torchvision", None),
    "transformers": ("transformers", None),
    "safetensors": ("safetensors", None),
    "tokenizers": ("tokenizers", None),
}
# Hardware SDKs imported lazily (inside the driver that needs them, whose error names the pip package) and not yet
# in pyproject.toml: remove an entry once pyproject.toml has the distribution (the test says so).
NOT_IN_PYPROJECT: set[str] = set()


def ros_packages(root: Path) -> set[str]:
    """Modules that are ROS packages package.xml depends on by name (rclpy, std_msgs, ...)."""
    declared = package_xml(root / "package.xml")
    return declared.keys | declared.conditional_keys


def problems_declared(root: Path) -> list[str]:
    declared = package_xml(root / "package.xml")
    in_pyproject = pyproject_requirements(root / "pyproject.toml")
    found = []
    for module, files in sorted(imported_modules(root / "src" / "user").items()):
        if module in ros_packages(root):
            continue
        if module not in MODULES:
            found.append(f"{module} (imported by {min(files)}): add it to MODULES here, package.xml, pyproject.toml")
            continue
        dist, key = MODULES[module]
        if key is not None and key not in declared.keys | declared.conditional_keys:
            found.append(f"{module}: package.xml has no <exec_depend>{key}</exec_depend>")
        if key is None and canonical(dist) not in declared.pip | declared.pip_hardware:
            found.append(f"{module}: {dist} has no rosdep key and is not in a `pip:` list of package.xml")
        if canonical(dist) not in in_pyproject and module not in NOT_IN_PYPROJECT:
            found.append(f"{module}: {dist} is in neither pyproject.toml's dependencies nor an extra")
    return found


def problems_rosdep_skips(root: Path) -> list[str]:
    """Dockerfile.ros skips in rosdep exactly the unconditional *-pip keys and python3-torch of package.xml, and
    pins each of them (and every `pip:` distribution) in the Humble requirements instead."""
    declared = package_xml(root / "package.xml")
    dockerfile = root / "docker/Dockerfile.ros"
    skipped = set(arg_defaults(dockerfile).get("ROSDEP_SKIP_KEYS", "").split())
    (rosdep,) = [c for c in run_commands(dockerfile) if c[:2] == ["rosdep", "install"]]
    found = [] if option_values(rosdep, "--skip-keys") == ["$ROSDEP_SKIP_KEYS"] else ["rosdep install: no --skip-keys"]
    wanted = {k for k in declared.keys if k.endswith("-pip") or k == "python3-torch"}
    found += [f"ROSDEP_SKIP_KEYS lacks {k} (rosdep would pip-install it unpinned)" for k in sorted(wanted - skipped)]
    found += [
        f"ROSDEP_SKIP_KEYS names {k}, not a *-pip key or python3-torch of package.xml" for k in sorted(skipped - wanted)
    ]
    pinned = {canonical(r.name) for r, _ in requirements(root / HUMBLE_PINS)}
    for_pip = {canonical(k.removeprefix("python3-").removesuffix("-pip")) for k in skipped} | declared.pip
    found += [f"{HUMBLE_PINS}: {d} is left to pip but not pinned there" for d in sorted(for_pip - pinned)]
    return found


def problems_humble_pins(root: Path) -> list[str]:
    pins = constraint_pins(root / "constraints.txt")
    in_pyproject = pyproject_requirements(root / "pyproject.toml")
    found = []
    for req, comment in requirements(root / HUMBLE_PINS):
        name = canonical(req.name)
        if name not in in_pyproject:
            found.append(f"{HUMBLE_PINS}: {req.name} is not a requirement of pyproject.toml")
            continue
        exact = [s.version for s in req.specifier if s.operator == "=="]
        if exact and not in_pyproject[name].specifier.contains(exact[0], prereleases=True):
            found.append(f"{HUMBLE_PINS}: {req} does not meet pyproject.toml's {in_pyproject[name]}")
        same = exact and name in pins and Version(exact[0]) == Version(pins[name])
        if not same and "differs from constraints.txt" not in comment:
            found.append(f"{HUMBLE_PINS}: {req} is not constraints.txt's {pins.get(name)} and says nothing why")
    numpy = [r.specifier for r, _ in requirements(root / HUMBLE_PINS) if canonical(r.name) == "numpy"]
    if not numpy or numpy[0].contains("2.0.0") or not numpy[0].contains("1.26.4"):
        found.append(f"{HUMBLE_PINS}: numpy must be required below 2 (Humble's compiled modules need 1.x)")
    return found


def problems_pip_commands(root: Path) -> list[str]:
    """The pip lines read the right files from the right indexes: the ROS image installs the Humble pins with the
    CPU torch index; the learner installs from constraints.txt with TORCH_INDEX, by default the CPU index."""
    found = []
    ros = pip_installs(root / "docker/Dockerfile.ros")
    copied = [a for a in ros if any(f.endswith(Path(HUMBLE_PINS).name) for f in option_values(a, "-r"))]
    if not copied or option_values(copied[0], "--extra-index-url") != [CPU_TORCH_INDEX]:
        found.append(f"Dockerfile.ros: no `pip install --extra-index-url {CPU_TORCH_INDEX} -r ...{HUMBLE_PINS}`")
    learner = root / "docker/Dockerfile.learner"
    if arg_defaults(learner).get("TORCH_INDEX") != CPU_TORCH_INDEX:
        found.append(f"Dockerfile.learner: ARG TORCH_INDEX must default to {CPU_TORCH_INDEX} (the CPU build)")
    if not any(option_values(a, "--extra-index-url") == ["$TORCH_INDEX"] for a in pip_installs(learner)):
        found.append("Dockerfile.learner: no pip install with --extra-index-url $TORCH_INDEX")
    return found


def problems_guide(root: Path) -> list[str]:
    """docs/robot_site.md installs as Dockerfile.ros does: the same rosdep skips, the same pins and index."""
    text = (root / "docs/robot_site.md").read_text().replace("\\\n", " ")
    skipped = arg_defaults(root / "docker/Dockerfile.ros").get("ROSDEP_SKIP_KEYS", "")
    found = []
    # every rosdep line, the real-hardware one (`USER_REAL_HARDWARE=1 rosdep install ...`) and prose ones included
    rosdep = [shlex.split(line.strip("`")) for line in text.splitlines() if "rosdep install --from-paths" in line]
    if not rosdep or any(option_values(r, "--skip-keys") != [skipped] for r in rosdep):
        found.append(f"docs/robot_site.md: rosdep install must skip the keys Dockerfile.ros skips ({skipped})")
    pip = [line for line in text.splitlines() if line.startswith("python3 -m pip install") and HUMBLE_PINS in line]
    if not pip or not all(f"--extra-index-url {CPU_TORCH_INDEX}" in line for line in pip):
        found.append(f"docs/robot_site.md: no `pip install --extra-index-url {CPU_TORCH_INDEX} -r ...{HUMBLE_PINS}`")
    return found


def problems_modules_table(root: Path) -> list[str]:
    """MODULES names the distribution that really provides each module, where that module is installed here."""
    provided = importlib.metadata.packages_distributions()
    found = []
    for module, (dist, _) in MODULES.items():
        if module in provided and canonical(dist) not in {canonical(d) for d in provided[module]}:
            found.append(f"MODULES: {module} comes from {provided[module]}, not {dist}")
    return found


CHECKS: dict[str, Callable[[Path], list[str]]] = {
    "declared": problems_declared,
    "rosdep_skips": problems_rosdep_skips,
    "humble_pins": problems_humble_pins,
    "pip_commands": problems_pip_commands,
    "guide": problems_guide,
    "modules_table": problems_modules_table,
}


@pytest.mark.parametrize("check", CHECKS)
def test_the_dependencies_are_declared(check: str) -> None:
    assert CHECKS[check](REPO) == []


COPIED = (
    "package.xml",
    "pyproject.toml",
    "constraints.txt",
    "docker/Dockerfile.ros",
    "docker/Dockerfile.learner",
    "docs/robot_site.md",
)
# check -> (file, text in it, its replacement): each plants one fault the check must report
FAULTS = {
    "declared": ("package.xml", "<exec_depend>python3-opencv</exec_depend>", ""),
    "rosdep_skips": ("docker/Dockerfile.ros", "python3-torch python3-gymnasium-pip", "python3-torch"),
    "humble_pins": (HUMBLE_PINS, "mcap==1.6.0", "mcap==1.5.0"),
    "pip_commands": ("docker/Dockerfile.ros", "--extra-index-url https://download.pytorch.org/whl/cpu -r", "-r"),
    "guide": ("docs/robot_site.md", "python3-torch python3-gymnasium-pip", "python3-gymnasium-pip"),
}


@pytest.mark.parametrize("check", FAULTS)
def test_a_planted_fault_is_found(check: str, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "docker").mkdir(parents=True)
    (root / "docs").mkdir()
    for name in (*COPIED, HUMBLE_PINS):
        shutil.copy(REPO / name, root / name)
    (root / "src").symlink_to(REPO / "src")
    name, old, new = FAULTS[check]
    text = (root / name).read_text()
    assert old in text, f"{name} no longer holds {old!r}: update FAULTS"
    (root / name).write_text(text.replace(old, new))
    assert CHECKS[check](root) != []


def test_a_wrong_distribution_in_the_table_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(MODULES, "yaml", ("pyyaml-ng", "python3-yaml"))
    assert problems_modules_table(REPO) == ["MODULES: yaml comes from ['PyYAML'], not pyyaml-ng"]


@pytest.mark.parametrize("module", sorted(NOT_IN_PYPROJECT))
def test_the_modules_left_out_of_pyproject_are_still_imported_lazily(module: str) -> None:
    """Each exemption is still needed (the module is imported, pyproject.toml still lacks it) and harmless (no
    module-level import: only the driver that uses it needs it)."""
    dist = canonical(MODULES[module][0])
    assert dist not in pyproject_requirements(REPO / "pyproject.toml"), f"{dist} is in pyproject.toml now: drop it"
    files = imported_modules(REPO / "src" / "user").get(module, set())
    assert files, f"src/user no longer imports {module}: drop it from NOT_IN_PYPROJECT"
    for name in files:
        tree = ast.parse((REPO / "src" / name).read_text())
        top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
        names = {a.name.split(".")[0] for n in top for a in n.names} | {
            (n.module or "").split(".")[0] for n in top if isinstance(n, ast.ImportFrom)
        }
        assert module not in names, f"src/{name} imports {module} at module level"
