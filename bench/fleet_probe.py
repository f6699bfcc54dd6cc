"""What bench/fleet.py observes of a running fleet, from one probe node on the deployment's router, and the
figures it computes from that (pure functions, tested without a deployment).

The probe stamps every message with this machine's wall clock when it arrives (all processes share the machine):

- the learner's stats (`/learner/stats`): `buffer_transitions` (stored) and `env_steps` (received) over time;
- each robot's episode END events and the learner's receipts (`/<robot>/episode_acks`): acknowledgement latency is
  the receipt's arrival minus the END's arrival, per (robot, episode); with `done_steps`, also each episode's done
  step (its last transition) on `/<robot>/transitions`, which splits that latency in two: END to the done step
  (the robot's side and the transport), the done step to the receipt (the learner storing it);
- the weight chunks (`/policy/weights`): a version is published when its first chunk arrives; and each robot's
  actions (`/<robot>/action`): the first action of each robot carrying that version or a newer one. Weight fan-out
  is the last robot's first such action minus the publication.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from user.bus.base import Bus
from user.interfaces.episode_events import EpisodeKind
from user.runtime.node import Node

TICK_S = os.sysconf("SC_CLK_TCK")  # clock ticks per second in /proc/stat


class FleetProbe(Node):
    """Listens to the learner's stats, the weights, every robot's episode ENDs, receipts and actions."""

    def __init__(
        self, bus: Bus, robots: list[str], stats_topic: str, weights_topic: str, *, done_steps: bool = False
    ) -> None:
        super().__init__(bus)
        self.robots = robots
        self.stats: list[tuple[float, int, int]] = []  # (arrival, stored, received)
        self.ends: dict[tuple[str, int], float] = {}  # (robot, episode) -> arrival of its END
        self.acks: dict[tuple[str, int], float] = {}  # (robot, episode) -> arrival of its first receipt
        self.published: dict[int, float] = {}  # version -> arrival of its first chunk
        self.acting: dict[tuple[str, int], float] = {}  # (robot, version) -> first action with it (or newer)
        self.done: dict[tuple[str, int], float] = {}  # (robot, episode) -> arrival of its done step (done_steps)
        self._newest: dict[str, int] = {}  # robot -> newest version seen in its actions
        self._lock = threading.Lock()
        self.create_subscription(stats_topic, "user/msg/TrainingStats", self._on_stats)
        self.create_subscription(weights_topic, "user/msg/WeightChunk", self._on_chunk)
        for robot in robots:
            self.create_subscription(f"/{robot}/episode_events", "user/msg/EpisodeEvent", self._on_event)
            self.create_subscription(f"/{robot}/episode_acks", "user/msg/EpisodeAck", self._on_ack)
            self.create_subscription(f"/{robot}/action", "user/msg/Action", self._on_action)
            if done_steps:
                self.create_subscription(f"/{robot}/transitions", "user/msg/Transition", self._on_transition)

    def _on_stats(self, msg: Any) -> None:
        with self._lock:
            self.stats.append((time.time(), int(msg.buffer_transitions), int(msg.env_steps)))

    def _on_chunk(self, msg: Any) -> None:
        with self._lock:
            self.published.setdefault(int(msg.version), time.time())

    def _on_event(self, msg: Any) -> None:
        if int(msg.kind) == EpisodeKind.END:
            with self._lock:
                self.ends.setdefault((str(msg.robot_id), int(msg.episode_id)), time.time())

    def _on_transition(self, msg: Any) -> None:
        if msg.terminated or msg.truncated:
            with self._lock:
                self.done.setdefault((str(msg.robot_id), int(msg.episode_id)), time.time())

    def _on_ack(self, msg: Any) -> None:
        with self._lock:
            self.acks.setdefault((str(msg.robot_id), int(msg.episode_id)), time.time())

    def _on_action(self, msg: Any) -> None:
        robot, version = str(msg.robot_id), int(msg.policy_version)
        with self._lock:
            if version > self._newest.get(robot, -1):
                self._newest[robot] = version
                self.acting[(robot, version)] = time.time()

    def robots_ended(self) -> set[str]:
        """Robots with at least one episode END seen."""
        with self._lock:
            return {robot for robot, _ in self.ends}

    def stored_at(self, when: float) -> tuple[int, int] | None:
        """(stored, received) of the newest stats message that arrived by `when`."""
        with self._lock:
            before = [s for s in self.stats if s[0] <= when]
        return (before[-1][1], before[-1][2]) if before else None

    def snapshot(self) -> Observed:
        with self._lock:
            return Observed(
                list(self.stats),
                dict(self.ends),
                dict(self.acks),
                dict(self.published),
                dict(self.acting),
                dict(self.done),
            )


@dataclass
class Observed:
    stats: list[tuple[float, int, int]]
    ends: dict[tuple[str, int], float]
    acks: dict[tuple[str, int], float]
    published: dict[int, float]
    acting: dict[tuple[str, int], float]
    done: dict[tuple[str, int], float] = field(default_factory=dict)  # (robot, episode) -> its done step's arrival


def percentiles_ms(values: list[float]) -> tuple[float, float, float, int]:
    """(p50, p99, max) in ms of `values` in seconds, and how many; NaN when none."""
    if not values:
        return (math.nan, math.nan, math.nan, 0)
    ms = np.asarray(values) * 1e3
    return (float(np.percentile(ms, 50)), float(np.percentile(ms, 99)), float(ms.max()), len(values))


def ack_latencies(observed: Observed, window: tuple[float, float]) -> tuple[list[float], int]:
    """Seconds from each END that arrived in `window` to its receipt; and how many such ENDs had none."""
    a, b = window
    got: list[float] = []
    missing = 0
    for key, end in observed.ends.items():
        if a <= end <= b:
            ack = observed.acks.get(key)
            if ack is None:
                missing += 1
            else:
                got.append(max(0.0, ack - end))
    return got, missing


def ack_split(observed: Observed, window: tuple[float, float]) -> tuple[list[float], list[float]]:
    """For each END that arrived in `window` with its done step and its receipt seen: (seconds from the END to the
    done step, signed: negative when the step came first; seconds from the later of the two to the receipt)."""
    a, b = window
    to_done: list[float] = []
    to_ack: list[float] = []
    for key, end in observed.ends.items():
        done, ack = observed.done.get(key), observed.acks.get(key)
        if a <= end <= b and done is not None and ack is not None:
            to_done.append(done - end)
            to_ack.append(max(0.0, ack - max(done, end)))
    return to_done, to_ack


def fan_outs(observed: Observed, robots: list[str], window: tuple[float, float]) -> tuple[list[float], int]:
    """Per version first published in `window`: seconds until the last robot acted with it (or a newer one);
    and how many such versions some robot never acted with by the end."""
    a, b = window
    firsts: dict[str, list[tuple[int, float]]] = {r: [] for r in robots}
    for (robot, version), when in observed.acting.items():
        if robot in firsts:
            firsts[robot].append((version, when))
    spans: list[float] = []
    unreached = 0
    for version, published in observed.published.items():
        if not a <= published <= b:
            continue
        reached = [min((w for v, w in firsts[r] if v >= version and w >= published), default=None) for r in robots]
        if any(w is None for w in reached):
            unreached += 1
        else:
            spans.append(max(w for w in reached if w is not None) - published)
    return spans, unreached


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat (all CPUs; iowait counts as idle)."""
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest time is inside user)
    return (total - idle) / TICK_S, total / TICK_S


def saturated(shares: dict[str, float], machine: float, cores: int) -> str:
    """What saturates, from CPU shares over the window (1.0 = one core): a node at >= 90 % of one core (they are
    mostly one Python thread each), else the machine when >= 90 % busy, else nothing found."""
    worst = max(shares.items(), key=lambda item: item[1], default=("", 0.0))
    if worst[1] >= 0.9:
        return f"{worst[0]} ({100 * worst[1]:.0f}% of a core)"
    if machine >= 0.9:
        return f"the machine's {cores} CPUs ({100 * machine:.0f}% busy)"
    return "nothing found saturated"
