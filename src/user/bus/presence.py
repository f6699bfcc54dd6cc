"""Which nodes are alive in a domain, asked through a router without joining: a client session that announces
nothing reads the nodes' liveliness tokens (`@user/runtime/NODE/ZID`, as `ZenohBus` declares them).

`user bringup` asks this before it starts anything: a second run of a deployment beside a running one would
otherwise join it, under the same node names on the same topics.
"""

from __future__ import annotations

import zenoh

from user.bus.liveliness import alive_keys
from user.bus.names import in_domain, out_of_domain, unmangle
from user.bus.zenoh_config import ZenohSettings, session_config
from user.bus.zenoh_graph import NODE_PREFIX

LISTEN_S = 1.0  # how long the probe collects tokens: the router sends those it holds at once, this is the margin


class PresenceProbeError(RuntimeError):
    """No router answered the probe."""


def live_nodes(
    endpoints: list[str], domain: str, config_file: str | None = None, listen_s: float = LISTEN_S
) -> list[str]:
    """Names of the nodes alive in `domain` as the router at `endpoints` knows them (sorted, each once).

    Raises PresenceProbeError when no router answers there within `listen_s`."""
    probe = ZenohSettings(router=list(endpoints), listen=[], router_timeout_s=listen_s, config_file=config_file)
    try:
        session = zenoh.open(session_config(probe, mode="client"))
    except zenoh.ZError as exc:
        raise PresenceProbeError(f"no Zenoh router answers at {', '.join(endpoints)}: {exc}") from None
    try:
        alive = alive_keys(session, in_domain(domain, f"{NODE_PREFIX}/**"), listen_s)
    finally:
        session.close()  # type: ignore[no-untyped-call]
    keys = [out_of_domain(domain, key) for key in alive]
    return sorted({unmangle(key.split("/")[2]) for key in keys if key.count("/") >= 3})
