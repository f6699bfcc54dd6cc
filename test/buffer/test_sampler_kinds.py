"""`make_sampler` hands out the sampler each kind names, with the config's parameters: every kind gives the
draws that kind must give (checked on distributions of many seeded draws, not on exact sequences)."""

import numpy as np
import pytest

from test.buffer.test_samplers import _columns
from user.buffer.columns import ColumnView
from user.buffer.config import SamplerConfig
from user.buffer.errors import NotReadyError
from user.buffer.samplers import (
    DemoRatioSampler,
    InterventionSampler,
    RecentSampler,
    Sampler,
    StalenessSampler,
    UniformSampler,
    make_sampler,
)
from user.config.strict import ConfigError, from_mapping

KINDS = ["uniform", "recent", "staleness", "demo_ratio", "intervention"]
DEMOS = 40  # transitions 0..39 are demonstrations
INTERVENED = {100, 150, 199}
VERSIONS = [i // 50 for i in range(200)]  # policy versions 0..3, 50 transitions each


def _view() -> ColumnView:
    return _columns(200, demo=DEMOS, intervened=INTERVENED, versions=VERSIONS).view()


def _sampler(kind: str, **params: object) -> Sampler:
    return make_sampler(SamplerConfig(kind=kind, seed=5, **params))  # type: ignore[arg-type]


def test_uniform_kind_draws_every_stored_transition_evenly() -> None:
    draws = _sampler("uniform").sample(_view(), 20_000)
    counts = np.bincount(draws, minlength=200)
    assert len(counts) == 200 and counts.min() > 50 and counts.max() < 150  # about 100 each


def test_recent_kind_draws_only_the_configured_window() -> None:
    draws = _sampler("recent", window=30).sample(_view(), 3000)
    assert set(draws.tolist()) == set(range(170, 200))


def test_staleness_kind_draws_only_recent_policy_versions_weighted_by_age() -> None:
    sampler = _sampler("staleness", max_staleness=1, staleness_temperature=2.0)
    sampler.set_policy_version(3)
    versions = np.asarray(VERSIONS)[sampler.sample(_view(), 20_000)]
    counts = np.bincount(versions, minlength=4)
    assert counts[0] == counts[1] == 0  # two or more versions old: left out
    assert counts[3] / counts[2] == pytest.approx(np.exp(1 / 2.0), rel=0.1)  # one version old: exp(-1/T)


def test_demo_ratio_kind_draws_the_demo_share_of_every_batch() -> None:
    sampler = _sampler("demo_ratio", demo_ratio=0.25)
    view = _view()
    for _ in range(5):
        draws = sampler.sample(view, 200)
        assert int((draws < DEMOS).sum()) == 50  # RLPD: exactly a quarter of each batch from demonstrations


@pytest.mark.parametrize("demos", [0, DEMOS])
def test_the_default_auto_kind_draws_half_demos_once_there_are_demos_and_uniformly_before(demos: int) -> None:
    assert SamplerConfig().kind == "auto"
    view = _columns(200, demo=demos).view()
    draws = make_sampler(SamplerConfig(seed=5)).sample(view, 20_000)
    counts = np.bincount(draws, minlength=200)
    if demos:
        assert int((draws < demos).sum()) == 10_000  # half of every batch from the demonstrations
    else:
        assert counts.min() > 50 and counts.max() < 150  # uniform over all: about 100 each


@pytest.mark.parametrize("include_demos", [False, True])
def test_intervention_kind_draws_only_intervened_rows(include_demos: bool) -> None:
    draws = set(_sampler("intervention", include_demos=include_demos).sample(_view(), 3000).tolist())
    assert draws == INTERVENED | (set(range(DEMOS)) if include_demos else set())


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_is_reproducible_from_its_seed(kind: str) -> None:
    view = _view()
    config = SamplerConfig(kind=kind, window=64, seed=11)  # type: ignore[arg-type]
    first, again = make_sampler(config).sample(view, 64), make_sampler(config).sample(view, 64)
    other = make_sampler(SamplerConfig(kind=kind, window=64, seed=12)).sample(view, 64)  # type: ignore[arg-type]
    assert np.array_equal(first, again)
    assert not np.array_equal(first, other)


DIRECT = {
    "uniform": UniformSampler,
    "recent": lambda: RecentSampler(SamplerConfig().window),
    "staleness": StalenessSampler,
    "demo_ratio": DemoRatioSampler,
    "intervention": InterventionSampler,
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_sampler_built_without_arguments_behaves_as_the_default_config(kind: str) -> None:
    view = _view()
    direct: Sampler = DIRECT[kind]()  # type: ignore[operator]
    configured = make_sampler(SamplerConfig(kind=kind))  # type: ignore[arg-type]
    assert direct.kind == configured.kind == kind
    assert direct.state_dict()["params"] == configured.state_dict()["params"]
    assert np.array_equal(direct.sample(view, 64), configured.sample(view, 64))


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_not_ready_on_an_empty_buffer(kind: str) -> None:
    with pytest.raises(NotReadyError, match=f"{kind} sampler: no transitions to sample from yet"):
        _sampler(kind).sample(_columns(0).view(), 4)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "uniform", "demo_ratio": 0.3}, "demo_ratio: a setting of kind 'demo_ratio', but kind 'uniform'"),
        ({"kind": "demo_ratio", "window": 10}, "window: a setting of kind 'recent'"),
        ({"kind": "recent", "max_staleness": 2}, "max_staleness: a setting of kind 'staleness'"),
        ({"include_demos": False}, "include_demos: a setting of kind 'intervention', but kind 'auto'"),
        ({"demo_ratio": 0.3}, "demo_ratio: a setting of kind 'demo_ratio', but kind 'auto'"),  # auto: 0.5 fixed
    ],
)
def test_a_setting_of_another_sampler_kind_is_refused(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=f"^buffer.yaml: {message}"):
        from_mapping(SamplerConfig, data, where="buffer.yaml")
