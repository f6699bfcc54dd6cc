"""The fleet settings of the learner, rollout and monitor: `admit` (which announced robots may join while the run
goes on) and `leave_after_s` (how long a joined robot's announcement may be gone before it is dropped).

Declared by each node's parameters with these defaults and descriptions, so the three read alike; the
node's `robots` list keeps its meaning (served from the start, never dropped) beside them.
"""

from __future__ import annotations

DEFAULT_LEAVE_AFTER_S = 10.0


ADMIT_HELP = (
    "glob patterns (e.g. franka_*) of announced robots that may join at run time when they fit the policy; "
    "empty: only the robots list"
)
LEAVE_HELP = "a robot that joined at run time is dropped once its announcement has been gone this long, s"


def fleet_summary(robots: list[str], admit: list[str]) -> str:
    """The robots a node starts with, as its start line names them."""
    parts = [", ".join(robots)] if robots else []
    if admit:
        parts.append(f"robots joining as {' or '.join(admit)}")
    return "; ".join(parts)
