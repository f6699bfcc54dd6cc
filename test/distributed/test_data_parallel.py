"""Data parallelism over 2 gloo ranks: the averaged gradients of the shares are the whole batch's gradient, every
rank starts from the lead's weights, and means are means."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from test.distributed.test_batch_share import run_ranks

pytestmark = pytest.mark.timeout(180)


def test_averaged_share_gradients_are_the_whole_batch_gradient(tmp_path: Path) -> None:
    done = run_ranks(tmp_path, "test.distributed.data_parallel_worker")
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    for got in ranks:
        for averaged, whole in zip(got["averaged"], got["whole"], strict=True):
            torch.testing.assert_close(averaged, whole, rtol=1e-5, atol=1e-7)
        assert all(torch.count_nonzero(g) == 0 for g in got["unused_grad"])
        assert got["means"] == {"loss": 0.5, "other": 1.0}
    for a, b in zip(ranks[0]["weights"], ranks[1]["weights"], strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)  # the same start: the lead's weights


def test_a_hung_rank_ends_at_the_collective_deadline(tmp_path: Path) -> None:
    """Rank 1 alive but never joining: rank 0's collective fails at its deadline (3 s), torchrun ends the group."""
    done = run_ranks(tmp_path, "test.distributed.hang_worker", timeout_s=90.0)
    assert done.returncode != 0
    said = [line for line in done.stdout.splitlines() if line.startswith("rank 0: the collective failed after")]
    assert said, done.stdout[-2000:] + done.stderr[-2000:]  # within run_ranks' wait, while rank 1 sleeps an hour
