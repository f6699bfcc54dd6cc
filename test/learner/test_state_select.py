"""StateSelector: privileged entries are dropped by name, the same way for one state and for a batch."""

from __future__ import annotations

import numpy as np
import pytest

from user.learner.state_select import StateSelectionError, StateSelector

NAMES = ("tcp/x", "tcp/y", "task/peg/x", "extra/hole_top/0", "task/peg/y")


def test_privileged_entries_are_dropped_by_name() -> None:
    sel = StateSelector(expected_dim=3)
    state = np.arange(5, dtype=np.float32)
    assert sel.select(state, NAMES).tolist() == [0.0, 1.0, 3.0]
    batch = np.stack([state, state + 10])
    assert sel.select(batch, NAMES).tolist() == [[0.0, 1.0, 3.0], [10.0, 11.0, 13.0]]


def test_a_dimension_mismatch_names_what_the_policy_would_see() -> None:
    with pytest.raises(StateSelectionError, match=r"expects 4 .* has 3 .*tcp/x, tcp/y, extra/hole_top/0"):
        StateSelector(expected_dim=4).select(np.zeros(5, np.float32), NAMES)


def test_names_and_values_of_different_lengths_are_refused() -> None:
    with pytest.raises(StateSelectionError, match="5 entries but 4 names"):
        StateSelector().select(np.zeros(5, np.float32), NAMES[:4])


def test_unnamed_states_pass_whole_when_their_length_fits() -> None:
    sel = StateSelector(expected_dim=5)
    assert sel.select(np.ones(5, np.float32), ()).shape == (5,)
    with pytest.raises(StateSelectionError, match="only be dropped by name"):
        sel.select(np.ones(7, np.float32), ())


def test_no_prefixes_keeps_everything() -> None:
    assert StateSelector(exclude_prefixes=()).select(np.arange(5, dtype=np.float32), NAMES).shape == (5,)
