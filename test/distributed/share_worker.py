"""A rank under torchrun for test_batch_share: the lead draws a global batch of known rows (decoded and compressed
images, bools, names), every rank receives its share and writes it to OUT_DIR/rank<N>.npz for the test to read."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from test.buffer.factories import transition
from user.buffer.batch import TransitionBatch, collate
from user.distributed.batch_share import share_batch
from user.distributed.group import RankEnv, close_group, end_process, open_group
from user.distributed.ranks import RanksConfig

GLOBAL_ROWS = 8


HORIZON = 3


def global_batch(decode: bool) -> TransitionBatch:
    """The lead's batch; the decoded one also carries action chunks of HORIZON steps (a VLA learner's)."""
    rows = [transition("r0", 3, step, GLOBAL_ROWS, success=True) for step in range(GLOBAL_ROWS)]
    batch = collate(rows, np.arange(100, 100 + GLOBAL_ROWS, dtype=np.int64), decode_images=decode)
    if not decode:
        return batch
    n, a = batch.action.shape
    chunk = np.arange(n * HORIZON * a, dtype=np.float32).reshape(n, HORIZON, a)
    mask = np.arange(n * HORIZON).reshape(n, HORIZON) % 4 != 3
    return replace(batch, action_chunk=chunk, chunk_mask=mask, chunk_intervened=~mask)


def main() -> None:
    out = Path(sys.argv[1])
    group = open_group(RanksConfig(collective_timeout_s=60.0), RankEnv.from_environ())
    try:
        saved: dict[str, np.ndarray] = {"lead": np.array(group.lead)}
        for decode in (True, False):
            share = share_batch(group, global_batch(decode) if group.is_lead else None)
            tag = "decoded" if decode else "compressed"
            saved[f"{tag}_indices"] = share.indices
            saved[f"{tag}_state"] = share.state
            saved[f"{tag}_terminated"] = share.terminated
            saved[f"{tag}_names"] = np.array(share.state_names)
            for name in ("action_chunk", "chunk_mask", "chunk_intervened"):
                value = getattr(share, name)
                if value is not None:
                    saved[f"{tag}_{name}"] = value
            for camera, pixels in share.images.items():
                saved[f"{tag}_image_{camera}"] = pixels if decode else np.array([len(b) for b in pixels])
        np.savez(out / f"rank{group.env.rank}.npz", **cast(dict[str, Any], saved))
    finally:
        close_group()


if __name__ == "__main__":
    main()
    end_process(0)  # no interpreter teardown: torch's C++ threads can abort it after the work is done
