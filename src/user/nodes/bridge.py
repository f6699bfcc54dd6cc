"""The bridge of a ROS 2 site (`user bridge`, node kind `bridge`): relays an allow-list of topics between this
node's bus (DDS, when it runs on rclpy) and Zenoh, and mirrors the site's hardware presence.

The convention is zenoh-bridge-ros2dds's: a topic `/arm_a/transitions` is the Zenoh key `arm_a/transitions`
(behind the domain, as the standard bridge's namespace), the payload the message's CDR bytes unchanged, so the
standard bridge can replace this one in production. Only allowed topics cross, each in one direction (a topic
in both lists would loop), with its QoS (reliable topics block rather than drop; latched ones reach late
joiners). For each robot the site names, the topics its learner needs go out (transitions, episode events)
and the learner's come in (weights, episode receipts, data credit, stats). Hardware announced on the ROS side
(`@user/hw/...` tokens and their latched descriptors) appears on the Zenoh side while it lives, so a robot on
the ROS site is in `user hardware list` at the cloud.

Joining at run time: a robot announced on the ROS side whose id matches one of `admit`'s patterns gets the same
topics relayed from its announcement on, for the bridge's lifetime (a robot that leaves and comes back re-sends its
outbox over them), so a robot started at the site joins a running learner that admits it. Which robots may cross
is the site's deployment's to decide, as the learner's `admit` is the cloud's.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Literal

from user.bus.base import BEST_EFFORT, LATCHED, RELIABLE, Bus, Handle, QoS
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings
from user.config.strict import ConfigError, setting
from user.fleet.admission import Authorisation
from user.hardware.descriptor import MSG_TYPE as DESCRIPTOR_TYPE
from user.hardware.keys import TOKEN_PREFIX, TokenName, descriptor_topic, parse_token_key
from user.runtime.node import Node
from user.sync.chunking import MSG_TYPE as WEIGHT_CHUNK_TYPE
from user.sync.publisher import REQUEST_TYPE, resend_topic

_log = logging.getLogger(__name__)

QOS = {"reliable": RELIABLE, "best_effort": BEST_EFFORT, "latched": LATCHED}
WEIGHTS_QOS = QoS(reliable=True, latched=True, depth=64)  # enough chunks of the newest version for late joiners


@dataclass(frozen=True)
class Route:
    """One relayed topic."""

    topic: str
    typename: str
    qos: QoS


def parse_route(entry: str, where: str) -> Route:
    """'TOPIC TYPE [reliable|best_effort|latched]' -> Route."""
    parts = entry.split()
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in QOS):
        raise ConfigError(f"{where}: {entry!r} is not 'TOPIC TYPE [{'|'.join(QOS)}]'")
    return Route(parts[0], parts[1], QOS[parts[2] if len(parts) == 3 else "reliable"])


@dataclass
class BridgeParams:
    robots: list[str] = setting([], "robots of this site: their learner-bound topics go out, the learner's come in")
    admit: list[str] = setting(
        [],
        "glob patterns (e.g. franka_*) of robots announced on this bus whose topics are relayed as the robots "
        "list's from their announcement on (joining at run time); empty: only the robots list",
    )
    to_zenoh: list[str] = setting([], "more topics from this bus to Zenoh: 'TOPIC TYPE [reliable|best_effort|latched]'")
    to_ros: list[str] = setting([], "more topics from Zenoh to this bus, the same form")
    weights_topic: str = setting("/policy/weights", "the learner's weights (in, latched) and resend requests (out)")
    credit_topic: str = setting("/data_credit", "the learner's data credit (in); empty: none")
    stats_topic: str = setting("/learner/stats", "the learner's training stats (in); empty: none")
    hardware: bool = setting(True, "mirror the hardware announced on this bus (tokens and descriptors) to Zenoh")
    zenoh_router: list[str] = setting([], "Zenoh router endpoints (empty: USER_ZENOH_ROUTER, else the default)")
    domain: str = setting("", "the Zenoh side's domain (empty: USER_DOMAIN)")
    zenoh_mode: Literal["client", "peer"] = setting(
        "client",
        "client: everything through the router it dials (which may be another machine's, whose peers it cannot "
        "reach directly); peer: also directly to peers the router introduces (all on one host)",
    )

    def routes(self) -> tuple[list[Route], list[Route]]:
        """(to Zenoh, to ROS): the robots' defaults, then the listed ones; a topic in both is refused."""
        out = [Route(resend_topic(self.weights_topic), REQUEST_TYPE, RELIABLE)]
        inn = [Route(self.weights_topic, WEIGHT_CHUNK_TYPE, WEIGHTS_QOS)]
        for r in self.robots:
            robot_out, robot_in = robot_routes(r)
            out += robot_out
            inn += robot_in
        if self.credit_topic:
            inn.append(Route(self.credit_topic, "user/msg/DataCredit", BEST_EFFORT))
        if self.stats_topic:
            inn.append(Route(self.stats_topic, "user/msg/TrainingStats", RELIABLE))
        out += [parse_route(e, "to_zenoh") for e in self.to_zenoh]
        inn += [parse_route(e, "to_ros") for e in self.to_ros]
        both = sorted({r.topic for r in out} & {r.topic for r in inn})
        if both:
            raise ConfigError(f"to_zenoh/to_ros: {', '.join(both)} in both directions would loop; choose one")
        return out, inn


