"""Which entries of an observation's `state` a policy sees.

A robot may publish more than a policy may use: in simulation, `privileged_state: true` appends the full
task state (`task/...` names) so a scripted expert can act, but a learned policy must not see it. The
selection is by name (`Observation.state_names`), resolved once per distinct name list, and applied the
same way on the rollout side and in the learner's batches.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

PRIVILEGED_PREFIX = "task/"


class StateSelectionError(ValueError):
    """An observation's state does not fit the selection (names missing, wrong length)."""


class StateSelector:
    """Keeps the state entries whose names do not start with any of `exclude_prefixes`."""

    def __init__(self, exclude_prefixes: Sequence[str] = (PRIVILEGED_PREFIX,), expected_dim: int | None = None) -> None:
        self.exclude_prefixes = tuple(exclude_prefixes)
        self.expected_dim = expected_dim
        self._columns: dict[tuple[str, ...], npt.NDArray[np.intp]] = {}

    def columns(self, names: Sequence[str], length: int) -> npt.NDArray[np.intp] | None:
        """Indices to keep for a state of `length` entries named `names`; None = keep all."""
        key = tuple(names)
        cols = self._columns.get(key)
        if cols is None:
            if not key:
                if self.exclude_prefixes and self.expected_dim is not None and length != self.expected_dim:
                    raise StateSelectionError(
                        f"state has {length} unnamed entries; the policy expects {self.expected_dim} and "
                        "privileged entries can only be dropped by name"
                    )
                return None
            if len(key) != length:
                raise StateSelectionError(f"state has {length} entries but {len(key)} names")
            cols = np.asarray([i for i, n in enumerate(key) if not n.startswith(self.exclude_prefixes)], dtype=np.intp)
            if self.expected_dim is not None and cols.size != self.expected_dim:
                kept = ", ".join(key[i] for i in cols)
                raise StateSelectionError(
                    f"the policy expects {self.expected_dim} state entries; the observation has {cols.size} "
                    f"after dropping {self.exclude_prefixes}: {kept}"
                )
            self._columns[key] = cols
        return cols

    def select(self, state: npt.NDArray[np.float32], names: Sequence[str]) -> npt.NDArray[np.float32]:
        """The policy's part of one state vector (S,) or of a batch (B, S) sharing `names`."""
        cols = self.columns(names, int(state.shape[-1]))
        out = state if cols is None else state[..., cols]
        return np.ascontiguousarray(out, dtype=np.float32)
