"""Benchmark of the learner (issue 5): RLPD update rates for state-MLP and image-CNN policies, 2 and 10 critics.

Everything is measured in one run with trials interleaved round by round (every setup, on every device, once
per round) and medians taken, so machine noise hits every setup alike: read the ratios, not the absolute
numbers. Ratios are the median over rounds of the ratio measured within each round.

The algorithm is the real `RLPD` (SAC with a LayerNorm `EnsembleQ` batched critic ensemble, TD target = min
over `critic_subsample` = 2 random target critics; the actor maximises the ensemble mean) with the project's
defaults (gamma 0.96, Adam 3e-4, critic_hidden (256, 256), utd_ratio 1, critic_actor_ratio 4, no augmentation)
unless changed on the command line. Synthetic `TransitionBatch`es of batch 256: state 17 floats, action 7;
the image setups add one camera ("wrist") of SIZE x SIZE RGB uint8 pixels (already decoded, the policy's
configured `image_size`, so preprocessing does not resize) for the observation and the next observation.

1. Update rates: one update = one call `RLPD.update_tensors(to_torch(batch).to(device))` (the policy's
   preprocessing and the host-to-device copy are inside the timing; `RLPD.update` only adds a row shuffle),
   which does `utd_ratio` critic steps and an actor + temperature step every `critic_actor_ratio` critic
   steps. Each trial runs whole periods of that schedule, so every trial holds the same mix. Reported:
   updates/s, critic steps/s and actor steps/s in that loop, and the mean wall time of one critic step
   (target actions, target ensemble, ensemble forward/backward, Adam, Polyak) and of one actor step (actor
   forward/backward through its own encoder, critic forward with the critic encoder frozen, temperature).
   Setups: {state MLP (MLPPolicy, hidden (256, 256)), image CNN (CNNPolicy: ResNet-10 encoder with GroupNorm,
   spatial embedding, bottleneck 256, + state)} x {2, 10 critics} x {cpu, cuda when available}.
2. Critic ensemble as one batched module vs a Python list: the real `EnsembleQ` (N members as one
   `baddbmm` per layer) against N independent `nn.Sequential` MLP critics of exactly the same sizes
   (Linear -> LayerNorm -> ReLU, twice, then Linear to 1; same parameter count), doing the same work: forward
   of Q(features, action) for all N members and backward of the mean squared TD loss (`sac.critic_loss`),
   batch 256, on fixed encoder features (17 + 7 inputs for the state setup, 256 + 17 + 7 for the CNN one).

Run: python3 bench/learner.py [--quick] [--device cpu|cuda|all] [--image-size N] [--rounds N]
     (default 3-5 min on 2 shared cores, --quick ~35 s there with --threads 1; --device all adds cuda if a GPU)
Needs torch (the `learn` or `bench` extra).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from user.algorithms.base import TorchBatch, to_torch
from user.algorithms.critics import EnsembleQ
from user.algorithms.rlpd import RLPD, RLPDConfig
from user.algorithms.sac import critic_loss
from user.buffer.batch import TransitionBatch
from user.policies.base import TensorObs
from user.policies.cnn import CNNPolicy, CNNPolicyConfig
from user.policies.gaussian import GaussianPolicy, mlp
from user.policies.mlp import MLPPolicy, MLPPolicyConfig, StateEncoder
from user.policies.preprocess import ObservationConfig

BATCH = 256
STATE_DIM = 17
ACTION_DIM = 7
CAMERA = "wrist"
CRITICS = (2, 10)
SUBSAMPLE = 2  # RLPD's REDQ target subset
BOTTLENECK = 256  # ImageEncoderConfig default: width of the camera embedding the critic head sees


@dataclass(frozen=True)
class Setup:
    policy: str  # "state MLP" or "image CNN"
    critics: int
    device: str

    @property
    def label(self) -> str:
        return f"{self.policy}, {self.critics} critics, {self.device}"


@dataclass
class Trial:
    """Per-round results of one setup."""

    updates: list[float] = field(default_factory=list)  # update calls per second
    critic: list[float] = field(default_factory=list)  # critic steps per second inside the update loop
    actor: list[float] = field(default_factory=list)  # actor steps per second inside the update loop
    critic_ms: list[float] = field(default_factory=list)  # mean wall ms of one critic step
    actor_ms: list[float] = field(default_factory=list)  # mean wall ms of one actor step


# ---- setup -----------------------------------------------------------------------------------------------


def synthetic_batch(image_size: int | None, seed: int = 0) -> TransitionBatch:
    """A batch of BATCH random transitions; one camera of image_size^2 uint8 pixels unless image_size is None."""
    rng = np.random.default_rng(seed)
    n = BATCH

    def pixels() -> dict[str, np.ndarray]:
        if image_size is None:
            return {}
        return {CAMERA: rng.integers(0, 256, (n, image_size, image_size, 3), dtype=np.uint8)}

    return TransitionBatch(
        indices=np.arange(n, dtype=np.int64),
        state=rng.normal(size=(n, STATE_DIM)).astype(np.float32),
        action=rng.uniform(-0.9, 0.9, (n, ACTION_DIM)).astype(np.float32),
        reward=rng.normal(size=n).astype(np.float32),
        next_state=rng.normal(size=(n, STATE_DIM)).astype(np.float32),
        terminated=rng.random(n) < 0.05,
        truncated=np.zeros(n, bool),
        success=np.zeros(n, bool),
        is_demo=np.arange(n) % 2 == 0,
        intervened=np.zeros(n, bool),
        policy_version=np.zeros(n, np.int64),
        images=pixels(),
        next_images=pixels(),
    )


def make_policy(kind: str, image_size: int) -> GaussianPolicy:
    if kind == "state MLP":
        return MLPPolicy(MLPPolicyConfig(state_dim=STATE_DIM, action_dim=ACTION_DIM))
    obs = ObservationConfig(cameras=(CAMERA,), image_size=image_size)
    return CNNPolicy(CNNPolicyConfig(state_dim=STATE_DIM, action_dim=ACTION_DIM, observation=obs))


def to_device(algo: RLPD, device: torch.device) -> None:
    """Move actor, critics and temperature to `device` in place (parameters keep their identity, so the
    optimisers built on CPU stay valid; the actor's flat weight buffer is left behind, which only
    `get_weights` would notice)."""
    if device.type == "cpu":
        return
    algo.policy.actor.to(device)
    algo.critic.to(device)
    algo.target_critic.to(device)
    algo.log_alpha.data = algo.log_alpha.data.to(device)


def obs_to(obs: TensorObs, device: torch.device) -> TensorObs:
    return TensorObs(obs.state.to(device), {k: v.to(device) for k, v in obs.images.items()})


def batch_to(batch: TorchBatch, device: torch.device) -> TorchBatch:
    return TorchBatch(
        obs_to(batch.obs, device),
        batch.action.to(device),
        batch.reward.to(device),
        obs_to(batch.next_obs, device),
        batch.terminated.to(device),
        batch.is_demo.to(device),
        batch.intervened.to(device),
    )


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---- 1. update rates ---------------------------------------------------------------------------------------


class Learner:
    """One setup: an RLPD learner on its device, its batch, and timers around its critic and actor steps."""

    def __init__(self, setup: Setup, image_size: int, utd: int, ratio: int) -> None:
        self.setup = setup
        self.device = torch.device(setup.device)
        cfg = RLPDConfig(
            batch_size=BATCH,
            num_critics=setup.critics,
            critic_subsample=SUBSAMPLE,
            utd_ratio=utd,
            critic_actor_ratio=ratio,
        )
        self.algo = RLPD(make_policy(setup.policy, image_size), cfg, seed=0)
        to_device(self.algo, self.device)
        self.batch = synthetic_batch(image_size if setup.policy == "image CNN" else None)
        self.critic_s = self.actor_s = 0.0
        self._wrap("critic_step", "critic_s")
        self._wrap("actor_step", "actor_s")
        # calls per trial come in whole periods of the critic/actor schedule
        self.period = ratio // math.gcd(ratio, utd)
        self.calls = self.period

    def _wrap(self, method: str, total: str) -> None:
        inner: Callable[..., Any] = getattr(self.algo, method)

        def timed(*args: Any) -> Any:
            t0 = time.perf_counter()
            out = inner(*args)
            sync(self.device)
            setattr(self, total, getattr(self, total) + time.perf_counter() - t0)
            return out

        setattr(self.algo, method, timed)  # instance attribute: SAC.update_tensors calls it

    def update(self) -> None:
        self.algo.update_tensors(batch_to(to_torch(self.batch, self.algo.policy), self.device))

    def run(self, calls: int) -> tuple[float, float, float, float, float]:
        """(seconds, critic steps, actor steps, seconds in critic steps, seconds in actor steps) of `calls`."""
        c0, a0 = self.algo.critic_steps, self.algo.actor_steps
        self.critic_s = self.actor_s = 0.0
        sync(self.device)
        t0 = time.perf_counter()
        for _ in range(calls):
            self.update()
        sync(self.device)
        wall = time.perf_counter() - t0
        return wall, self.algo.critic_steps - c0, self.algo.actor_steps - a0, self.critic_s, self.actor_s

    def warm_up(self, trial_s: float) -> None:
        """Untimed warm-up (first calls allocate), then size trials to about `trial_s` seconds in whole periods."""
        wall = self.run(self.period)[0]
        if wall < trial_s:  # cheap enough to time a period again without the first-call costs
            wall = self.run(self.period)[0]
        self.calls = self.period * max(1, round(trial_s / max(wall, 1e-9)))

    def trial(self, result: Trial) -> None:
        wall, critic, actor, critic_s, actor_s = self.run(self.calls)
        result.updates.append(self.calls / wall)
        result.critic.append(critic / wall)
        result.actor.append(actor / wall)
        result.critic_ms.append(1e3 * critic_s / max(critic, 1))
        result.actor_ms.append(1e3 * actor_s / max(actor, 1))


def update_rates(setups: Sequence[Setup], args: argparse.Namespace) -> dict[Setup, Trial]:
    learners = [Learner(s, args.image_size, args.utd, args.critic_actor_ratio) for s in setups]
    for learner in learners:
        trial_s = args.cnn_trial_s if learner.setup.policy == "image CNN" else args.mlp_trial_s
        learner.warm_up(trial_s)
    results = {s: Trial() for s in setups}
    for r in range(args.rounds):
        order = learners[r % len(learners) :] + learners[: r % len(learners)]  # rotate who goes first
        for learner in order:
            learner.trial(results[learner.setup])
    return results


# ---- 2. batched ensemble vs a list of critics --------------------------------------------------------------


class ListQ(nn.Module):
    """N independent MLP critics in a Python list, the same sizes as `EnsembleQ`'s members: (B, F+A) -> (N, B)."""

    def __init__(self, members: int, in_features: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.members = nn.ModuleList(
            mlp((in_features, *hidden, 1), layer_norm=True, final_activation=False) for _ in range(members)
        )

    def forward(self, features: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([features, action], dim=-1)
        return torch.stack([m(x).squeeze(-1) for m in self.members])


@dataclass(frozen=True)
class EnsembleSetup:
    features: str  # "state" or "CNN"
    critics: int
    device: str

    @property
    def feature_dim(self) -> int:
        return STATE_DIM if self.features == "state" else BOTTLENECK + STATE_DIM


class EnsembleBench:
    """The same critic loss forward + backward through the batched `EnsembleQ` and through `ListQ`."""

    def __init__(self, setup: EnsembleSetup, hidden: Sequence[int]) -> None:
        self.device = torch.device(setup.device)
        gen = torch.Generator().manual_seed(0)
        f = setup.feature_dim
        self.features = torch.randn(BATCH, f, generator=gen).to(self.device)
        self.action = torch.rand(BATCH, ACTION_DIM, generator=gen).mul(2).sub(1).to(self.device)
        self.target = torch.randn(BATCH, generator=gen).to(self.device)
        self.obs = TensorObs(self.features)
        self.batched = EnsembleQ(StateEncoder(f), f, ACTION_DIM, setup.critics, hidden, layer_norm=True)
        self.batched.to(self.device)
        self.listed = ListQ(setup.critics, f + ACTION_DIM, hidden).to(self.device)
        n_batched = sum(p.numel() for p in self.batched.parameters())
        n_listed = sum(p.numel() for p in self.listed.parameters())
        assert n_batched == n_listed, (n_batched, n_listed)
        self.params = n_batched
        self.steps = 1

    def step(self, module: nn.Module, calls: int) -> float:
        """Steps per second of `calls` forward + backward passes."""
        sync(self.device)
        t0 = time.perf_counter()
        for _ in range(calls):
            if isinstance(module, EnsembleQ):
                q = module(self.obs, self.action, features=self.features)
            else:
                q = module(self.features, self.action)
            loss, _ = critic_loss(q, self.target)
            module.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
        sync(self.device)
        return calls / (time.perf_counter() - t0)

    def warm_up(self, trial_s: float) -> None:
        self.step(self.batched, 3)
        self.step(self.listed, 3)
        rate = min(self.step(self.batched, 5), self.step(self.listed, 5))
        self.steps = max(5, round(trial_s * rate))


def ensemble_rates(
    setups: Sequence[EnsembleSetup], hidden: Sequence[int], rounds: int, trial_s: float
) -> dict[EnsembleSetup, tuple[list[float], list[float], int]]:
    """Per setup: batched steps/s per round, list steps/s per round, parameter count."""
    benches = {s: EnsembleBench(s, hidden) for s in setups}
    for bench in benches.values():
        bench.warm_up(trial_s)
    out: dict[EnsembleSetup, tuple[list[float], list[float], int]] = {s: ([], [], b.params) for s, b in benches.items()}
    for r in range(rounds):
        for s, bench in benches.items():
            first, second = (bench.batched, bench.listed) if r % 2 == 0 else (bench.listed, bench.batched)
            rates = {id(first): bench.step(first, bench.steps), id(second): bench.step(second, bench.steps)}
            out[s][0].append(rates[id(bench.batched)])
            out[s][1].append(rates[id(bench.listed)])
    return out


# ---- report ----------------------------------------------------------------------------------------------


def med(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def fmt(x: float) -> str:
    """Rates from 0.1 to 100,000 in a readable width."""
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def paired(a: Sequence[float], b: Sequence[float]) -> float:
    """Median over rounds of a/b, each round's pair measured back to back."""
    return med([x / y for x, y in zip(a, b, strict=True)])


def print_rates(results: dict[Setup, Trial], image_size: int) -> None:
    print(
        f"{'setup':<30} {'updates/s':>10} {'range':>15} {'critic st/s':>12} {'actor st/s':>11} "
        f"{'ms/critic st':>13} {'ms/actor st':>12}"
    )
    for s, t in results.items():
        spread = f"{fmt(min(t.updates))}..{fmt(max(t.updates))}"
        print(
            f"{s.label:<30} {fmt(med(t.updates)):>10} {spread:>15} {fmt(med(t.critic)):>12} "
            f"{fmt(med(t.actor)):>11} {med(t.critic_ms):>13.1f} {med(t.actor_ms):>12.1f}"
        )
    print(f"   (image CNN: 1 camera, {image_size}x{image_size} RGB; state MLP: state only)")


def print_ratios(results: dict[Setup, Trial]) -> None:
    print("\n   Ratios of updates/s (median of per-round ratios, same run):")
    devices = sorted({s.device for s in results})
    policies = ("state MLP", "image CNN")
    for d in devices:
        for p in policies:
            r = paired(results[Setup(p, CRITICS[1], d)].updates, results[Setup(p, CRITICS[0], d)].updates)
            print(f"   {d:<5} {p}: {CRITICS[1]} vs {CRITICS[0]} critics {r:.2f}x")
        for n in CRITICS:
            r = paired(results[Setup("image CNN", n, d)].updates, results[Setup("state MLP", n, d)].updates)
            print(f"   {d:<5} {n} critics: image CNN vs state MLP {r:.4f}x (MLP {1 / r:,.0f}x faster)")
    if "cuda" in devices and "cpu" in devices:
        for p in policies:
            for n in CRITICS:
                r = paired(results[Setup(p, n, "cuda")].updates, results[Setup(p, n, "cpu")].updates)
                print(f"   cuda vs cpu, {p}, {n} critics: {r:.1f}x")


def print_ensemble(results: dict[EnsembleSetup, tuple[list[float], list[float], int]], hidden: Sequence[int]) -> None:
    print(
        f"{'features':<9} {'in':>4} {'critics':>8} {'device':>6} {'params':>9} "
        f"{'batched st/s':>13} {'list st/s':>10} {'batched/list':>13}"
    )
    for s, (batched, listed, params) in results.items():
        print(
            f"{s.features:<9} {s.feature_dim + ACTION_DIM:>4} {s.critics:>8} {s.device:>6} {params:>9,} "
            f"{fmt(med(batched)):>13} {fmt(med(listed)):>10} {paired(batched, listed):>12.2f}x"
        )
    print(f"   (hidden {tuple(hidden)} with LayerNorm, batch {BATCH}; batched/list = median of per-round ratios)")


# ---- main ------------------------------------------------------------------------------------------------


def devices_for(choice: str) -> list[str]:
    cuda = torch.cuda.is_available()
    if choice == "cuda" and not cuda:
        raise SystemExit("bench/learner.py: --device cuda, but torch sees no GPU (torch.cuda.is_available() is False)")
    if choice == "all":
        return ["cpu", "cuda"] if cuda else ["cpu"]
    return [choice]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--quick", action="store_true", help="smaller images, fewer and shorter trials (about a minute)"
    )
    parser.add_argument("--device", choices=("cpu", "cuda", "all"), default="cpu", help="all = cpu + cuda if any")
    parser.add_argument("--image-size", type=int, default=None, help="camera image side (default 64, quick 16)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5, quick 2)")
    parser.add_argument("--utd", type=int, default=1, help="RLPD utd_ratio: critic steps per update")
    parser.add_argument("--critic-actor-ratio", type=int, default=4, help="RLPD critic steps per actor step")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all usable cores)")
    args = parser.parse_args(argv)
    args.image_size = args.image_size or (16 if args.quick else 64)
    args.rounds = args.rounds or (2 if args.quick else 5)
    args.mlp_trial_s = 0.2 if args.quick else 1.5  # CNN trials on CPU are one period (longer than this)
    args.cnn_trial_s = 0.2 if args.quick else 1.5
    args.ens_trial_s = 0.1 if args.quick else 0.5
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    devices = devices_for(args.device)
    threads = args.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    started = time.monotonic()
    gpu = torch.cuda.get_device_name(0) if "cuda" in devices else "not used"
    print(
        f"bench/learner.py: Python {sys.version.split()[0]}, torch {torch.__version__}, "
        f"torch threads {torch.get_num_threads()} of {os.cpu_count()} CPUs, GPU: {gpu}; "
        f"load average at start {os.getloadavg()[0]:.2f} (other processes share these CPUs)"
    )
    print(
        f"RLPD, batch {BATCH}, state {STATE_DIM}, action {ACTION_DIM}, critic_hidden (256, 256) + LayerNorm, "
        f"target min over {SUBSAMPLE} random critics, utd_ratio {args.utd}, critic_actor_ratio "
        f"{args.critic_actor_ratio}; image CNN: 1 camera {args.image_size}x{args.image_size} RGB"
    )
    setups = [Setup(p, n, d) for d in devices for p in ("state MLP", "image CNN") for n in CRITICS]
    print(f"\n1. Update rates: median over {args.rounds} interleaved rounds (range min..max)")
    results = update_rates(setups, args)
    print_rates(results, args.image_size)
    print_ratios(results)
    hidden = RLPDConfig().critic_hidden
    ens = [EnsembleSetup(f, n, d) for d in devices for f in ("state", "CNN") for n in CRITICS]
    print(f"\n2. Critic ensemble forward + backward: batched EnsembleQ vs a list of MLPs, {args.rounds} rounds")
    print_ensemble(ensemble_rates(ens, hidden, args.rounds, args.ens_trial_s), hidden)
    print(f"\n(took {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
