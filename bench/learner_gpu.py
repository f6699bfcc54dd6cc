"""GPU benchmark of the learner (issue 34, item 8): the naive and the tuned image update, publication's cost to
training, DDP scaling. One command, one run, trials interleaved round by round (every setup once per round) and
medians taken, so machine noise hits every setup alike; ratios are the median of the ratios within each round.

Device command, from the repository root of a fresh checkout (needs only torch, numpy and pyyaml; about 4 minutes
on one H200; no round starts after --budget-s, 420 s by default, so it ends within 8 with one GPU):

    PYTHONPATH=src python3 bench/learner_gpu.py

Compiling on the GPU needs Triton, which builds a small C launcher with the machine's C compiler the first time;
where that fails, the tuned rows train eagerly and say so ("compile failed") in the output and in the JSON
(`compile_fell_back`). `--compile-backend eager` isolates the other speed-ups.

Dry run (CPU, tiny sizes, every code path the GPU run takes except CUDA streams, < 60 s; test/bench runs it):

    PYTHONPATH=src python3 bench/learner_gpu.py --dry-run

Setups (the real `SAC`/`RLPD` on the real `CNNPolicy`; synthetic batches of already-decoded uint8 pixels):
- image SAC and image RLPD: 2 cameras of 128x128 RGB, state 17, action 7, batch 256, 10 critics (SAC: target min
  over all 10; RLPD: its defaults, min over 2 of 10, LayerNorm, actor on the mean), ResNet-10 encoders (GroupNorm,
  spatial embedding, bottleneck 256), utd 1, critic:actor 1, no augmentation;
- naive: today's path, one update = `update_tensors(to_torch(batch, policy))`, float32, eager;
- tuned: `user.learner.speed.FastUpdate` with prefetch (`user.learner.prefetch.Prefetcher`: the next batch prepared
  on a side CUDA stream from pinned memory while the update runs), bf16 autocast of the CNN encoders,
  channels-last images, `torch.compile`d actor and critic forwards (compiling happens in the warm-up and is
  timed apart).
Reported: updates/s (median over rounds) and tuned/naive per round.

Publication: the tuned RLPD update alone, with `Policy.get_weights()` every update (today's path: the flat buffer
to pageable host memory on the training stream), and with `FlatWeightCopier.copy()` every update (a device
snapshot, then one pinned host buffer filled on a lowest-priority side stream, `keep=1` as `WeightPublisher`
would use it); slowdown = 1 - rate with / rate without, per round, median. The chunking and sending of the
weights (host work of `WeightPublisher`) are not in this figure.

DDP scaling (weak): tuned image RLPD on 1 rank, then on every GPU (`torch.multiprocessing.spawn`, nccl), each rank
a full batch of its own, every optimiser's gradients averaged over the group before it steps; efficiency = per-rank
updates/s on N ranks / updates/s on 1 (not interleaved: one process group at a time). Needs 2 or more GPUs; with
fewer the run says so and measures nothing. The dry run takes this path with 2 CPU ranks over gloo. The sizes,
batches and timed step live in learner_gpu_setup.py, the scaling run in learner_gpu_ddp.py.

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from learner_gpu_ddp import bench_ddp
from learner_gpu_setup import (
    CAMERAS,
    CRITICS,
    DRY,
    FULL,
    HostBatch,
    Runner,
    Sizes,
    host_batch,
    median,
    over,
    trial,
    warm,
)
from user.learner import speed
from user.sync.flat_weights import FlatWeightCopier


def bench_updates(
    sizes: Sizes, device: torch.device, batches: list[HostBatch], out: dict[str, Any], deadline: float
) -> Runner:
    runners = [Runner(kind, tuned, sizes, device, batches) for kind in ("SAC", "RLPD") for tuned in (False, True)]
    for r in runners:
        secs = warm(r, sizes.warmup)
        fell_back = r.fast.fell_back if r.fast is not None else None
        print(
            f"warm-up {r.label}: {sizes.warmup} updates in {secs:.1f} s"
            + (f" (eager: {fell_back})" if fell_back else "")
        )
        out.setdefault("warmup_s", {})[r.label] = round(secs, 2)
        if fell_back:
            out.setdefault("compile_fell_back", {})[r.label] = fell_back
    rates: dict[str, list[float]] = {r.label: [] for r in runners}
    ratios: dict[str, list[float]] = {k: [] for k in ("SAC", "RLPD")}
    for k in range(sizes.rounds):
        if over(k, sizes.rounds, deadline):
            break
        for r in runners:
            rates[r.label].append(trial(r.step, sizes.updates, device, None))
        for kind, xs in ratios.items():
            xs.append(rates[f"image {kind}, tuned"][-1] / rates[f"image {kind}, naive"][-1])
    print(f"\n{'setup':<22} {'updates/s':>10}  (median of {sizes.rounds} rounds, {sizes.updates} updates each)")
    for label, xs in rates.items():
        print(f"{label:<22} {median(xs):>10.1f}")
        out.setdefault("updates_per_s", {})[label] = round(median(xs), 2)
    for kind, xs in ratios.items():
        print(f"image {kind}: tuned / naive = {median(xs):.2f}x")
        out.setdefault("tuned_over_naive", {})[kind] = round(median(xs), 3)
    for r in runners[:-1]:
        r.close()
    return runners[-1]  # the tuned RLPD runner, warm, for the publication figures


def bench_publication(runner: Runner, sizes: Sizes, device: torch.device, out: dict[str, Any], deadline: float) -> None:
    policy = runner.algo.policy
    copier = FlatWeightCopier(policy, preallocated=True, keep=1)
    numel = policy.weight_spec.numel
    modes: dict[str, Callable[[], object] | None] = {
        "none": None,
        "get_weights (today)": policy.get_weights,
        "flat buffer, side stream": copier.copy,
    }
    rates: dict[str, list[float]] = {m: [] for m in modes}
    slowdown: dict[str, list[float]] = {m: [] for m in modes if m != "none"}
    for k in range(sizes.rounds):
        if over(k, sizes.rounds, deadline):
            break
        for mode, after in modes.items():
            rates[mode].append(trial(runner.step, sizes.updates, device, after))
        for mode, xs in slowdown.items():
            xs.append(1.0 - rates[mode][-1] / rates["none"][-1])
    print(f"\npublication every update (tuned image RLPD, actor {numel / 1e6:.1f} M parameters, float32)")
    out["publication"] = {"actor_parameters": numel}
    for mode, xs in rates.items():
        extra = f"  slowdown {100 * median(slowdown[mode]):+.1f} %" if mode in slowdown else ""
        print(f"{mode:<26} {median(xs):>8.1f} updates/s{extra}")
        out["publication"][mode] = {"updates_per_s": round(median(xs), 2)}
        if mode in slowdown:
            out["publication"][mode]["slowdown"] = round(median(slowdown[mode]), 4)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU, every code path, < 60 s")
    ap.add_argument("--device", default=None, help="cuda (default) or cpu; the dry run uses cpu")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 7; dry run 2)")
    ap.add_argument("--updates", type=int, default=None, help="update calls per trial (default 30; dry run 2)")
    ap.add_argument("--budget-s", type=float, default=420.0, help="no round starts after this many s (default 420)")
    ap.add_argument("--compile-backend", default=None, help="torch.compile backend (default inductor; dry run eager)")
    args = ap.parse_args(argv)
    sizes = DRY if args.dry_run else FULL
    sizes = Sizes(**{**sizes.__dict__, **{k: v for k, v in (("rounds", args.rounds), ("updates", args.updates)) if v}})
    device = torch.device(args.device or ("cpu" if args.dry_run else "cuda"))
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA GPU here: run with --dry-run (CPU) or on a machine with a GPU", file=sys.stderr)
        return 2
    speed.COMPILE_BACKEND = args.compile_backend or ("eager" if args.dry_run else "inductor")
    if args.dry_run:
        torch.set_num_threads(1)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(
        f"torch {torch.__version__} on {name}; {len(CAMERAS)} cameras {sizes.image}x{sizes.image}, batch "
        f"{sizes.batch}, {CRITICS} critics; cudnn TF32 {torch.backends.cudnn.allow_tf32}, matmul TF32 "
        f"{torch.backends.cuda.matmul.allow_tf32}; compile backend {speed.COMPILE_BACKEND}"
    )
    out: dict[str, Any] = {"torch": torch.__version__, "device": name, "dry_run": args.dry_run, "batch": sizes.batch}
    batches = [host_batch(sizes, seed) for seed in range(3)]
    started = time.perf_counter()
    tuned_rlpd = bench_updates(sizes, device, batches, out, started + 0.75 * args.budget_s)
    bench_publication(tuned_rlpd, sizes, device, out, started + args.budget_s)
    tuned_rlpd.close()
    bench_ddp(device, sizes, out, args.dry_run)
    out["wall_s"] = round(time.perf_counter() - started, 1)
    out["rounds"] = sizes.rounds
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
