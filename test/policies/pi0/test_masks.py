"""π0's attention mask: a bidirectional prefix, then the state block, then the action block."""

from __future__ import annotations

import torch

from user.policies.pi0.masks import additive, allowed, positions


def test_prefix_state_and_actions_see_what_pi0_lets_them_see() -> None:
    # 2 image tokens, 2 instruction tokens (the second is padding), the state, 2 actions
    pad = torch.tensor([[True, True, True, False, True, True, True]])
    starts = torch.tensor([[False, False, False, False, True, True, False]])
    m = allowed(pad, starts)[0]
    prefix, state, actions = [0, 1, 2], 4, [5, 6]
    for i in prefix:
        assert m[i, prefix].all() and not m[i, [state, *actions]].any()  # bidirectional, blind to the suffix
    assert m[state, [*prefix, state]].all() and not m[state, actions].any()
    for i in actions:
        assert m[i, [*prefix, state, *actions]].all()  # the chunk is one block
    assert not m[:, 3].any() and not m[3].any()  # padding is seen by nobody and sees nothing


def test_additive_mask_and_positions() -> None:
    pad = torch.tensor([[True, False, True]])
    m = additive(allowed(pad, torch.zeros_like(pad)), torch.float32)
    assert m.shape == (1, 1, 3, 3) and m[0, 0, 0, 0] == 0 and m[0, 0, 0, 1] == torch.finfo(torch.float32).min
    assert positions(pad).tolist() == [[0, 0, 1]]
    assert positions(pad, torch.tensor([[5]])).tolist() == [[5, 5, 6]]
