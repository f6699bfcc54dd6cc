"""The mutation gate: mutmut over the core modules of mutation/modules/*.toml, a score per module.

Each module runs in its own working directory (build/mutation/<module>/), so modules can be run alone, again
and incrementally (mutmut re-tests only functions that changed), with mutmut's configuration written for that
module: only its source file is mutated, only its tests run. Survivors that are listed in
mutation/equivalent/<module>.toml (mutants that cannot change behaviour, each with its reason) count as
equivalent, as do survivors a rule here recognises (a SQL text changed only in letter case).

    scripts/mutation                     every module of the gate
    scripts/mutation buffer.index sync.chunking
    scripts/mutation --list              the modules and their tests
    scripts/mutation --survivors MODULE  the diff of each surviving mutant

Exit status 1 when a module scores below the gate's threshold (or mutmut failed), else 0.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
GATE = REPO / "mutation" / "gate.toml"
MODULES = REPO / "mutation" / "modules"  # *.toml: [modules."name"] source = ..., tests = [...]
EQUIVALENT = REPO / "mutation" / "equivalent"  # one TOML file per module: <module>.toml
WORK = REPO / "build" / "mutation"
LINKED = ("src", "test", "msg", "srv", "config", "launch")  # what a module's working directory sees of the repo
KILLED = {1, 3, 37}  # mutmut exit codes: tests failed, pytest internal error, caught by the type check
SURVIVED = {0}
NO_TESTS = {5, 33}
TIMEOUT = {36, 24, -24, 152, 255}


@dataclass(frozen=True)
class Module:
    name: str  # e.g. "buffer.index"
    source: str  # repository-relative path of the mutated file
    tests: list[str]  # pytest paths


@dataclass
class Score:
    module: str
    killed: int = 0
    survived: int = 0
    equivalent: int = 0
    no_tests: int = 0
    timeout: int = 0
    other: int = 0
    survivors: list[str] | None = None
    stale_equivalents: list[str] | None = None

    @property
    def total(self) -> int:
        return self.killed + self.survived + self.equivalent + self.no_tests + self.timeout + self.other

    @property
    def score(self) -> float:
        """Killed (timeouts count as killed: the mutant hangs the tests) over the non-equivalent mutants."""
        counted = self.total - self.equivalent
        return (self.killed + self.timeout) / counted if counted else 1.0


def load_gate() -> tuple[float, dict[str, Module]]:
    threshold = float(tomllib.loads(GATE.read_text())["gate"]["threshold"])
    modules: dict[str, Module] = {}
    for path in sorted(MODULES.glob("*.toml")):
        for name, m in tomllib.loads(path.read_text()).get("modules", {}).items():
            modules[name] = Module(name, m["source"], list(m["tests"]))
    return threshold, modules


def load_equivalents() -> dict[str, str]:
    """Mutant name -> the reason it cannot change behaviour, from every mutation/equivalent/*.toml."""
    found: dict[str, str] = {}
    for path in sorted(EQUIVALENT.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        found.update({str(k): str(v) for k, v in data.get("equivalent", {}).items()})
    return found


SQL = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|PRAGMA|BEGIN|COMMIT|ROLLBACK|WITH)\b", re.IGNORECASE)
SQL_CASE_REASON = "SQL keywords and identifiers are case-insensitive (quoted values unchanged)"


def mutant_sources(work: Path, module: Module) -> dict[str, str]:
    """Source of every mutant function (and each `..._mutmut_orig`) in mutmut's mutated copy, by mutant name."""
    path = work / "mutants" / module.source
    prefix = module.source.removeprefix("src/").removesuffix(".py").replace("/", ".")
    text = path.read_text()
    sources: dict[str, str] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and "__mutmut_" in node.name:
            sources[f"{prefix}.{node.name}"] = ast.get_source_segment(text, node) or ""
    return sources


def original_of(name: str) -> str:
    return name.rsplit("__mutmut_", 1)[0] + "__mutmut_orig"


def strings_of(source: str) -> list[str]:
    return [
        n.value for n in ast.walk(ast.parse(source.strip())) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def same_sql_but_case(original: str, mutant: str) -> bool:
    """Two SQL texts that differ only in letter case outside single-quoted values."""
    if not SQL.match(original) or original == mutant:
        return False
    a, b = original.split("'"), mutant.split("'")
    if len(a) != len(b):
        return False
    return all(x.lower() == y.lower() if i % 2 == 0 else x == y for i, (x, y) in enumerate(zip(a, b, strict=True)))


def auto_equivalent(name: str, sources: dict[str, str]) -> str | None:
    """The reason a survivor is equivalent by a rule of this gate, or None."""
    original, mutant = sources.get(original_of(name)), sources.get(name)
    if original is None or mutant is None:
        return None
    try:
        before, after = strings_of(original), strings_of(mutant)
    except SyntaxError:
        return None
    changed = [(x, y) for x, y in zip(before, after, strict=False) if x != y]
    if len(before) == len(after) and len(changed) == 1 and same_sql_but_case(*changed[0]):
        return SQL_CASE_REASON
    return None


def diff_of(name: str, sources: dict[str, str]) -> str:
    original, mutant = sources.get(original_of(name), ""), sources.get(name, "")
    lines = difflib.unified_diff(original.splitlines()[1:], mutant.splitlines()[1:], lineterm="", n=1)
    return "\n".join(line for line in lines if not line.startswith(("---", "+++")))


def mutmut_config(module: Module) -> str:
    """The [tool.mutmut] section for one module (TOML)."""

    def toml_list(items: list[str]) -> str:
        return "[" + ", ".join(json.dumps(i) for i in items) + "]"

    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["src"]\n'
        f"only_mutate = {toml_list([module.source])}\n"
        f"pytest_add_cli_args_test_selection = {toml_list(module.tests)}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-p", "no:randomly"]\n'
        'process_isolation = "forkserver"\n'
        f"also_copy = {toml_list([d + '/' for d in LINKED if d not in ('src', 'test')])}\n"
    )


def prepare(module: Module) -> Path:
    """The module's working directory: links to the repository, and a pyproject.toml with its mutmut section."""
    work = WORK / module.name
    work.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        link = work / name
        if not link.is_symlink():
            link.symlink_to(REPO / name)
    shared = work / "shared"  # tests look for ../shared beside the repository, which is mutants/ here
    if not shared.is_symlink() and (REPO.parent / "shared").is_dir():
        shared.symlink_to(REPO.parent / "shared")
    pyproject = (REPO / "pyproject.toml").read_text()
    if "[tool.mutmut]" in pyproject:
        pyproject = pyproject[: pyproject.index("[tool.mutmut]")]
    (work / "pyproject.toml").write_text(pyproject + mutmut_config(module))
    return work


def clean_env() -> dict[str, str]:
    """Our environment without what would let the tests import the original sources instead of the mutants."""
    env = dict(os.environ)
    src = str(REPO / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != src)
    env.pop("USER_REQUIRE_ROS", None)
    env.setdefault("MUJOCO_GL", "egl")
    return env


def run_mutmut(module: Module, work: Path, max_children: int, verbose: bool) -> int:
    """mutmut run in the module's directory; its progress output goes to mutmut.log there (or the console)."""
    cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children)]
    print(f"== {module.name}: mutmut over {module.source}, tests {' '.join(module.tests)}", flush=True)
    if verbose:
        return subprocess.call(cmd, cwd=work, env=clean_env())
    with open(work / "mutmut.log", "wb") as log:
        code = subprocess.call(cmd, cwd=work, env=clean_env(), stdout=log, stderr=subprocess.STDOUT)
    if code != 0:
        print((work / "mutmut.log").read_text(errors="replace")[-3000:], file=sys.stderr)
    return code


def collect(module: Module, work: Path, equivalents: dict[str, str]) -> Score:
    """Count mutmut's verdicts for the module from its .meta file."""
    meta = work / "mutants" / (module.source + ".meta")
    score = Score(module.name, survivors=[], stale_equivalents=[])
    if not meta.exists():
        score.other = 1
        return score
    codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
    sources = mutant_sources(work, module)
    for name, code in sorted(codes.items()):
        if code in SURVIVED:
            if name in equivalents or auto_equivalent(name, sources) is not None:
                score.equivalent += 1
            else:
                score.survived += 1
                score.survivors.append(name)  # type: ignore[union-attr]
        elif code in KILLED:
            score.killed += 1
            if name in equivalents:
                score.stale_equivalents.append(name)  # type: ignore[union-attr]
        elif code in NO_TESTS:
            score.no_tests += 1
        elif code in TIMEOUT:
            score.timeout += 1
        else:
            score.other += 1
    return score


def print_table(scores: list[Score], threshold: float) -> None:
    print(f"\nMutation gate ({date.today().isoformat()}), threshold {threshold:.0%} of non-equivalent mutants killed")
    columns = ("mutants", "killed", "timeout", "survived", "equiv.", "no tests", "score")
    header = f"{'module':<22} " + " ".join(f"{c:>8}" for c in columns)
    print(header)
    print("-" * len(header))
    for s in scores:
        verdict = "ok" if s.score >= threshold else "BELOW"
        counts = (s.total, s.killed, s.timeout, s.survived, s.equivalent, s.no_tests)
        print(f"{s.module:<22} " + " ".join(f"{c:>8}" for c in counts) + f" {s.score:>8.1%} {verdict}")
    for s in scores:
        for name in s.stale_equivalents or []:
            print(f"note: {name} is listed as equivalent but was killed; remove it from {EQUIVALENT}/{s.module}.toml")


def show_survivors(module: Module, work: Path, score: Score) -> None:
    sources = mutant_sources(work, module)
    for name in score.survivors or []:
        print(f"\n# {name}\n{diff_of(name, sources)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/mutation", description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("modules", nargs="*", help="gate modules (default: all), e.g. buffer.index")
    parser.add_argument("--list", action="store_true", help="list the gate's modules and their tests")
    parser.add_argument("--survivors", action="store_true", help="print the diff of every surviving mutant")
    parser.add_argument("--fresh", action="store_true", help="forget earlier results of these modules")
    parser.add_argument("--no-run", action="store_true", help="report the last results without running mutmut")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2, help="parallel mutant workers")
    parser.add_argument("--verbose", action="store_true", help="show mutmut's own progress output")
    args = parser.parse_args(argv)
    threshold, modules = load_gate()
    if args.list:
        for m in modules.values():
            print(f"{m.name:<22} {m.source:<34} {' '.join(m.tests)}")
        return 0
    unknown = [m for m in args.modules if m not in modules]
    if unknown:
        print(f"unknown gate module(s): {', '.join(unknown)} (known: {', '.join(modules)})", file=sys.stderr)
        return 2
    equivalents = load_equivalents()
    scores = []
    for name in args.modules or list(modules):
        module = modules[name]
        if args.fresh:
            shutil.rmtree(WORK / module.name, ignore_errors=True)
        work = prepare(module)
        code = 0 if args.no_run else run_mutmut(module, work, args.max_children, args.verbose)
        score = collect(module, work, equivalents)
        if code != 0:
            print(f"mutmut exited with {code} for {name}", file=sys.stderr)
            score.other += 1
        scores.append(score)
        print(f"   {score.killed + score.timeout} of {score.total - score.equivalent} killed ({score.score:.1%})")
        if args.survivors:
            show_survivors(module, work, score)
    print_table(scores, threshold)
    return 0 if all(s.score >= threshold and s.other == 0 for s in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
