"""`RanksConfig` and the torchrun command it starts; torchrun's rank environment read strictly."""

from __future__ import annotations

import pytest

from user.config import ConfigError, from_mapping
from user.distributed.group import RankEnv, RankError, resolve_backend
from user.distributed.ranks import RanksConfig, torchrun_command


def test_one_process_on_one_machine_is_not_distributed() -> None:
    assert not RanksConfig().distributed
    assert RanksConfig(processes_per_machine=4, machines=2).world_size == 8


def test_the_torchrun_command_names_every_setting() -> None:
    cfg = RanksConfig(processes_per_machine=4, machines=2, rendezvous="10.0.0.5:29500", max_restarts=5, run_id="a")
    command = torchrun_command(cfg, ["user", "node", "learner"], python="/py")
    assert command[:3] == ["/py", "-m", "user.distributed.launch"]
    assert command[3:] == [
        "--nnodes=2",
        "--nproc-per-node=4",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=10.0.0.5:29500",
        "--rdzv-id=a",
        "--rdzv-conf=is_host=true",
        "--local-addr=10.0.0.5",
        "--max-restarts=5",
        "--module",
        "user",
        "node",
        "learner",
    ]
    joining = torchrun_command(cfg, ["user"], home=False, address="10.0.0.6")
    assert "--rdzv-conf=is_host=false" in joining and "--local-addr=10.0.0.6" in joining
    assert not any(a.startswith("--local-addr") for a in torchrun_command(cfg, ["user"], home=False))
    with pytest.raises(ConfigError, match="needs a module"):
        torchrun_command(cfg, [])


@pytest.mark.parametrize("endpoint", ["10.0.0.5", ":29400", "host:port", "host:70000", "host:0"])
def test_a_rendezvous_that_is_not_host_port_is_refused(endpoint: str) -> None:
    with pytest.raises(ConfigError, match=r"ranks.rendezvous: .* is not host:port"):
        RanksConfig(rendezvous=endpoint)


def test_settings_are_strict() -> None:
    assert from_mapping(RanksConfig, {"machines": 2, "backend": "gloo"}, where="ranks").machines == 2
    with pytest.raises(ConfigError, match="backend"):
        from_mapping(RanksConfig, {"backend": "mpi"}, where="ranks")
    with pytest.raises(ConfigError, match="processes_per_machine"):
        from_mapping(RanksConfig, {"processes_per_machine": 0}, where="ranks")


def test_the_rank_environment_is_read_strictly() -> None:
    env = {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "TORCHELASTIC_RESTART_COUNT": "2",
        "USER_LEARNER_HOME": "1",
    }
    assert RankEnv.from_environ(env) == RankEnv(rank=3, local_rank=1, world_size=4, restart=2, home=True)
    assert not RankEnv.from_environ({**env, "USER_LEARNER_HOME": "0"}).home
    with pytest.raises(RankError, match="not started by torchrun: RANK, WORLD_SIZE not set"):
        RankEnv.from_environ({"LOCAL_RANK": "0"})
    with pytest.raises(RankError, match="not numeric"):
        RankEnv.from_environ({**env, "RANK": "x"})
    with pytest.raises(RankError, match="does not fit a world of 4"):
        RankEnv.from_environ({**env, "RANK": "4"})


def test_the_backend_follows_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert resolve_backend("auto") == "gloo"
    with pytest.raises(RankError, match="nccl needs CUDA"):
        resolve_backend("nccl")
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert resolve_backend("auto") == "nccl"
    assert resolve_backend("gloo") == "gloo"
