"""Task-balanced batches: each task's share follows its recent failure rate (exact shares and row counts), draws stay
within each task and keep the inner rule's demonstration share, one task draws as the inner rule alone, and a
resumed sampler draws exactly as the saved one."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from test.buffer.factories import episode
from test.buffer.test_columns import _tasked
from user.buffer import BufferConfig, RateLimiterConfig, ReplayBuffer, StorageConfig
from user.buffer.columns import Columns, ColumnView
from user.buffer.config import SamplerConfig
from user.buffer.errors import NotReadyError
from user.buffer.rows import TransitionRow
from user.buffer.samplers import DemoRatioSampler, UniformSampler, make_sampler
from user.buffer.task_sampler import TaskBalancedSampler, split_counts
from user.config.strict import ConfigError, from_mapping


@dataclass(frozen=True)
class Ep:
    task: str
    steps: int = 4
    demo: bool = False
    success: bool = False


def _row(n: int, e: int, s: int, ep: Ep) -> TransitionRow:
    """Transition `n`, step `s` of episode `e` (`ep`); its last step is done, with the success flag on it."""
    last = s == ep.steps - 1
    return TransitionRow(
        index=n, segment_id=1, offset=n, length=1, episode=e, robot_id="r", task=ep.task, episode_id=e, step=s,
        policy_version=0, wall_ns=n, sim_ns=n, reward=0.0, terminated=last and ep.success,
        truncated=last and not ep.success, intervened=False, is_demo=ep.demo, success=last and ep.success,
    )  # fmt: skip


def _rows(episodes: list[Ep]) -> list[TransitionRow]:
    """The episodes' transitions, numbered from 0 in order."""
    rows: list[TransitionRow] = []
    for e, ep in enumerate(episodes):
        rows.extend(_row(len(rows), e, s, ep) for s in range(ep.steps))
    return rows


def _view(episodes: list[Ep]) -> ColumnView:
    cols = Columns(capacity=4)
    cols.extend(_rows(episodes))
    return cols.view()


# a: solved (5 of 5 online episodes succeed); b: 1 of 5; c: only demonstrations, all successful (they say nothing
# about the policy: c counts as failing). Weights (1 - s) + 0.2: a 0.2, b 1.0, c 1.2 (sum 2.4).
MIXED = (
    [Ep("a", success=True) for _ in range(5)]
    + [Ep("b", demo=True, steps=10)]
    + [Ep("b", success=i == 2) for i in range(5)]
    + [Ep("c", demo=True, success=True) for _ in range(3)]
)
A_ROWS, B_ROWS, C_ROWS = range(0, 20), range(20, 50), range(50, 62)
B_DEMOS = range(20, 30)


def test_shares_follow_each_task_s_recent_failures() -> None:
    shares = TaskBalancedSampler(floor=0.2).shares(_view(MIXED))
    assert list(shares) == ["a", "b", "c"]
    assert shares == pytest.approx({"a": 0.2 / 2.4, "b": 1.0 / 2.4, "c": 1.2 / 2.4})
    no_floor = TaskBalancedSampler(floor=0.0).shares(_view(MIXED))
    assert no_floor == pytest.approx({"a": 0.0, "b": 0.8 / 1.8, "c": 1.0 / 1.8})


@pytest.mark.parametrize(
    ("batch", "counts"),
    [(24, [2, 10, 12]), (10, [1, 4, 5]), (3, [1, 1, 1]), (2, [0, 1, 1]), (1, [0, 0, 1]), (7, [1, 3, 3])],
)
def test_rows_per_task_by_largest_remainder_and_at_least_one_each(batch: int, counts: list[int]) -> None:
    """24: exactly 2/10/12. 10: quotas 0.83/4.17/5 -> 1/4/5. 3: 0.25/1.25/1.5 -> 0/1/2, then a takes one from c.
    Fewer rows than tasks: the largest shares only. 7: 0.58/2.92/3.5 -> 1/3/3 (largest remainders a and b)."""
    sampler = TaskBalancedSampler(seed=1)
    view = _view(MIXED)
    assert sampler.batch_counts(view, batch) == dict(zip("abc", counts, strict=True))
    drawn = view.task[sampler.sample(view, batch)]
    assert np.bincount(drawn, minlength=3).tolist() == counts


def test_split_counts_sums_to_the_total_and_gives_every_weight_a_row() -> None:
    weights = np.asarray([0.2, 5.0, 0.2, 0.2, 9.0])
    for total in range(5, 40):
        counts = split_counts(weights, total)
        assert counts.sum() == total and counts.min() >= 1, total
    assert split_counts(np.asarray([1.0, 1.0, 1.0]), 4).tolist() == [2, 1, 1]  # ties: the earlier task


