"""Helpers shared by the CLI commands."""

from __future__ import annotations

import os
import signal
import threading

from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings


def open_tool_bus(tool: str, router_timeout_s: float = 3.0) -> ZenohBus:
    """A bus for a command-line tool; raises RouterUnreachableError with advice when no router answers."""
    return ZenohBus(f"_user_{tool}_{os.getpid()}", ZenohSettings.from_env(router_timeout_s=router_timeout_s))


def stop_on_signals() -> threading.Event:
    """An event set on SIGINT/SIGTERM."""
    event = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: event.set())
    return event
