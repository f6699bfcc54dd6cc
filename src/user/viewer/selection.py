"""Which announced topics the viewer opens, and why it skips the others. Pure: no bus, no server."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from user.interfaces.codec import Codec


def allowed(topic: str, patterns: Iterable[str]) -> bool:
    """True when `topic` matches one of `patterns` (exact names or shell patterns), or when there are none."""
    wanted = [p if p.startswith("/") else f"/{p}" for p in patterns]
    return not wanted or any(fnmatch.fnmatchcase(topic, p) for p in wanted)


@dataclass
class Selection:
    """The outcome of one look at the graph."""

    to_open: dict[str, str] = field(default_factory=dict)  # topic -> canonical type ("pkg/msg/Type")
    skipped: dict[str, str] = field(default_factory=dict)  # topic -> why it is not served


def select_topics(
    announced: Mapping[str, list[str]], already: Iterable[str], patterns: Iterable[str], codec: Codec
) -> Selection:
    """The topics of `announced` (topic -> announced types) to open now: allowed, not open yet, of exactly one
    type the codec knows. The others that are allowed and not open yet are in `skipped` with the reason."""
    patterns = list(patterns)
    done = set(already)
    out = Selection()
    for topic, types in announced.items():
        if topic in done or not allowed(topic, patterns):
            continue
        known = sorted({codec.resolve(t) for t in types if codec.has_type(t)})
        unknown = sorted(t for t in types if not codec.has_type(t))
        if unknown:
            out.skipped[topic] = f"its type {', '.join(unknown)} is not in this installation's message definitions"
        elif len(known) != 1:
            out.skipped[topic] = f"it is announced with several types ({', '.join(known)})"
        else:
            out.to_open[topic] = known[0]
    return out
