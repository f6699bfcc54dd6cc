"""A π0 model behind the `VLAModel` interface, so `VLAPolicy` can drive it.

`Pi0VLA.predict` takes the policy's preprocessed images (camera -> (B, 3, h, w); give the cameras an
`ObservationConfig` with image_mean = image_std = 0.5 so pixels arrive in [-1, 1] as SigLIP expects), resizes
them to the vision tower's side, pads the robot's state with zeros to the model's `state_dim`, tokenizes the
instruction, samples a chunk and returns its first `action_dim` dimensions clipped to [-1, 1].
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias

from user.policies.pi0 import checkpoint
from user.policies.pi0.errors import Pi0Error
from user.policies.pi0.model import Pi0Model, Pi0Observation
from user.policies.pi0.rtc import RtcConfig, sample_continuing
from user.policies.pi0.tokenizer import check_fits, tokenize
from user.policies.vla import Continuing, VLAModel

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast


class Pi0VLA(VLAModel):
    """π0 as a `VLAModel`: (B, H, A) chunks in [-1, 1] for a robot with `state_dim` and `action_dim`."""

    def __init__(
        self,
        model: Pi0Model,
        tokenizer: PreTrainedTokenizerFast,
        *,
        state_dim: int | None = None,
        action_dim: int | None = None,
    ) -> None:
        super().__init__()
        cfg = model.config
        self.state_dim = cfg.state_dim if state_dim is None else state_dim
        self.action_dim = cfg.action_dim if action_dim is None else action_dim
        if not 0 < self.state_dim <= cfg.state_dim or not 0 < self.action_dim <= cfg.action_dim:
            raise Pi0Error(
                f"a robot with state {self.state_dim} and action {self.action_dim} does not fit the model's "
                f"state_dim {cfg.state_dim} and action_dim {cfg.action_dim}"
            )
        check_fits(tokenizer, cfg.vocab_size)
        self.chunk_size = cfg.chunk_size
        self.model = model
        self.tokenizer = tokenizer

    def observation(self, images: Mapping[str, torch.Tensor], state: torch.Tensor, instruction: str) -> Pi0Observation:
        """The model's batch for the policy's images, (B, state_dim) state and one instruction."""
        cfg = self.model.config
        if state.dim() != 2 or state.shape[1] != self.state_dim:
            raise Pi0Error(f"state must be (B, {self.state_dim}), got {tuple(state.shape)}")
        missing = [c for c in cfg.cameras if c not in images]
        if missing:
            raise Pi0Error(f"camera(s) {missing} missing: the model looks at {list(cfg.cameras)}, got {sorted(images)}")
        side = cfg.vision.image_size
        pixels = tuple(_resized(images[c], side) for c in cfg.cameras)
        padded = F.pad(state.float(), (0, cfg.state_dim - self.state_dim))
        tokens = tokenize(self.tokenizer, [instruction] * len(state), cfg.max_tokens, state.device)
        return Pi0Observation(pixels, padded, tokens.ids, tokens.mask)

    def predict(self, images: Mapping[str, torch.Tensor], state: torch.Tensor, instruction: str) -> torch.Tensor:
        chunk = self.model.sample_chunk(self.observation(images, state, instruction))
        return chunk[..., : self.action_dim].clamp(-1.0, 1.0)

    def predict_continuing(
        self, images: Mapping[str, torch.Tensor], state: torch.Tensor, instruction: str, continuing: Continuing
    ) -> torch.Tensor:
        """A chunk continuing the previous one's remaining actions (real-time chunking, `rtc.sample_continuing`)."""
        cfg = self.model.config
        previous = F.pad(continuing.previous.float(), (0, cfg.action_dim - self.action_dim))
        config = RtcConfig(
            execute_horizon=continuing.execute_horizon,
            max_guidance=continuing.max_guidance,
            schedule=continuing.schedule,  # type: ignore[arg-type]  # checked by RtcConfig
        )
        chunk = sample_continuing(
            self.model, self.observation(images, state, instruction), previous, continuing.delay, config
        )
        return chunk[..., : self.action_dim].clamp(-1.0, 1.0)

    def chunk_loss(
        self,
        images: Mapping[str, torch.Tensor],
        state: torch.Tensor,
        instruction: str,
        actions: torch.Tensor,
        mask: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Flow-matching loss of the robot's (B, H, action_dim) chunks (zero-padded to the model's action_dim)."""
        if actions.dim() != 3 or actions.shape[2] != self.action_dim:
            raise Pi0Error(f"actions must be (B, H, {self.action_dim}), got {tuple(actions.shape)}")
        padded = F.pad(actions.float(), (0, self.model.config.action_dim - self.action_dim))
        return self.model.chunk_loss(self.observation(images, state, instruction), padded, mask)

    def save(self, directory: str | Path) -> Path:
        """Write the checkpoint directory (model.safetensors, config.json, tokenizer files)."""
        return checkpoint.save(directory, self.model, self.tokenizer)

    @classmethod
    def load(
        cls,
        directory: str | Path,
        *,
        device: str | torch.device = "cpu",
        state_dim: int | None = None,
        action_dim: int | None = None,
    ) -> Pi0VLA:
        """A checkpoint directory's model behind the interface (local files only)."""
        model, tokenizer = checkpoint.load(directory, device)
        return cls(model, tokenizer, state_dim=state_dim, action_dim=action_dim)


def _resized(image: torch.Tensor, side: int) -> torch.Tensor:
    if image.dim() != 4 or image.shape[1] != 3:
        raise Pi0Error(f"images must be (B, 3, h, w), got {tuple(image.shape)}")
    if image.shape[-2:] == (side, side):
        return image.float()
    return F.interpolate(image.float(), size=(side, side), mode="bilinear", align_corners=False)
