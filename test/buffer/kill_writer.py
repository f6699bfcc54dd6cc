"""A writer process for the kill -9 test: streams episodes into a buffer until it is killed.

Run as `python -m test.buffer.kill_writer DIR [--die-at POINT] [--seed N]` from the repository root.
Protocol on stdout, one line each, flushed at once:
    ready E        the buffer is open (recovered) and holds E completed episodes
    committing E   the next transition completes episode number E (1-based count)
    complete E     the buffer now holds E completed episodes (the commit returned)
It waits for a line on stdin before streaming ("go"), so the test can verify the directory first;
"stop" instead closes the buffer cleanly. With --die-at, the process kills itself with SIGKILL when the
writer reaches that point of its protocol (episode:written, roll:finished, recover:rewritten, ...).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
from collections.abc import Iterator

from test.buffer.factories import episode
from user.buffer import BufferConfig, ReplayBuffer, StorageConfig
from user.interfaces.domain import Transition

ROBOTS = ("left", "right")


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("directory")
    parser.add_argument("--die-at", default="")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=10_000)
    args = parser.parse_args()

    def hook(point: str) -> None:
        if point == args.die_at:
            os.kill(os.getpid(), signal.SIGKILL)

    config = BufferConfig(storage=StorageConfig(segment_max_episodes=3, fsync="episode", cache_size=64), prefetch=0)
    buf = ReplayBuffer.open(args.directory, config, fault_hook=hook)
    done = buf.info().episodes
    _say(f"ready {done}")
    if sys.stdin.readline().strip() != "go":
        buf.close()
        return 0
    rng = random.Random(args.seed)
    next_id = {robot: 1000 * args.seed + k * 100_000 for k, robot in enumerate(ROBOTS)}
    streams: dict[str, Iterator[Transition]] = {robot: iter(()) for robot in ROBOTS}
    for _ in range(args.episodes * 40):
        robot = rng.choice(ROBOTS)  # robots' steps interleave, as they arrive from several robots
        t = next(streams[robot], None)
        if t is None:
            streams[robot] = iter(episode(robot, next_id[robot], rng.randint(2, 8), success=rng.random() < 0.5))
            next_id[robot] += 1
            t = next(streams[robot])
        if t.done:
            _say(f"committing {done + 1}")
        if buf.add(t) is not None:
            done += 1
            _say(f"complete {done}")
    buf.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