def robot_routes(robot: str) -> tuple[list[Route], list[Route]]:
    """(to Zenoh, to ROS) of one robot: its transitions (live and re-sent) and episode events out, its receipts in."""
    out = [
        Route(f"/{robot}/transitions", "user/msg/Transition", RELIABLE),
        Route(f"/{robot}/transitions/replay", "user/msg/Transition", RELIABLE),
        Route(f"/{robot}/episode_events", "user/msg/EpisodeEvent", RELIABLE),
    ]
    return out, [Route(f"/{robot}/episode_acks", "user/msg/EpisodeAck", RELIABLE)]


class Relay:
    """Copies every message of `route` from one bus to the other, bytes unchanged."""

    def __init__(self, route: Route, source: Bus, target: Bus) -> None:
        self.route = route
        self.count = 0  # messages relayed
        self._lock = threading.Lock()
        self._publisher = target.create_publisher(route.topic, route.typename, route.qos)
        self._subscription = source.create_subscription(route.topic, route.typename, self._on, route.qos)

    def _on(self, payload: bytes) -> None:
        self._publisher.publish(payload)
        with self._lock:
            self.count += 1

    def close(self) -> None:
        self._subscription.close()
        self._publisher.close()


class BridgeNode(Node):
    """Relays the allowed topics both ways and mirrors hardware presence (see the module's text)."""

    Params = BridgeParams

    def __init__(self, bus: Bus) -> None:
        super().__init__(bus)
        p = self.params = self.declare_parameters(BridgeParams)
        out, inn = p.routes()
        settings = ZenohSettings.from_env(router=p.zenoh_router or None, domain=p.domain or None, mode=p.zenoh_mode)
        self.zenoh = ZenohBus(f"{self.name}_zenoh", settings)
        self.relays = [Relay(r, bus, self.zenoh) for r in out] + [Relay(r, self.zenoh, bus) for r in inn]
        self._mirrored: dict[str, tuple[Handle, Relay | None]] = {}  # token key -> (its Zenoh token, descriptor)
        self._joining = Authorisation(patterns=tuple(p.admit))
        self._relayed = set(p.robots)  # robots whose topics are relayed
        self._relays_lock = threading.Lock()
        watch = p.hardware or bool(p.admit)
        self._tokens = bus.watch_tokens(TOKEN_PREFIX, self._on_token) if watch else None
        _log.info(
            "bridge %s: %d topics to Zenoh, %d from Zenoh (%s)",
            self.name,
            len(out),
            len(inn),
            ", ".join(r.topic for r in out + inn),
        )

    def _on_token(self, key: str, alive: bool) -> None:
        """A resource announced on this bus: a robot that may join gets its topics relayed; with `hardware`, its
        token and latched descriptor are on Zenoh while it lives."""
        if alive:
            self._admit(parse_token_key(key))
        if not self.params.hardware:
            return
        if alive and key not in self._mirrored:
            found = parse_token_key(key)
            relay = None
            if found is not None:
                route = Route(descriptor_topic(found.resource_id), DESCRIPTOR_TYPE, LATCHED)
                relay = Relay(route, self.bus, self.zenoh)
            self._mirrored[key] = (self.zenoh.declare_token(key), relay)
        elif not alive and key in self._mirrored:
            token, relay = self._mirrored.pop(key)
            token.close()
            if relay is not None:
                relay.close()

    def _admit(self, found: TokenName | None) -> None:
        if found is None or found.kind != "robot" or not self._joining.allows(found.resource_id):
            return
        with self._relays_lock:
            if found.resource_id in self._relayed:
                return
            self._relayed.add(found.resource_id)
            out, inn = robot_routes(found.resource_id)
            self.relays += [Relay(r, self.bus, self.zenoh) for r in out] + [Relay(r, self.zenoh, self.bus) for r in inn]
        admit = ", ".join(self.params.admit)
        _log.info("bridge %s: robot %s joined (admit %s): its topics are relayed", self.name, found.resource_id, admit)

    def counts(self) -> dict[str, Any]:
        with self._relays_lock:
            return {r.route.topic: r.count for r in self.relays}

    def destroy(self) -> None:
        if self._tokens is not None:
            self._tokens.close()
        with self._relays_lock:
            relays = list(self.relays)
        for relay in relays:
            relay.close()
        for token, mirrored in self._mirrored.values():
            token.close()
            if mirrored is not None:
                mirrored.close()
        self.zenoh.close()
        super().destroy()
