"""A rollout's session acts on the camera frames the robot sends when its policy looks at cameras (a CNN policy
here): the action of an observation is the policy's on that observation's decoded pixels, so two observations that
differ only in their images get different actions; an observation without a camera the policy looks at is refused
(the robot holds) and counted, and the others of its batch are still answered."""

from __future__ import annotations

import numpy as np
import pytest

from test.acting.helpers import STATE_DIM, observation
from user.acting.config import ActingConfig
from user.acting.session import ActingSession
from user.interfaces.domain import Action, EncodedImage, Observation
from user.interfaces.images import decode_image, encode_jpeg
from user.learner.config import LearningConfig
from user.policies.base import PolicyInput
from user.policies.cnn import CNNPolicyConfig
from user.policies.preprocess import ObservationConfig
from user.policies.resnet import ImageEncoderConfig
from user.sync.in_use import WeightsInUse

pytestmark = pytest.mark.timeout(60)

TINY = ImageEncoderConfig(channels=(8, 8, 16, 16), stem_channels=8, groups=2, spatial_features=2, bottleneck=8)


def _learning() -> LearningConfig:
    cnn = CNNPolicyConfig(
        state_dim=STATE_DIM,
        action_dim=2,
        observation=ObservationConfig(cameras=("wrist",), image_size=32),
        encoder=TINY,
        hidden=(16,),
    )
    return LearningConfig(policy_kind="cnn", cnn=cnn, exclude_state_prefixes=())


def _seen(robot: str, pixels: np.ndarray | None, step: int = 0) -> Observation:
    obs = observation(robot, step=step)
    if pixels is None:
        return obs
    return Observation(**{**obs.__dict__, "images": (EncodedImage("wrist", "jpeg", encode_jpeg(pixels), 1),)})


def test_the_policy_acts_on_each_observation_s_own_frames() -> None:
    learning = _learning()
    weights = WeightsInUse(learning.build_policy())
    sent: list[Action] = []
    session = ActingSession(
        ActingConfig(learning=learning, wait_for_weights=False, deterministic=True), weights, sent.append
    )
    rng = np.random.default_rng(0)
    dark = rng.integers(0, 60, (48, 48, 3), dtype=np.uint8)
    bright = rng.integers(190, 255, (48, 48, 3), dtype=np.uint8)
    for obs in (_seen("a", dark), _seen("b", bright), _seen("c", None)):
        session.observe(obs.robot_id, obs)
    session.act_pending(0.0)
    actions = {a.robot_id: a.data for a in sent}
    assert sorted(actions) == ["a", "b"], "the observation without the camera was answered"
    assert session.refusals.count("camera") == 1 and session.skipped == 1
    assert not np.allclose(actions["a"], actions["b"], atol=1e-4), "the images made no difference"
    reference = learning.build_policy()
    reference.load_weights(weights.policy.get_weights())
    state = observation("a").state
    for robot, pixels in (("a", dark), ("b", bright)):
        frame = decode_image(encode_jpeg(pixels))  # what the robot's JPEG decodes to
        expected = reference.act(PolicyInput(state, {"wrist": frame}), deterministic=True)
        np.testing.assert_allclose(actions[robot], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a GPU is here: the device is usable")
def test_a_device_the_machine_lacks_is_refused_at_the_start() -> None:
    from user.config.strict import ConfigError

    config = ActingConfig(learning=_learning(), device="cuda:0")
    with pytest.raises(ConfigError, match="device 'cuda:0': this machine has no CUDA GPU"):
        ActingSession(config, WeightsInUse(_learning().build_policy()), lambda action: None)
