"""The fenced blocks of a setup guide (docs/*.md) and the steps of its `sh runs-here` blocks.

The notation (docs/README.md, "How to read the command blocks"): after a command, `# -> TEXT` is what it prints
when it works; `(keeps running)` marks a command that runs until Ctrl-C; `(exits N)` a command meant to fail
with that exit code; a trailing `&` a command started in the background of its terminal (its output is checked
at the end of the block). A comment line `# press KEY -> TEXT` presses KEY in the terminal of the last command
that keeps running. `$NAME` in an expected output is captured from it into the environment of later commands.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

DOCS = Path(__file__).resolve().parents[2] / "docs"
RUNS_HERE = "runs-here"
SHELLS = ("sh", "bash", "shell", "console")
_FENCE = re.compile(r"^(`{3,})(.*)$")
_PRESS = re.compile(r"^press (\S+)$")
_EXITS = re.compile(r"\(exits (\d+)\)")
_VARIABLE = re.compile(r"\$([A-Z_][A-Z0-9_]*)")

StepKind = Literal["run", "start", "background", "press"]


class GuideSyntaxError(ValueError):
    """A runnable block says something the test cannot run; the message names the file and line."""


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts, its language, the rest of its info string, its text."""

    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    flags: tuple[str, ...]
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"

    @property
    def runs_here(self) -> bool:
        return self.lang in SHELLS and RUNS_HERE in self.flags


@dataclass(frozen=True)
class Step:
    """One thing a runnable block asks for: run a command, start one, or press a key."""

    kind: StepKind
    text: str  # the command line (without its comment and `&`), or the key to press
    expect: str  # what its output shows ("" = nothing in particular)
    exit_code: int  # for `run`: the exit code it must end with
    where: str

    def expect_pattern(self) -> re.Pattern[str] | None:
        """`expect` as a regex; each `$NAME` in it captures a value (a word without quotes) as group NAME."""
        if not self.expect:
            return None
        parts = _VARIABLE.split(self.expect)  # text, name, text, name, ..., text
        pattern = "".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^\\s'\"]+)" for i, part in enumerate(parts))
        return re.compile(pattern)


def blocks(path: Path) -> list[Block]:
    """Every fenced block of the markdown file at `path`, in order."""
    found: list[Block] = []
    fence: tuple[str, int, str] | None = None  # (backticks, line, info string) of the open block
    body: list[str] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = _FENCE.match(line.strip())
        if fence is None and match:
            fence, body = (match.group(1), number, match.group(2).strip()), []
        elif fence is not None and match and match.group(1) == fence[0] and not match.group(2).strip():
            words = fence[2].split()
            lang = words[0] if words else ""
            found.append(Block(path, fence[1], lang, tuple(words[1:]), "\n".join(body)))
            fence = None
        elif fence is not None:
            body.append(line)
    if fence is not None:
        raise GuideSyntaxError(f"{path.name}:{fence[1]}: a fenced block that is never closed")
    return found


def logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations joined."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append(pending + raw)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def split_comment(line: str) -> tuple[str, str]:
    """(command, comment): the comment starts at the first `#` outside quotes that begins a word."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip(), line[i + 1 :].strip()
    return line.strip(), ""


def steps(block: Block) -> list[Step]:
    """The steps of a runnable block, in order."""
    found: list[Step] = []
    for line in logical_lines(block.text):
        command, comment = split_comment(line)
        if not command and not comment:
            continue
        tags, _, expect = comment.partition("->")
        tags, expect = tags.strip(), expect.strip()
        if not command:
            press = _PRESS.match(tags)
            if press is not None:
                found.append(Step("press", press.group(1), expect, 0, block.where))
            continue  # a plain comment line
        found.append(_command_step(command, tags, expect, block.where))
    return found


def _command_step(command: str, tags: str, expect: str, where: str) -> Step:
    exits = _EXITS.search(tags)
    exit_code = int(exits.group(1)) if exits else 0
    if command.endswith("&") and not command.endswith("&&"):
        if "(keeps running)" in tags or exits:
            raise GuideSyntaxError(f"{where}: {command!r}: a background command (&) neither keeps running nor exits")
        return Step("background", command[:-1].strip(), expect, 0, where)
    if "(keeps running)" in tags:
        if exits:
            raise GuideSyntaxError(f"{where}: {command!r}: both (keeps running) and (exits N)")
        return Step("start", command, expect, 0, where)
    return Step("run", command, expect, exit_code, where)


def variables(command: str) -> list[str]:
    """The `$NAME` variables a command line uses."""
    return _VARIABLE.findall(command)


def user_commands(block: Block) -> list[list[str]]:
    """The argument lists after `user` of every `user ...` command in a shell block (pipes and `&&` split)."""
    found: list[list[str]] = []
    for line in logical_lines(block.text):
        command, _ = split_comment(line)
        if not command:
            continue
        try:
            words = shlex.split(command.rstrip("&").strip())
        except ValueError as exc:
            raise GuideSyntaxError(f"{block.where}: cannot split {command!r}: {exc}") from exc
        segment: list[str] = []
        for word in [*words, "|"]:
            if word in ("|", "&&", ";", "||"):
                if segment and Path(segment[0]).name == "user":
                    found.append(segment[1:])
                segment = []
            else:
                segment.append(word)
    return found
