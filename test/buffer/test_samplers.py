"""Each sampler draws from the right subset, in the right proportions, and resumes from its state."""

from collections.abc import Callable

import numpy as np
import pytest

from user.buffer.columns import Columns, ColumnView
from user.buffer.config import SamplerConfig
from user.buffer.errors import BufferError, NotReadyError
from user.buffer.rows import TransitionRow
from user.buffer.samplers import (
    DemoRatioSampler,
    InterventionSampler,
    RecentSampler,
    Sampler,
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


RESUME_VIEW_VERSIONS = [i // 50 for i in range(200)]  # versions 0..3

# two settings per kind that draw differently, so a resume that drops a parameter shows
SETTINGS = [
    {"window": 64, "max_staleness": 1, "staleness_temperature": 2.0, "demo_ratio": 0.25, "include_demos": False},
    {"window": 100, "max_staleness": -1, "staleness_temperature": 0.0, "demo_ratio": 0.5, "include_demos": True},
]


@pytest.mark.parametrize("kind", ["uniform", "recent", "staleness", "demo_ratio", "intervention"])
@pytest.mark.parametrize("direction", [0, 1])
def test_state_dict_resumes_the_same_draws(kind: str, direction: int) -> None:
    """A sampler resumed from a state, whatever it was built with, draws exactly what the saved one would."""
    view: ColumnView = _columns(200, demo=50, intervened={60, 70, 80}, versions=RESUME_VIEW_VERSIONS).view()
    saved, fresh = SETTINGS[direction], SETTINGS[1 - direction]
    a = make_sampler(SamplerConfig(kind=kind, seed=7, **saved))  # type: ignore[arg-type]
    a.set_policy_version(2)  # the learner is behind the newest data (version 3)
    a.sample(view, 32)
    state = a.state_dict()
    expected = a.sample(view, 256)
    b = make_sampler(SamplerConfig(kind=kind, seed=99, **fresh))  # type: ignore[arg-type]
    b.load_state_dict(state)
    assert b.policy_version == 2
    assert np.array_equal(b.sample(view, 256), expected)
    assert b.state_dict() == a.state_dict()  # and it saves the same checkpoint again


@pytest.mark.parametrize("kind", ["uniform", "recent", "staleness", "demo_ratio", "intervention"])
def test_a_state_without_parameters_keeps_the_samplers_own(kind: str) -> None:
    """A checkpoint holding only the kind and the generator (no parameters, no policy version) resumes the
    generator and keeps the parameters the sampler was configured with."""
    config = SamplerConfig(kind=kind, seed=3, **SETTINGS[0])  # type: ignore[arg-type]
    saved, b = make_sampler(config), make_sampler(config)
    saved.sample(_columns(10, demo=3, intervened={5}).view(), 8)
    b.load_state_dict({"kind": kind, "rng": saved.state_dict()["rng"]})
    assert b.policy_version is None
    assert b.state_dict() == saved.state_dict()


def test_resumed_staleness_sampler_draws_as_before_when_old_versions_arrive_late() -> None:
    """Robots on an older policy can deliver after newer data; a resumed sampler rebuilds its version
    subsets from the storage in one go and must still draw exactly what the running one would."""
    versions = [2] * 20 + [0] * 20 + [1] * 20
    running = StalenessSampler(temperature=2.0, seed=3)
    running.set_policy_version(2)
    running.sample(_columns(20, versions=versions).view(), 4)  # only version 2 stored yet
    full = _columns(60, versions=versions).view()
    running.sample(full, 4)
    state = running.state_dict()
    expected = running.sample(full, 64)
    resumed = StalenessSampler()
    resumed.load_state_dict(state)
    assert np.array_equal(resumed.sample(full, 64), expected)


def test_state_of_another_kind_is_refused() -> None:
    with pytest.raises(BufferError, match="sampler state is for 'uniform'"):
        RecentSampler(10).load_state_dict(UniformSampler().state_dict())


def test_empty_buffer_is_not_ready() -> None:
    with pytest.raises(NotReadyError):
        UniformSampler().sample(_columns(0).view(), 4)


def test_recent_window_larger_than_the_buffer_draws_everything() -> None:
    sampler = RecentSampler(window=100, seed=2)
    small = _columns(30).view()
    assert sampler.candidates(small) == 30
    assert set(sampler.sample(small, 1000).tolist()) == set(range(30))
    assert sampler.candidates(_columns(1000).view()) == 100


def test_demo_ratio_draws_every_demo_and_every_online_transition() -> None:
    sampler = DemoRatioSampler(ratio=0.5, seed=4)
    view = _columns(60, demo=20).view()
    assert sampler.candidates(view) == 60
    assert set(sampler.sample(view, 2000).tolist()) == set(range(60))


def test_staleness_zero_draws_only_the_current_version() -> None:
    view = _columns(300, versions=[0] * 100 + [1] * 100 + [2] * 100).view()
    sampler = StalenessSampler(max_staleness=0, seed=0)
    sampler.set_policy_version(2)
    assert set(sampler.sample(view, 2000).tolist()) == set(range(200, 300))
    assert sampler.candidates(view) == 100


def test_staleness_counts_from_the_learners_version_not_the_newest_data() -> None:
    """Data newer than the learner's version (a resumed learner) is fresh; older than allowed is dropped."""
    versions = [0] * 100 + [1] * 100 + [2] * 100
    view = _columns(300, versions=versions).view()
    sampler = StalenessSampler(max_staleness=0, seed=0)
    sampler.set_policy_version(1)
    drawn = np.bincount(np.asarray(versions)[sampler.sample(view, 4000)], minlength=3)
    assert drawn[0] == 0 and drawn[1] > 1500 and drawn[2] > 1500


def test_staleness_without_a_reported_version_counts_from_the_newest_stored() -> None:
    view = _columns(300, versions=[0] * 100 + [1] * 100 + [2] * 100).view()
    sampler = StalenessSampler(max_staleness=1, seed=0)
    assert sampler.policy_version is None
    assert set(sampler.sample(view, 4000).tolist()) == set(range(100, 300))  # versions 1 and 2


def test_staleness_keeps_versions_within_the_limit_equally_weighted_per_transition() -> None:
    """Temperature 0: every kept transition equally likely, so a version with more data is drawn more."""
    versions = [0] * 50 + [1] * 300 + [2] * 100
    view = _columns(450, versions=versions).view()
    sampler = StalenessSampler(max_staleness=1, seed=1)
    sampler.set_policy_version(2)
    draws = sampler.sample(view, 40_000)
    counts = np.bincount(draws, minlength=450)
    assert counts[:50].sum() == 0
    assert counts[50:].min() > 0  # every kept transition, the first of each version included
    share_v1 = counts[50:350].sum() / len(draws)
    assert share_v1 == pytest.approx(0.75, abs=0.02)


def test_staleness_weights_each_transition_by_its_age() -> None:
    versions = [0] * 300 + [1] * 100
    view = _columns(400, versions=versions).view()
    sampler = StalenessSampler(temperature=2.0, seed=1)
    sampler.set_policy_version(1)
    old_share = float((sampler.sample(view, 40_000) < 300).mean())
    w = 300 * np.exp(-1 / 2.0)
    assert old_share == pytest.approx(w / (w + 100), abs=0.02)


def test_staleness_candidates_are_the_transitions_with_any_weight() -> None:
    view = _columns(3, versions=[0, 1, 2]).view()
    sampler = StalenessSampler(temperature=1.0, seed=0)
    sampler.set_policy_version(2)
    assert sampler.candidates(view) == 3
    sampler.set_policy_version(100_000)  # so stale that exp(-staleness / T) is 0: nothing to draw from
    assert sampler.candidates(view) == 0
    with pytest.raises(NotReadyError):
        sampler.sample(view, 4)


GROWING: dict[str, Callable[[], Sampler]] = {
    "staleness": lambda: StalenessSampler(seed=0),
    "demo_ratio": lambda: DemoRatioSampler(ratio=0.5, seed=0),
    "intervention": lambda: InterventionSampler(include_demos=True, seed=0),
}


@pytest.mark.parametrize("kind", list(GROWING))
def test_samplers_follow_a_growing_buffer_and_start_over_on_a_smaller_one(kind: str) -> None:
    """Subsets are kept incrementally as transitions arrive; a smaller storage (a fresh open) rebuilds them."""
    sampler = GROWING[kind]()

    def view(n: int, demo: int) -> ColumnView:
        versions = [i % 3 for i in range(n)]
        return _columns(n, demo=demo, intervened=set(range(0, n, 4)), versions=versions).view()

    def expected(n: int, demo: int) -> set[int]:
        if kind == "intervention":
            return set(range(demo)) | set(range(0, n, 4))
        return set(range(n))

    for n, demo in [(40, 10), (100, 10), (300, 10), (50, 5)]:  # grows past the first arrays, then shrinks
        v = view(n, demo)
        drawn = set(sampler.sample(v, 10_000).tolist())
        assert drawn == expected(n, demo), n
