"""The fleet: robots join and leave a running experiment.

- `admission`: which announced robots the deployment lets join (`Authorisation`: `robots` and `admit` patterns) and
  whether what they send fits the policy (`PolicySpec`, a `Mismatch` names the field);
- `roster`: `Roster`, the robots joined at run time, dropped `leave_after_s` after their announcement is gone, and
  those waiting for a place (`Capacity`: a rollout's `max_robots` and `site`);
- `watch`: `FleetWatch`, a node's roster fed from the hardware registry, its subscriptions per robot opened and
  closed as robots join and leave;
- `settings`: the `admit` and `leave_after_s` settings of the learner, rollout and monitor.
"""

from user.fleet.admission import Authorisation, Mismatch, PolicySpec
from user.fleet.roster import Capacity, Changes, Roster
from user.fleet.settings import fleet_summary
from user.fleet.watch import FleetWatch, capacity_of, watch_fleet

__all__ = [
    "Authorisation",
    "Capacity",
    "Changes",
    "FleetWatch",
    "Mismatch",
    "PolicySpec",
    "Roster",
    "capacity_of",
    "fleet_summary",
    "watch_fleet",
]
