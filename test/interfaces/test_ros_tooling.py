"""The package as ROS 2's own tools see it: rosidl, catkin_pkg and colcon from Debian's ROS packages.

They are importable only by Debian's Python (/usr/bin/python3), so each check runs them in a subprocess.
Missing tools fail these tests (a ROS 2 build would fail the same way); `.ci/run` installs them.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rosbags.interfaces import Nodetype

from user.interfaces import default_codec

REPO = Path(__file__).resolve().parents[2]
ROS_PYTHON = "/usr/bin/python3"
APT_PACKAGES = "colcon python3-colcon-ros python3-rosidl python3-catkin-pkg ament-cmake"
MISSING = f"ROS 2 tooling is missing; .ci/run installs it via apt-get install {APT_PACKAGES}"
_TOOLS_MISSING_RC = 3
# rosidl maps `byte` to IDL `octet` and `char` to `uint8`; compare both sides in these terms.
_SAME_BASE = {"byte": "uint8", "char": "uint8", "octet": "uint8"}
_IDL_BASE = {"boolean": "bool", "float": "float32", "double": "float64"}

# Runs under Debian's Python. argv[1] = the package folder. Prints, per type ("user/msg/Observation",
# "user/srv/Reset_Request"), the fields rosidl's .msg parser and its IDL pipeline see, and the constants.
_ROSIDL_SCRIPT = r"""
import contextlib, json, sys, tempfile
from pathlib import Path
try:
    from rosidl_adapter.msg import convert_msg_to_idl
    from rosidl_adapter.parser import parse_message_string, parse_service_string
    from rosidl_adapter.srv import convert_srv_to_idl
    from rosidl_parser import definition as d
    from rosidl_parser.parser import parse_idl_file
except ImportError as exc:
    sys.exit(print(exc, file=sys.stderr) or 3)

def bound(text, limit):
    return f"{text}<={limit}" if limit else text

def idl_type(t):
    if isinstance(t, d.Array):
        return idl_type(t.value_type) + f"[{t.size}]"
    if isinstance(t, d.BoundedSequence):
        return idl_type(t.value_type) + f"[<={t.maximum_size}]"
    if isinstance(t, d.UnboundedSequence):
        return idl_type(t.value_type) + "[]"
    if isinstance(t, d.NamespacedType):
        return "/".join([*t.namespaces, t.name])
    if isinstance(t, d.AbstractGenericString):
        name = "wstring" if isinstance(t, d.AbstractWString) else "string"
        return bound(name, getattr(t, "maximum_size", None))
    return t.typename

def msg_type(t):
    base = f"{t.pkg_name}/msg/{t.type}" if t.pkg_name else bound(t.type, t.string_upper_bound)
    if not t.is_array:
        return base
    if t.array_size is None:
        return base + "[]"
    return base + (f"[<={t.array_size}]" if t.is_upper_bound else f"[{t.array_size}]")

def describe(spec, structure):
    return {
        "parser": [[f.name, msg_type(f.type)] for f in spec.fields],
        "constants": [[c.name, c.type, c.value] for c in spec.constants],
        "idl": [[m.name, idl_type(m.type)] for m in structure.members],
    }

repo, out = Path(sys.argv[1]), {}
with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(sys.stderr):
    base = Path(tmp)
    for path in sorted((repo / "msg").glob("*.msg")):
        spec = parse_message_string("user", path.stem, path.read_text())
        (base / "msg").mkdir(exist_ok=True)
        convert_msg_to_idl(repo, "user", Path("msg") / path.name, base / "msg")
        idl = parse_idl_file(d.IdlLocator(base, f"msg/{path.stem}.idl")).content
        (message,) = idl.get_elements_of_type(d.Message)
        out[f"user/msg/{path.stem}"] = describe(spec, message.structure)
    for path in sorted((repo / "srv").glob("*.srv")):
        spec = parse_service_string("user", path.stem, path.read_text())
        (base / "srv").mkdir(exist_ok=True)
        convert_srv_to_idl(repo, "user", Path("srv") / path.name, base / "srv")
        idl = parse_idl_file(d.IdlLocator(base, f"srv/{path.stem}.idl")).content
        (service,) = idl.get_elements_of_type(d.Service)
        out[f"user/srv/{path.stem}_Request"] = describe(spec.request, service.request_message.structure)
        out[f"user/srv/{path.stem}_Response"] = describe(spec.response, service.response_message.structure)
print(json.dumps(out))
"""

_CATKIN_SCRIPT = r"""
import json, sys
try:
    from catkin_pkg.package import parse_package
except ImportError as exc:
    sys.exit(print(exc, file=sys.stderr) or 3)
pkg = parse_package(sys.argv[1])
pkg.validate()
print(json.dumps({"name": pkg.name, "format": pkg.package_format, "build_type": pkg.get_build_type(),
                  "groups": [g.name for g in pkg.member_of_groups]}))
