"""A learning session with policy_kind vla: HG-DAgger trains the test-sized π0 on the action chunks of stored episodes
with interventions (on the CPU), and the weights it publishes, loaded into a rollout's policy built from the same
settings, act as the learner's policy does."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="the π0 model needs the `vla` extra (scripts/install --ros has it)")

from test.buffer.factories import ACTION_DIM, STATE_DIM, episode
from test.conftest import wait_until
from user.algorithms.base import to_torch
from user.algorithms.bc import BCConfig
from user.algorithms.hg_dagger import HGDaggerConfig
from user.buffer.config import BufferConfig
from user.config.strict import ConfigError
from user.interfaces.domain import Transition
from user.learner.config import LearningConfig, PacingConfig
from user.learner.session import LearningSession
from user.learner.session_config import SessionConfig
from user.policies import ObservationConfig, PolicyInput
from user.policies.pi0.kind import VLAKindConfig
from user.policies.vla import VLAPolicy

pytestmark = pytest.mark.timeout(180)

INSTRUCTION = "insert the peg into the hole"
H = 4  # the test size's chunk
STEPS = 8


def _config(run: Path) -> SessionConfig:
    pixels = ObservationConfig(cameras=("front",), image_size=32, image_mean=(0.5,) * 3, image_std=(0.5,) * 3)
    vla = VLAKindConfig(
        size="test", seed=1, instruction=INSTRUCTION, state_dim=STATE_DIM, action_dim=ACTION_DIM, observation=pixels
    )
    learning = LearningConfig(
        policy_kind="vla",
        vla=vla,
        algorithm="hg_dagger",
        hg_dagger=HGDaggerConfig(bc=BCConfig(lr=1e-3, batch_size=8)),
        exclude_state_prefixes=(),
    )
    return SessionConfig(
        run_dir=str(run),
        learning=learning,
        pacing=PacingConfig(mode="sync", min_transitions=STEPS + 1, updates_per_step=1.0),
        buffer=BufferConfig(prefetch=0, chunk_horizon=H),
        checkpoint_period_s=0.0,
    )


def _episode(e: int) -> list[Transition]:
    """A smooth path of actions in [-1, 1]; the human in control from step 2 to 5."""
    out = []
    for t in episode("r", e, STEPS, images=True):
        data = np.sin(0.4 * t.step + e + np.arange(ACTION_DIM, dtype=np.float32)).astype(np.float32) * 0.8
        out.append(replace(t, action=replace(t.action, data=data, intervened=2 <= t.step <= 5)))
    return out


class Sink:
    """Counts publications; versions go up by one like the real publisher's."""

    def __init__(self) -> None:
        self.version = 0

    def after_update(self) -> int | None:
        return None

    def publish_now(self) -> int:
        self.version += 1
        return self.version


def _chunk_loss(policy: VLAPolicy, session: LearningSession) -> float:
    """The chunk loss of one batch of the session's buffer, with the same draws each call."""
    batch = to_torch(session.buffer.sample(), policy)
    assert batch.action_chunk is not None and batch.chunk_mask is not None and bool(batch.intervened.any())
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(0)
        return float(policy.chunk_loss(batch.obs, batch.action_chunk, batch.chunk_mask)[0])


def test_hg_dagger_trains_a_vla_on_chunks_and_its_weights_act_the_same_on_a_rollout(tmp_path: Path) -> None:
    config = _config(tmp_path)
    session = LearningSession(config)
    trained: list[int] = []  # episodes trained on (sync mode: a phase after each stored episode)
    session.on_trained = lambda robot, episode, version: trained.append(episode)
    try:
        assert isinstance(session.policy, VLAPolicy) and session.policy.learns_chunks
        session.start(Sink())
        for e in range(3):
            for t in _episode(e):
                session.add(t)
        assert wait_until(lambda: len(trained) == 3, 120.0)
        assert session.trainer.counters.update_calls == 2 * STEPS  # episode 0 is below min_transitions
        report = session.report().values
        assert math.isfinite(report["loss/bc"]) and report["rows"] > 0
        fresh = config.learning.build_policy()  # the weights before training (drawn from the same seed)
        assert isinstance(fresh, VLAPolicy) and isinstance(session.policy, VLAPolicy)
        before, after = _chunk_loss(fresh, session), _chunk_loss(session.policy, session)
        assert math.isfinite(after) and after < before, (before, after)
    finally:
        session.close()

    rollout = config.learning.build_policy()  # a robot site builds the policy from the same settings
    rng = np.random.default_rng(0)
    obs = PolicyInput(
        rng.normal(size=STATE_DIM).astype(np.float32), {"front": rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)}
    )
    learner = session.policy
    learner.reset()
    acted = learner.act(obs, deterministic=True)
    assert not np.array_equal(rollout.act(obs, deterministic=True), acted)  # training changed the weights
    rollout.load_weights(learner.get_weights())
    rollout.reset()
    assert np.array_equal(rollout.act(obs, deterministic=True), acted)
    assert rollout.version == learner.version


def test_a_session_whose_buffer_hands_no_chunks_of_the_models_size_is_refused_at_its_start(tmp_path: Path) -> None:
    config = _config(tmp_path)
    wrong = replace(config, buffer=replace(config.buffer, chunk_horizon=config.buffer.chunk_horizon + 1))
    with pytest.raises(ConfigError, match=r"buffer.chunk_horizon \d+ differs from the VLA model's chunk size"):
        LearningSession(wrong)
