"""The global batch keeps the sampler's distribution with several ranks: the lead samples it from the persistent
buffer exactly as one process does, so the indices trained on over 2 ranks are, draw for draw, those of 1 rank."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from test.distributed.test_batch_share import run_ranks

pytestmark = pytest.mark.timeout(240)


def trained_on(tmp_path: Path, nproc: int, sampler: str) -> list[np.ndarray]:
    out = tmp_path / f"{sampler}_{nproc}"
    out.mkdir()
    done = run_ranks(out, "test.learner.sampling_worker", nproc=nproc, args=(str(out), sampler))
    assert done.returncode == 0, done.stderr[-3000:]
    return [np.load(out / f"rank{r}.npy") for r in range(nproc)]


@pytest.mark.parametrize("sampler", ["uniform", "recent"])
def test_index_frequencies_are_the_same_on_one_and_two_ranks(tmp_path: Path, sampler: str) -> None:
    (alone,) = trained_on(tmp_path, 1, sampler)
    two = trained_on(tmp_path, 2, sampler)
    assert Counter(alone.tolist()) == Counter(np.concatenate(two).tolist())
    assert len(set(alone.tolist())) > 20  # the draws cover the buffer (42 transitions), not one row
