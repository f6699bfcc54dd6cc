"""What bench/churn.py watches and counts: a probe node on the deployment's router, the robots' own records on disk
(outbox spool, saved episode ids), hand-started robot processes, an independent read of the buffer's MCAP
segments, and the per-robot accounting (pure functions, tested from synthetic inputs without a deployment).

What a robot *ended* (and so must be stored once): every episode id whose END event (steps > 0) the probe saw on
`/<robot>/episode_events`, plus every episode id ever seen in the robot's outbox spool
(`<state_dir>/<robot>.outbox/<id>.mcap`). The robot publishes an episode's last transition, writes its spool file,
then publishes END, so a SIGKILL between the write and END still leaves the id on disk, where the bench reads it
after every stop. An episode cut by SIGKILL or SIGINT mid-way has neither: it was never ended, so it is not counted
lost; it shows as *cut* (ids the robot handed out, `<state_dir>/<robot>.episode.json`, that were never ended).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from user.bus.base import Bus
from user.interfaces.episode_events import EpisodeKind
from user.robot_loop.episode_ids import saved_next_id
from user.runtime.node import Node

STOP_TIMEOUT_S = 20.0  # a robot stopped with SIGINT must exit within this
SPOOL_SUFFIXES = (".mcap", ".episode")  # user.robot_loop.outbox_spool: MCAP_SUFFIX, SUFFIX


class ChurnProbe(Node):
    """Every robot's episode ENDs (with their step counts) and the learner's update count over time."""

    def __init__(self, bus: Bus, robots: list[str], stats_topic: str) -> None:
        super().__init__(bus)
        self._lock = threading.Lock()
        self.ends: dict[str, dict[int, int]] = defaultdict(dict)  # robot -> episode -> steps of its END
        self.updates: list[tuple[float, int]] = []  # (wall s, the learner's gradient steps so far)
        self._kill_at_end: dict[str, int] = {}  # robot -> pid to SIGKILL the moment its next END arrives
        self.create_subscription(stats_topic, "user/msg/TrainingStats", self._on_stats)
        for robot in robots:
            self.create_subscription(f"/{robot}/episode_events", "user/msg/EpisodeEvent", self._on_event)

    def _on_stats(self, msg: Any) -> None:
        with self._lock:
            self.updates.append((time.time(), int(msg.updates)))

    def _on_event(self, msg: Any) -> None:
        if int(msg.kind) == EpisodeKind.END and int(msg.steps) > 0:
            robot = str(msg.robot_id)
            with self._lock:
                self.ends[robot][int(msg.episode_id)] = int(msg.steps)
                pid = self._kill_at_end.pop(robot, None)
            if pid is not None:  # right after the END: the learner's receipt may not have reached the robot yet
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def kill_at_end(self, robot: str, pid: int) -> None:
        """SIGKILL process `pid` from the bus thread as soon as `robot`'s next END arrives."""
        with self._lock:
            self._kill_at_end[robot] = pid

    def cancel_kill(self, robot: str) -> None:
        with self._lock:
            self._kill_at_end.pop(robot, None)

    def latest_updates(self) -> int | None:
        with self._lock:
            return self.updates[-1][1] if self.updates else None

    def snapshot_ends(self) -> dict[str, dict[int, int]]:
        with self._lock:
            return {robot: dict(episodes) for robot, episodes in self.ends.items()}


def spooled(state_dir: Path, robot: str) -> set[int]:
    """Episode ids in robot `robot`'s outbox spool now (whole files only: a file being written has a `.` name)."""
    directory = state_dir / f"{robot}.outbox"
    if not directory.is_dir():
        return set()
    found: set[int] = set()
    for path in directory.iterdir():
        stem, suffix = os.path.splitext(path.name)
        if suffix in SPOOL_SUFFIXES and stem.isdigit():
            found.add(int(stem))
    return found


def handed_out(state_dir: Path, robot: str) -> int:
    """How many episode ids robot `robot` handed out (ids 0 .. n-1; its saved next id; 0 when none saved)."""
    return saved_next_id(state_dir, robot) or 0


def stored_steps(buffer: Path) -> Counter[tuple[str, int, int]]:
    """(robot, episode, step) of every transition in the buffer's MCAP segments, read with mcap's own ROS 2
    decoder (independent of the learner's index), as test/deploy/test_learner_ranks.py reads them."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    from user.buffer.disk.segments import TRANSITION_TOPIC

    seen: Counter[tuple[str, int, int]] = Counter()
    for segment in sorted(buffer.rglob("*.mcap")):
        with segment.open("rb") as f:
            reader = make_reader(f, decoder_factories=[DecoderFactory()])
            for _, _, _, msg in reader.iter_decoded_messages(topics=[TRANSITION_TOPIC]):
                seen[(str(msg.robot_id), int(msg.episode_id), int(msg.step))] += 1
    return seen


@dataclass
class Tally:
    """One robot's figures."""

    ended: int  # episodes it ended (END seen or ever spooled)
    stored: int  # distinct episodes in the buffer
    duplicated: int  # episodes stored more than once (some step twice or more)
    lost: int  # ended, not stored
    incomplete: int  # stored, but its steps are not 0..n-1 (n: its END's step count when seen)
    cut: int  # ids handed out, never ended (a stop cut them mid-way): not lost
    stored_end_unseen: int  # stored whole, but neither END nor spool file seen (killed right after its last step)
    lost_ids: list[int]
    duplicated_ids: list[int]


