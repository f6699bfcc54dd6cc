"""Each rank's share of a global batch, over a real gloo group of 2 ranks started by torchrun: the shares are the
lead's rows, contiguous, disjoint and complete, with images (decoded and compressed), bools and names intact."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from test.distributed.share_worker import global_batch
from user.distributed.batch_share import share_batch
from user.distributed.group import RankEnv, RankError, RankGroup
from user.distributed.ranks import HOME_ENV

pytestmark = pytest.mark.timeout(180)
REPO = Path(__file__).resolve().parents[2]


def run_ranks(
    tmp_path: Path,
    module: str,
    *,
    nproc: int = 2,
    home: bool = True,
    timeout_s: float = 150.0,
    args: tuple[str, ...] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`module` as `nproc` gloo ranks under torchrun on this machine (a standalone rendezvous), home here."""
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'src'}", OMP_NUM_THREADS="1")
    env.pop(HOME_ENV, None)
    if home:
        env[HOME_ENV] = "1"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
    command += ["--module", module, *(args if args is not None else (str(tmp_path),))]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)


def test_two_ranks_get_disjoint_complete_shares_of_the_lead_batch(tmp_path: Path) -> None:
    done = run_ranks(tmp_path, "test.distributed.share_worker")
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in range(2)]
    assert {int(r["lead"]) for r in ranks} == {0}
    for decode in (True, False):
        tag = "decoded" if decode else "compressed"
        whole = global_batch(decode)
        half = len(whole) // 2
        for r, got in enumerate(ranks):
            rows = slice(r * half, (r + 1) * half)
            np.testing.assert_array_equal(got[f"{tag}_indices"], whole.indices[rows])
            np.testing.assert_array_equal(got[f"{tag}_state"], whole.state[rows])
            np.testing.assert_array_equal(got[f"{tag}_terminated"], whole.terminated[rows])
            assert got[f"{tag}_terminated"].dtype == np.bool_
            assert tuple(got[f"{tag}_names"]) == whole.state_names
            for name in ("action_chunk", "chunk_mask", "chunk_intervened"):  # chunks travel with their rows
                if getattr(whole, name) is None:
                    assert f"{tag}_{name}" not in got.files
                else:
                    np.testing.assert_array_equal(got[f"{tag}_{name}"], getattr(whole, name)[rows])
            for camera, pixels in whole.images.items():
                expected = pixels[rows] if decode else np.array([len(b) for b in pixels[rows]])
                np.testing.assert_array_equal(got[f"{tag}_image_{camera}"], expected)


def test_ranks_without_a_home_machine_fail_with_the_reason(tmp_path: Path) -> None:
    done = run_ranks(tmp_path, "test.distributed.share_worker", home=False)
    assert done.returncode != 0
    assert "need exactly one home machine (USER_LEARNER_HOME=1" in done.stderr
    assert not list(tmp_path.glob("rank*.npz"))


def test_a_batch_that_does_not_split_evenly_is_refused_before_any_collective() -> None:
    group = RankGroup(RankEnv(0, 0, 3, 0, True), "gloo", torch.device("cpu"), lead=0)
    with pytest.raises(RankError, match="a batch of 8 rows does not split evenly over 3 ranks"):
        share_batch(group, global_batch(True))
    other = RankGroup(RankEnv(1, 1, 3, 0, True), "gloo", torch.device("cpu"), lead=0)
    with pytest.raises(RankError, match="rank 1 is not the lead"):
        share_batch(other, global_batch(True))