def test_success_counts_only_the_latest_window_of_finished_online_episodes() -> None:
    episodes = [Ep("a", success=False) for _ in range(5)] + [Ep("a", success=True) for _ in range(3)] + [Ep("b")]
    view = _view(episodes)
    assert TaskBalancedSampler(floor=0.5, window=3).shares(view) == pytest.approx({"a": 0.5 / 2.0, "b": 1.5 / 2.0})
    assert TaskBalancedSampler(floor=0.5, window=4).shares(view) == pytest.approx({"a": 0.75 / 2.25, "b": 1.5 / 2.25})
    assert TaskBalancedSampler(floor=0.5, window=20).shares(view)["a"] == pytest.approx((5 / 8 + 0.5) / 2.625)


def test_every_task_solved_and_no_floor_splits_evenly() -> None:
    view = _view([Ep("a", success=True), Ep("b", success=True)])
    assert TaskBalancedSampler(floor=0.0).shares(view) == {"a": 0.5, "b": 0.5}


@pytest.mark.parametrize("ratio", [0.3, 0.5])
def test_draws_stay_inside_each_task_and_keep_its_demo_share(ratio: float) -> None:
    sampler = TaskBalancedSampler("demo_ratio", demo_ratio=ratio, seed=3)
    view = _view(MIXED)
    for _ in range(20):
        draws = sampler.sample(view, 24)
        by_task = {name: draws[view.task[draws] == code] for code, name in enumerate(view.tasks)}
        assert set(by_task["a"].tolist()) <= set(A_ROWS) and len(by_task["a"]) == 2  # online only: all online
        assert set(by_task["c"].tolist()) <= set(C_ROWS) and len(by_task["c"]) == 12  # demos only: all demos
        b = by_task["b"]
        assert set(b.tolist()) <= set(B_ROWS) and len(b) == 10
        assert int(np.isin(b, B_DEMOS).sum()) == round(10 * ratio)  # RLPD's share within the task


def test_uniform_within_a_task_reaches_every_row_of_it() -> None:
    sampler = make_sampler(SamplerConfig(kind="uniform", balance_tasks=True, seed=2))
    view = _view(MIXED)
    draws = np.concatenate([sampler.sample(view, 24) for _ in range(200)])
    for code, rows in enumerate((A_ROWS, B_ROWS, C_ROWS)):
        assert set(draws[view.task[draws] == code].tolist()) == set(rows)


ONE_TASK = [Ep("solo", demo=True, steps=6)] + [Ep("solo", success=i % 2 == 0, steps=5) for i in range(8)]


def test_one_task_draws_exactly_as_the_inner_rule() -> None:
    view = _view(ONE_TASK)
    balanced, plain = TaskBalancedSampler("demo_ratio", demo_ratio=0.25, seed=7), DemoRatioSampler(0.25, seed=7)
    uniform_balanced, uniform = TaskBalancedSampler("uniform", seed=7), UniformSampler(seed=7)
    for size in (1, 16, 33):
        assert np.array_equal(balanced.sample(view, size), plain.sample(view, size))
        assert np.array_equal(uniform_balanced.sample(view, size), uniform.sample(view, size))
    assert balanced.shares(view) == {"solo": 1.0}


@pytest.mark.parametrize("kind", ["recent", "staleness", "intervention"])
def test_inner_kinds_that_cannot_be_split_are_refused_by_name(kind: str) -> None:
    with pytest.raises(ConfigError, match=f"balance_tasks: the '{kind}' sampler cannot be split among tasks"):
        SamplerConfig(kind=kind, balance_tasks=True)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=f"^buffer.yaml: balance_tasks: the '{kind}' sampler"):
        from_mapping(SamplerConfig, {"kind": kind, "balance_tasks": True}, where="buffer.yaml")
    with pytest.raises(ConfigError, match=f"the '{kind}' sampler cannot be split"):
        TaskBalancedSampler(kind)
    state = TaskBalancedSampler().state_dict()
    with pytest.raises(ConfigError, match=f"the '{kind}' sampler cannot be split"):
        TaskBalancedSampler().load_state_dict({**state, "params": {"inner": kind}})


def test_make_sampler_balances_only_when_asked_and_auto_is_demo_ratio_within_tasks() -> None:
    assert isinstance(make_sampler(SamplerConfig(kind="demo_ratio")), DemoRatioSampler)
    config = SamplerConfig(balance_tasks=True, task_floor=0.1, task_window=7, seed=4)
    sampler = make_sampler(config)
    assert isinstance(sampler, TaskBalancedSampler)
    assert sampler.state_dict()["params"] == {"inner": "demo_ratio", "demo_ratio": 0.5, "floor": 0.1, "window": 7}
    assert (
        from_mapping(SamplerConfig, {"balance_tasks": True, "task_floor": 0.1, "task_window": 7, "seed": 4}, where="")
        == config
    )
    with pytest.raises(ConfigError, match="task_window: 0 is below the minimum 1"):
        from_mapping(SamplerConfig, {"task_window": 0}, where="")


