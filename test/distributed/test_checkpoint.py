"""DCP checkpoints of a learner's ranks: saved by 2 gloo ranks, resumed with 1 and with 2 (the same state, the same
next loss), replicated and sharded; a save cut short never counts; the newest complete one is found."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from test.distributed.test_batch_share import run_ranks
from user.distributed import checkpoint

pytestmark = pytest.mark.timeout(300)


def ranks(tmp_path: Path, nproc: int, *args: str) -> None:
    done = run_ranks(tmp_path, "test.distributed.checkpoint_worker", nproc=nproc, args=args)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("mode", ["replicated", "sharded"])
def test_saved_by_two_ranks_resumed_by_one_and_by_two(tmp_path: Path, mode: str) -> None:
    ranks(tmp_path, 2, "save", str(tmp_path), mode)
    assert checkpoint.latest(tmp_path) == tmp_path / "dcp_3"
    saved = torch.load(tmp_path / "save_rank0.pt")
    for nproc in (1, 2):
        ranks(tmp_path, nproc, "load", str(tmp_path), mode)
        for rank in range(nproc):
            loaded = torch.load(tmp_path / f"load_rank{rank}.pt")
            assert loaded["steps"] == saved["steps"] == 4
            for name, tensor in saved["before"].items():
                torch.testing.assert_close(loaded["before"][name], tensor, rtol=0, atol=0)
            assert loaded["loss"] == pytest.approx(saved["loss"], rel=1e-6)  # Adam's moments came back too


def test_a_save_cut_short_never_counts(tmp_path: Path) -> None:
    ranks(tmp_path, 2, "save", str(tmp_path), "replicated")
    (tmp_path / ".dcp_9.partial").mkdir()  # killed while writing step 9
    (tmp_path / ".dcp_9.partial" / "__0_0.distcp").write_bytes(b"half")
    (tmp_path / "dcp_8").mkdir()  # a directory without DCP's .metadata is no checkpoint either
    (tmp_path / checkpoint.LATEST).unlink()
    assert checkpoint.latest(tmp_path) == tmp_path / "dcp_3"
    (tmp_path / checkpoint.LATEST).write_text("dcp_9\n")  # a pointer to an incomplete one is not followed
    assert checkpoint.latest(tmp_path) == tmp_path / "dcp_3"


def test_nothing_saved_is_none(tmp_path: Path) -> None:
    assert checkpoint.latest(tmp_path / "missing") is None
    assert checkpoint.latest(tmp_path) is None


def test_a_second_save_of_the_same_step_replaces_it(tmp_path: Path) -> None:
    """A learner's final checkpoint right after a periodic one at the same update count is written, not refused."""
    ranks(tmp_path, 2, "save", str(tmp_path), "sharded")
    first = (tmp_path / "dcp_3" / ".metadata").stat().st_mtime_ns
    ranks(tmp_path, 2, "save", str(tmp_path), "sharded")
    assert checkpoint.latest(tmp_path) == tmp_path / "dcp_3"
    assert (tmp_path / "dcp_3" / ".metadata").stat().st_mtime_ns > first
    assert not list(tmp_path.glob(".dcp_*"))  # nothing left aside or partial


def test_an_unreadable_checkpoint_is_a_checkpoint_error_naming_it(tmp_path: Path) -> None:
    """DCP's CheckpointException is a BaseException: it must not slip past as something else."""
    broken = tmp_path / "dcp_4"
    broken.mkdir()
    (broken / ".metadata").write_bytes(b"not DCP's")
    with pytest.raises(checkpoint.CheckpointError, match="cannot read the checkpoint .*dcp_4"):
        checkpoint.read_whole(broken)
    with pytest.raises(checkpoint.CheckpointError, match="cannot read the checkpoint .*dcp_4"):
        checkpoint._read({"app": {"x": torch.zeros(1)}}, broken, no_dist=True)
