"""`LearningConfig`: the policy kind and the algorithm each select one section; a section of another kind is
an error naming it, and the kind tables give each kind's policy, algorithm, batch size and sampler (the default
sampler `auto` becomes the algorithm's own)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from test.buffer.test_samplers import _columns
from user.algorithms.base import Algorithm
from user.algorithms.hg_dagger import HGDagger
from user.algorithms.rlpd import RLPD
from user.algorithms.sac import SAC
from user.buffer.config import SamplerConfig
from user.buffer.samplers import make_sampler
from user.config.strict import ConfigError, from_mapping
from user.learner.config import ALGORITHMS, POLICIES, LearningConfig
from user.policies.cnn import CNNPolicy
from user.policies.mlp import MLPPolicy

MLP = {"mlp": {"state_dim": 5, "action_dim": 2}}


def load(**data: Any) -> LearningConfig:
    return from_mapping(LearningConfig, data, where="run.yaml")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"algorithm": "rlpd", "sac": {"gamma": 0.5}},
            "sac: a setting of algorithm 'sac', but algorithm 'rlpd'",
        ),
        ({"sac": {"gamma": 0.5}}, "sac: a setting of algorithm 'sac', but algorithm 'rlpd'"),  # the default
        ({"algorithm": "sac", "rlpd": {}}, "rlpd: a setting of algorithm 'rlpd', but algorithm 'sac'"),
        ({"algorithm": "sac", "hg_dagger": {}}, "hg_dagger: a setting of algorithm 'hg_dagger'"),
        ({"algorithm": "hg_dagger", "rlpd": {}}, "rlpd: a setting of algorithm 'rlpd', but algorithm 'hg"),
        ({"policy_kind": "cnn", "mlp": {}}, "mlp: a setting of policy_kind 'mlp', but policy_kind 'cnn'"),
        ({"cnn": {"state_dim": 3}}, "cnn: a setting of policy_kind 'cnn', but policy_kind 'mlp'"),
    ],
)
def test_a_section_of_an_unselected_kind_is_one_clear_error(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(**data)
    assert str(err.value).startswith(f"run.yaml: {message}")
    assert "\n" not in str(err.value)


def test_each_algorithm_kind_builds_its_own_algorithm_with_its_section() -> None:
    rlpd = load(**MLP, rlpd={"gamma": 0.5})
    algorithm = rlpd.build_algorithm(rlpd.build_policy())
    assert isinstance(algorithm, RLPD) and algorithm.config.gamma == 0.5
    built: dict[str, tuple[type[Algorithm], dict[str, Any]]] = {
        "rlpd": (RLPD, {"rlpd": {"gamma": 0.5, "batch_size": 64, "utd_ratio": 2, "demo_ratio": 0.25}}),
        "sac": (SAC, {"sac": {"gamma": 0.5, "batch_size": 32, "utd_ratio": 2}}),
        "hg_dagger": (HGDagger, {"hg_dagger": {"bc": {"batch_size": 16}}}),
    }
    assert set(built) == set(ALGORITHMS)
    for kind, (cls, section) in built.items():
        config = load(algorithm=kind, **MLP, **section)
        algorithm = config.build_algorithm(config.build_policy())
        assert type(algorithm) is cls, kind
        assert config.batch_size == {"rlpd": 64, "sac": 32, "hg_dagger": 16}[kind]
        assert config.gradient_steps_per_update == {"rlpd": 2, "sac": 2, "hg_dagger": 1}[kind]
    algorithm = load(algorithm="rlpd", **MLP, rlpd={"gamma": 0.5}).build_algorithm(load(**MLP).build_policy())
    assert isinstance(algorithm, RLPD) and algorithm.config.gamma == 0.5


def test_the_default_sampler_becomes_the_algorithm_s_own_and_a_named_one_is_kept() -> None:
    auto = SamplerConfig()
    assert auto.kind == "auto"
    rlpd = load(**MLP, rlpd={"demo_ratio": 0.25}).sampler_for(auto)
    assert (rlpd.kind, rlpd.demo_ratio) == ("demo_ratio", 0.25)  # RLPD's own share of demos, not the buffer's 0.5
    assert load(algorithm="hg_dagger", **MLP).sampler_for(auto).kind == "intervention"  # the human's corrections
    assert load(algorithm="sac", **MLP).sampler_for(auto) == auto  # follows the presence of demos (below)
    named = [
        SamplerConfig(kind="uniform"),
        SamplerConfig(kind="recent"),
        SamplerConfig(kind="demo_ratio", demo_ratio=0.1),
    ]
    for algorithm in ALGORITHMS:
        for sampler in named:
            assert load(algorithm=algorithm, **MLP).sampler_for(sampler) == sampler, (algorithm, sampler.kind)


@pytest.mark.parametrize("demos", [0, 40])
def test_sac_s_default_sampler_draws_half_demos_when_there_are_demos_and_uniformly_otherwise(demos: int) -> None:
    sampler = make_sampler(load(algorithm="sac", **MLP).sampler_for(SamplerConfig(seed=3)))
    draws = sampler.sample(_columns(200, demo=demos).view(), 20_000)
    counts = np.bincount(draws, minlength=200)
    if demos:  # half of every batch from the 40 demonstrations, half from the 160 online transitions
        assert int((draws < demos).sum()) == 10_000
        assert counts[:demos].min() > 150 and counts[demos:].min() > 30
    else:  # no demonstrations: uniform over everything (about 100 draws each)
        assert counts.min() > 50 and counts.max() < 150


def test_each_policy_kind_builds_its_own_policy() -> None:
    assert set(POLICIES) == {"mlp", "cnn"}
    mlp = load(**MLP)
    assert isinstance(mlp.build_policy(), MLPPolicy) and mlp.state_dim == 5
    cnn = load(policy_kind="cnn", cnn={"state_dim": 4, "action_dim": 2, "observation": {"cameras": ["wrist"]}})
    assert cnn.state_dim == 4
    assert isinstance(cnn.build_policy(), CNNPolicy)
