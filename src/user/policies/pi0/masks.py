"""π0's attention mask: blocks of tokens, each attending to itself and every block before it.

A sequence is described per token by `pad` (True: a real token, False: padding nobody attends to) and `starts`
(True: the token opens a new block). Tokens see every real token whose block index (the running count of
`starts`) is at most theirs. π0 puts images and the instruction in block 0 (bidirectional prefix), the state in a
block of its own and the action chunk in the last block, so the prefix never sees the state or the actions and
the state never sees the actions (big_vision's `make_attn_mask`, as openpi `pi0_pytorch.py` make_att_2d_masks).
"""

from __future__ import annotations

import torch


def allowed(pad: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """(B, T) pad and block starts -> (B, T, T) bool, [b, i, j] True where token i may attend to token j."""
    if pad.shape != starts.shape or pad.dim() != 2:
        raise ValueError(f"pad {tuple(pad.shape)} and starts {tuple(starts.shape)} must both be (B, T)")
    block = torch.cumsum(starts.to(torch.int64), dim=1)
    sees = block[:, None, :] <= block[:, :, None]
    return sees & pad[:, None, :] & pad[:, :, None]


def additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, Tq, Tk) bool -> (B, 1, Tq, Tk) additive: 0 where allowed, the dtype's lowest value elsewhere.

    A fully masked row (a padding query) then averages uniformly instead of producing NaN."""
    low = torch.finfo(dtype).min
    return torch.where(mask[:, None], torch.zeros((), dtype=dtype), torch.full((), low, dtype=dtype)).to(dtype)


def positions(pad: torch.Tensor, offset: torch.Tensor | None = None) -> torch.Tensor:
    """(B, T) rotary positions: real tokens numbered 0, 1, ... (after `offset` (B, 1) earlier real tokens)."""
    pos = torch.cumsum(pad.to(torch.int64), dim=1) - 1
    return pos if offset is None else pos + offset
