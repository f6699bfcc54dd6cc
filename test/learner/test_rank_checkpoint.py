"""Checkpoints of a learner with ranks: DCP beside today's latest.pt. Saved by 2 ranks with the actor sharded,
resumed by one process and by 2 ranks (the same weights, counters and losses on a fixed batch); saved unsharded by
2 ranks (the lead writes alone); today's latest.pt loads into a learner with ranks; a resume takes the newest
complete checkpoint of either format. (A save a kill cut short never counts: test/distributed/test_checkpoint.py.)"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from test.distributed.test_batch_share import run_ranks
from test.learner.rank_session_worker import run
from user.algorithms.bc import BC
from user.distributed.commands import Op
from user.distributed.current import ThisRank
from user.distributed.group import RankEnv, RankGroup
from user.learner import rank_checkpoint
from user.learner.checkpoint import (
    Checkpoint,
    CheckpointError,
    CheckpointStore,
    CheckpointWriteError,
    LearnerCounters,
)
from user.learner.trainer import TrainerCounters
from user.policies.mlp import MLPPolicy, MLPPolicyConfig

pytestmark = pytest.mark.timeout(300)


def ranks(run_dir: Path, out: Path, shard: str, nproc: int = 2) -> dict[str, Any]:
    out.mkdir()
    done = run_ranks(out, "test.learner.rank_session_worker", nproc=nproc, args=(str(run_dir), str(out), shard))
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = torch.load(out / "result.pt")
    return result


def alone(run_dir: Path, out: Path) -> dict[str, Any]:
    out.mkdir()
    run(run_dir, out, "on")  # one process: nothing to shard over
    result: dict[str, Any] = torch.load(out / "result.pt")
    return result


def copy(run_dir: Path, to: Path) -> Path:
    shutil.copytree(run_dir, to)  # each resume writes its own final checkpoint: every one starts from the saved
    return to


def test_saved_by_two_sharded_ranks_resumed_by_one_process_and_by_two_ranks(tmp_path: Path) -> None:
    saved = ranks(tmp_path / "run", tmp_path / "saved", "on")
    assert saved["sharded"] and not saved["resumed"] and saved["update_calls"] == 3
    checkpoints = tmp_path / "run" / "checkpoints"
    assert sorted(p.name for p in (checkpoints / "dcp_3").glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    assert not (checkpoints / "latest.pt").exists()
    single = alone(copy(tmp_path / "run", tmp_path / "run0"), tmp_path / "single")  # no ranks at all
    one = ranks(copy(tmp_path / "run", tmp_path / "run1"), tmp_path / "one", "on", nproc=1)
    two = ranks(copy(tmp_path / "run", tmp_path / "run2"), tmp_path / "two", "on")
    assert not single["sharded"] and not one["sharded"] and two["sharded"]
    for resumed in (single, one, two):
        assert resumed["resumed"] and resumed["update_calls"] == 3
        torch.testing.assert_close(resumed["weights"], saved["weights"], rtol=0, atol=0)
        torch.testing.assert_close(resumed["critic"], saved["critic"], rtol=0, atol=0)
    # the same next update: 1 rank and 2 draw the same noise (a process without ranks draws from torch's own)
    assert one["losses"].keys() == two["losses"].keys() == {"critic", "actor", "temperature"}
    for key, value in one["losses"].items():
        assert two["losses"][key] == pytest.approx(value, rel=1e-4, abs=1e-6), key


def test_an_unsharded_learner_with_ranks_saves_what_its_lead_writes_alone(tmp_path: Path) -> None:
    saved = ranks(tmp_path / "run", tmp_path / "saved", "off")
    assert not saved["sharded"]
    assert [p.name for p in (tmp_path / "run" / "checkpoints" / "dcp_3").glob("*.distcp")] == ["__0_0.distcp"]
    again = alone(tmp_path / "run", tmp_path / "again")
    assert again["resumed"] and again["update_calls"] == 3
    torch.testing.assert_close(again["weights"], saved["weights"], rtol=0, atol=0)


def test_a_single_file_checkpoint_loads_into_a_learner_with_ranks(tmp_path: Path) -> None:
    saved = alone(tmp_path / "run", tmp_path / "saved")
    assert (tmp_path / "run" / "checkpoints" / "latest.pt").is_file()
    resumed = ranks(tmp_path / "run", tmp_path / "resumed", "on")
    assert resumed["resumed"] and resumed["sharded"] and resumed["update_calls"] == 3
    torch.testing.assert_close(resumed["weights"], saved["weights"], rtol=0, atol=0)


def _checkpoint(calls: int) -> Checkpoint:
    return Checkpoint({}, {}, TrainerCounters(update_calls=calls), LearnerCounters(), "p")


def test_a_resume_takes_the_newest_complete_checkpoint_of_either_format(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    assert rank_checkpoint.newest(store) is None
    store.save(_checkpoint(5))
    dcp = tmp_path / "dcp_9"
    dcp.mkdir()
    (dcp / ".metadata").write_bytes(b"")
    (tmp_path / ".dcp_12.partial").mkdir()  # a save a kill cut short
    os.utime(store.latest, ns=(1, 1_000))
    os.utime(dcp / ".metadata", ns=(1, 2_000))
    assert rank_checkpoint.newest(store) == dcp
    os.utime(store.latest, ns=(1, 3_000))
    assert rank_checkpoint.newest(store) == store.latest
    assert rank_checkpoint.read(store.latest, store, "p").trainer.update_calls == 5
    with pytest.raises(CheckpointError, match="dcp_9: cannot read the checkpoint"):
        rank_checkpoint.read(dcp, store, "p")


class BrokenChannel:
    """The lead's channel once a rank died: gloo's collectives raise (third_party/gloo/gloo/transport/tcp/pair.cc:
    "Connection reset by peer")."""

    @contextlib.contextmanager
    def command(self, op: Op) -> Iterator[None]:
        raise RuntimeError(f"[gloo/transport/tcp/pair.cc:537] Read error: Connection reset by peer ({op.name})")
        yield


def test_a_lead_whose_ranks_are_gone_writes_its_whole_state_alone_unless_sharded(tmp_path: Path) -> None:
    """Found by test/deploy/test_learner_ranks.py: the lead's final checkpoint after rank 1 was killed is what the
    restarted group resumes from; written together it was never written at all."""
    group = RankGroup(RankEnv(0, 0, 2, 0, True), "gloo", torch.device("cpu"), lead=0)
    rank = ThisRank(group, BrokenChannel())  # type: ignore[arg-type]
    algorithm = BC(MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(8,))))
    store = CheckpointStore(tmp_path)
    with pytest.raises(CheckpointWriteError, match="could not write it together .*Connection reset by peer"):
        rank_checkpoint.write(_checkpoint(7), algorithm, store, rank, sharded=True)
    assert rank_checkpoint.newest(store) is None
    assert rank_checkpoint.write(_checkpoint(7), algorithm, store, rank, sharded=False) == store.latest
    loaded = rank_checkpoint.read(store.latest, store, "p")
    assert loaded.trainer.update_calls == 7
    for key, value in algorithm.state_dict()["actor"].items():
        torch.testing.assert_close(loaded.algorithm["actor"][key], value, rtol=0, atol=0)
