"""A learner's ranks on two machines: two network namespaces joined by a veth pair, one torchrun in each meeting at
a c10d rendezvous on the home machine's address; the second machine's rank cannot see the home machine's data
directory (hidden behind an empty tmpfs in its own mount namespace) and trains on the share it gets over the link."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import numpy as np
import pytest

from test.distributed.share_worker import global_batch
from test.helpers import netns
from user.distributed.ranks import HOME_ENV, RanksConfig, torchrun_command

WHY_NOT = netns.available()
pytestmark = [pytest.mark.timeout(240), pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))]
REPO = Path(__file__).resolve().parents[2]
PORT = 29531


def test_a_rank_on_a_second_machine_trains_on_data_it_gets_over_the_link(tmp_path: Path) -> None:
    data, out = tmp_path / "home_data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    (data / "buffer.marker").write_text("the home machine's buffer\n")
    net = netns.Netns(f"dp{uuid.uuid4().hex[:4]}", ["second"])
    try:
        home_ip = net.cloud_address("second")
        config = RanksConfig(machines=2, rendezvous=f"{home_ip}:{PORT}", run_id=f"t{uuid.uuid4().hex[:6]}")
        target = ["test.distributed.two_machines_worker", str(data), str(out)]
        command = torchrun_command(config, target)
        joining = torchrun_command(config, target, home=False, address=f"{netns.SUBNET}.1.2")
        base = dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'src'}", OMP_NUM_THREADS="1")
        base.pop(HOME_ENV, None)
        home_env = dict(base, GLOO_SOCKET_IFNAME=f"{net.tag}c1", **{HOME_ENV: "1"})
        second_env = dict(base, GLOO_SOCKET_IFNAME=f"{net.tag}l1")
        hide = f"mount -t tmpfs none {data} && exec " + " ".join(joining)  # its own view: the data dir is empty
        with (tmp_path / "home.log").open("wb") as home_log, (tmp_path / "second.log").open("wb") as second_log:
            home = net.popen("cloud", command, home_log, env=home_env)
            second = net.popen("second", ["unshare", "--mount", "sh", "-c", hide], second_log, env=second_env)
            codes = [home.wait(timeout=180), second.wait(timeout=60)]
        logs = (tmp_path / "home.log").read_text(errors="replace")[-2000:] + (tmp_path / "second.log").read_text(
            errors="replace"
        )[-2000:]
        assert codes == [0, 0], logs
    finally:
        net.close()
    ranks = [dict(np.load(out / f"rank{r}.npz")) for r in range(2)]
    lead = next(r for r in ranks if r["lead"])
    other = next(r for r in ranks if not r["lead"])
    assert lead["sees_data"] and not other["sees_data"]
    whole = global_batch(decode=True)
    got = np.concatenate([r["indices"] for r in ranks])
    assert sorted(got.tolist()) == sorted(whole.indices.tolist())
    for r in ranks:  # each share is the lead's rows, state included
        rows = np.searchsorted(whole.indices, r["indices"])
        np.testing.assert_array_equal(r["state"], whole.state[rows])
