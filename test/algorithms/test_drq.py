"""DrQ: the random shift really moves pixels, and SAC feeds shifted images to its networks only when asked."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

from test.algorithms.factories import fixed_batch
from user.algorithms.augment import augment_obs, random_shift
from user.algorithms.base import TorchBatch, to_torch
from user.algorithms.sac import SAC, SACConfig
from user.policies.base import TensorObs
from user.policies.mlp import MLPPolicy, MLPPolicyConfig


def _images(b: int = 16, h: int = 10, w: int = 12, seed: int = 0) -> torch.Tensor:
    return torch.rand(b, 3, h, w, generator=torch.Generator().manual_seed(seed))


def _shift_of(original: torch.Tensor, shifted: torch.Tensor, pad: int) -> tuple[int, int] | None:
    """The (dy, dx) window of the replicate-padded `original` that equals `shifted`, if any."""
    padded = F.pad(original[None], (pad, pad, pad, pad), mode="replicate")[0]
    h, w = original.shape[-2:]
    for dy in range(2 * pad + 1):
        for dx in range(2 * pad + 1):
            if torch.equal(padded[:, dy : dy + h, dx : dx + w], shifted):
                return dy, dx
    return None


def test_random_shift_is_a_padded_translation_that_changes_images() -> None:
    images, pad = _images(), 3
    out = random_shift(images, pad, torch.Generator().manual_seed(1))
    assert out.shape == images.shape and out.dtype == images.dtype
    assert not torch.equal(out, images)
    shifts = [_shift_of(images[k], out[k], pad) for k in range(len(images))]
    assert all(s is not None for s in shifts), shifts  # every image is a window of its padded self
    assert len(set(shifts)) > 1  # offsets are drawn per image
    assert any(s != (pad, pad) for s in shifts)  # (pad, pad) would be no shift at all


def test_random_shift_pads_by_replicating_the_border() -> None:
    images = _images(b=64, seed=2)
    out = random_shift(images, 2, torch.Generator().manual_seed(3))
    for k in range(len(images)):
        shift = _shift_of(images[k], out[k], 2)
        assert shift is not None
        if shift[0] == 0:  # moved down by the full pad: rows 0 and 1 repeat row 2 (the original first row)
            assert torch.equal(out[k, :, 0], out[k, :, 2]) and torch.equal(out[k, :, 1], out[k, :, 2])
            assert not torch.equal(out[k, :, 3], out[k, :, 2])
            return
    raise AssertionError("no image was shifted by the full pad in 64 draws")


def test_random_shift_is_reproducible_and_zero_pad_is_identity() -> None:
    images = _images()
    a = random_shift(images, 4, torch.Generator().manual_seed(5))
    b = random_shift(images, 4, torch.Generator().manual_seed(5))
    assert torch.equal(a, b)
    assert not torch.equal(a, random_shift(images, 4, torch.Generator().manual_seed(6)))
    assert torch.equal(random_shift(images, 0), images)


def test_augment_obs_shifts_every_camera_and_keeps_the_state() -> None:
    obs = TensorObs(torch.randn(16, 3), {"wrist": _images(seed=1), "front": _images(seed=2)})
    out = augment_obs(obs, 2, torch.Generator().manual_seed(0))
    assert out.state is obs.state
    assert set(out.images) == {"wrist", "front"}
    assert all(not torch.equal(out.images[c], obs.images[c]) for c in obs.images)


# ---- SAC applies it (or not) ------------------------------------------------------------------------


def _sac(augmentation: str) -> SAC:
    policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(16,), seed=1))
    cfg = SACConfig(critic_hidden=(16,), augmentation=augmentation, drq_pad=2)
    return SAC(policy, cfg, seed=2)


def _image_batch(sac: SAC) -> TorchBatch:
    """A state batch from the factory with images attached as the networks would receive them."""
    base = to_torch(fixed_batch(16), sac.policy)
    return TorchBatch(
        base.obs.with_images({"wrist": _images(seed=3)}),
        base.action,
        base.reward,
        base.next_obs.with_images({"wrist": _images(seed=4)}),
        base.terminated,
        base.is_demo,
        base.intervened,
    )


def _spy(module: nn.Module) -> list[torch.Tensor]:
    """Records the 'wrist' images of every TensorObs passed into `module`."""
    seen: list[torch.Tensor] = []

    def hook(_: nn.Module, args: tuple[Any, ...]) -> None:
        seen.append(args[0].images["wrist"].clone())

    module.register_forward_pre_hook(hook)
    return seen


def _seen_by_networks(augmentation: str) -> tuple[TorchBatch, list[torch.Tensor], list[torch.Tensor]]:
    sac = _sac(augmentation)
    batch = _image_batch(sac)
    actor_encoder = sac.policy.actor.encoder
    assert isinstance(actor_encoder, nn.Module)
    critic_seen, actor_seen = _spy(sac.critic.encoder), _spy(actor_encoder)
    sac.update_tensors(batch)
    return batch, critic_seen, actor_seen


def test_sac_with_drq_feeds_shifted_images_to_critic_and_actor() -> None:
    batch, critic_seen, actor_seen = _seen_by_networks("drq")
    obs, nxt = batch.obs.images["wrist"], batch.next_obs.images["wrist"]
    assert critic_seen and actor_seen
    for x in [*critic_seen, *actor_seen]:
        assert not torch.equal(x, obs) and not torch.equal(x, nxt)  # never the raw images
        matches_obs = all(_shift_of(obs[k], x[k], 2) is not None for k in range(len(x)))
        matches_next = all(_shift_of(nxt[k], x[k], 2) is not None for k in range(len(x)))
        assert matches_obs or matches_next  # but shifted copies of them


def test_sac_without_augmentation_feeds_raw_images() -> None:
    batch, critic_seen, actor_seen = _seen_by_networks("none")
    obs, nxt = batch.obs.images["wrist"], batch.next_obs.images["wrist"]
    assert critic_seen and actor_seen
    for x in [*critic_seen, *actor_seen]:
        assert torch.equal(x, obs) or torch.equal(x, nxt)
