"""Runs the `sh runs-here` blocks of one guide, in order, as a person would, checking each step's expected state.

Each command runs in a terminal of its own (`Terminal`). A `run` step must end within `RUN_TIMEOUT_S` with its
exit code and expected output; a `start` step must show its expected output within `START_TIMEOUT_S` and keep
running (until `close`, which presses Ctrl-C and wants exit code 0 from `user` commands); a `background` step is
checked at the end of its block; a `press` step types a key into the last started command's terminal and waits
for the output it names. The first failure raises `GuideCheckError` with the command's output.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from test.docs.blocks import Block, Step, steps, variables
from test.docs.terminal import Terminal

RUN_TIMEOUT_S = 45.0  # a command that ends (a topic echo, a node that fails at start)
START_TIMEOUT_S = 60.0  # a node or simulator until it says it runs (MuJoCo and the model load on a busy machine)
STOP_TIMEOUT_S = 20.0  # Ctrl-C until a `user` command is gone
OTHER_STOP_TIMEOUT_S = 3.0  # Ctrl-C until another program (franky-sim) is gone; then it is killed
TAIL_CHARS = 3000


class GuideCheckError(AssertionError):
    """A runnable block of a guide did not reach the state it promises."""


@dataclass
class _Started:
    step: Step
    terminal: Terminal
    checked: bool = False


@dataclass
class GuideSession:
    """The terminals of one guide's runnable blocks. `wait_subscribed(topic)` waits until a topic has a subscriber
    (so that a key is pressed only once a background `user topic echo` listens, as a person would wait)."""

    env: dict[str, str]
    cwd: Path
    logs: Path
    wait_subscribed: Callable[[str], bool] | None = None
    _all: list[_Started] = field(default_factory=list)
    _running: list[_Started] = field(default_factory=list)

    def run_block(self, block: Block) -> None:
        """Every step of `block`, then the expectations of its background commands."""
        background: list[_Started] = []
        for step in steps(block):
            if step.kind == "press":
                self._press(step)
                continue
            started = self._launch(step)
            if step.kind == "run":
                self._finish(started)
            elif step.kind == "start":
                self._await(started, START_TIMEOUT_S)
                self._running.append(started)
            else:
                background.append(started)
                self._await_listening(started)
        for started in background:
            self._await(started, RUN_TIMEOUT_S)
            code = started.terminal.proc.poll()
            if code not in (None, 0):
                self._fail(started, f"exited with code {code}")

    def close(self) -> None:
        """Ctrl-C every command still running, newest first; a `user` command must then end with code 0."""
        problems: list[str] = []
        for started in reversed(self._running):
            is_user = shlex.split(started.step.text)[0] == "user"
            code = started.terminal.interrupt(STOP_TIMEOUT_S if is_user else OTHER_STOP_TIMEOUT_S)
            if is_user and code != 0:
                problems.append(f"{started.step.where}: {started.step.text!r} ended with {code} on Ctrl-C")
        for started in self._all:
            started.terminal.close()
        self._running.clear()
        if problems:
            raise GuideCheckError("; ".join(problems))

    # ---- steps ----------------------------------------------------------------------------------------------

    def _launch(self, step: Step) -> _Started:
        missing = [name for name in variables(step.text) if name not in self.env]
        if missing:
            raise GuideCheckError(f"{step.where}: {step.text!r} uses ${missing[0]}, which no earlier command printed")
        log = self.logs / f"step{len(self._all)}.log"
        started = _Started(step, Terminal(step.text, self.env, self.cwd, log))
        self._all.append(started)
        return started

    def _finish(self, started: _Started) -> None:
        terminal, step = started.terminal, started.step
        if not terminal.wait_for(terminal.exited, RUN_TIMEOUT_S):
            self._fail(started, f"did not end within {RUN_TIMEOUT_S:.0f} s")
        code = terminal.proc.returncode
        if code != step.exit_code:
            self._fail(started, f"exited with code {code}, expected {step.exit_code}")
        self._check(started)

    def _await(self, started: _Started, timeout_s: float) -> None:
        """Until the expected output shows; for a `start` step the process must not have exited."""
        pattern = started.step.expect_pattern()
        terminal = started.terminal
        if pattern is not None and not terminal.wait_for(lambda: pattern.search(terminal.output()) is not None,
                                                         timeout_s):  # fmt: skip
            why = "exited" if terminal.exited() else f"not within {timeout_s:.0f} s"
            self._fail(started, f"never printed {started.step.expect!r} ({why})")
        if started.step.kind == "start" and terminal.exited():
            self._fail(started, f"exited with code {terminal.proc.returncode} instead of running on")
        self._check(started)

    def _check(self, started: _Started) -> None:
        """The expected output is there; its `$NAME` values go into the environment of later commands."""
        pattern = started.step.expect_pattern()
        if pattern is None:
            return
        match = pattern.search(started.terminal.output())
        if match is None:
            self._fail(started, f"did not print {started.step.expect!r}")
        self.env.update({name: value for name, value in match.groupdict().items() if value is not None})
        started.checked = True

    def _await_listening(self, started: _Started) -> None:
        words = shlex.split(started.step.text)
        if self.wait_subscribed is None or words[:3] != ["user", "topic", "echo"]:
            return
        topic = words[3]
        if not self.wait_subscribed(topic):
            self._fail(started, f"never subscribed to {topic}")

    def _press(self, step: Step) -> None:
        if not self._running:
            raise GuideCheckError(f"{step.where}: press {step.text}: no command keeps running to press it in")
        target = self._running[-1]
        before = len(target.terminal.output())
        target.terminal.press(step.text)
        pattern = step.expect_pattern()
        if pattern is None:
            return
        terminal = target.terminal
        if not terminal.wait_for(lambda: pattern.search(terminal.output()[before:]) is not None, RUN_TIMEOUT_S):
            self._fail(target, f"press {step.text} ({step.where}): never printed {step.expect!r}")

    def _fail(self, started: _Started, why: str) -> NoReturn:
        output = started.terminal.output()[-TAIL_CHARS:]
        raise GuideCheckError(f"{started.step.where}: {started.step.text!r}: {why}. Its output:\n{output}")
