"""A learner's session as the lead of its ranks under torchrun (the other ranks follow it), or alone in the test's
process: `RUN OUT SHARD` resumes from RUN's newest checkpoint or, with none, stores 3 episodes and trains 3 updates;
then it writes to OUT/result.pt what it holds (update calls, the published weights, which gather a sharded actor,
the critics' weights) and, when it resumed, the losses of one update on a fixed batch; its close writes the final
checkpoint."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from test.algorithms.factories import fixed_batch
from test.buffer import factories as f
from user.algorithms.sac import SAC, SACConfig
from user.buffer.config import BufferConfig
from user.distributed.commands import LeadChannel
from user.distributed.current import ThisRank, set_this_rank
from user.distributed.group import RankEnv, close_group, end_process, open_group
from user.distributed.ranks import RanksConfig
from user.learner.config import LearningConfig, PacingConfig
from user.learner.rank_follower import follow
from user.learner.session import LearningSession
from user.learner.session_config import SessionConfig
from user.policies.mlp import MLPPolicyConfig

BATCH = 16


def learning() -> LearningConfig:
    return LearningConfig(
        mlp=MLPPolicyConfig(state_dim=f.STATE_DIM, action_dim=f.ACTION_DIM, hidden=(16, 16)),
        algorithm="sac",
        sac=SACConfig(batch_size=BATCH, num_critics=2, critic_hidden=(16, 16)),
        exclude_state_prefixes=(),
    )


def run(run_dir: Path, out: Path, shard: str, world: int = 1) -> None:
    """The lead's (or a single process's) part."""
    session = LearningSession(
        SessionConfig(
            run_dir=str(run_dir),
            learning=learning(),
            pacing=PacingConfig(mode="sync", min_transitions=10),
            buffer=BufferConfig(prefetch=0),
            checkpoint_period_s=0.0,
            ranks=RanksConfig(processes_per_machine=world, shard=shard),
        )
    )
    try:
        result: dict[str, Any] = {"resumed": session.resumed}
        if not session.resumed:
            for e in range(3):
                session.add_episode(f.episode("r", e, steps=10, images=False))
            assert session.trainer.train(3, 60.0) == 3
        result["update_calls"] = session.trainer.counters.update_calls
        result["sharded"] = session.policy.sharded
        result["weights"] = session.policy.get_weights().data.clone()  # gathered from the shards when sharded
        assert isinstance(session.algorithm, SAC)  # its critics are compared too
        result["critic"] = torch.cat([p.detach().reshape(-1) for p in session.algorithm.critic.parameters()])
        if session.resumed:
            batch = fixed_batch(BATCH, state_dim=f.STATE_DIM, action_dim=f.ACTION_DIM, seed=7)
            stats = session._ranked_update(batch) if session.rank is not None else session.algorithm.update(batch)
            result["losses"] = dict(stats.losses)
        torch.save(result, out / "result.pt")
    finally:
        session.close()


def main() -> None:
    run_dir, out, shard = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    group = open_group(RanksConfig(collective_timeout_s=60.0), RankEnv.from_environ())
    try:
        if group.is_lead:
            channel = LeadChannel(group, heartbeat_s=5.0)
            set_this_rank(ThisRank(group, channel))
            try:
                run(run_dir, out, shard, group.env.world_size)
            finally:
                channel.close()
        else:
            follow(learning(), group)
    finally:
        set_this_rank(None)
        close_group()


if __name__ == "__main__":
    main()
    end_process(0)  # no interpreter teardown: torch's C++ threads can abort it after the work is done