def account(
    ended: dict[str, dict[int, int | None]], stored: Counter[tuple[str, int, int]], handed: dict[str, int]
) -> dict[str, Tally]:
    """Per robot: `ended` robot -> episode -> steps of its END (None: known from the spool only); `stored` the
    buffer's (robot, episode, step) counts; `handed` robot -> ids handed out (0 .. n-1)."""
    steps: dict[str, dict[int, Counter[int]]] = defaultdict(lambda: defaultdict(Counter))
    for (robot, episode, step), count in stored.items():
        steps[robot][episode][step] += count
    out: dict[str, Tally] = {}
    for robot in sorted(set(ended) | set(steps) | set(handed)):
        mine, kept = ended.get(robot, {}), steps.get(robot, {})
        lost = sorted(set(mine) - set(kept))
        duplicated = sorted(e for e, c in kept.items() if max(c.values()) > 1)
        incomplete = sum(not _whole(c, mine.get(e)) for e, c in kept.items())
        cut = len(set(range(handed.get(robot, 0))) - set(mine) - set(kept))
        out[robot] = Tally(
            ended=len(mine),
            stored=len(kept),
            duplicated=len(duplicated),
            lost=len(lost),
            incomplete=incomplete,
            cut=cut,
            stored_end_unseen=len(set(kept) - set(mine)),
            lost_ids=lost,
            duplicated_ids=duplicated,
        )
    return out


def _whole(steps: Counter[int], expected: int | None) -> bool:
    n = len(steps) if expected is None else expected
    return set(steps) == set(range(n))


PROCESS_COLUMNS = ("starts", "SIGINT", "SIGKILL", "at END", "spooled")
TALLY_COLUMNS = ("ended", "stored", "dupl.", "lost", "incompl.", "cut", "unseen")
SUMMARY_ROWS = ("learner_pid", "learner_restarted", "updates_at_start", "updates_at_end", "joins", "leaves",
                "drained", "unclean_stops", "robots_died", "bringup_exit_code")  # fmt: skip


def table(tallies: dict[str, Tally], processes: dict[str, list[int]], summary: dict[str, Any], most: int) -> str:
    """The printed figures: one row per robot (`processes`: its PROCESS_COLUMNS), totals, the learner, a verdict."""
    lines = [f"\nChurn benchmark (seed {summary['seed']}, {summary['duration_s']:.0f} s of churn, at most {most} "
             "robots at once)"]  # fmt: skip
    lines.append(f"{'robot':<10}" + "".join(f"{h:>9}" for h in PROCESS_COLUMNS + TALLY_COLUMNS))
    totals = [0] * (len(PROCESS_COLUMNS) + len(TALLY_COLUMNS))
    for robot, t in tallies.items():
        row = [*processes.get(robot, [0] * len(PROCESS_COLUMNS)), t.ended, t.stored, t.duplicated, t.lost,
               t.incomplete, t.cut, t.stored_end_unseen]  # fmt: skip
        totals = [a + b for a, b in zip(totals, row, strict=True)]
        lines.append(f"{robot:<10}" + "".join(f"{v:>9}" for v in row))
    lines.append(f"{'total':<10}" + "".join(f"{v:>9}" for v in totals))
    lines.append("(at END: SIGKILL the moment its END arrived; spooled: left in its outbox by a stop; cut: episodes a "
                 "stop cut mid-way,\n never ended, not lost; unseen: stored whole, its END not seen)")  # fmt: skip
    lines += [f"  {key.replace('_', ' '):<22} {summary[key]}" for key in SUMMARY_ROWS]
    lines += [f"  {robot}: lost {t.lost_ids[:20]}, duplicated {t.duplicated_ids[:20]}"
              for robot, t in tallies.items() if t.lost_ids or t.duplicated_ids]  # fmt: skip
    lines.append(f"\nRESULT: {'PASS' if summary['passed'] else 'FAIL'}: lost {summary['lost']}, duplicated "
                 f"{summary['duplicated']}, incomplete {summary['incomplete']}, learner restarted "
                 f"{summary['learner_restarted']}, updates {summary['updates_at_start']} -> "
                 f"{summary['updates_at_end']}")  # fmt: skip
    return "\n".join(lines)


class HandRobot:
    """`user node robot` for one robot id, a process of its own on the deployment's router and domain."""

    def __init__(self, robot: str, params: dict[str, Any], env: dict[str, str], log: Path) -> None:
        argv = [sys.executable, "-m", "user", "node", "robot", "--name", robot]
        for key, value in {"robot_id": robot, **params}.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            argv += ["-p", f"{key}:={text or chr(39) * 2}"]
        self.robot = robot
        self.log = log
        self._file = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, env=env, stdout=self._file, stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig: int | None, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """Send `sig` (None: none, something else stops it) and wait for the exit within `timeout_s`, else it is
        killed (None)."""
        if sig is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code: int | None = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10.0)
            code = None
        self._file.close()
        return code


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


SIGNALS = {"SIGINT": signal.SIGINT, "SIGKILL": signal.SIGKILL}
