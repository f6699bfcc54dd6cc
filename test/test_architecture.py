"""The house as ARCHITECTURE.md draws it: every package listed once with its layer, imports only downward, small
modules and functions. Computed from the source, so a new upward import or an unlisted package fails here."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "user"
MAX_MODULE_LINES = 350  # a module may be longer only with a reason at the top of its docstring ("Size: ...")
HARD_MODULE_LINES = 400  # and never longer than this
MAX_FUNCTION_LINES = 60
_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*([a-z_]+)\s*\|")


def documented_layers(text: str) -> dict[str, int]:
    """{package: layer} from the table rows `| layer | package | ... |` of ARCHITECTURE.md."""
    layers: dict[str, int] = {}
    for line in text.splitlines():
        m = _ROW.match(line)
        if m:
            if m[2] in layers:
                raise AssertionError(f"ARCHITECTURE.md lists package {m[2]!r} twice")
            layers[m[2]] = int(m[1])
    return layers


def packages() -> set[str]:
    return {p.name for p in SRC.iterdir() if (p / "__init__.py").exists()}


def imported_packages(path: Path) -> Iterator[tuple[int, str]]:
    """(line, package) for every `user.<package>` an import statement of `path` names (lazy ones too)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if node.module != "user" else [f"user.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "user" and len(parts) > 1:
                yield node.lineno, parts[1]


def import_edges() -> dict[tuple[str, str], str]:
    """{(importer, imported): 'file:line' of one such import} between different packages of src/user."""
    edges: dict[tuple[str, str], str] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if len(rel.parts) < 2:
            continue  # user/__init__.py, user/__main__.py: the entry point above every layer
        for line, target in imported_packages(path):
            if target != rel.parts[0]:
                edges.setdefault((rel.parts[0], target), f"src/user/{rel}:{line}")
    return edges


def test_every_package_is_documented_once_and_every_documented_one_exists() -> None:
    layers = documented_layers((REPO / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    assert sorted(packages() - layers.keys()) == [], "packages missing from ARCHITECTURE.md"
    assert sorted(layers.keys() - packages()) == [], "ARCHITECTURE.md lists packages that do not exist"


def test_the_readme_layout_names_every_package() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^src/user/([a-z_]+)\s", layout, flags=re.MULTILINE))
    assert sorted(packages() - listed) == [], "packages missing from the README's layout"
    assert sorted(listed - packages()) == [], "the README's layout names packages that do not exist"


def test_imports_only_run_down_the_documented_layers() -> None:
    layers = documented_layers((REPO / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    wrong = [
        f"{where}: {src} (layer {layers[src]}) imports {dst} (layer {layers[dst]})"
        for (src, dst), where in sorted(import_edges().items())
        if src in layers and dst in layers and layers[dst] >= layers[src]
    ]
    assert wrong == []


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The parser finds plain, from- and lazy (in-function) imports of user packages."""
    module = tmp_path / "m.py"
    module.write_text("import user.bus.base\nfrom user import nodes\ndef f():\n    from user.deploy.run_dir import x\n")
    assert [pkg for _, pkg in imported_packages(module)] == ["bus", "nodes", "deploy"]
    assert documented_layers("| 3 | robots | x |\n| 4 | tasks | y |\nnot a row\n") == {"robots": 3, "tasks": 4}


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def size_reason(text: str) -> str:
    """The reason a module gives at the top of its docstring for being longer than MAX_MODULE_LINES ("" if none)."""
    doc = ast.get_docstring(ast.parse(text)) or ""
    first = doc.split("\n\n", 1)[0]
    m = re.search(r"^Size: (.+)", first, flags=re.MULTILINE)
    return m[1].strip() if m else ""


def test_the_size_check_reads_a_reason_only_at_the_top() -> None:
    assert size_reason('"""One concern.\n\nSize: one table of 120 message types."""\n') == ""
    assert size_reason('"""One concern.\nSize: one table of 120 message types.\n\nMore."""\n') == (
        "one table of 120 message types."
    )
    assert size_reason("x = 1\n") == ""


def test_no_formatting_is_switched_off_to_fit_a_size() -> None:
    """`# fmt: skip` / `# fmt: off` hide a line's real shape from the formatter (and from the size limits)."""
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for path in sorted(SRC.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"#\s*fmt:\s*(skip|off)", line)
    ]
    assert found == []


@pytest.mark.parametrize("limit", ["module", "function"])
def test_modules_and_functions_stay_small(limit: str) -> None:
    too_big = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(REPO)
        text = path.read_text(encoding="utf-8")
        if limit == "module":
            lines = len(text.splitlines())
            limit_here = HARD_MODULE_LINES if size_reason(text) else MAX_MODULE_LINES
            if lines > limit_here:
                too_big.append(f"{rel}: {lines} lines (at most {limit_here})")
            continue
        for fn in _functions(ast.parse(text)):
            lines = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                too_big.append(f"{rel}:{fn.lineno} {fn.name}: {lines} lines (at most {MAX_FUNCTION_LINES})")
    assert too_big == []
