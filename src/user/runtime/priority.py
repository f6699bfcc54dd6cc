"""A node process's CPU scheduling priority (Unix niceness), set by the launcher through the environment.

On a machine shared by robots and a learner, the learner's training threads can take the CPU from the
robots' control loops and the rollout's inference; a positive niceness (`nice` in the deployment YAML) makes
the learner yield to them without limiting it when the CPU is free. Only lowering the priority is possible
without privileges, so values are 0..19.
"""

from __future__ import annotations

import logging
import os

ENV_NICE = "USER_NICE"  # set by both launchers from the node's `nice`
MAX_NICE = 19

_log = logging.getLogger(__name__)


def apply_niceness_from_env() -> int:
    """Run this process at niceness `$USER_NICE` (0..19) or lower priority; returns the niceness in effect."""
    raw = os.environ.get(ENV_NICE, "").strip()
    if not raw:
        return os.nice(0)
    try:
        wanted = int(raw)
    except ValueError:
        _log.error("%s=%r is not an integer niceness (0..%d); priority unchanged", ENV_NICE, raw, MAX_NICE)
        return os.nice(0)
    if not 0 <= wanted <= MAX_NICE:
        _log.error("%s=%d is outside 0..%d; priority unchanged", ENV_NICE, wanted, MAX_NICE)
        return os.nice(0)
    current = os.nice(0)
    if wanted > current:
        current = os.nice(wanted - current)
    return current
