"""What a node process tells its launcher: an exit code that says whether a restart can help, and a one-line
status file (`$USER_NODE_STATUS_FILE`) that says when it runs and, when it failed, why.

Exit codes (both runtimes):

- 0: stopped on a signal, or finished (an expert whose demonstrations are done); never respawned: `respawn` is
  for failures;
- 1: failed (an error while starting or running); respawned within its limit;
- 2: its configuration or environment is wrong (a bad setting, an unknown kind, a missing dependency); never
  respawned: the same start fails the same way;
- 3: did not shut down within its allowance and exited anyway; a failed stop;
- 4: something it needs did not answer (no Zenoh router reachable); respawned within its limit;
- 5: the run is complete (the learner reached its `stop_after`): the launcher stops the whole deployment,
  cleanly, and exits 0.

The status file holds one line, rewritten as the node goes: `starting`, `running`, then `stopped` when it ended
cleanly (exit code 0), or `<state> <reason>` when it failed (`config-error ...`, `failed ...`) or completed the
run (`complete ...`), so `user bringup` and the ROS launch file print the reason on their console instead of only
an exit code, and `user report` shows how each node ended. Without the variable nothing is written.

A node that is killed (SIGKILL, a crash) cannot write how it ended: its launcher does, from the exit code
(`record_exit`), so that a status file never says `starting` or `running` for a process that is gone. Files
written before `stopped` existed still read back (their last line may say `running` after the run).
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG_ERROR = 2
EXIT_SHUTDOWN_TIMEOUT = 3
EXIT_UNAVAILABLE = 4
EXIT_RUN_COMPLETE = 5

ENV_STATUS_FILE = "USER_NODE_STATUS_FILE"  # set by both launchers, one file per node

STARTING = "starting"
RUNNING = "running"
CONFIG_ERROR = "config-error"
FAILED = "failed"
COMPLETE = "complete"  # the run is complete (exit code 5), with the reason
STOPPED = "stopped"  # ended cleanly (exit code 0): stopped on a signal, or finished
STATES = (STARTING, RUNNING, STOPPED, CONFIG_ERROR, FAILED, COMPLETE)
LIVE = (STARTING, RUNNING)  # the states of a process that is still there
REASONED = (CONFIG_ERROR, FAILED, COMPLETE)  # the states whose reason a launcher prints
MAX_REASON_CHARS = 2000  # a status line stays one readable console line


@dataclass(frozen=True)
class NodeStatus:
    """One status line: the state and, for a failure, its reason."""

    state: str
    reason: str = ""


def one_line(text: str) -> str:
    """`text` as one line (newlines joined with ' | '), cut to MAX_REASON_CHARS."""
    joined = " | ".join(part.strip() for part in text.splitlines() if part.strip())
    return joined if len(joined) <= MAX_REASON_CHARS else joined[: MAX_REASON_CHARS - 3] + "..."


def write_status(state: str, reason: str = "", path: str | Path | None = None) -> None:
    """Replace the node's status line (to `path`, else `$USER_NODE_STATUS_FILE`; neither: nothing happens).

    Written whole (a temporary file renamed over the old one), so a launcher never reads half a line. A status
    that cannot be written is not an error of the node: the exit code still tells the launcher what happened."""
    if state not in STATES:
        raise ValueError(f"unknown node state {state!r} (known: {', '.join(STATES)})")
    target = path if path is not None else os.environ.get(ENV_STATUS_FILE)
    if not target:
        return
    line = f"{state} {one_line(reason)}".rstrip() + "\n"
    tmp = Path(f"{target}.tmp")
    with contextlib.suppress(OSError):
        tmp.write_text(line, encoding="utf-8")
        tmp.replace(target)


def read_status(path: str | Path) -> NodeStatus | None:
    """The status line at `path`; None when there is none (not written yet, or not a status line)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    state, _, reason = text.partition(" ")
    return NodeStatus(state, reason.strip()) if state in STATES else None


def final_state(code: int) -> str:
    """The state exit code `code` means (a negative code: killed by that signal, a failure)."""
    if code == EXIT_OK:
        return STOPPED
    if code == EXIT_RUN_COMPLETE:
        return COMPLETE
    if code == EXIT_CONFIG_ERROR:
        return CONFIG_ERROR
    return FAILED


def _exit_words(code: int) -> str:
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"ended by signal {signal.Signals(-code).name}"
    except ValueError:
        return f"ended by signal {-code}"


def record_exit(path: str | Path, code: int, reason: str = "") -> None:
    """After the node's process at `path` exited with `code` (its launcher calls this): when its status still says
    starting or running, or holds no status, the node could not write how it ended (killed, crashed); write the
    state `code` means, with `reason` (else the exit itself) for anything but a clean stop. A status the node
    wrote itself is kept."""
    current = read_status(path)
    if current is not None and current.state not in LIVE:
        return
    state = final_state(code)
    write_status(state, "" if state == STOPPED else reason or _exit_words(code), path)
