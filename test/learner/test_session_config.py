"""The buffer a learning session opens for each algorithm and mode (`learner_buffer_config`): the algorithm's own
sampler by default, the rate limiter holding the update-to-data ratio in async mode and off in sync mode."""

from __future__ import annotations

from dataclasses import replace

import pytest

from test.learner.test_session import BATCH, _learning
from user.algorithms.hg_dagger import HGDaggerConfig
from user.buffer.config import BufferConfig, SamplerConfig
from user.config.strict import ConfigError
from user.learner.config import PacingConfig
from user.learner.session_config import learner_buffer_config


@pytest.mark.parametrize(
    ("algorithm", "kind", "demo_ratio"),
    [("sac", "auto", 0.5), ("rlpd", "demo_ratio", 0.25), ("hg_dagger", "intervention", 0.5)],
)
def test_each_algorithm_gets_its_own_sampler_by_default(algorithm: str, kind: str, demo_ratio: float) -> None:
    learning = replace(_learning(algorithm), hg_dagger=HGDaggerConfig())
    config = learner_buffer_config(learning, PacingConfig(), BufferConfig())
    assert (config.sampler.kind, config.sampler.demo_ratio) == (kind, demo_ratio)  # sac: auto follows the demos
    for chosen in (SamplerConfig(kind="recent", window=7), SamplerConfig(kind="uniform")):
        assert learner_buffer_config(learning, PacingConfig(), BufferConfig(sampler=chosen)).sampler == chosen


def test_async_limits_samples_per_insert_to_the_ratio_and_sync_sizes_phases_itself() -> None:
    learning = _learning("rlpd")  # 16 rows per call, split into 4 gradient steps: 4 rows per gradient step
    buffer = BufferConfig(prefetch=3)
    live = learner_buffer_config(learning, PacingConfig(mode="async", updates_per_step=2.0, min_transitions=9), buffer)
    assert live.rate_limiter.samples_per_insert == pytest.approx(2.0 * 4)
    assert (live.rate_limiter.min_size, live.batch_size, live.prefetch) == (9, BATCH, 3)
    assert live.rate_limiter.error_buffer == max(buffer.rate_limiter.error_buffer, BATCH)
    phased = learner_buffer_config(learning, PacingConfig(mode="sync", updates_per_step=2.0), buffer)
    assert phased.rate_limiter.samples_per_insert == 0.0 and phased.prefetch == 0


def test_balanced_tasks_keep_the_algorithm_s_rule_within_each_task() -> None:
    """`balance_tasks` and its settings pass through the algorithm's `auto`: RLPD's demo share applies within each
    task, SAC's auto stays (demo_ratio within tasks), HG-DAgger's intervention sampler cannot be split."""
    chosen = BufferConfig(sampler=SamplerConfig(balance_tasks=True, task_floor=0.3, task_window=5))
    rlpd = learner_buffer_config(_learning("rlpd"), PacingConfig(), chosen).sampler
    assert rlpd == replace(chosen.sampler, kind="demo_ratio", demo_ratio=0.25)  # floor and window kept
    assert learner_buffer_config(_learning("sac"), PacingConfig(), chosen).sampler == chosen.sampler
    hg_dagger = replace(_learning("hg_dagger"), hg_dagger=HGDaggerConfig())
    with pytest.raises(ConfigError, match="balance_tasks: the 'intervention' sampler cannot be split among tasks"):
        learner_buffer_config(hg_dagger, PacingConfig(), chosen)
