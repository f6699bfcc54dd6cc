"""`pip install .` carries msg/, srv/, config/ and launch/ where the code looks for them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from test.conftest import REPO
from user.interfaces.idl import candidate_dirs


def test_wheel_installs_interfaces_and_configs_under_share(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            str(REPO),
            "-w",
            str(tmp_path),
        ],
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    (wheel,) = tmp_path.glob("user-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    data = "user-0.1.0.data/data/share/user"
    for kind, pattern in (("msg", "*.msg"), ("srv", "*.srv"), ("config", "*.yaml")):
        for path in (REPO / kind).glob(pattern):
            assert f"{data}/{kind}/{path.name}" in names
    assert f"{data}/launch/bringup.launch.py" in names
    assert "user/bus/zenoh_bus.py" in names and "user/py.typed" in names


def test_installed_share_dir_is_searched() -> None:
    assert Path(sys.prefix) / "share" / "user" in candidate_dirs()
