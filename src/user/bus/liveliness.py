"""The liveliness tokens a Zenoh session sees alive under a key expression, collected over a window.

A history subscriber rather than a one-shot query: right after a session opens, a query can return before the
router has told it about existing tokens, the subscriber's history cannot. `ZenohBus` reads its graph with it,
`user.bus.presence` a domain's nodes from a session that announces nothing.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import zenoh


def alive_keys(session: Any, pattern: str, window_s: float) -> list[str]:
    """Keys of the tokens matching `pattern` that are alive at the end of `window_s` (sorted)."""
    alive: dict[str, bool] = {}
    lock = threading.Lock()

    def on_sample(sample: Any) -> None:
        with lock:
            alive[str(sample.key_expr)] = sample.kind == zenoh.SampleKind.PUT

    sub = session.liveliness().declare_subscriber(pattern, on_sample, history=True)
    time.sleep(window_s)  # a collection window, not a synchronisation: tokens may keep arriving
    sub.undeclare()
    with lock:
        return sorted(key for key, up in alive.items() if up)
