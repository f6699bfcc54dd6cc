"""Where the image update's GPU time goes (issue 34, item 7): a companion of bench/learner_gpu.py for one GPU.

1. The naive image RLPD update (bench/learner_gpu_setup.py's full sizes) under torch.profiler: the busiest kernels
   by their own GPU time, and how much of the wall time the GPU was busy at all (low: the update is bound by the
   host, kernel launches and Python; high: by the kernels listed).
2. Updates/s with the ResNet trunks trained (what the bench times) against frozen trunks (a pretrained encoder
   kept fixed, as HIL-SERL trains), each eager in float32 and eager with bf16 autocast and channels-last, trials
   interleaved round by round, medians.

Device command: PYTHONPATH=src python3 bench/learner_gpu_profile.py   (about 2 minutes on one H200)
Dry run (CPU, tiny sizes): PYTHONPATH=src python3 bench/learner_gpu_profile.py --dry-run
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from learner_gpu_setup import DRY, FULL, Runner, Sizes, host_batch, sync
from user.algorithms.base import to_torch
from user.learner.speed import FastUpdate, SpeedPlan


def freeze_trunks(runner: Runner) -> None:
    """No gradient for any ResNet trunk (actor's and critics' encoders): a pretrained encoder kept fixed."""
    for module in (runner.algo.policy.actor, runner.algo.critic):
        for name, sub in module.named_modules():
            if name.endswith("trunk"):
                sub.requires_grad_(False)


def step_fn(runner: Runner, fast: FastUpdate | None) -> object:
    batch = runner._batches[runner._k % len(runner._batches)]
    runner._k += 1
    if fast is None:
        return runner.algo.update_tensors(to_torch(batch, runner.algo.policy))  # type: ignore[arg-type]
    return fast.update_prepared(fast.prepare(batch))  # type: ignore[arg-type]


def profiled(sizes: Sizes, device: torch.device, batches: list) -> None:  # type: ignore[type-arg]
    runner = Runner("RLPD", False, sizes, device, batches)
    for _ in range(3):
        step_fn(runner, None)
    sync(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        for _ in range(5):
            step_fn(runner, None)
        sync(device)
    wall = time.perf_counter() - start
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=22, max_name_column_width=60))
    if device.type == "cuda":
        busy = sum(e.self_device_time_total for e in prof.key_averages()) / 1e6
        print(f"5 naive RLPD updates: wall {wall:.3f} s, GPU busy {busy:.3f} s ({busy / wall:.0%})")


def variants(sizes: Sizes, device: torch.device, batches: list, rounds: int) -> None:  # type: ignore[type-arg]
    plan = SpeedPlan(prefetch=False, autocast=torch.bfloat16, channels_last=True, compile=False)
    setups = {}
    for frozen in (False, True):
        for fast in (False, True):
            runner = Runner("RLPD", False, sizes, device, batches)
            if frozen:
                freeze_trunks(runner)
            update = FastUpdate(runner.algo, plan) if fast else None
            label = f"trunk {'frozen' if frozen else 'trained'}, {'bf16+channels-last' if fast else 'fp32'}"
            setups[label] = (runner, update)
            for _ in range(2):
                step_fn(runner, update)
    rates: dict[str, list[float]] = {label: [] for label in setups}
    for _ in range(rounds):
        for label, (runner, update) in setups.items():
            sync(device)
            start = time.perf_counter()
            for _ in range(sizes.updates):
                step_fn(runner, update)
            sync(device)
            rates[label].append(sizes.updates / (time.perf_counter() - start))
    print(f"\nimage RLPD, eager, updates/s (median of {rounds} rounds, {sizes.updates} updates each)")
    for label, xs in rates.items():
        print(f"{label:40s} {statistics.median(xs):8.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU")
    args = parser.parse_args()
    sizes = DRY if args.dry_run else FULL
    device = torch.device("cuda" if torch.cuda.is_available() and not args.dry_run else "cpu")
    batches = [host_batch(sizes, seed) for seed in range(4)]
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}")
    profiled(sizes, device, batches)
    variants(sizes, device, batches, rounds=2 if args.dry_run else 5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
