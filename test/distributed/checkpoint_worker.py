"""A rank under torchrun for test_checkpoint: `save DIR MODE` trains a small model 3 steps and saves it (MODE
replicated or sharded); `load DIR MODE` builds a different one, loads the newest checkpoint and trains one step.
Each rank writes what it holds to DIR/<verb>_rank<N>.pt for the test to compare."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict, set_state_dict

from user.distributed import checkpoint
from user.distributed.group import RankEnv, close_group, end_process, open_group
from user.distributed.ranks import RanksConfig


class App:
    """A model, its Adam and a counter: what a learner's checkpoint holds, in small."""

    def __init__(self, seed: int) -> None:
        torch.manual_seed(seed)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-2)
        self.steps = 0

    def train(self) -> float:
        x = torch.linspace(-1, 1, 32).reshape(8, 4)
        loss = (self.net(x) - 1.0).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.steps += 1
        return float(loss)

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": get_model_state_dict(self.net),
            "optim": get_optimizer_state_dict(self.net, self.opt),
            "steps": self.steps,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        set_state_dict(self.net, self.opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        self.steps = state["steps"]


def main() -> None:
    verb, directory, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    group = open_group(RanksConfig(collective_timeout_s=60.0), RankEnv.from_environ())
    try:
        if verb == "save":
            app = App(seed=1)
            for _ in range(3):
                app.train()
            checkpoint.save(app, directory, app.steps, group, sharded=mode == "sharded")
        else:
            app = App(seed=2)
            found = checkpoint.latest(directory)
            assert found is not None
            checkpoint.load(app, found, group, sharded=mode == "sharded")
        held = {k: v.clone() for k, v in app.net.state_dict().items()}
        loss = app.train()  # the same next step from the same state: the same loss and weights
        torch.save({"before": held, "steps": app.steps, "loss": loss}, directory / f"{verb}_rank{group.env.rank}.pt")
    finally:
        close_group()


if __name__ == "__main__":
    main()
    end_process(0)  # no interpreter teardown: torch's C++ threads can abort it after the work is done
