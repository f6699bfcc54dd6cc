"""`LearningConfig`: the policy kind and the algorithm each select one section; a section of another kind is
an error naming it, and the kind tables give each kind's policy, algorithm, batch size and sampler."""

from __future__ import annotations

from typing import Any

import pytest

from user.algorithms.base import Algorithm
from user.algorithms.hg_dagger import HGDagger
from user.algorithms.rlpd import RLPD
from user.algorithms.sac import SAC
from user.buffer.config import SamplerConfig
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


def test_each_algorithm_turns_a_uniform_sampler_into_its_own() -> None:
    uniform, recent = SamplerConfig(kind="uniform"), SamplerConfig(kind="recent")
    rlpd = load(**MLP, rlpd={"demo_ratio": 0.25}).sampler_for(uniform)
    assert (rlpd.kind, rlpd.demo_ratio) == ("demo_ratio", 0.25)
    assert load(algorithm="sac", **MLP).sampler_for(uniform) == uniform
    assert load(algorithm="hg_dagger", **MLP).sampler_for(uniform).kind == "intervention"
    assert load(**MLP).sampler_for(recent) == recent  # a sampler chosen by name is kept


def test_each_policy_kind_builds_its_own_policy() -> None:
    assert set(POLICIES) == {"mlp", "cnn"}
    mlp = load(**MLP)
    assert isinstance(mlp.build_policy(), MLPPolicy) and mlp.state_dim == 5
    cnn = load(policy_kind="cnn", cnn={"state_dim": 4, "action_dim": 2, "observation": {"cameras": ["wrist"]}})
    assert cnn.state_dim == 4
    assert isinstance(cnn.build_policy(), CNNPolicy)
