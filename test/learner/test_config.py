"""`LearningConfig`: the policy kind and the algorithm each select one section; a section of another kind is
an error naming it, and the kind tables give each kind's policy, algorithm, batch size and sampler (the default
sampler `auto` becomes the algorithm's own). The choices, the sections and the tables name the same kinds."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import numpy as np
import pytest

from test.buffer.test_samplers import _columns
from user.algorithms.base import Algorithm
from user.algorithms.hg_dagger import HGDagger
from user.algorithms.registry import ALGORITHMS
from user.algorithms.rlpd import RLPD
from user.algorithms.sac import SAC
from user.algorithms.sac_flow import SACFlow
from user.buffer.config import BufferConfig, SamplerConfig
from user.buffer.samplers import make_sampler
from user.config.strict import ConfigError, from_mapping, selection_of
from user.learner.config import POLICIES, LearningConfig, check_chunk_horizon
from user.policies.cnn import CNNPolicy
from user.policies.flow import FlowPolicy
from user.policies.mlp import MLPPolicy

MLP = {"mlp": {"state_dim": 5, "action_dim": 2}}
FLOW = {"policy_kind": "flow", "flow": {"state_dim": 5, "action_dim": 2, "hidden": [16]}}
POLICY_FOR = {"sac_flow": FLOW}  # algorithms that train only some policies: one they train; the others take MLP


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
        ({"vla": {"size": "test"}}, "vla: a setting of policy_kind 'vla', but policy_kind 'mlp'"),
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
        "sac_flow": (SACFlow, {"sac_flow": {"gamma": 0.5, "batch_size": 24, "utd_ratio": 3, "critic_hidden": [16]}}),
        "hg_dagger": (HGDagger, {"hg_dagger": {"bc": {"batch_size": 16}}}),
    }
    assert set(built) == set(ALGORITHMS)
    for kind, (cls, section) in built.items():
        config = load(algorithm=kind, **POLICY_FOR.get(kind, MLP), **section)
        algorithm = config.build_algorithm(config.build_policy())
        assert type(algorithm) is cls, kind
        assert config.batch_size == {"rlpd": 64, "sac": 32, "sac_flow": 24, "hg_dagger": 16}[kind]
        assert config.gradient_steps_per_update == {"rlpd": 2, "sac": 2, "sac_flow": 3, "hg_dagger": 1}[kind]
    algorithm = load(algorithm="rlpd", **MLP, rlpd={"gamma": 0.5}).build_algorithm(load(**MLP).build_policy())
    assert isinstance(algorithm, RLPD) and algorithm.config.gamma == 0.5


def test_the_default_sampler_becomes_the_algorithm_s_own_and_a_named_one_is_kept() -> None:
    auto = SamplerConfig()
    assert auto.kind == "auto"
    rlpd = load(**MLP, rlpd={"demo_ratio": 0.25}).sampler_for(auto)
    assert (rlpd.kind, rlpd.demo_ratio) == ("demo_ratio", 0.25)  # RLPD's own share of demos, not the buffer's 0.5
    assert load(algorithm="hg_dagger", **MLP).sampler_for(auto).kind == "intervention"  # the human's corrections
    assert load(algorithm="sac", **MLP).sampler_for(auto) == auto  # follows the presence of demos (below)
    assert load(algorithm="sac_flow", **FLOW).sampler_for(auto) == auto  # as SAC's
    named = [
        SamplerConfig(kind="uniform"),
        SamplerConfig(kind="recent"),
        SamplerConfig(kind="demo_ratio", demo_ratio=0.1),
    ]
    for algorithm in ALGORITHMS:
        for sampler in named:
            config = load(algorithm=algorithm, **POLICY_FOR.get(algorithm, MLP))
            assert config.sampler_for(sampler) == sampler, (algorithm, sampler.kind)


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
    assert set(POLICIES) == {"mlp", "cnn", "flow", "vla"}
    mlp = load(**MLP)
    assert isinstance(mlp.build_policy(), MLPPolicy) and mlp.state_dim == 5
    cnn = load(policy_kind="cnn", cnn={"state_dim": 4, "action_dim": 2, "observation": {"cameras": ["wrist"]}})
    assert cnn.state_dim == 4
    assert isinstance(cnn.build_policy(), CNNPolicy)
    flow = load(**FLOW)
    assert isinstance(flow.build_policy(), FlowPolicy) and flow.state_dim == 5


def test_an_algorithm_refuses_a_policy_kind_it_cannot_train() -> None:
    with pytest.raises(ConfigError) as err:
        load(algorithm="sac_flow", **MLP)
    assert str(err.value) == (
        "run.yaml: algorithm sac_flow cannot train a policy of policy_kind mlp; select policy_kind flow"
    )
    refused = "algorithm hg_dagger cannot train a policy of policy_kind flow; select policy_kind mlp or cnn or vla"
    with pytest.raises(ConfigError, match=refused):
        load(algorithm="hg_dagger", **FLOW)
    for algorithm in ("rlpd", "sac"):  # these train a flow policy too (with its path likelihood as log pi)
        config = load(algorithm=algorithm, **FLOW, **{algorithm: {"critic_hidden": [16]}})
        assert type(config.build_algorithm(config.build_policy()).policy) is FlowPolicy


@pytest.mark.parametrize("algorithm", ["rlpd", "sac", "sac_flow"])
def test_only_hg_dagger_trains_a_vla(algorithm: str) -> None:
    """A VLA gives no action log-likelihood: the SAC-style learners are refused at once, naming what fits."""
    with pytest.raises(ConfigError) as err:
        load(algorithm=algorithm, policy_kind="vla")
    fits = "flow" if algorithm == "sac_flow" else "mlp or cnn or flow"
    assert str(err.value) == (
        f"run.yaml: algorithm {algorithm} cannot train a policy of policy_kind vla; select policy_kind {fits}"
    )
    assert load(algorithm="hg_dagger", policy_kind="vla").vla.size == "test"


def test_a_vla_learner_needs_chunks_of_its_model_s_size() -> None:
    vla = load(algorithm="hg_dagger", policy_kind="vla", vla={"size": "test", "chunk_size": 10})
    with pytest.raises(ConfigError) as err:
        check_chunk_horizon(vla, BufferConfig())
    assert str(err.value) == (
        "buffer.chunk_horizon 0 differs from the VLA model's chunk size 10 (learning.vla): set buffer.chunk_horizon: 10"
    )
    with pytest.raises(ConfigError, match="buffer.chunk_horizon 4 differs from the VLA model's chunk size 10"):
        check_chunk_horizon(vla, BufferConfig(chunk_horizon=4))
    check_chunk_horizon(vla, BufferConfig(chunk_horizon=10))
    check_chunk_horizon(load(**MLP), BufferConfig())  # other policies learn single actions


@pytest.mark.parametrize(("selector", "table"), [("algorithm", ALGORITHMS), ("policy_kind", POLICIES)])
def test_the_choices_the_sections_and_the_kind_tables_name_the_same_kinds(selector: str, table: dict[str, Any]) -> None:
    """A kind added to one of them and not to the others fails here: the `algorithm` / `policy_kind` choices, the
    sections selected by them (each named after its kind) and the table of kinds."""
    hints = typing.get_type_hints(LearningConfig)
    selected = {f.name: selection_of(f) for f in dataclasses.fields(LearningConfig)}
    sections = {name: hints[name] for name, selection in selected.items() if selection and selection[0] == selector}
    assert set(typing.get_args(hints[selector])) == set(table) == set(sections), selector
    assert all(selected[kind] == (selector, (kind,)) for kind in table)  # each section is of its own kind only
    if selector == "algorithm":  # each section's class is the one registered for its kind
        assert all(sections[kind] is table[kind] for kind in table)
    else:  # each section builds its kind's policy class
        defaults = LearningConfig()
        assert all(isinstance(table[k].build(getattr(defaults, k)), table[k].policy) for k in table)
