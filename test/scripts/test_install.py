"""scripts/install resolves on a machine that sees only the public registries.

A newcomer's machine has no pip configuration: PyPI, plus the indexes the script itself names. These tests run
pip's resolver (`--dry-run`) with every local pip setting removed, against PyPI and the PyTorch index that
scripts/install names. That index cannot be reached from here, so a stand-in directory serves what it serves for
torch: the pinned version's CPU build (`+cpu`), with the installed torch's own metadata (PEP 658), for CPython
3.10-3.13 on this platform. PyPI is reached for real; without it these tests skip, or fail where
USER_REQUIRE_PYPI=1 (CI).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

from test.conftest import REPO

INSTALL = REPO / "scripts/install"
CONSTRAINTS = REPO / "constraints.txt"
PYPI = "https://pypi.org/simple"
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"  # what scripts/install must name by default
MAIN_EXTRAS = "sim,franka,learn"  # `scripts/install`: the main job
TEST_EXTRAS = "test,vla,sim,franka,learn"  # `scripts/install --ros`: the tests
ENV_REQUIRE_PYPI = "USER_REQUIRE_PYPI"
STANDIN_PYTHONS = ("cp310", "cp311", "cp312", "cp313")


def script_torch_index() -> str:
    """The torch index scripts/install uses by default, and check that its torch step passes it to pip."""
    text = INSTALL.read_text()
    default = re.search(r'^TORCH_INDEX="\$\{USER_TORCH_INDEX:-([^}]+)\}"', text, re.MULTILINE)
    assert default, 'scripts/install: no TORCH_INDEX="${USER_TORCH_INDEX:-...}" line'
    assert re.search(r'--extra-index-url "\$TORCH_INDEX" "torch==', text), (
        "scripts/install: torch not from $TORCH_INDEX"
    )
    return default.group(1)


def constraint_pins() -> dict[str, str]:
    """constraints.txt: distribution name (lower case) -> the pinned version, as written."""
    pins = {}
    for raw in CONSTRAINTS.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            pins[req.name.lower()] = spec.version
    return pins


def require_pypi() -> None:
    """Skip (or fail, in CI) when PyPI cannot be reached."""
    try:
        socket.create_connection(("pypi.org", 443), timeout=10).close()
    except OSError as exc:
        if os.environ.get(ENV_REQUIRE_PYPI) == "1":
            pytest.fail(f"PyPI is not reachable ({exc}) and {ENV_REQUIRE_PYPI}=1")
        pytest.skip(f"PyPI is not reachable: {exc}")


@pytest.fixture(scope="module")
def torch_standin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simple index that serves what PyTorch's CPU index serves for the pinned torch (metadata only)."""
    pin = constraint_pins()["torch"]
    dist = importlib.metadata.distribution("torch")
    if Version(dist.version).public != pin:
        pytest.skip(f"the installed torch is {dist.version}, not constraints.txt's {pin}")
    platform = next(
        line.split("-")[-1] for line in (dist.read_text("WHEEL") or "").splitlines() if line.startswith("Tag:")
    )
    metadata = (dist.read_text("METADATA") or "").encode()
    digest = hashlib.sha256(metadata).hexdigest()
    root = tmp_path_factory.mktemp("torch-index") / "simple"
    project = root / "torch"
    project.mkdir(parents=True)
    links = []
    for python in STANDIN_PYTHONS:
        wheel = f"torch-{pin}+cpu-{python}-{python}-{platform}.whl"
        (project / f"{wheel}.metadata").write_bytes(metadata)
        href = wheel.replace("+", "%2B")
        links.append(
            f'<a href="{href}" data-dist-info-metadata="sha256={digest}" '
            f'data-core-metadata="sha256={digest}">{wheel}</a>'
        )
    (project / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    return root


def resolve(args: list[str], index: Path, report: Path) -> dict[str, Any]:
    """pip's resolution of `args` as a plain machine does it: PyPI and the torch index, no local pip settings."""
    require_pypi()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # neither this machine's pip.conf nor its wheelhouse
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
    argv += ["--disable-pip-version-check", "--index-url", PYPI, "--extra-index-url", index.as_uri()]
    argv += ["--report", str(report), "-c", str(CONSTRAINTS), *args]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    errors = [line for line in done.stderr.splitlines() if "is ignored: it is neither" not in line]
    assert done.returncode == 0, f"pip could not resolve {args}:\n" + "\n".join(errors[-30:])
    result: dict[str, Any] = json.loads(report.read_text())
    return result


def chosen(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """name -> (version, where from) of each distribution the resolution installs."""
    return {
        item["metadata"]["name"].lower(): (item["metadata"]["version"], item["download_info"]["url"])
        for item in report["install"]
    }


def test_the_install_takes_torch_from_pytorchs_cpu_index() -> None:
    assert script_torch_index() == CPU_TORCH_INDEX


def test_every_pin_is_a_public_release() -> None:
    """A local label (torch==2.13.0+cpu) exists on no public index but the one that built it: the index picks the
    build, the pin only the version."""
    labelled = {name: v for name, v in constraint_pins().items() if Version(v).local is not None}
    assert not labelled, f"constraints.txt pins local builds {labelled}: pin the release, let the index pick the build"


@pytest.mark.parametrize("extras", [MAIN_EXTRAS, TEST_EXTRAS])
def test_the_install_resolves_from_pypi_and_the_torch_index(extras: str, torch_standin: Path, tmp_path: Path) -> None:
    """Both of the script's pip steps at once: torch from the torch index, everything else from PyPI, at the pins."""
    assert script_torch_index() == CPU_TORCH_INDEX, "the stand-in serves what PyTorch's CPU index serves"
    index = torch_standin
    pins = constraint_pins()
    got = chosen(resolve(["--editable", f".[{extras}]"], index, tmp_path / "report.json"))
    assert got["torch"][0] == pins["torch"] + "+cpu", got["torch"]
    assert got["torch"][1].startswith(index.as_uri()), got["torch"]
    for name, (version, url) in got.items():
        if name in ("torch", "user"):
            continue
        assert url.startswith("https://files.pythonhosted.org/"), f"{name} {version} from {url}"
        if name in pins:
            assert Version(version) == Version(pins[name]), f"{name}: {version} resolved, {pins[name]} pinned"


def test_the_main_job_resolves_on_python_3_12(torch_standin: Path, tmp_path: Path) -> None:
    """Ubuntu 24.04's Python: the same pins as wheels for 3.12 (binary only, as pip sees another interpreter)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in MAIN_EXTRAS.split(","):
        reqs += project["optional-dependencies"][extra]
    target = ["--python-version", "3.12", "--only-binary", ":all:", "--target", str(tmp_path / "target")]
    got = chosen(resolve([*target, *reqs], torch_standin, tmp_path / "report.json"))
    assert got["torch"][0].endswith("+cpu") and "cp312" in got["torch"][1], got["torch"]


def test_an_old_python_is_refused_before_anything_is_installed(tmp_path: Path) -> None:
    """Python 3.10 cannot take constraints.txt's pins: one line says so and what to do, exit 2, no .venv made."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(INSTALL, tmp_path / "scripts/install")
    shutil.copy(CONSTRAINTS, tmp_path / "constraints.txt")
    old = tmp_path / "python3.10"
    old.write_text(
        "#!/bin/sh\n"
        f"exec {sys.executable} -c \"import sys; sys.version_info = (3, 10, 12, 'final', 0); "
        "sys.version = '3.10.12'; exec(sys.stdin.read()) if sys.argv[1:] == ['-'] else sys.exit(9)\" \"$@\"\n"
    )
    old.chmod(0o755)
    done = subprocess.run(
        ["bash", "scripts/install"],
        cwd=tmp_path,
        env={**os.environ, "PYTHON": str(old)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "Python 3.10.12 is too old" in done.stderr and "docs/robot_site.md" in done.stderr
    assert not (tmp_path / ".venv").exists()
