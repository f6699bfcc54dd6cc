"""Each sampler draws from the right subset, in the right proportions, and resumes from its state."""

import numpy as np
import pytest

from user.buffer.columns import Columns, ColumnView
from user.buffer.config import SamplerConfig
from user.buffer.errors import BufferError, NotReadyError
from user.buffer.index import TransitionRow
from user.buffer.samplers import (
    DemoRatioSampler,
    InterventionSampler,
    RecentSampler,
    StalenessSampler,
    UniformSampler,
    make_sampler,
)


def _columns(
    n: int, *, demo: int = 0, intervened: set[int] | None = None, versions: list[int] | None = None
) -> Columns:
    cols = Columns(capacity=4)
    rows = [
        TransitionRow(
            index=i, segment_id=1, offset=i, length=1, episode=i // 10, robot_id="a", task="t", episode_id=i // 10,
            step=i % 10, policy_version=versions[i] if versions else 0, wall_ns=i, sim_ns=i, reward=0.0,
            terminated=False, truncated=False, intervened=i in (intervened or set()), is_demo=i < demo, success=False,
        )
        for i in range(n)
    ]  # fmt: skip
    cols.extend(rows)
    return cols


def test_uniform_covers_everything() -> None:
    view = _columns(50).view()
    draws = UniformSampler(seed=1).sample(view, 5000)
    assert draws.min() == 0 and draws.max() == 49
    assert np.bincount(draws, minlength=50).min() > 50


def test_recent_window_only_draws_the_newest() -> None:
    view = _columns(1000).view()
    draws = RecentSampler(window=100, seed=1).sample(view, 2000)
    assert draws.min() >= 900 and draws.max() == 999


def test_demo_ratio_splits_every_batch() -> None:
    sampler = DemoRatioSampler(ratio=0.25, seed=3)
    view = _columns(400, demo=100).view()
    draws = sampler.sample(view, 256)
    assert int((draws < 100).sum()) == 64  # exactly a quarter from demonstrations, every batch
    only_online = sampler.sample(_columns(50).view(), 16)
    assert len(only_online) == 16  # no demos yet: all online


def test_demo_ratio_follows_growth() -> None:
    cols = _columns(10, demo=10)
    sampler = DemoRatioSampler(ratio=0.5, seed=0)
    assert (sampler.sample(cols.view(), 8) < 10).all()  # only demos exist
    more = _columns(30, demo=10).view()  # 20 online transitions arrive
    draws = sampler.sample(more, 1000)
    assert int((draws >= 10).sum()) == 500


def test_intervention_only() -> None:
    view = _columns(100, demo=5, intervened={40, 41, 77}).view()
    assert set(InterventionSampler(include_demos=False, seed=0).sample(view, 300).tolist()) == {40, 41, 77}
    with_demos = set(InterventionSampler(include_demos=True, seed=0).sample(view, 600).tolist())
    assert with_demos == {0, 1, 2, 3, 4, 40, 41, 77}
    with pytest.raises(NotReadyError, match="no transitions"):
        InterventionSampler(include_demos=False).sample(_columns(10).view(), 4)


def test_staleness_drops_old_versions_and_weights_the_rest() -> None:
    versions = [0] * 100 + [1] * 100 + [2] * 100
    view = _columns(300, versions=versions).view()
    capped = StalenessSampler(max_staleness=1, seed=0)
    capped.set_policy_version(2)
    assert capped.sample(view, 2000).min() >= 100
    weighted = StalenessSampler(temperature=1.0, seed=0)
    weighted.set_policy_version(2)
    counts = np.bincount(np.asarray(versions)[weighted.sample(view, 30_000)], minlength=3)
    assert counts[2] / counts[1] == pytest.approx(np.e, rel=0.1)
    assert counts[1] / counts[0] == pytest.approx(np.e, rel=0.15)
    assert capped.candidates(view) == 200


@pytest.mark.parametrize("kind", ["uniform", "recent", "staleness", "demo_ratio", "intervention"])
def test_state_dict_resumes_the_same_draws(kind: str) -> None:
    view: ColumnView = _columns(200, demo=50, intervened={60, 70, 80}, versions=[i // 50 for i in range(200)]).view()
    config = SamplerConfig(kind=kind, window=64, max_staleness=2, staleness_temperature=2.0, seed=7)  # type: ignore[arg-type]
    a = make_sampler(config)
    a.set_policy_version(3)
    a.sample(view, 32)
    state = a.state_dict()
    expected = a.sample(view, 32)
    b = make_sampler(SamplerConfig(kind=kind, seed=99))  # type: ignore[arg-type]
    b.load_state_dict(state)
    assert np.array_equal(b.sample(view, 32), expected)


def test_state_of_another_kind_is_refused() -> None:
    with pytest.raises(BufferError, match="sampler state is for 'uniform'"):
        RecentSampler(10).load_state_dict(UniformSampler().state_dict())


def test_empty_buffer_is_not_ready() -> None:
    with pytest.raises(NotReadyError):
        UniformSampler().sample(_columns(0).view(), 4)