"""


def _clean_env() -> dict[str, str]:
    """Our environment without what points Debian's Python at this interpreter's packages."""
    return {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}


def _ros_python(script: str, *args: str) -> Any:
    """Run `script` with Debian's Python and return the JSON it prints; fail if the tools are missing."""
    if not Path(ROS_PYTHON).exists():
        pytest.fail(f"{ROS_PYTHON} not found. {MISSING}")
    proc = subprocess.run(
        [ROS_PYTHON, "-c", script, *args], capture_output=True, text=True, timeout=120, env=_clean_env()
    )
    if proc.returncode == _TOOLS_MISSING_RC:
        pytest.fail(f"{proc.stderr.strip()}. {MISSING}")
    assert proc.returncode == 0, f"ROS tool run failed:\n{proc.stderr}"
    return json.loads(proc.stdout)


@functools.lru_cache(maxsize=1)
def _rosidl_view() -> dict[str, Any]:
    return dict(_ros_python(_ROSIDL_SCRIPT, str(REPO)))


def _our_type(desc: Any) -> str:
    kind, detail = desc
    if kind == Nodetype.BASE:
        name, limit = detail
        name = _SAME_BASE.get(name, name)
        return f"{name}<={limit}" if limit else name
    if kind == Nodetype.NAME:
        return str(detail)
    sub, count = detail
    if kind == Nodetype.ARRAY:
        return f"{_our_type(sub)}[{count}]"
    return f"{_our_type(sub)}[<={count}]" if count else f"{_our_type(sub)}[]"


def _normalize(fields: list[list[str]]) -> list[tuple[str, str]]:
    """Field types from rosidl in our terms: base type names mapped, bounds and `pkg/msg/Name` kept."""
    out = []
    for name, text in fields:
        match = re.fullmatch(r"([\w/]+)(.*)", text)
        assert match, f"unexpected rosidl type {text!r}"
        head, rest = match.groups()
        head = _IDL_BASE.get(head, head)
        out.append((name, _SAME_BASE.get(head, head) + rest))
    return out


CODEC = default_codec()
USER_TYPES = [t for t in sorted(CODEC.typestore.types) if t.startswith("user/")]


def test_rosidl_parses_every_definition() -> None:
    """Every msg/*.msg and srv/*.srv parses and converts to IDL that rosidl_parser accepts."""
    view = _rosidl_view()
    assert sorted(view) == USER_TYPES


@pytest.mark.parametrize("typename", USER_TYPES)
def test_rosidl_sees_our_fields(typename: str) -> None:
    seen = _rosidl_view()[typename]
    constants, fields = CODEC.typestore.fielddefs[typename]
    ours = [(name, _our_type(desc)) for name, desc in fields]

    # The generated IDL (what rosidl generates C, C++ and Python code from) has exactly our fields.
    assert _normalize(seen["idl"]) == ours
    # The .msg parser has them too, without the placeholder member IDL adds to an empty struct.
    assert _normalize(seen["parser"]) == [f for f in ours if f[0] != "structure_needs_at_least_one_member"]
    assert [tuple(c) for c in seen["constants"]] == [tuple(c) for c in constants]


def test_package_xml_validates_with_catkin_pkg() -> None:
    info = _ros_python(_CATKIN_SCRIPT, str(REPO / "package.xml"))
    assert info["name"] == "user"
    assert info["format"] == 3
    assert info["build_type"] == "ament_cmake"
    assert "rosidl_interface_packages" in info["groups"]


def test_colcon_lists_the_package() -> None:
    colcon = shutil.which("colcon")
    if colcon is None:
        pytest.fail(f"colcon not found on PATH. {MISSING}")
    proc = subprocess.run(
        [colcon, "--log-base", os.devnull, "list"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=_clean_env(),
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    assert ["user", ".", "(ros.ament_cmake)"] in rows, proc.stdout


def _cmake_set(text: str, variable: str) -> list[str]:
    """The items of `set(variable ...)` in CMake text, quotes removed."""
    match = re.search(rf"set\(\s*{variable}\s+(.*?)\)", text, flags=re.DOTALL)
    assert match, f"CMakeLists.txt has no set({variable} ...)"
    body = re.sub(r"#.*", "", match.group(1))
    return [item.strip('"') for item in body.split()]


def test_cmakelists_lists_exactly_the_definitions() -> None:
    text = (REPO / "CMakeLists.txt").read_text()
    for kind in ("msg", "srv"):
        present = sorted(p.relative_to(REPO).as_posix() for p in (REPO / kind).glob(f"*.{kind}"))
        listed = _cmake_set(text, f"{kind}_files")
        assert sorted(listed) == present
        assert len(listed) == len(set(listed)), f"{kind}_files lists a file twice"
    generate = re.search(r"rosidl_generate_interfaces\((.*?)\)", text, flags=re.DOTALL)
    assert generate and "${msg_files}" in generate.group(1) and "${srv_files}" in generate.group(1)
