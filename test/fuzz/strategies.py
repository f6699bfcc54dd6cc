"""Hypothesis settings and strategies shared by the property tests of the parsers of outside data.

Every parser that reads bytes or documents from outside the process (a peer on the bus, a file on disk, a
deployment file, a device) must turn anything it cannot use into its own typed error, never into another
exception, a hang or a half-applied result. These tests throw random and mutated inputs at each one.
The example counts keep the whole directory to seconds in the default run; the coverage-guided fuzzers in
bench/fuzz/ run the same parsers for minutes.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# bounded and deterministic enough for CI: no deadline (a loaded machine is slow), no example database
CI = settings(
    max_examples=150,
    deadline=None,
    database=None,
    # fixtures here install fakes that each example resets itself (a fresh device, a fresh file)
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@st.composite
def mutated(draw: st.DrawFn, valid: bytes) -> bytes:
    """`valid` cut short, extended, or with some bytes overwritten: what a lost fragment or a bit flip gives."""
    data = bytearray(valid)
    kind = draw(st.sampled_from(["truncate", "flip", "append", "splice"]))
    if kind == "truncate":
        return bytes(data[: draw(st.integers(0, max(0, len(data) - 1)))])
    if kind == "append":
        return bytes(data) + draw(st.binary(min_size=1, max_size=64))
    if kind == "splice":
        at = draw(st.integers(0, len(data)))
        return bytes(data[:at]) + draw(st.binary(max_size=32)) + bytes(data[at:])
    for _ in range(draw(st.integers(1, 8))):
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        data[i] = draw(st.integers(0, 255))
    return bytes(data)
