"""Every algorithm trained data-parallel: 2 gloo ranks under torchrun give the losses and weights 1 rank gives on
the same global batches (gradients averaged, targets, temperature and draws in step); an algorithm that cannot
train data-parallel says so; the lead orders a batch so that each rank holds its part of every slice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from test.distributed.test_batch_share import run_ranks
from user.distributed.group import RankError
from user.learner.ranked_update import share_order

pytestmark = pytest.mark.timeout(300)
ALGORITHMS = ("sac", "rlpd", "sac_drq_images", "sac_flow", "bc", "hg_dagger")


def trained(
    tmp_path: Path,
    nproc: int,
    *flags: str,
    names: tuple[str, ...] = ALGORITHMS,
    worker: str = "test.learner.ranked_update_worker",
) -> dict[str, list[dict[str, Any]]]:
    """What `worker` wrote for each algorithm of `names` and each of `nproc` ranks (OUT/<name>_rank<r>.pt)."""
    out = tmp_path / f"world{nproc}{''.join(flags)}"
    out.mkdir()
    done = run_ranks(out, worker, nproc=nproc, args=(str(out), *flags, *names))
    assert done.returncode == 0, done.stderr[-3000:]
    return {name: [torch.load(out / f"{name}_rank{r}.pt") for r in range(nproc)] for name in names}


def assert_trained_alike(name: str, rank: dict[str, Any], alone: dict[str, Any]) -> None:
    """A rank's 3 updates gave the losses and final weights one process's gave (float tolerance)."""
    assert len(rank["losses"]) == len(alone["losses"]) == 3, name
    for got, want in zip(rank["losses"], alone["losses"], strict=True):
        assert got.keys() == want.keys(), name
        for key in want:
            assert got[key] == pytest.approx(want[key], rel=1e-4, abs=1e-6), (name, key)
    for key, value in alone["weights"].items():
        torch.testing.assert_close(rank["weights"][key], value, rtol=1e-4, atol=1e-6, msg=f"{name} {key}")


def test_two_ranks_train_every_algorithm_as_one_process(tmp_path: Path) -> None:
    one, two = trained(tmp_path, 1), trained(tmp_path, 2)
    for name in ALGORITHMS:
        (alone,) = one[name]
        for rank in two[name]:  # both ranks hold the same model, and it is the one process's
            assert_trained_alike(name, rank, alone)


def test_each_rank_holds_its_part_of_every_slice() -> None:
    order = share_order(rows=8, chunks=2, world=2)  # slices 0-3 and 4-7; rank 0 holds 0,1 and 4,5
    assert order.tolist() == [0, 1, 4, 5, 2, 3, 6, 7]
    assert sorted(share_order(12, 3, 2).tolist()) == list(range(12))
    np.testing.assert_array_equal(share_order(6, 1, 1), np.arange(6))
    with pytest.raises(RankError, match="does not split into 2 slices over 2 ranks"):
        share_order(6, 2, 2)
