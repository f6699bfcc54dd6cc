"""The process group of a learner's ranks: who this rank is (from torchrun's environment), the collective backend,
the deadline on every collective, and which rank talks on the Bus (the lead).

torchrun sets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT and TORCHELASTIC_RESTART_COUNT
for each rank it starts (torch/distributed/run.py, elastic/agent/server/api.py). `open_group` joins the group
with the configured deadline, so a collective whose peer died or hangs fails this rank (and torchrun restarts the
group) instead of waiting forever.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NoReturn

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import TCPStore
from torch.distributed.distributed_c10d import PrefixStore

from user.distributed.ranks import HOME_ENV, RanksConfig

_log = logging.getLogger(__name__)


class RankError(RuntimeError):
    """This process is not a rank torchrun started, or its group could not form."""


@dataclass(frozen=True)
class RankEnv:
    """What torchrun told this rank about itself."""

    rank: int  # global rank, 0 .. world_size - 1
    local_rank: int  # rank on this machine (the GPU it uses)
    world_size: int  # ranks in the group
    restart: int  # how many times torchrun has restarted the group (0 at the first start)
    home: bool  # this rank runs on the home machine (the one whose learner talks on the Bus)

    @staticmethod
    def from_environ(environ: Mapping[str, str] | None = None) -> RankEnv:
        env = os.environ if environ is None else environ
        missing = [k for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE") if k not in env]
        if missing:
            raise RankError(f"not started by torchrun: {', '.join(missing)} not set (start the learner with ranks)")
        try:
            values = [int(env[k]) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE")]
            restart = int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
        except ValueError as exc:
            raise RankError(f"torchrun's rank environment is not numeric: {exc}") from exc
        rank, local_rank, world = values
        if not 0 <= rank < world or local_rank < 0:
            raise RankError(f"rank {rank} (local {local_rank}) does not fit a world of {world}")
        return RankEnv(rank, local_rank, world, restart, env.get(HOME_ENV) == "1")


def resolve_backend(name: str) -> str:
    """auto -> nccl when this machine has a CUDA GPU, else gloo; nccl without a GPU is a `RankError`."""
    if name == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    if name == "nccl" and not torch.cuda.is_available():
        raise RankError("backend nccl needs CUDA GPUs; this machine has none (use gloo or auto)")
    return name


@dataclass(frozen=True)
class RankGroup:
    """A formed group: this rank, its device, and the lead rank (the first rank on the home machine)."""

    env: RankEnv
    backend: str
    device: torch.device
    lead: int

    @property
    def is_lead(self) -> bool:
        return self.env.rank == self.lead


def open_group(config: RanksConfig, env: RankEnv) -> RankGroup:
    """Join the group with `config.collective_timeout_s` on every collective; find the lead rank. A group with no
    rank on the home machine, or with more than one home machine, is a `RankError` on every rank."""
    backend = resolve_backend(config.backend)
    device = torch.device("cuda", env.local_rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    timeout = datetime.timedelta(seconds=config.collective_timeout_s)
    dist.init_process_group(
        backend,
        store=_attempt_store(env, timeout),
        rank=env.rank,
        world_size=env.world_size,
        timeout=timeout,
        device_id=device if device.type == "cuda" else None,
    )
    gathered: list[object] = [None] * env.world_size
    dist.all_gather_object(gathered, (env.home, env.local_rank))
    homes = [(bool(g[0]), int(g[1])) for g in gathered if isinstance(g, tuple)]
    leads = [r for r, (home, local) in enumerate(homes) if home and local == 0]
    if len(leads) != 1:
        dist.destroy_process_group()
        raise RankError(
            f"the learner's ranks need exactly one home machine ({HOME_ENV}=1 on the machine that runs the "
            f"deployment); found {len(leads)} first ranks on home machines among {env.world_size} ranks"
        )
    _log.info(
        "rank %d of %d (%s on %s, restart %d); rank %d talks on the Bus",
        env.rank,
        env.world_size,
        backend,
        device,
        env.restart,
        leads[0],
    )
    return RankGroup(env, backend, device, leads[0])


def _attempt_store(env: RankEnv, timeout: datetime.timedelta) -> PrefixStore:
    """The store the group forms through, its keys under this start's own prefix: after torchrun restarts the group,
    the ranks would otherwise find the addresses the dead ranks of the last start left there (gloo then connects
    to a port nobody listens on). torchrun's agent hosts the store (TORCHELASTIC_USE_AGENT_STORE) or rank 0 does."""
    try:
        host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    except (KeyError, ValueError) as exc:
        raise RankError(f"torchrun's MASTER_ADDR/MASTER_PORT are missing or not numeric: {exc}") from exc
    hosts = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() != "true" and env.rank == 0
    store = TCPStore(host, port, env.world_size, is_master=hosts, timeout=timeout, wait_for_workers=False)
    return PrefixStore(f"/user/start_{env.restart}", store)


def end_process(code: int) -> NoReturn:
    """End a rank's process with `code` once its group is closed and its output flushed, without the interpreter's
    teardown: torch's and gloo's C++ threads being destroyed at exit sometimes abort the process ("terminate called
    without an active exception", exit -6 after all its work was done), which torchrun would read as a failure."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def close_group(*, together: bool = True) -> None:
    """Leave the group (nothing to do when none was joined). `together`: first wait until every rank is leaving
    (a barrier, within the collective deadline): a rank that tears its connections down while another still uses
    them can abort in gloo's teardown (`terminate called without an active exception`). Without it (a peer is
    known gone), leave at once."""
    if not dist.is_initialized():
        return
    if together:
        try:
            dist.barrier()
        except RuntimeError as exc:  # a peer already gone: nothing left to wait for
            _log.debug("leaving the group without the others: %s", exc)
    dist.destroy_process_group()
