"""The flat-buffer copy for publication gives exactly today's weights (`Policy.get_weights`): same bytes, spec
and version, in every wire dtype, and a copy the next one does not overwrite."""

from __future__ import annotations

import pytest
import torch

from test.learner.speed_setup import tiny_algorithm
from user.policies.base import PolicyError
from user.sync.flat_weights import FlatWeightCopier


def _bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().view(torch.uint8).numpy().tobytes()


@pytest.mark.parametrize("dtype", [None, torch.float32, torch.float16, torch.bfloat16])
def test_the_preallocated_copy_is_today_s_bytes(dtype: torch.dtype | None) -> None:
    algo = tiny_algorithm("sac")
    policy = algo.policy
    policy.version = 7
    copier = FlatWeightCopier(policy, dtype, preallocated=True)
    first = copier.copy()
    today = policy.get_weights(dtype)
    assert first.spec == today.spec and first.version == today.version == 7
    assert first.data.dtype == today.data.dtype and _bytes(first.data) == _bytes(today.data)
    with torch.no_grad():
        policy._flat.buffer.add_(0.5)  # the next version
    second = copier.copy()
    assert _bytes(second.data) == _bytes(policy.get_weights(dtype).data)
    assert _bytes(first.data) == _bytes(today.data)  # the first copy kept its bytes


def test_kept_copies_stay_valid_for_keep_more_copies() -> None:
    policy = tiny_algorithm("sac").policy
    copier = FlatWeightCopier(policy, preallocated=True, keep=1)
    first = copier.copy()
    want = _bytes(policy.get_weights().data)
    with torch.no_grad():
        policy._flat.buffer.add_(1.0)
    second = copier.copy()
    assert _bytes(first.data) == want and _bytes(second.data) == _bytes(policy.get_weights().data)
    assert first.data.data_ptr() != second.data.data_ptr()
    assert copier.copy().data.data_ptr() == first.data.data_ptr()  # the third reuses the first's buffer


def test_on_cpu_it_is_today_s_path() -> None:
    policy = tiny_algorithm("sac").policy
    copier = FlatWeightCopier(policy, torch.bfloat16)
    assert not copier.preallocated
    assert torch.equal(copier.copy().data, policy.get_weights(torch.bfloat16).data)


def test_a_policy_moved_off_its_flat_buffer_is_refused() -> None:
    policy = tiny_algorithm("sac").policy
    copier = FlatWeightCopier(policy)
    policy.actor.to(torch.float64)  # without Policy.to: the parameters leave the flat buffer
    with pytest.raises(PolicyError, match="flat buffer"):
        copier.copy()
