"""A session that sends chunks (`send: chunks`, issue 35 item 3), without a bus: the first observation of an episode
gets a whole chunk; in mode rtc the next is due `execute_horizon - delay_steps` steps later and continues the
actions the robot still plays (its delayed actions much closer to them than a chunk sampled afresh); in mode replace
the next is due once the chunk is used up; an observation seen again gets nothing new; a policy that makes no chunks,
and settings that do not fit the chunk, are refused at the start."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from user.acting.chunks import ChunkingConfig
from user.acting.config import ActingConfig
from user.acting.session import ActingSession
from user.config.strict import ConfigError
from user.interfaces.chunks import ActionChunk
from user.interfaces.domain import Action, EncodedImage, Observation
from user.interfaces.images import encode_jpeg
from user.learner.config import LearningConfig
from user.nodes.rollout import RolloutParams
from user.policies.mlp import MLPPolicyConfig
from user.policies.pi0.kind import VLAKindConfig
from user.policies.preprocess import ObservationConfig
from user.sync.in_use import WeightsInUse

pytest.importorskip("transformers", reason="the π0 model needs the `vla` extra (scripts/install --ros has it)")
pytestmark = pytest.mark.timeout(120)

H, STATE, ACTIONS = 8, 5, 3
PIXELS = ObservationConfig(cameras=("front",), image_size=32, image_mean=(0.5,) * 3, image_std=(0.5,) * 3)
VLA = VLAKindConfig(size="test", seed=2, chunk_size=H, state_dim=STATE, action_dim=ACTIONS, observation=PIXELS)
LEARNING = LearningConfig(policy_kind="vla", vla=VLA, algorithm="hg_dagger", exclude_state_prefixes=())
FRAME = encode_jpeg(np.random.default_rng(0).integers(0, 255, (32, 32, 3), dtype=np.uint8))


class Rig:
    def __init__(self, chunking: ChunkingConfig) -> None:
        config = ActingConfig(learning=LEARNING, wait_for_weights=False, send="chunks", chunking=chunking)
        self.chunks: list[ActionChunk] = []
        self.actions: list[Action] = []
        self.session = ActingSession(
            config, WeightsInUse(LEARNING.build_policy()), self.actions.append, send_chunk=self.chunks.append
        )

    def at(self, step: int, episode: int = 0) -> ActionChunk | None:
        obs = Observation(
            "arm", "peg_insertion", episode, step, np.full(STATE, 0.1, np.float32), 1_000 + step,
            images=(EncodedImage("front", "jpeg", FRAME, 1),),
        )  # fmt: skip
        before = len(self.chunks)
        self.session.observe("arm", obs)
        self.session.act_pending(0.0)
        assert not self.actions, "send chunks sent a single action"
        return self.chunks[-1] if len(self.chunks) > before else None


def test_rtc_sends_a_chunk_when_due_that_continues_the_one_playing() -> None:
    rig = Rig(ChunkingConfig(mode="rtc", execute_horizon=4, delay_steps=2))
    first = rig.at(0)
    assert first is not None and (first.episode_id, first.start_step, first.seq) == (0, 0, 1)
    assert first.actions.shape == (H, ACTIONS) and np.all(np.abs(first.actions) <= 1.0)
    assert rig.at(0) is None and rig.at(1) is None  # seen again; not due (4 - 2 = 2 steps in)
    second = rig.at(2)
    assert second is not None and (second.start_step, second.seq) == (2, 2)
    # its two delayed actions continue the first chunk's actions for steps 2 and 3; a fresh chunk's do not
    fresh = Rig(ChunkingConfig(mode="rtc", execute_horizon=4, delay_steps=2)).at(2)
    assert fresh is not None
    guided_gap = np.abs(second.actions[:2] - first.actions[2:4]).max()
    fresh_gap = np.abs(fresh.actions[:2] - first.actions[2:4]).max()
    assert guided_gap < fresh_gap / 3, (guided_gap, fresh_gap)
    third = rig.at(0, episode=1)  # a new episode: a fresh chunk at once
    assert third is not None and (third.episode_id, third.start_step) == (1, 0)


def test_replace_sends_the_next_chunk_once_the_last_is_used_up() -> None:
    rig = Rig(ChunkingConfig(mode="replace"))
    assert rig.at(0) is not None
    assert all(rig.at(step) is None for step in range(1, H))
    second = rig.at(H)
    assert second is not None and second.start_step == H


def test_settings_that_cannot_work_are_refused_at_the_start() -> None:
    with pytest.raises(ConfigError, match="policy_kind vla"):
        ActingConfig(learning=LearningConfig(mlp=MLPPolicyConfig(state_dim=3, action_dim=2)), send="chunks")
    with pytest.raises(ConfigError, match="delay_steps 5 exceeds"):
        ActingConfig(learning=LEARNING, send="chunks", chunking=ChunkingConfig(execute_horizon=4, delay_steps=5))
    with pytest.raises(ConfigError, match="execute_horizon 9 exceeds"):
        ActingConfig(learning=LEARNING, send="chunks", chunking=replace(ChunkingConfig(), execute_horizon=9))
    with pytest.raises(ConfigError, match="random_steps"):
        ActingConfig(learning=LEARNING, send="chunks", random_steps=10)
    with pytest.raises(ConfigError, match="policy_kind vla"):  # the rollout node's settings check as much
        RolloutParams(robots=["arm"], learning=LearningConfig(mlp=MLPPolicyConfig(state_dim=3)), send="chunks")


def test_a_robot_that_got_no_chunk_for_a_while_gets_one_wherever_it_is() -> None:
    """A robot that restarted its episode ids (no state_dir) asks at an episode and step before the last chunk's, and
    one whose chunk was lost holds at its step: after resend_after_s either gets a chunk, never waits for ever."""
    from user.acting.chunks import ChunkPlans

    now = [100.0]
    plans = ChunkPlans(ChunkingConfig(mode="rtc", execute_horizon=4, delay_steps=2, resend_after_s=2.0), lambda: now[0])
    plans.sent("arm", 5, 30, np.zeros((H, ACTIONS), np.float32))
    assert not plans.due("arm", 0, 0) and not plans.due("arm", 5, 30) and not plans.due("arm", 5, 31)
    now[0] += 2.0
    assert plans.due("arm", 0, 0) and plans.due("arm", 5, 30)
    plans.sent("arm", 0, 0, np.zeros((H, ACTIONS), np.float32))
    assert not plans.due("arm", 0, 1) and plans.due("arm", 0, 2)
