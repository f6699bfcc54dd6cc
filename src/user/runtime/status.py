"""What a node process tells its launcher: an exit code that says whether a restart can help, and a one-line
status file (`$USER_NODE_STATUS_FILE`) that says when it runs and, when it failed, why.

Exit codes (both runtimes):

- 0: stopped on a signal, or finished; a launcher respawns it only when its `respawn` says so;
- 1: failed (an error while starting or running); respawned within its limit;
- 2: its configuration or environment is wrong (a bad setting, an unknown kind, a missing dependency); never
  respawned: the same start fails the same way;
- 3: did not shut down within its allowance and exited anyway; a failed stop;
- 4: something it needs did not answer (no Zenoh router reachable); respawned within its limit;
- 5: the run is complete (the learner reached its `stop_after`): the launcher stops the whole deployment,
  cleanly, and exits 0.

The status file holds one line, rewritten as the node goes: `starting`, `running`, or `<state> <reason>` when it
failed (`config-error ...`, `failed ...`) or completed the run (`complete ...`), so `user bringup` and the ROS
launch file print the reason on their console instead of only an exit code. Without the variable nothing is
written.
"""

from __future__ import annotations

import contextlib
import os
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
STATES = (STARTING, RUNNING, CONFIG_ERROR, FAILED, COMPLETE)
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
