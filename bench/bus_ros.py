"""The ROS 2 half of bench/bus.py: `RosBus` against raw rclpy, the same serialized payloads on both.

Each side is its own rclpy context (a DDS participant) spun by a single-threaded executor on a background
thread, in this process and in a spawned child, exactly like `RosRuntime` does for the bus; the raw side
uses the same QoS profile the bus uses for RELIABLE topics (`ros_qos`), so what differs is only the Bus
layer: the callback wrapper, exception guard and bytes hand-off. Payloads are valid CDR of
std_msgs/msg/UInt8MultiArray (rclpy passes serialized bytes through untouched either way).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import numpy as np

from peer import Counter, serve_trials

TYPENAME = "std_msgs/msg/UInt8MultiArray"
TOPICS = {
    "raw": {"tp": "/bench/tp/raw", "ping": "/bench/ping/raw", "pong": "/bench/pong/raw"},
    "bus": {"tp": "/bench/tp/bus", "ping": "/bench/ping/bus", "pong": "/bench/pong/bus"},
}
STARTUP_TIMEOUT_S = 30.0


def payload(size: int) -> bytes:
    """CDR bytes of a UInt8MultiArray holding `size` random bytes (a few bytes more on the wire)."""
    from user.interfaces import default_codec

    codec = default_codec()
    layout = codec.msg_class("std_msgs/msg/MultiArrayLayout")(dim=[], data_offset=0)
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    return codec.encode(codec.msg_class(TYPENAME)(layout=layout, data=data), TYPENAME)


class RawRos:
    """A plain rclpy node on its own context, spun on a background thread (no Bus in between)."""

    def __init__(self, name: str) -> None:
        import rclpy
        import rclpy.context
        import rclpy.executors
        import rclpy.node
        from rosidl_runtime_py.utilities import get_message

        from user.bus.base import RELIABLE
        from user.bus.ros_types import ros_qos

        self.msg_type = get_message(TYPENAME)
        self.qos = ros_qos(RELIABLE)
        self.context = rclpy.context.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.node.Node(name, context=self.context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        with contextlib.suppress(ExternalShutdownException):
            self.executor.spin()

    def publisher(self, topic: str) -> Any:
        return self.node.create_publisher(self.msg_type, topic, self.qos)

    def subscribe(self, topic: str, callback: Any) -> Any:
        return self.node.create_subscription(self.msg_type, topic, callback, self.qos, raw=True)

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=5.0)
        self._thread.join(5.0)
        self.node.destroy_node()  # type: ignore[no-untyped-call]  # rclpy: destroy_node has no annotations
        self.context.try_shutdown()


def peer_main(conn: Any) -> None:
    """Child process: throughput sinks and ping echoes, raw rclpy and RosBus, until told to quit."""
    from user.bus.ros_runtime import RosRuntime

    raw = RawRos("bench_peer_raw")
    runtime = RosRuntime("bench_peer_bus")
    counters = {"raw": Counter(), "bus": Counter()}
    pong = raw.publisher(TOPICS["raw"]["pong"])
    keep = [pong, raw.subscribe(TOPICS["raw"]["tp"], counters["raw"].on_bytes)]
    keep.append(raw.subscribe(TOPICS["raw"]["ping"], pong.publish))
    bus = runtime.bus
    bus_pong = bus.create_publisher(TOPICS["bus"]["pong"], TYPENAME)
    bus.create_subscription(TOPICS["bus"]["tp"], TYPENAME, counters["bus"].on_bytes)
    bus.create_subscription(TOPICS["bus"]["ping"], TYPENAME, bus_pong.publish)
    try:
        serve_trials(conn, counters)
    finally:
        del keep
        runtime.close()
        raw.close()


def _wait_matched(publisher: Any, what: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while publisher.get_subscription_count() == 0:
        if time.monotonic() >= deadline:
            raise RuntimeError(f"no subscriber matched {what} within {STARTUP_TIMEOUT_S:.0f} s")
        time.sleep(0.02)


def open_sides(raw: RawRos, bus: Any, side_class: Any) -> dict[str, Any]:
    """This process's raw and bus ends (bench/bus.py's `Side`)."""
    raw_event, bus_event = threading.Event(), threading.Event()
    tp, ping = raw.publisher(TOPICS["raw"]["tp"]), raw.publisher(TOPICS["raw"]["ping"])
    sub = raw.subscribe(TOPICS["raw"]["pong"], lambda _data: raw_event.set())
    for pub, topic in ((tp, "tp"), (ping, "ping")):
        _wait_matched(pub, f"raw {topic}")
    bus_tp = bus.create_publisher(TOPICS["bus"]["tp"], TYPENAME)
    bus_ping = bus.create_publisher(TOPICS["bus"]["ping"], TYPENAME)
    bus.create_subscription(TOPICS["bus"]["pong"], TYPENAME, lambda _data: bus_event.set())
    for pub in (bus_tp, bus_ping):
        if not pub.wait_for_subscribers(STARTUP_TIMEOUT_S):
            raise RuntimeError("no subscriber matched the bus publishers")
    return {
        "raw": side_class("raw", tp.publish, ping.publish, raw_event, [tp, ping, sub]),
        "bus": side_class("bus", bus_tp.publish, bus_ping.publish, bus_event),
    }
