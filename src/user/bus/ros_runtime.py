"""`RosRuntime`: a node on its own rclpy context, spun on background threads (a Bus on ROS in any process)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from user.bus.ros_bus import RosBus
from user.bus.ros_types import require_rclpy, spin


class RosRuntime:
    """A node on its own rclpy context, spun on background threads: a Bus on ROS inside any process.

    What a process of the ROS runtime runs (`user.runtime.ros_runner`, with `args` from the command line:
    remappings, `--params-file`, `-p`), reusable by tools and tests; each runtime is its own DDS
    participant, like a separate process. `parameters` are overrides as a launch file would give them.
    The node's callbacks run on one executor thread, its service clients on a hidden node (`_<name>_calls`)
    on another."""

    def __init__(
        self,
        name: str,
        parameters: Mapping[str, Any] | None = None,
        *,
        args: list[str] | None = None,
        namespace: str | None = None,
        domain_id: int | None = None,
    ) -> None:
        rclpy = require_rclpy()
        from rclpy.parameter import Parameter

        self.context = rclpy.context.Context()
        rclpy.init(args=args, context=self.context, domain_id=domain_id)  # no signal handlers: not the default
        overrides = [Parameter(k, value=v) for k, v in (parameters or {}).items()]
        self.node = rclpy.node.Node(
            name,
            context=self.context,
            namespace=namespace,
            parameter_overrides=overrides,
            automatically_declare_parameters_from_overrides=True,
        )
        self.client_node = rclpy.node.Node(
            f"_{self.node.get_name()}_calls",
            context=self.context,
            namespace=self.node.get_namespace(),
            use_global_arguments=False,  # the command line's remappings and parameters are the main node's
            start_parameter_services=False,
            enable_rosout=False,
        )
        self.bus = RosBus(self.node, self.client_node)
        self._executors = []
        self._threads = []
        for node in (self.node, self.client_node):
            executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
            executor.add_node(node)
            thread = threading.Thread(target=spin, args=(executor,), name=f"{name}-ros-spin", daemon=True)
            self._executors.append(executor)
            self._threads.append(thread)
            thread.start()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop spinning (a running callback finishes first), then destroy the nodes and the context."""
        for executor in self._executors:
            executor.shutdown(timeout_sec=timeout_s)
        for thread in self._threads:
            thread.join(timeout_s)
        self.bus.close()
        self.context.try_shutdown()
