"""`Draws`: each row's numbers are the same for one process and for any number of ranks sharing the batch."""

from __future__ import annotations

import pytest
import torch

from user.policies.draws import Draws, DrawsError

CPU = torch.device("cpu")


def shared(world: int, seed: int = 7) -> list[Draws]:
    return [Draws(torch.Generator().manual_seed(seed), world, rank) for rank in range(world)]


@pytest.mark.parametrize("world", [2, 4])
def test_the_ranks_rows_are_the_rows_of_one_process(world: int) -> None:
    (one,) = shared(1)
    ranks = shared(world)
    for _ in range(3):  # and the generators stay in step draw after draw
        whole = one.normal((8, 3), torch.float32, CPU)
        parts = [d.normal((8 // world, 3), torch.float32, CPU) for d in ranks]
        torch.testing.assert_close(torch.cat(parts), whole, rtol=0, atol=0)
        whole_t = one.uniform((8,), torch.float64, CPU)
        torch.testing.assert_close(torch.cat([d.uniform((8 // world,), torch.float64, CPU) for d in ranks]), whole_t)
        whole_i = one.integers(0, 9, (8,), CPU)
        assert torch.equal(torch.cat([d.integers(0, 9, (8 // world,), CPU) for d in ranks]), whole_i)


def test_the_default_is_torchs_own_generator_as_randn_like() -> None:
    like = torch.zeros(5, 2)
    torch.manual_seed(3)
    expected = torch.randn_like(like)
    torch.manual_seed(3)
    torch.testing.assert_close(Draws().normal_like(like), expected, rtol=0, atol=0)


def test_ranks_without_a_shared_generator_are_refused() -> None:
    with pytest.raises(DrawsError, match="need a generator seeded alike"):
        Draws(None, world=2, rank=0)
    with pytest.raises(DrawsError, match="rank 2 is not one of 2 ranks"):
        Draws(torch.Generator(), world=2, rank=2)
