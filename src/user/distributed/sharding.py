"""FSDP2 for the policy's actor, applied in one place: whether to shard it (a plan from the `ranks` settings, the
actor's size and the device), `fully_shard` on it, and its full weights gathered back for publication.

Each member of an `nn.ModuleList` inside the actor (a transformer block, a layer of a stack) becomes its own FSDP
unit, then the actor itself (the root: whatever parameters no unit holds); an actor without a forward of its own
(its policy calls its parts, e.g. the flow policy's encoder and velocity net) has each part sharded as a root of
its own instead. Only the actor is sharded: critics, targets and the temperature stay whole on every rank and are
averaged as before (`DataParallel`). The parameters become DTensors, new objects: every optimizer of the algorithm
is re-pointed at them with its state sharded alike, and the policy keeps its full weights on the host, gathered
when asked (`Policy.mark_sharded`). On GPUs the actor computes in bf16 with float32 gradient reduction (fully_shard's
`MixedPrecisionPolicy`; its outputs are float32 for the critics); on CPUs in float32.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor

from user.distributed.group import RankError, RankGroup
from user.distributed.ranks import RanksConfig

_log = logging.getLogger(__name__)


class ShardingError(RankError):
    """The actor cannot be sharded as it is built (the message says why)."""


@dataclass(frozen=True)
class ShardPlan:
    """Whether the actor is sharded, and in which dtype it computes."""

    shard: bool
    dtype: str  # "bf16" or "float32"
    params: int  # the actor's parameters


def count_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def plan_sharding(config: RanksConfig, params: int, device: torch.device, world_size: int) -> ShardPlan:
    """The plan for an actor of `params` parameters on `device` among `world_size` ranks: never with one rank."""
    if world_size < 2 or config.shard == "off":
        shard = False
    else:
        shard = config.shard == "on" or params >= config.shard_above_params
    dtype = config.shard_dtype if config.shard_dtype != "auto" else ("bf16" if device.type == "cuda" else "float32")
    return ShardPlan(shard, dtype, params)


def shard_units(actor: nn.Module) -> list[nn.Module]:
    """The FSDP units inside `actor`, innermost first: every member of every `nn.ModuleList` in it."""
    units = [m for holder in actor.modules() if isinstance(holder, nn.ModuleList) for m in holder]
    return list(reversed(units))  # modules() lists parents before children: children are sharded first


def apply_sharding(algorithm: object, plan: ShardPlan, group: RankGroup) -> None:
    """`fully_shard` the actor of `algorithm.policy` over the group's ranks (every rank, alike), its optimizers
    re-pointed at the sharded parameters. The ranks must hold the same actor already (the lead's state)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = algorithm.policy  # type: ignore[attr-defined]
    actor: nn.Module = policy.actor
    before = dict(actor.named_parameters())
    mesh = init_device_mesh(group.device.type, (group.env.world_size,))
    inner = MixedPrecisionPolicy()
    outer = MixedPrecisionPolicy()
    if plan.dtype == "bf16":
        inner = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        outer = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=torch.float32)
    units = shard_units(actor)
    for unit in units:
        fully_shard(unit, mesh=mesh, mp_policy=inner)
    if type(actor).forward is nn.Module.forward:  # called by its parts only: each part is a root
        if any(True for _ in actor.parameters(recurse=False)):
            raise ShardingError(f"{type(actor).__name__} has parameters of its own but no forward: cannot shard it")
        roots = list(actor.children())
    else:
        roots = [actor]
    for root in roots:  # resharded after every forward: SAC's target runs the actor without a backward to follow,
        # after which a root that kept its gathered parameters would still hold them (plain tensors) at the step
        fully_shard(root, mesh=mesh, mp_policy=outer, reshard_after_forward=True)
    after = dict(actor.named_parameters())
    if after.keys() != before.keys():
        raise ShardingError("fully_shard renamed the actor's parameters; the published layout would not fit")
    moved = {id(before[name]): after[name] for name in after}
    for optim in (v for v in vars(algorithm).values() if isinstance(v, torch.optim.Optimizer)):
        _repoint(optim, moved)
    policy.mark_sharded(group.device)
    if group.is_lead:
        _log.info(
            "actor sharded over %d ranks (FSDP2): %d units, %d parameters, %s",
            group.env.world_size,
            len(units) + len(roots),
            plan.params,
            "bf16 compute, float32 gradient reduction" if plan.dtype == "bf16" else "float32",
        )


def _repoint(optim: torch.optim.Optimizer, moved: dict[int, nn.Parameter]) -> None:
    """`optim` steps the sharded parameters in place of the whole ones; its state (moments) sharded alike. Every
    rank holds the same whole state, so each takes its own shard without communication."""
    state = dict(optim.state)
    optim.state.clear()
    for group in optim.param_groups:
        params = []
        for p in group["params"]:
            new = moved.get(id(p))
            if new is None:
                params.append(p)
                if p in state:
                    optim.state[p] = state[p]
                continue
            params.append(new)
            if p in state:
                optim.state[new] = {k: _like(v, new) for k, v in state[p].items()}
        group["params"] = params


def _like(value: object, param: nn.Parameter) -> object:
    if isinstance(value, torch.Tensor) and isinstance(param, DTensor) and value.shape == param.shape:
        return distribute_tensor(value.to(param.device), param.device_mesh, param.placements, src_data_rank=None)
    return value


def gather_full(actor: nn.Module, into: torch.Tensor | None) -> None:
    """The actor's full parameters, in `named_parameters` order, copied into the flat `into` (a collective: every
    rank calls it, the others with None)."""
    offset = 0
    with torch.no_grad():
        for _, p in actor.named_parameters():
            full = p.full_tensor() if isinstance(p, DTensor) else p.detach()
            n = full.numel()
            if into is not None:
                into[offset : offset + n].copy_(full.reshape(-1))
            offset += n
    if into is not None and offset != into.numel():
        raise ShardingError(f"the gathered actor holds {offset} values, its flat layout {into.numel()}")
