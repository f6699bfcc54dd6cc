"""VLA adapter: an external vision-language-action model (pi0-style, action chunks) behind `Policy.act`.

A `VLAModel` is a torch module mapping camera images, the state and an instruction to an action chunk
(B, H, A) in [-1, 1]. `VLAPolicy` queries it once, queues the first `execute_horizon` actions of the chunk
and replays them one per `act` call, re-querying when the queue runs out (and after `reset`). For training,
a model with its own chunk loss (`VLAModel.chunk_loss`, e.g. π0's flow matching) learns whole chunks of the
buffer's episodes (`chunk_loss`, used by BC and HG-DAgger when the batch carries chunks); otherwise a single
demonstrated action is scored against the first action of the predicted chunk (mse).

A deterministic query (`act(..., deterministic=True)`) seeds the model's random draws (π0's initial noise) with
`DETERMINISTIC_SEED` for that query alone: the same weights and observation give the same chunk on every machine.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

from user.config import setting
from user.policies.base import Encoder, Policy, PolicyError, PolicyInput, TensorObs
from user.policies.cnn import decode_batch
from user.policies.mlp import StateEncoder
from user.policies.preprocess import ObservationConfig, preprocess

DETERMINISTIC_SEED = 0  # the seed of a deterministic query's draws


@contextmanager
def _unchanged() -> Iterator[None]:
    yield


@contextmanager
def seeded_draws(device: torch.device) -> Iterator[None]:
    """Torch's random draws on the host and on `device` seeded with `DETERMINISTIC_SEED` inside, restored after."""
    devices = (
        [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    )
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(DETERMINISTIC_SEED)
        yield


class VLAModel(nn.Module):
    """What an adapted model provides. Subclass it (or wrap the external model in a subclass)."""

    chunk_size: int  # H: actions per predicted chunk
    action_dim: int  # A
    state_dim: int  # S: length of the state vector it expects

    def predict(self, images: Mapping[str, torch.Tensor], state: torch.Tensor, instruction: str) -> torch.Tensor:
        """images camera -> (B, 3, h, w) normalised, state (B, S) -> (B, H, A) actions in [-1, 1]."""
        raise NotImplementedError

    def forward(self, images: Mapping[str, torch.Tensor], state: torch.Tensor, instruction: str) -> torch.Tensor:
        return self.predict(images, state, instruction)

    def chunk_loss(
        self,
        images: Mapping[str, torch.Tensor],
        state: torch.Tensor,
        instruction: str,
        actions: torch.Tensor,
        mask: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The model's own loss of (B, H, A) chunks, steps where the (B, H) mask is False left out; a model that
        has one overrides this (see `has_chunk_loss`)."""
        raise PolicyError(f"{type(self).__name__} has no chunk loss")

    def predict_continuing(
        self,
        images: Mapping[str, torch.Tensor],
        state: torch.Tensor,
        instruction: str,
        continuing: Continuing,
    ) -> torch.Tensor:
        """(B, H, A) chunk made continuous with `continuing.previous` (real-time chunking); a model that cannot
        inpaint says so (it can still be played by plain chunk replacement)."""
        raise PolicyError(f"{type(self).__name__} cannot continue a chunk (no real-time chunking): use mode replace")

    @property
    def has_chunk_loss(self) -> bool:
        return type(self).chunk_loss is not VLAModel.chunk_loss


@dataclass(frozen=True)
class Continuing:
    """What a new chunk continues (real-time chunking): the previous chunk's actions the robot still plays."""

    previous: torch.Tensor  # (B, H', A): index 0 is the step the new chunk starts at
    delay: int  # d: of those, the ones executed before the new chunk arrives
    execute_horizon: int  # s: the new chunk's last s actions get no guidance
    max_guidance: float  # β
    schedule: str  # the soft mask's decay: exp, linear, ones or zeros


@dataclass(frozen=True)
class VLAPolicyConfig:
    """How a VLA model is driven."""

    instruction: str = setting("", "language instruction given to the model with every query")
    execute_horizon: int = setting(0, "actions of each chunk executed before re-querying; 0 = the whole chunk", min=0)
    observation: ObservationConfig = setting(ObservationConfig(), "cameras given to the model and their preprocessing")


class VLAPolicy(Policy):
    """Action-chunking policy around a `VLAModel`."""

    def __init__(self, model: VLAModel, config: VLAPolicyConfig | None = None) -> None:
        self.config = config or VLAPolicyConfig()
        if self.config.execute_horizon > model.chunk_size:
            raise PolicyError(
                f"execute_horizon {self.config.execute_horizon} exceeds the model's chunk of {model.chunk_size}"
            )
        super().__init__(model, model.action_dim)
        self.model = model
        self.queries = 0  # how often the model was run by `act` (for tests and diagnostics)
        self._queue: deque[npt.NDArray[np.float32]] = deque()

    @property
    def horizon(self) -> int:
        return self.config.execute_horizon or self.model.chunk_size

    @property
    def cameras(self) -> tuple[str, ...]:
        return tuple(self.config.observation.cameras)

    def preprocess(self, state: npt.NDArray[np.float32], images: Mapping[str, npt.NDArray[np.uint8]]) -> TensorObs:
        """Pixels, or (B,) arrays of the encoded frames a robot sends (decoded here), for every camera it looks at."""
        pixels = {c: decode_batch(images[c], c) for c in self.config.observation.cameras if c in images}
        return preprocess(state, pixels, self.config.observation, self.device)

    def chunk(self, obs: TensorObs) -> torch.Tensor:
        """(B, H, A) action chunk for a preprocessed batch, shape checked, clipped to [-1, 1]."""
        out = self.model.predict(obs.images, obs.state, self.config.instruction)
        expected = (len(obs), self.model.chunk_size, self.action_dim)
        if tuple(out.shape) != expected:
            raise PolicyError(f"VLA model returned shape {tuple(out.shape)}, expected {expected}")
        return out.clamp(-1.0, 1.0)

    def chunk_continuing(self, obs: TensorObs, continuing: Continuing | None, *, deterministic: bool) -> torch.Tensor:
        """(B, H, A) chunk for a preprocessed batch, continuing `continuing.previous` when given (real-time chunking),
        clipped to [-1, 1]; deterministic: the model's draws seeded."""
        with seeded_draws(self.device) if deterministic else _unchanged():
            if continuing is None:
                return self.chunk(obs)
            out = self.model.predict_continuing(obs.images, obs.state, self.config.instruction, continuing)
        expected = (len(obs), self.model.chunk_size, self.action_dim)
        if tuple(out.shape) != expected:
            raise PolicyError(f"VLA model returned shape {tuple(out.shape)}, expected {expected}")
        return out.clamp(-1.0, 1.0)

    def act_tensor(self, obs: TensorObs, *, deterministic: bool) -> torch.Tensor:
        """First action of each chunk (stateless; `act` is the chunk-replaying entry point)."""
        if deterministic:
            with seeded_draws(self.device):
                return self.chunk(obs)[:, 0]
        return self.chunk(obs)[:, 0]

    def act(self, obs: PolicyInput, *, deterministic: bool = False) -> npt.NDArray[np.float32]:
        """Next queued action; queries the model for a new chunk when the queue is empty (deterministic: with the
        model's draws seeded)."""
        if not self._queue:
            state = np.asarray(obs.state, dtype=np.float32)[None]
            images = {k: np.asarray(v)[None] for k, v in obs.images.items()}
            with torch.no_grad():
                batch = self.preprocess(state, images)
                if deterministic:
                    with seeded_draws(self.device):
                        out = self.chunk(batch)
                else:
                    out = self.chunk(batch)
                chunk = out[0].cpu().numpy().astype(np.float32)
            self._queue.extend(chunk[: self.horizon])
            self.queries += 1
        return self._queue.popleft()

    def reset(self) -> None:
        """Drop the rest of the current chunk (a new episode starts with a fresh query)."""
        self._queue.clear()

    def encoder(self) -> Encoder:
        """Critics of a VLA policy see the state (the model's vision stack stays the model's own)."""
        return StateEncoder(self.model.state_dim)

    @property
    def learns_chunks(self) -> bool:
        """Whether the model learns whole chunks (`chunk_loss`)."""
        return self.model.has_chunk_loss

    def chunk_loss(
        self, obs: TensorObs, actions: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The model's loss of the (B, H, A) chunks in `obs` (H the model's chunk size), masked steps left out."""
        expected = (len(obs), self.model.chunk_size, self.action_dim)
        if tuple(actions.shape) != expected:
            raise PolicyError(
                f"action chunks must be (B, H, A) = {expected}, got {tuple(actions.shape)}; set the buffer's "
                f"chunk_horizon to the model's chunk size {self.model.chunk_size}"
            )
        if tuple(mask.shape) != expected[:2] or mask.dtype != torch.bool:
            raise PolicyError(f"the chunk mask must be bool {expected[:2]}, got {mask.dtype} {tuple(mask.shape)}")
        return self.model.chunk_loss(obs.images, obs.state, self.config.instruction, actions, mask)

    def imitation_loss(self, obs: TensorObs, action: torch.Tensor, kind: str) -> tuple[torch.Tensor, dict[str, float]]:
        """MSE between the first predicted action of each chunk and the demonstrated action (B, A)."""
        if kind != "mse":
            raise PolicyError(f"a VLA policy has no action likelihood; use loss 'mse' (got {kind!r})")
        if action.dim() != 2 or action.shape != (len(obs), self.action_dim):
            raise PolicyError(f"actions must be (B, {self.action_dim}), got {tuple(action.shape)}")
        first = self.model.predict(obs.images, obs.state, self.config.instruction)[:, 0]
        loss = F.mse_loss(first, action)
        return loss, {"action_mse": float(loss.detach())}
