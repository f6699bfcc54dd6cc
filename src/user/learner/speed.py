"""The learner at GPU speed: which speed-ups a run uses (`SpeedConfig`, the learner's `speed` settings) and the
update step that applies them (`FastUpdate`).

- autocast: each camera's CNN encoder runs in bfloat16 autocast; its features, the MLP heads, the critics and
  every loss stay float32 (`ImageStateEncoder.set_speed`);
- channels_last: camera images enter the convolutions in channels-last memory format (the weights stay in the
  policy's one flat buffer, so what is published does not change);
- compile: `torch.compile` of the actor's and the critics' forward passes. Compiling happens at the first calls;
  when it fails, the algorithm's state (modules, optimisers, counters, random generators: torch's and the policy's
  own sampling generator where it has one) is put back as it was
  before the call, the forwards go back to eager, one log line says why, and the same update runs eagerly:
  training goes on and trains exactly as if compile had been off;
- prefetch: batches prepared one ahead on a side CUDA stream (`user.learner.prefetch`, used by the trainer).

`auto` means on CUDA only, so CPU runs keep today's path unless a setting says `on`/`bf16`.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch import nn

from user.config.strict import setting
from user.policies.resnet import ImageStateEncoder

if TYPE_CHECKING:
    from user.algorithms.base import Algorithm, TorchBatch, TrainingStats
    from user.buffer.batch import TransitionBatch

Switch = Literal["auto", "on", "off"]
COMPILE_BACKEND: str | Callable[..., Any] = "inductor"  # torch.compile's backend (tests force a failing one)
GUARDED_CALLS = 3  # update calls run with a way back to eager (compiling happens in the first ones)


@dataclass(frozen=True)
class SpeedConfig:
    """How the learner uses its device; `auto` = on CUDA only (CPU runs keep the plain path)."""

    prefetch: Switch = setting("auto", "prepare the next batch on the device (side CUDA stream) while an update runs")
    autocast: Literal["auto", "bf16", "off"] = setting(
        "auto", "CNN encoders in bfloat16 autocast; features, heads and losses stay float32"
    )
    channels_last: Switch = setting("auto", "camera images in channels-last memory format for the convolutions")
    compile: Switch = setting("auto", "torch.compile the actor and critic forwards; eager when compiling fails")


@dataclass(frozen=True)
class SpeedPlan:
    """What `SpeedConfig` means on one device."""

    prefetch: bool = False  # batches prepared one ahead (on a side stream on CUDA)
    autocast: torch.dtype | None = None  # the CNN encoders' autocast dtype; None = float32
    channels_last: bool = False  # channels-last images into the convolutions
    compile: bool = False  # compiled actor and critic forwards

    def describe(self) -> str:
        dtype = "off" if self.autocast is None else str(self.autocast).removeprefix("torch.")
        return (
            f"prefetch {'on' if self.prefetch else 'off'}, autocast {dtype}, "
            f"channels_last {'on' if self.channels_last else 'off'}, compile {'on' if self.compile else 'off'}"
        )


def speed_plan(config: SpeedConfig, device: torch.device) -> SpeedPlan:
    """The speed-ups `config` asks for on `device` (`auto`: on CUDA, off elsewhere)."""
    cuda = device.type == "cuda"

    def on(value: str) -> bool:
        return value == "on" or (value == "auto" and cuda)

    autocast = config.autocast == "bf16" or (config.autocast == "auto" and cuda)
    return SpeedPlan(
        prefetch=on(config.prefetch),
        autocast=torch.bfloat16 if autocast else None,
        channels_last=on(config.channels_last),
        compile=on(config.compile),
    )


def compiled_modules(algorithm: Algorithm) -> list[nn.Module]:
    """The modules whose forward is compiled: the actor and, where the algorithm has them, its critics."""
    found = [algorithm.policy.actor]
    for name in ("critic", "target_critic"):
        module = getattr(algorithm, name, None)
        if isinstance(module, nn.Module):
            found.append(module)
    return found


def image_encoders(modules: list[nn.Module]) -> Iterator[ImageStateEncoder]:
    for module in modules:
        yield from (m for m in module.modules() if isinstance(m, ImageStateEncoder))


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and what it was raised from, outermost first (dynamo wraps a backend's error)."""
    chain = [exc]
    while chain[-1].__cause__ is not None and len(chain) < 5:
        chain.append(chain[-1].__cause__)
    return chain


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]  # dynamo names the backend's error next
    return f"{type(exc).__name__}: {' '.join(lines[:2])}" if lines else type(exc).__name__


class FastUpdate:
    """`Algorithm.update`/`update_prepared` with the plan's speed-ups applied to `algorithm` (once, here)."""

    def __init__(self, algorithm: Algorithm, plan: SpeedPlan, log: logging.Logger | None = None) -> None:
        self.algorithm = algorithm
        self.plan = plan
        self.log = log or logging.getLogger("user.learner.speed")
        self._modules = compiled_modules(algorithm)
        for encoder in image_encoders(self._modules):
            encoder.set_speed(autocast=plan.autocast, channels_last=plan.channels_last)
        self.compiled = False  # the forwards are compiled now
        self.fell_back: str | None = None  # why compiling failed, if it did
        self._guarded = 0
        if plan.compile:
            for module in self._modules:
                module.forward = torch.compile(module.forward, backend=COMPILE_BACKEND, dynamic=False)
            self.compiled = True

    def prepare(self, batch: TransitionBatch) -> TorchBatch:
        return self.algorithm.prepare(batch)

    def update(self, batch: TransitionBatch) -> TrainingStats:
        return self._run(lambda: self.algorithm.update(batch))

    def update_prepared(self, batch: TorchBatch) -> TrainingStats:
        return self._run(lambda: self.algorithm.update_prepared(batch))

    def _run(self, step: Callable[[], TrainingStats]) -> TrainingStats:
        if not self.compiled or self._guarded >= GUARDED_CALLS:
            return step()
        self._guarded += 1
        saved = self._save()
        try:
            return step()
        except Exception as exc:  # whatever compiling raised (dynamo, inductor, the C++ compiler ...)
            self._restore(saved)
            self._eager(exc)
            return step()

    def _eager(self, exc: Exception) -> None:
        for module in self._modules:
            module.__dict__.pop("forward", None)
        self.compiled = False
        self.fell_back = ", from ".join(_first_line(e) for e in _causes(exc))
        self.log.warning("torch.compile of the update failed (%s); training goes on eagerly", self.fell_back)

    def _save(self) -> dict[str, Any]:
        state = {"algorithm": copy.deepcopy(self.algorithm.state_dict()), "cpu_rng": torch.get_rng_state()}
        if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
            state["cuda_rng"] = torch.cuda.get_rng_state_all()
        generator = self._draws_generator()
        if generator is not None:
            state["draws"] = generator.get_state()
        return state

    def _draws_generator(self) -> torch.Generator | None:
        """The generator of the policy's sampling noise, where it has its own (`Policy.draws`, ranks in step)."""
        generator = getattr(getattr(self.algorithm.policy, "draws", None), "generator", None)
        return generator if isinstance(generator, torch.Generator) else None

    def _restore(self, state: dict[str, Any]) -> None:
        self.algorithm.load_state_dict(state["algorithm"])
        torch.set_rng_state(state["cpu_rng"])
        if "cuda_rng" in state:
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        generator = self._draws_generator()
        if generator is not None and "draws" in state:
            generator.set_state(state["draws"])
