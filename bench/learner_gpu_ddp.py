"""DDP scaling for bench/learner_gpu.py (weak scaling, see its docstring): tuned image RLPD on 1 rank, then on N
ranks started with `torch.multiprocessing.spawn` (nccl on GPUs, gloo on the CPU for the dry run), every rank a
full batch of its own and every optimiser's gradients averaged over the group before it steps."""

from __future__ import annotations

import json
import socket
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.multiprocessing.spawn import spawn

from learner_gpu_setup import Runner, Sizes, host_batch, median, trial, warm
from user.algorithms.sac import SAC
from user.learner import speed


def average_gradients(algo: SAC, world: int) -> None:
    """Average every optimiser's gradients over the group just before it steps (one all-reduce of one flat bucket
    per step): data parallelism as DDP does it, without DDP's overlap of the all-reduce with the backward pass, so
    the efficiency measured is a lower bound on DDP's."""

    def hook(optim: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        grads = [p.grad for g in optim.param_groups for p in g["params"] if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= world
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    for optim in (algo.actor_optim, algo.critic_optim, algo.temperature_optim):
        optim.register_step_pre_hook(hook)


@dataclass(frozen=True)
class RankJob:
    """What every rank of a scaling run is told."""

    world: int
    port: int
    sizes: Sizes
    device_type: str  # cuda or cpu
    compile_backend: str
    result: str  # rank 0 writes its updates/s here


def ddp_rank(rank: int, job: RankJob) -> None:
    """One rank of the scaling run: tuned image RLPD on its own batches, gradients averaged; rank 0 writes its
    per-rank updates/s (a median over rounds) to `job.result`."""
    world, sizes, device_type = job.world, job.sizes, job.device_type
    speed.COMPILE_BACKEND = job.compile_backend
    backend = "nccl" if device_type == "cuda" else "gloo"
    device = torch.device(f"cuda:{rank}") if device_type == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(1)
    init = f"tcp://127.0.0.1:{job.port}"
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world, timeout=timedelta(seconds=300))
    try:
        runner = Runner("RLPD", True, sizes, device, [host_batch(sizes, 100 * rank + k) for k in range(3)])
        average_gradients(runner.algo, world)
        warm(runner, sizes.warmup)
        rates = []
        for _ in range(sizes.rounds):
            dist.barrier()
            rates.append(trial(runner.step, sizes.updates, device, None))
        runner.close()
        if rank == 0:
            Path(job.result).write_text(json.dumps(median(rates)))
    finally:
        dist.destroy_process_group()


def ddp_rate(world: int, sizes: Sizes, device_type: str) -> float:
    """Per-rank updates/s of tuned image RLPD over `world` ranks (each with its own batch of `sizes.batch` rows)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        result = str(Path(tmp) / "rate.json")
        job = RankJob(world, port, sizes, device_type, str(speed.COMPILE_BACKEND), result)
        spawn(ddp_rank, args=(job,), nprocs=world, join=True)  # type: ignore[no-untyped-call]
        return float(json.loads(Path(result).read_text()))


def bench_ddp(device: torch.device, sizes: Sizes, out: dict[str, Any], dry_run: bool) -> None:
    """Weak scaling: per-rank updates/s at N ranks over 1 rank (every rank a full batch); the dry run takes the
    same path with 2 CPU ranks over gloo."""
    gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    out["gpus"] = gpus
    ranks = 2 if dry_run else gpus
    if ranks < 2:
        print(f"\nDDP scaling needs >= 2 GPUs; {gpus} here: not measured")
        out["ddp_scaling"] = None
        return
    one = ddp_rate(1, sizes, device.type)
    many = ddp_rate(ranks, sizes, device.type)
    what = f"{ranks} CPU ranks (gloo, dry run)" if dry_run else f"{ranks} GPUs (nccl)"
    print(f"\nDDP scaling, tuned image RLPD, {what}: {one:.1f} updates/s on 1 rank, {many:.1f} per rank on {ranks}")
    print(f"efficiency {many / one:.2f} (1.0 = every added rank trains as fast as one alone)")
    out["ddp_scaling"] = {
        "ranks": ranks,
        "one_rank": round(one, 2),
        "per_rank": round(many, 2),
        "efficiency": round(many / one, 3),
    }
