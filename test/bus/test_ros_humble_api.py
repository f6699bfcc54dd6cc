"""Code of the ROS runtime uses only rclpy names that exist on Humble (the suite runs on Jazzy wheels here).

`rclpy-humble-api.txt` (../shared/ros2) lists rclpy's public API on the `humble` branch: modules, classes,
functions and methods with their parameter names. Checked, in every module that touches rclpy:
- every `import rclpy...` / `from rclpy... import X` and every dotted `rclpy.a.b` reference;
- every attribute the code reads that is a member of an rclpy class here (installed Jazzy) must be a member
  of some class on Humble, and every keyword argument passed to it must be one of Humble's parameters.
The listing leaves out enum members; the few the code uses are named below, checked by hand against the
humble branch (rclpy/qos.py, rclpy/parameter.py).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from collections import defaultdict
from pathlib import Path

import pytest

from test.conftest import REPO, SHARED

API_FILE = SHARED / "ros2" / "rclpy-humble-api.txt"
SOURCES = sorted([*(REPO / "src").rglob("*.py"), *(REPO / "launch").glob("*.py")])
ROS_ADAPTER = [
    REPO / "src" / "user" / "bus" / f"{name}.py"
    for name in ("ros_bus", "ros_node_params", "ros_runtime", "ros_services", "ros_types")
]
# Enum members (not in the listing), as on the humble branch.
HUMBLE_ENUM_MEMBERS = {
    "KEEP_ALL", "KEEP_LAST",  # qos.HistoryPolicy
    "RELIABLE", "BEST_EFFORT",  # qos.ReliabilityPolicy
    "TRANSIENT_LOCAL", "VOLATILE",  # qos.DurabilityPolicy
    "Type", "NOT_SET", "BOOL", "INTEGER", "DOUBLE", "STRING",  # parameter.Parameter.Type
    "BOOL_ARRAY", "INTEGER_ARRAY", "DOUBLE_ARRAY", "STRING_ARRAY", "BYTE_ARRAY",
}  # fmt: skip
# Names of other objects in the adapter that rclpy classes here also happen to have (threading.Event's,
# rcl_interfaces' SetParametersResult's).
NOT_RCLPY = {"set", "wait", "clear", "is_set", "reason"}
_LINE = re.compile(r"^(?P<name>rclpy(?:\.\w+)+)(?:\((?P<params>.*)\))?$")


class HumbleApi:
    """The listing: qualified names, and for each member name the parameter names it takes anywhere."""

    def __init__(self, text: str) -> None:
        self.names: set[str] = {"rclpy"}
        self.params: dict[str, set[str]] = defaultdict(set)
        for line in text.splitlines():
            match = _LINE.match(line.strip())
            if not match:
                continue
            name = match.group("name")
            self.names.add(name)
            parts = name.split(".")
            for i in range(2, len(parts)):
                self.names.add(".".join(parts[:i]))  # modules and classes above a listed name
            params = match.group("params") or ""
            cleaned = {p.strip().lstrip("*") for p in params.split(",")} - {"", "self", "cls"}
            member = "__init__" if parts[-1] == "__init__" else parts[-1]
            self.params[member] |= cleaned
            if member == "__init__":
                self.params[parts[-2]] |= cleaned  # calling the class
        self.members = {n.split(".")[-1] for n in self.names}

    def has(self, dotted: str) -> bool:
        return dotted in self.names


@pytest.fixture(scope="module")
def humble() -> HumbleApi:
    return HumbleApi(API_FILE.read_text())


@pytest.fixture(scope="module")
def installed_rclpy_members() -> set[str]:
    """Member names of every class defined in the installed rclpy (Jazzy)."""
    rclpy = pytest.importorskip("rclpy")
    members: set[str] = set()
    for info in pkgutil.walk_packages(rclpy.__path__, "rclpy."):
        if "impl" in info.name or "_rclpy" in info.name:
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__.startswith("rclpy"):
                members |= {m for m in vars(cls) if not m.startswith("_")}
    return members


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _uses(path: Path) -> tuple[set[str], set[str], list[tuple[str, str, int]]]:
    """(rclpy names imported or referenced, attribute names read, (callee, keyword, line) of calls)."""
    tree = ast.parse(path.read_text(), str(path))
    qualified: set[str] = set()
    attributes: set[str] = set()
    keywords: list[tuple[str, str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            qualified |= {a.name for a in node.names if a.name.startswith("rclpy")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rclpy"):
            qualified |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Attribute):
            attributes.add(node.attr)
            dotted = _dotted(node)
            if dotted and dotted.startswith("rclpy."):
                qualified.add(dotted)
        elif isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            keywords += [(callee, k.arg, node.lineno) for k in node.keywords if k.arg]
    return qualified, attributes, keywords


def test_the_listing_is_read() -> None:
    api = HumbleApi(API_FILE.read_text())
    assert api.has("rclpy.node.Node.create_subscription")
    assert "raw" in api.params["create_subscription"]
    assert not api.has("rclpy.node.Node.get_type_description")  # a Jazzy-only service, not on Humble


def test_only_the_adapter_imports_rclpy() -> None:
    importing = [p.relative_to(REPO).as_posix() for p in SOURCES if _uses(p)[0]]
    assert importing == sorted(p.relative_to(REPO).as_posix() for p in ROS_ADAPTER)


@pytest.mark.parametrize("path", ROS_ADAPTER, ids=lambda p: p.name)
def test_ros_runtime_uses_only_humble_rclpy(path: Path, humble: HumbleApi, installed_rclpy_members: set[str]) -> None:
    qualified, attributes, keywords = _uses(path)
    attributes -= NOT_RCLPY
    missing = sorted(q for q in qualified if not humble.has(q) and q.split(".")[-1] not in HUMBLE_ENUM_MEMBERS)
    assert not missing, f"{path.name}: not in rclpy on Humble: {missing}"
    rclpy_attrs = attributes & installed_rclpy_members
    not_humble = sorted(a for a in rclpy_attrs if a not in humble.members and a not in HUMBLE_ENUM_MEMBERS)
    assert not not_humble, f"{path.name}: rclpy members that Humble does not have: {not_humble}"
    bad = [
        f"{callee}({keyword}=...) at line {line}"
        for callee, keyword, line in keywords
        if callee in humble.params
        and (callee in installed_rclpy_members or humble.has(f"rclpy.{callee}"))
        and keyword not in humble.params[callee]
    ]
    assert not bad, f"{path.name}: keyword arguments Humble's rclpy does not take: {bad}"


def test_a_jazzy_only_name_would_be_caught(humble: HumbleApi, installed_rclpy_members: set[str]) -> None:
    """The check can fail: a method added after Humble is an rclpy member here but not on Humble."""
    jazzy_only = {"add_post_set_parameters_callback", "get_fully_qualified_node_names"} & installed_rclpy_members
    assert jazzy_only, "expected Jazzy's rclpy to have members Humble lacks"
    assert all(name not in humble.members for name in jazzy_only)
