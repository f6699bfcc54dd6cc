"""Learning tests run torch on one thread: on a shared 2-core machine more threads only contend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

# torch imports torch._dynamo lazily, at the first optimiser (seconds): import it once at collection, so that
# processes forked after collection (the mutation gate's workers) do not each import it again
import torch._dynamo


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
