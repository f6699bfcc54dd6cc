"""`RanksConfig`: how many learner processes (ranks) train together, and the torchrun command that starts them.

A learner with `ranks` absent or at one process on one machine is today's single process. Anything more is
started by torchrun (`python -m torch.distributed.run`, elastic, c10d rendezvous): `processes_per_machine`
ranks on each of `machines` machines, meeting at `rendezvous` (host:port on the first machine). torchrun
restarts the whole group up to `max_restarts` times when a rank fails; every rank then resumes from the last
checkpoint. A machine other than the first joins by running the same command without `USER_LEARNER_HOME` set.

The c10d rendezvous numbers the machines in the order of their names, so the rank that talks on the Bus is not
always rank 0: it is the first rank on the home machine (the one `user bringup` or `ros2 launch` started, marked by
`HOME_ENV`), found by the group when it forms (`user.distributed.group`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from user.config.strict import ConfigError, setting

BACKENDS = ("auto", "nccl", "gloo")
SHARD_MODES = ("auto", "on", "off")
SHARD_DTYPES = ("auto", "bf16", "float32")
HOME_ENV = "USER_LEARNER_HOME"  # set to 1 in the environment of the home machine's torchrun, absent elsewhere


@dataclass(frozen=True)
class RanksConfig:
    """The learner's ranks: processes per machine, machines, where they meet, how they talk, how often to restart."""

    processes_per_machine: int = setting(1, "learner ranks on each machine (one per GPU on a GPU machine)", min=1)
    machines: int = setting(1, "machines the learner spans; each runs the same command with its machine rank", min=1)
    rendezvous: str = setting(
        "127.0.0.1:29400", "host:port of torchrun's c10d rendezvous, on the first machine (reachable from the others)"
    )
    backend: str = setting(
        "auto", "collective backend: auto (nccl on GPUs, gloo on CPUs), nccl or gloo", choices=BACKENDS
    )
    max_restarts: int = setting(3, "times torchrun restarts the whole group after a rank fails", min=0)
    collective_timeout_s: float = setting(
        120.0, "a collective that has not completed after this long fails its rank (never a hang), s", min=1.0
    )
    run_id: str = setting("user-learner", "rendezvous id: the ranks of one learner share it, another learner must not")
    shard: str = setting(
        "auto",
        "FSDP2 for the policy's actor: auto (sharded when it holds at least shard_above_params parameters), on "
        "(always, with ranks) or off (every rank holds the whole actor: data-parallel)",
        choices=SHARD_MODES,
    )
    shard_above_params: int = setting(
        100_000_000, "shard: auto shards an actor of at least this many parameters", min=1
    )
    shard_dtype: str = setting(
        "auto",
        "a sharded actor's compute dtype: auto (bf16 parameters and compute with float32 gradient reduction on GPUs, "
        "float32 on CPUs), bf16 or float32",
        choices=SHARD_DTYPES,
    )

    def __post_init__(self) -> None:
        for key, value, allowed in (
            ("shard", self.shard, SHARD_MODES),
            ("shard_dtype", self.shard_dtype, SHARD_DTYPES),
        ):
            if value not in allowed:
                raise ConfigError(f"ranks.{key}: {value!r} is not one of {', '.join(allowed)}")
        if isinstance(self.shard_above_params, bool) or not isinstance(self.shard_above_params, int):
            raise ConfigError(f"ranks.shard_above_params: {self.shard_above_params!r} is not a whole number")
        if self.shard_above_params < 1:
            raise ConfigError(f"ranks.shard_above_params: {self.shard_above_params} is below 1")
        host, sep, port = self.rendezvous.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"ranks.rendezvous: {self.rendezvous!r} is not host:port (e.g. 10.0.0.5:29400)")

    @property
    def world_size(self) -> int:
        return self.processes_per_machine * self.machines

    @property
    def distributed(self) -> bool:
        """True when the learner runs as more than one rank (under torchrun)."""
        return self.world_size > 1


def torchrun_command(
    config: RanksConfig,
    target: Sequence[str],
    *,
    home: bool = True,
    address: str | None = None,
    python: str = sys.executable,
    script: bool = False,
) -> list[str]:
    """The torchrun command line that starts this machine's ranks of `target` (a module and its arguments, run
    with `python -m`). Every machine runs it; the home machine (`home`, which also sets `HOME_ENV=1`) hosts the
    rendezvous store at `config.rendezvous`, the others connect to it (`is_host`: torchrun cannot tell from a
    host name which machine owns an address, e.g. inside a network namespace). `address` is how the other
    machines reach this one (the home machine's is the rendezvous host); without it torchrun uses the host name.
    With `script`, the target is an executable run as it is (`--no-python`), and may be left for whoever appends
    it (ros2 launch puts this command before the node's executable)."""
    if not target and not script:
        raise ConfigError("torchrun needs a module to run")
    if home:
        address = config.rendezvous.rpartition(":")[0]
    command = [python, "-m", "user.distributed.launch"]  # torchrun; a stop by signal is a stop (launch.py)
    command += [f"--nnodes={config.machines}", f"--nproc-per-node={config.processes_per_machine}"]
    command += ["--rdzv-backend=c10d", f"--rdzv-endpoint={config.rendezvous}", f"--rdzv-id={config.run_id}"]
    command += [f"--rdzv-conf=is_host={'true' if home else 'false'}"]
    if address:
        command += [f"--local-addr={address}"]
    command += [f"--max-restarts={config.max_restarts}", "--no-python" if script else "--module"]
    return command + list(target)
