"""Reading the docker files, the deployment's dependency declarations and the sources as the checks of
test/docker need them: Dockerfile instructions, .dockerignore matching, compose services, pip requirements,
package.xml's keys and `pip:` lists, pyproject's requirements and the third-party modules src/user imports."""

from __future__ import annotations

import ast
import json
import re
import shlex
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction: its keyword (upper case) and its text after the keyword, continuations joined."""

    keyword: str
    text: str

    def argv(self) -> list[str]:
        """The exec (JSON) form's list, else the words of the shell form (options such as --chmod included)."""
        if self.text.startswith("["):
            return [str(word) for word in json.loads(self.text)]
        return shlex.split(self.text)


def instructions(path: Path) -> list[Instruction]:
    """A Dockerfile's instructions: comment lines dropped (also inside continued lines, as Docker does)."""
    out: list[Instruction] = []
    pending = ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1].strip() + " "
            continue
        whole = (pending + stripped).strip()
        pending = ""
        keyword, _, rest = whole.partition(" ")
        out.append(Instruction(keyword.upper(), rest.strip()))
    assert not pending, f"{path}: the last instruction ends in a line continuation"
    return out


def keyword_args(dockerfile: Path, keyword: str) -> list[list[str]]:
    return [i.argv() for i in instructions(dockerfile) if i.keyword == keyword]


def copy_sources(dockerfile: Path) -> list[str]:
    """The build-context sources of every COPY and ADD (not those copied from another stage or image)."""
    sources: list[str] = []
    for instruction in instructions(dockerfile):
        if instruction.keyword not in ("COPY", "ADD"):
            continue
        words = instruction.argv()
        if any(w.startswith("--from") for w in words):
            continue
        sources += [w for w in words if not w.startswith("--")][:-1]
    return sources


def arg_defaults(dockerfile: Path) -> dict[str, str]:
    """ARG NAME=default -> {NAME: default}."""
    out = {}
    for words in keyword_args(dockerfile, "ARG"):
        name, _, default = words[0].partition("=")
        out[name] = default
    return out


SEPARATORS = ("&&", "||", ";", "|", "&", ";;")


def simple_commands(text: str) -> list[list[str]]:
    """The simple commands of shell text (split at &&, ||, ;, | and &; quotes kept together, # comments dropped)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in SEPARATORS:
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def run_commands(dockerfile: Path) -> list[list[str]]:
    """The simple commands of every RUN, each as its words."""
    return [c for i in instructions(dockerfile) if i.keyword == "RUN" for c in simple_commands(i.text)]


def pip_installs(dockerfile: Path) -> list[list[str]]:
    """The arguments of every `pip install` a RUN makes (after `install`)."""
    out = []
    for words in run_commands(dockerfile):
        for i, word in enumerate(words[:-1]):
            is_pip = word in ("pip", "pip3") or word.endswith("/pip") or words[i - 1 : i + 1] == ["-m", "pip"]
            if is_pip and words[i + 1] == "install":
                out.append(words[i + 2 :])
                break
    return out


def option_values(args: list[str], *names: str) -> list[str]:
    """Values of `--name value` / `--name=value` options (and short ones such as -c) in `args`."""
    values = []
    for i, word in enumerate(args):
        for name in names:
            if word == name and i + 1 < len(args):
                values.append(args[i + 1])
            elif word.startswith(name + "=") and name.startswith("--"):
                values.append(word.split("=", 1)[1])
    return values


def extras(args: list[str]) -> list[str]:
    """The extras named by `.[a,b]`-style requirements among pip's arguments."""
    found = []
    for word in args:
        match = re.fullmatch(r"[^\s\[]*\[([\w,\s-]+)\]", word)
        if match:
            found += [e.strip() for e in match.group(1).split(",")]
    return found