@pytest.mark.parametrize(
    ("saved", "fresh"),
    [
        ({"kind": "demo_ratio", "demo_ratio": 0.25, "task_floor": 0.1, "task_window": 2}, {"kind": "uniform"}),
        ({"kind": "uniform", "task_floor": 0.6, "task_window": 1}, {"kind": "demo_ratio", "demo_ratio": 0.75}),
    ],
)
def test_state_dict_resumes_the_same_draws(saved: dict[str, object], fresh: dict[str, object]) -> None:
    view = _view(MIXED)
    a = make_sampler(SamplerConfig(balance_tasks=True, seed=7, **saved))  # type: ignore[arg-type]
    a.sample(view, 32)
    state = a.state_dict()
    expected = a.sample(view, 40)
    b = make_sampler(SamplerConfig(balance_tasks=True, seed=99, **fresh))  # type: ignore[arg-type]
    b.sample(view, 8)  # its subsets built with the other inner rule: rebuilt on load
    b.load_state_dict(state)
    assert np.array_equal(b.sample(view, 40), expected)
    assert b.state_dict() == a.state_dict()


def test_subsets_kept_incrementally_equal_subsets_built_at_once() -> None:
    """Rows and episode outcomes arriving batch by batch give the shares and draws of a sampler that saw them all
    at once (a resumed one); a smaller storage (a fresh open) starts over."""
    cols = Columns(capacity=4)
    grown = TaskBalancedSampler(window=3, seed=5)
    rows = _rows(MIXED)
    for start in range(0, len(rows), 7):
        cols.extend(rows[start : start + 7])
        grown.sample(cols.view(), 5)
    full = cols.view()
    at_once = TaskBalancedSampler(window=3)
    assert at_once.shares(full) == grown.shares(full)
    at_once.load_state_dict(grown.state_dict())
    assert np.array_equal(at_once.sample(full, 64), grown.sample(full, 64))
    smaller = _view([Ep("z", success=True), Ep("y")])
    assert grown.shares(smaller) == pytest.approx({"z": 0.2 / 1.4, "y": 1.2 / 1.4})
    assert set(smaller.task[grown.sample(smaller, 100)].tolist()) == {0, 1}


def test_an_empty_buffer_is_not_ready_and_has_no_shares() -> None:
    sampler = TaskBalancedSampler()
    empty = Columns().view()
    assert sampler.shares(empty) == {} and sampler.batch_counts(empty, 8) == {} and sampler.candidates(empty) == 0
    with pytest.raises(NotReadyError, match="task_balanced sampler: no transitions to sample from yet"):
        sampler.sample(empty, 4)


def test_a_reopened_buffer_resumes_the_same_task_balanced_draws(tmp_path: Path) -> None:
    """Task codes and episode outcomes rebuilt from the index on open (the bulk load) give the running buffer's
    shares, and a resumed sampler its next draws."""
    config = BufferConfig(
        storage=StorageConfig(segment_max_episodes=2),
        sampler=SamplerConfig(balance_tasks=True, seed=3),
        rate_limiter=RateLimiterConfig(min_size=1),
        batch_size=6,
        prefetch=0,
    )
    plan = [("pick", True), ("place", False), ("pick", True), ("stack", False), ("place", True), ("pick", False)]
    with ReplayBuffer.open(tmp_path, config) as buf:
        for e, (task, success) in enumerate(plan):
            for t in _tasked(episode("a", e, steps=3, demo=e == 1, success=success, images=False), task):
                buf.add(t)
        assert buf.sample().state.shape == (6, 7)
        sampler, view = buf.sampler, buf.storage.view()
        assert isinstance(sampler, TaskBalancedSampler)
        shares, state = sampler.shares(view), buf.state_dict()
        expected = sampler.sample(view, 32)
    # pick: 2 of 3 online episodes succeed; place: its online one did (the failed one is a demo); stack: none did
    total = (1 - 2 / 3 + 0.2) + 0.2 + 1.2
    assert shares == pytest.approx({"pick": (1 / 3 + 0.2) / total, "place": 0.2 / total, "stack": 1.2 / total})
    with ReplayBuffer.open(tmp_path, config) as again:
        again.resume(state)
        assert isinstance(again.sampler, TaskBalancedSampler)
        assert again.sampler.shares(again.storage.view()) == shares
        assert np.array_equal(again.sampler.sample(again.storage.view(), 32), expected)
