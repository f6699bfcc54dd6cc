"""Find and read this package's own interface definitions (the `msg/` and `srv/` folders).

The same files feed `rosidl_generate_interfaces` on a ROS 2 build and the `rosbags` typestore here,
so there is exactly one definition of every message.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "user"
ENV_DIR = "USER_INTERFACE_DIR"  # a folder holding msg/ and srv/, overriding the search below


class InterfaceNotFoundError(RuntimeError):
    """The msg/ and srv/ definitions of the package could not be located."""


@dataclass(frozen=True)
class InterfaceFile:
    """One .msg or .srv file."""

    typename: str  # e.g. "user/msg/Observation" or "user/srv/Reset"
    kind: str  # "msg" or "srv"
    path: Path
    text: str


def candidate_dirs() -> list[Path]:
    """Folders that may hold msg/ and srv/, most specific first."""
    dirs: list[Path] = []
    env = os.environ.get(ENV_DIR)
    if env:
        dirs.append(Path(env))
    # A source checkout or editable install: src/user/interfaces/idl.py -> repository root.
    dirs.append(Path(__file__).resolve().parents[3])
    # A pip install (data files) or a colcon/ament install: <prefix>/share/user/{msg,srv}.
    prefixes = [sys.prefix, *os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)]
    dirs.extend(Path(prefix) / "share" / PACKAGE for prefix in prefixes if prefix)
    return dirs


def interface_dir() -> Path:
    """The first candidate folder that has a msg/ folder with definitions in it."""
    tried = candidate_dirs()
    for d in tried:
        if any((d / "msg").glob("*.msg")):
            return d
    raise InterfaceNotFoundError(
        f"cannot find the {PACKAGE} msg/ definitions; looked in: {', '.join(str(d) for d in tried)}. "
        f"Set {ENV_DIR} to the folder that holds msg/ and srv/."
    )


def read_interfaces(root: Path | None = None) -> list[InterfaceFile]:
    """Every .msg and .srv definition of the package, sorted by type name."""
    base = root if root is not None else interface_dir()
    files: list[InterfaceFile] = []
    for kind in ("msg", "srv"):
        for path in sorted((base / kind).glob(f"*.{kind}")):
            files.append(InterfaceFile(f"{PACKAGE}/{kind}/{path.stem}", kind, path, path.read_text(encoding="utf-8")))
    return files
