"""FSDP2 for the learner's actor: 2 gloo ranks with the actor sharded (`shard: on`) train BC, HG-DAgger, SAC, RLPD
and SAC-Flow to the losses and weights 1 rank gives on the same global batches, and the weights the lead publishes
(gathered from the shards) are the full parameters; in bf16 they train close to it; the shard plan follows the
settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from test.learner.test_ranked_update import assert_trained_alike
from test.learner.test_ranked_update import trained as ranked_trained
from user.config import ConfigError, from_mapping
from user.distributed.ranks import RanksConfig
from user.distributed.sharding import plan_sharding

pytestmark = pytest.mark.timeout(300)
ALGORITHMS = ("bc", "hg_dagger", "sac", "rlpd", "sac_flow")
CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def trained(tmp_path: Path, nproc: int, *flags: str, names: tuple[str, ...] = ALGORITHMS) -> dict[str, Any]:
    return ranked_trained(tmp_path, nproc, *flags, names=names, worker="test.distributed.sharding_worker")


def test_a_sharded_actor_trains_as_one_process_and_publishes_its_full_weights(tmp_path: Path) -> None:
    one, two = trained(tmp_path, 1), trained(tmp_path, 2)
    for name in ALGORITHMS:
        (alone,) = one[name]
        assert not any(alone["sharded"]), name  # one rank trains the actor whole
        for rank in two[name]:
            assert all(rank["sharded"]), name  # every actor parameter a DTensor
            assert_trained_alike(name, rank, alone)
        lead, other = two[name]
        full = torch.cat([w.reshape(-1) for w in lead["weights"].values()])
        torch.testing.assert_close(lead["published"], full, rtol=0, atol=0)  # the gather is the whole actor
        assert "no gather is possible here" in other["published"]
    bf16 = trained(tmp_path, 2, "--bf16", names=("bc", "sac"))
    for name, ranks in bf16.items():  # bf16 compute, float32 shards and reduction: close to float32 training
        (alone,) = one[name]
        for rank in ranks:
            assert all(rank["sharded"]), name
            for key, value in alone["losses"][-1].items():
                assert rank["losses"][-1][key] == pytest.approx(value, rel=0.05, abs=0.02), (name, key)


def test_the_shard_plan_follows_the_settings() -> None:
    auto = RanksConfig(shard_above_params=1000)
    assert plan_sharding(auto, 1000, CPU, 2).shard
    assert not plan_sharding(auto, 999, CPU, 2).shard
    assert not plan_sharding(auto, 10**9, CPU, 1).shard  # one rank: nothing to shard over
    assert not plan_sharding(RanksConfig(shard="off"), 10**12, CPU, 8).shard
    assert plan_sharding(RanksConfig(shard="on"), 1, CPU, 2).shard
    assert RanksConfig().shard == "auto" and RanksConfig().shard_above_params == 100_000_000
    assert plan_sharding(auto, 1, CPU, 2).dtype == "float32"
    assert plan_sharding(auto, 1, CUDA, 2).dtype == "bf16"
    assert plan_sharding(RanksConfig(shard_dtype="float32"), 1, CUDA, 2).dtype == "float32"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"shard": "always"}, "shard: 'always' is not one of 'auto', 'on', 'off'"),
        ({"shard_dtype": "fp16"}, "shard_dtype: 'fp16' is not one of"),
        ({"shard_above_params": 0}, "shard_above_params: 0 is below the minimum 1"),
    ],
)
def test_bad_shard_settings_are_config_errors_naming_the_key(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_mapping(RanksConfig, data, where="ranks")
    with pytest.raises(ConfigError, match=f"ranks.{next(iter(data))}"):
        RanksConfig(**data)