def ignore_patterns(path: Path) -> list[str]:
    lines = [line.strip() for line in path.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    parts = []
    for token in re.split(r"(\*\*/|\*\*|\*|\?)", pattern.strip("/")):
        parts.append(
            {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(token, re.escape(token)) if token else ""
        )
    return re.compile("".join(parts))


def docker_ignores(patterns: list[str], path: str) -> bool:
    """Whether .dockerignore `patterns` keep `path` (relative to the context) out: a path is out when it or a
    folder above it matches; the last matching pattern wins, `!` patterns bring paths back."""
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = _pattern_regex(pattern[1:] if negate else pattern)
        if any(regex.fullmatch(p) for p in prefixes):
            ignored = not negate
    return ignored


def compose_services(path: Path) -> dict[str, dict[str, Any]]:
    data = yaml.safe_load(path.read_text())
    services = data["services"]
    assert isinstance(services, dict)
    return services


def volume_map(compose_dir: Path, service: dict[str, Any]) -> dict[str, Path]:
    """A service's bind mounts: container path -> host path (named volumes left out)."""
    out = {}
    for entry in service.get("volumes", []):
        source, target = str(entry).split(":")[:2]
        if source.startswith((".", "/")):
            out[target] = (compose_dir / source).resolve()
    return out


def requirements(path: Path) -> list[tuple[Requirement, str]]:
    """A pip requirements file: each requirement with its line's comment ('' without one)."""
    out = []
    for line in path.read_text().splitlines():
        spec, _, comment = line.partition(" #")
        spec = spec.strip()
        if spec and not spec.startswith(("#", "-")):
            out.append((Requirement(spec), comment.strip()))
    return out


def constraint_pins(path: Path) -> dict[str, str]:
    """constraints.txt: canonical distribution name -> pinned version."""
    pins = {}
    for req, _ in requirements(path):
        (spec,) = req.specifier
        pins[canonical(req.name)] = spec.version
    return pins


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pyproject_requirements(path: Path) -> dict[str, Requirement]:
    """Every requirement of pyproject.toml (dependencies and every extra), by canonical name; the first wins."""
    project = tomllib.loads(path.read_text())["project"]
    found: dict[str, Requirement] = {}
    for text in [*project["dependencies"], *(r for e in project["optional-dependencies"].values() for r in e)]:
        req = Requirement(text)
        found.setdefault(canonical(req.name), req)
    return found


def pyproject_extras(path: Path) -> set[str]:
    return set(tomllib.loads(path.read_text())["project"]["optional-dependencies"])


@dataclass(frozen=True)
class PackageXml:
    """What package.xml declares for running: exec_depend/depend keys (conditional ones apart) and `pip:` lists."""

    keys: set[str]  # unconditional
    conditional_keys: set[str]
    pip: set[str]  # `pip:` (installed by docker/Dockerfile.ros), canonical names
    pip_hardware: set[str]  # `pip, real hardware only:`


def package_xml(path: Path) -> PackageXml:
    root = ET.parse(path, parser=ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))).getroot()
    keys: set[str] = set()
    conditional: set[str] = set()
    pip: set[str] = set()
    hardware: set[str] = set()
    for element in root:
        tag: Any = element.tag  # a str, or ET.Comment for a comment
        if tag in ("depend", "exec_depend"):
            (conditional if element.get("condition") else keys).add((element.text or "").strip())
        elif tag is ET.Comment:
            for match in re.finditer(r"^\s*pip(, real hardware only)?:\s*(.+?)\s*$", element.text or "", re.M):
                (hardware if match.group(1) else pip).update(canonical(n) for n in match.group(2).split())
    return PackageXml(keys, conditional, pip, hardware)


def _literal_import(node: ast.Call) -> str | None:
    """X of importlib.import_module("X") / importlib.util.find_spec("X")."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name in ("import_module", "find_spec") and node.args and isinstance(node.args[0], ast.Constant):
        value = node.args[0].value
        return value if isinstance(value, str) else None
    return None


def imported_modules(package: Path) -> dict[str, set[str]]:
    """Top-level modules the package imports (statements, and import_module/find_spec of a literal name) that are
    neither the standard library nor the package itself -> the files that import them."""
    found: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Call):
                names = [n for n in [_literal_import(node)] if n]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != package.name:
                    found.setdefault(top, set()).add(str(path.relative_to(package.parent)))
    return found
