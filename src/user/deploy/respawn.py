"""What a node's exit means, decided the same way by both launchers (`user bringup` and the ROS launch file):
respawn it, it finished, or it is gone for good.

- exit code 2 (a configuration error, `user.runtime.status`): never respawned; the same start fails the same way;
- exit code 0: it finished (an expert whose demonstrations are done, a node stopped by a signal from outside its
  launcher): never respawned, whatever `respawn` says, and not a failure;
- otherwise: respawned after `respawn_delay_s` while `max_respawns` allows, else gone for good;
- a node that ran `respawn_reset_s` since its last start has its respawn count reset, so a node that fails
  once a day is not given up after its fifth day;
- a node that did not report running within `start_timeout_s` is stopped by its launcher, and that exit counts
  as a failure whatever its code;
- gone for good: a `required` node stops the deployment (which then exits non-zero), an optional one does not;
- the run is complete (a learner met its `stop_after`): the deployment stops, cleanly, once every learner it
  started is complete (`RunCompletion`: with one learner per task, a task that is done waits for the others).

Every verdict carries one console line naming the node, its exit and, when the node gave one, its reason.
"""

from __future__ import annotations

import enum
import signal
from collections.abc import Iterable
from dataclasses import dataclass

from user.deploy.commands import NodeLaunch
from user.runtime.status import (
    EXIT_CONFIG_ERROR,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_RUN_COMPLETE,
    EXIT_SHUTDOWN_TIMEOUT,
    EXIT_UNAVAILABLE,
)

_MEANINGS = {
    EXIT_FAILED: "failed",
    EXIT_CONFIG_ERROR: "configuration error",
    EXIT_SHUTDOWN_TIMEOUT: "shutdown took too long",
    EXIT_UNAVAILABLE: "something it needs did not answer",
    EXIT_RUN_COMPLETE: "the run is complete",
}


class Outcome(enum.Enum):
    RESPAWN = "respawn"
    FINISHED = "finished"
    GONE = "gone"  # failed, and not started again
    COMPLETE = "complete"  # the run is complete: the whole deployment stops, cleanly


@dataclass(frozen=True)
class Verdict:
    """What follows a node's exit."""

    outcome: Outcome
    line: str  # one console line: the node, its exit, its reason, what happens next
    delay_s: float = 0.0  # RESPAWN: wait this long first
    stops_deployment: bool = False  # GONE of a required node


def describe_exit(code: int | None) -> str:
    """'code 2 (configuration error)', 'signal SIGKILL', ..."""
    if code is None:
        return "an unknown status"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    meaning = _MEANINGS.get(code)
    return f"code {code} ({meaning})" if meaning else f"code {code}"


class RunCompletion:
    """Which of the learners a launcher started have completed their run; the deployment's run is complete when
    all have (shared by the `NodeLife` of every node of one launcher)."""

    def __init__(self, learners: Iterable[str]) -> None:
        self.learners = list(learners)
        self.complete: set[str] = set()

    @classmethod
    def of(cls, launches: Iterable[NodeLaunch]) -> RunCompletion:
        return cls(launch.name for launch in launches if launch.kind == "learner")

    def completed(self, name: str) -> list[str]:
        """Note that `name` completed its run; the learners still running (empty: the whole run is complete)."""
        self.complete.add(name)
        return [learner for learner in self.learners if learner not in self.complete]


class NodeLife:
    """One node across its restarts: when it started, whether it reported running, how often it was respawned."""

    def __init__(self, launch: NodeLaunch, completion: RunCompletion | None = None) -> None:
        self.launch = launch
        self.completion = completion  # None: a complete run stops the deployment at once
        self.respawns = 0  # respawns since the count was last reset
        self.started_at: float | None = None
        self.running = False  # reported running since its last start
        self.start_overdue = False  # did not report running in time; its launcher stops it

    def started(self, now: float) -> None:
        self.started_at = now
        self.running = False
        self.start_overdue = False

    def reported_running(self, now: float) -> float:
        """The node reported running: seconds it took since its start."""
        self.running = True
        return now - self.started_at if self.started_at is not None else 0.0

    def reset_if_healthy(self, now: float) -> bool:
        """Reset the respawn count when the node has run `respawn_reset_s` since its start; True when it did."""
        if self.respawns == 0 or self.started_at is None or self.start_overdue:
            return False
        if now - self.started_at < self.launch.respawn_reset_s:
            return False
        self.respawns = 0
        return True

    def overdue(self, now: float) -> bool:
        """True once, when the node has not reported running within `start_timeout_s` of its start."""
        if self.running or self.start_overdue or self.started_at is None:
            return False
        if now - self.started_at < self.launch.start_timeout_s:
            return False
        self.start_overdue = True
        return True

    def exited(self, code: int | None, reason: str, now: float) -> Verdict:
        """What follows the exit of the node with `code` (and the one-line `reason` it gave, or '')."""
        self.reset_if_healthy(now)
        what = f"{self.launch.name} exited with {describe_exit(code)}"
        if self.start_overdue:
            what += f" after it did not report running within {self.launch.start_timeout_s:g} s"
        if reason:
            what += f": {reason}"
        if code == EXIT_RUN_COMPLETE:
            waiting = self.completion.completed(self.launch.name) if self.completion is not None else []
            if waiting:  # its task is done; the deployment runs on for the others
                return Verdict(Outcome.FINISHED, f"{what}; the run goes on until {', '.join(waiting)} complete too")
            return Verdict(Outcome.COMPLETE, f"{what}; stopping the deployment", stops_deployment=True)
        if code == EXIT_CONFIG_ERROR:
            return self._gone(f"{what}; not respawned: the same configuration fails the same way")
        if code == EXIT_OK and not self.start_overdue:  # `respawn` is for failures: a finished node stays finished
            return Verdict(Outcome.FINISHED, f"{what}; it finished")
        if self.launch.may_respawn(self.respawns):
            self.respawns += 1
            limit = "" if self.launch.max_respawns < 0 else f" of {self.launch.max_respawns}"
            delay = self.launch.respawn_delay_s
            return Verdict(
                Outcome.RESPAWN, f"{what}; respawning in {delay:.1f} s (respawn {self.respawns}{limit})", delay
            )
        why = "respawn is off" if not self.launch.respawn else f"gave up after {self.launch.max_respawns} respawns"
        return self._gone(f"{what}; not respawned ({why})")

    def _gone(self, line: str) -> Verdict:
        if self.launch.required:
            return Verdict(Outcome.GONE, f"{line}; it is required: stopping the deployment", stops_deployment=True)
        return Verdict(Outcome.GONE, f"{line}; it is optional: the rest runs on")
