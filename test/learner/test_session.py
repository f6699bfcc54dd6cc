"""The learner's ROS-free core without any bus: sync-mode training phases, counters, publication through a sink,
halting on divergence, checkpoints and resume."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from test.buffer import factories as f
from test.conftest import wait_until
from test.sync.loopback import Loopback
from user.algorithms.base import TrainingStats
from user.algorithms.rlpd import RLPDConfig
from user.algorithms.sac import SACConfig
from user.buffer.batch import TransitionBatch
from user.buffer.config import BufferConfig
from user.learner.config import LearningConfig, PacingConfig
from user.learner.session import LearningSession, TrainingHaltedError
from user.learner.session_config import SessionConfig
from user.policies.mlp import MLPPolicyConfig
from user.runtime.node import Node
from user.sync.publisher import WeightPublisher

pytestmark = pytest.mark.timeout(60)

BATCH = 16


def _learning(algorithm: str = "sac") -> LearningConfig:
    return LearningConfig(
        mlp=MLPPolicyConfig(state_dim=f.STATE_DIM, action_dim=f.ACTION_DIM, hidden=(16, 16)),
        algorithm=algorithm,  # type: ignore[arg-type]
        sac=SACConfig(batch_size=BATCH, num_critics=2, critic_hidden=(16, 16)),
        rlpd=RLPDConfig(batch_size=BATCH, utd_ratio=4, demo_ratio=0.25, critic_hidden=(16, 16)),
        exclude_state_prefixes=(),
    )


class Sink:
    """Counts what the session asks to publish; versions go up by one like the real publisher's."""

    def __init__(self, every: int | None = None) -> None:
        self.version = 0
        self.every = every
        self.updates = 0
        self.published = threading.Event()

    def after_update(self) -> int | None:
        self.updates += 1
        return self.publish_now() if self.every and self.updates % self.every == 0 else None

    def publish_now(self) -> int:
        self.version += 1
        self.published.set()
        return self.version


def _session(run: Path, mode: str = "sync", **pacing: object) -> LearningSession:
    return LearningSession(
        SessionConfig(
            run_dir=str(run),
            learning=_learning(),
            pacing=PacingConfig(mode=mode, min_transitions=10, **pacing),  # type: ignore[arg-type]
            buffer=BufferConfig(prefetch=0),
            checkpoint_period_s=0.0,
        )
    )


def test_a_sync_session_trains_after_each_episode_and_publishes(tmp_path: Path) -> None:
    session = _session(tmp_path, "sync", updates_per_step=0.5)
    sink = Sink()
    trained: list[tuple[str, int, int]] = []  # the second receipts: (robot, episode, first version trained on it)
    session.on_trained = lambda robot, episode, version: trained.append((robot, episode, version))
    try:
        assert session.start(sink) == 1
        for t in f.episode("r", 0, steps=8, images=False):  # below min_transitions: only releases the robots
            session.add(t)
        assert wait_until(lambda: trained == [("r", 0, 2)], 10.0) and session.trainer.counters.update_calls == 0
        for t in f.episode("r", 1, steps=12, images=False, success=True):
            session.add(t)
        assert wait_until(lambda: len(trained) == 2, 10.0)
        assert trained[1] == ("r", 1, 3) and sink.version == 3
        session.add_episode(f.episode("q", 5, steps=4, images=False))  # a re-sent episode is trained on too
        assert wait_until(lambda: len(trained) == 3, 10.0) and trained[2] == ("q", 5, 4)
        assert session.trainer.counters.update_calls == 8  # + 4 steps x 0.5
        c = session.counters
        assert (c.episodes, c.successes, c.env_steps, c.policy_version) == (3, 1, 24, 4)
        assert session.buffer.sampler.policy_version == 4  # the sampler knows how stale each row is
        report = session.report()
        assert report.buffered == 24 and report.values["episodes"] == 3.0 and report.values["update_calls"] == 8.0
    finally:
        session.close()
    assert (tmp_path / "checkpoints" / "latest.pt").exists() and (tmp_path / "progress.csv").exists()


def test_a_resent_episode_is_stored_once(tmp_path: Path) -> None:
    session = _session(tmp_path)
    try:
        session.start(Sink())
        steps = f.episode("r", 4, steps=5, images=False)
        assert session.add_episode(steps) is True and session.add_episode(steps) is False
        assert (session.counters.episodes, session.counters.env_steps, len(session.buffer)) == (1, 5, 5)
    finally:
        session.close()


def test_a_resumed_session_continues_counts_sampler_and_limiter(tmp_path: Path) -> None:
    first = _session(tmp_path, "async", updates_per_step=0.25)
    sink = Sink(every=2)
    first.start(sink)
    for e in range(3):
        for t in f.episode("r", e, steps=10, images=False):
            first.add(t)
    assert wait_until(lambda: first.trainer.counters.update_calls >= 4, 20.0)
    first.close()
    calls, samples = first.trainer.counters.update_calls, first.buffer.rate_limiter.samples
    again = _session(tmp_path, "async", updates_per_step=0.5)  # a changed ratio applies from now on
    try:
        assert again.resumed and again.trainer.counters.update_calls == calls
        assert again.counters.episodes == 3 and again.counters.env_steps == 30
        limiter = again.buffer.rate_limiter
        assert (limiter.inserts, limiter.samples) == (30, samples)
        assert limiter.samples_per_insert == pytest.approx(0.5 * BATCH)
        assert again.buffer.sampler.state_dict() == first.buffer.sampler.state_dict()
    finally:
        again.close()


# ---- divergence (issue 13, finding 1: a NaN loss poisoned the published policy, and no node said so) ---------


def _diverging(session: LearningSession, *, after: int, poison: bool = False) -> None:
    """From update call `after` on, the algorithm reports a loss that is not finite (or, with `poison`, finite
    statistics over weights that are not)."""
    update = session.algorithm.update
    calls = [0]

    def diverging(batch: TransitionBatch) -> TrainingStats:
        stats = update(batch)
        calls[0] += 1
        if calls[0] < after:
            return stats
        if poison:
            with torch.no_grad():
                next(session.policy.actor.parameters()).view(-1)[0] = float("nan")
            return stats
        return replace(stats, losses={**stats.losses, "critic": float("nan")})

    session.algorithm.update = diverging  # type: ignore[method-assign]


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_loss_that_is_not_finite_halts_publication_and_checkpoints_once_and_loudly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    session = _session(tmp_path, "sync", updates_per_step=0.5)
    sink = Sink()
    _diverging(session, after=3)
    try:
        assert session.start(sink) == 1
        for t in f.episode("r", 0, steps=12, images=False):
            session.add(t)
        assert wait_until(lambda: session.halted is not None, 10.0)
        assert session.halted == "training diverged at update call 3: loss/critic = nan"
        for t in f.episode("r", 1, steps=12, images=False):  # more data: still nothing published
            session.add(t)
        assert wait_until(lambda: session.trainer.counters.update_calls >= 3 and not session.phases.waiting(), 10.0)
        assert sink.version == 1 and session.counters.policy_version == 1
        assert session.report().values["publishing_halted"] == 1.0
        with pytest.raises(TrainingHaltedError, match="no checkpoint written: training diverged at update call 3"):
            session.save_checkpoint()
    finally:
        session.close()
    assert not (tmp_path / "checkpoints" / "latest.pt").exists()  # no checkpoint of the poisoned policy
    (alarm,) = [m for m in _errors(caplog) if "weights are no longer published" in m]
    assert alarm.startswith("training diverged at update call 3: loss/critic = nan; weights are no longer published")
    assert "robots keep acting with version 1" in alarm


def test_weights_the_publisher_refuses_halt_publication_and_keep_the_last_good_version(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    session = _session(tmp_path, "async", updates_per_step=1.0)
    net = Loopback()
    publisher = WeightPublisher(Node(net.bus("learner")), session.policy, policy_id="p", topic="/w", every_k_updates=1)
    _diverging(session, after=2, poison=True)
    try:
        assert session.start(publisher) == 1
        for t in f.episode("r", 0, steps=12, images=False):
            session.add(t)
        assert wait_until(lambda: session.halted is not None, 20.0)
        assert publisher.version == session.counters.policy_version == 2  # the update before the poisoned one
        name = session.policy.weight_spec.names[0]
        assert session.halted == f"weights of policy 'p' version 3 not published: weights.{name} are not finite " + (
            f"(1 of {session.policy.weight_spec.numel} values)"
        )
    finally:
        session.close()
    assert len([m for m in _errors(caplog) if "weights are no longer published" in m]) == 1


def test_a_checkpoint_the_full_disk_refuses_stops_checkpoints_not_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by the soak (issue 13): a periodic checkpoint on a full disk raised in the training thread, training
    stopped and the learner was restarted. Now training goes on, the failure is logged, the next period tries
    again, and no half-written file is left; a full disk at the stop costs the final checkpoint only."""
    import torch as torch_module

    session = LearningSession(
        SessionConfig(
            run_dir=str(tmp_path),
            learning=_learning(),
            buffer=BufferConfig(prefetch=0),
            pacing=PacingConfig(mode="async", updates_per_step=1.0, min_transitions=10),
            checkpoint_period_s=0.01,
        )
    )
    real_save = torch_module.save

    def no_space(*args: object, **kwargs: object) -> None:
        raise RuntimeError("[enforce fail at inline_container.cc] PytorchStreamWriter failed writing file data/0")

    monkeypatch.setattr(torch_module, "save", no_space)
    try:
        with caplog.at_level(logging.ERROR, logger="user.learner.session"):
            session.start(Sink())
            for e in range(4):
                for t in f.episode("r", e, steps=10, images=False):
                    session.add(t)
            assert wait_until(lambda: session.trainer.counters.update_calls >= 20, 20.0), session.trainer.failed
        assert session.trainer.failed is None  # training went on
        assert any("no checkpoint written to" in r.getMessage() and "training goes on" in r.getMessage()
                   for r in caplog.records)  # fmt: skip
        # nothing half-written left (waited for: the next try may be writing its file right now)
        assert wait_until(lambda: not list((tmp_path / "checkpoints").glob(".*.tmp")), 5.0)
        monkeypatch.setattr(torch_module, "save", real_save)  # space again
        assert wait_until((tmp_path / "checkpoints" / "latest.pt").exists, 20.0)
    finally:
        session.close()
