"""`user bringup`: a two-node deployment as separate processes, stopped by SIGINT within 5 s."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from test.conftest import free_port, user_cmd, wait_until


def _deployment(tmp_path: Path, endpoint: str, extra_node: str = "") -> Path:
    path = tmp_path / "two_nodes.yaml"
    path.write_text(
        f"""name: two_nodes
router:
  endpoints: [{endpoint}]
  start: auto
log_dir: {tmp_path}/logs
nodes:
  - name: talker
    kind: talker
    params: {{topic: /two_nodes, rate_hz: 20.0}}
  - name: listener
    kind: listener
    params: {{topic: /two_nodes}}
{extra_node}"""
    )
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); look at its state
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def _child_pids(log: str) -> list[int]:
    return [int(line.split("(pid ")[1].split(")")[0]) for line in log.splitlines() if "(pid " in line]


def test_bringup_starts_router_and_nodes_and_sigint_stops_all(tmp_path: Path) -> None:
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    out = tmp_path / "bringup.out"
    with open(out, "wb") as f:
        proc = subprocess.Popen(
            user_cmd("bringup", str(_deployment(tmp_path, endpoint)), "--run-dir", str(tmp_path / "run")),
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    listener_log = tmp_path / "logs" / "listener.log"
    try:
        assert wait_until(lambda: listener_log.exists() and "I heard" in listener_log.read_text(), 30.0), (
            out.read_text()
        )
        pids = _child_pids(out.read_text())
        assert len(pids) == 3  # router, talker, listener
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(10)
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
    text = out.read_text()
    assert code == 0, text
    assert elapsed < 5.0, text
    # ordered shutdown: listener (started last) stops before talker, the router last
    assert text.index("stopped listener") < text.index("stopped talker") < text.index("stopped the Zenoh router")
    assert not any(_alive(pid) for pid in pids)
    assert "Publishing" in (tmp_path / "logs" / "talker.log").read_text()


def test_failing_node_is_respawned_then_given_up(tmp_path: Path) -> None:
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    broken = """  - name: broken
    kind: talker
    params: {rate_hz: -1.0}
    respawn: true
    respawn_delay_s: 0.1
    max_respawns: 2
"""
    out = tmp_path / "bringup.out"
    with open(out, "wb") as f:
        proc = subprocess.Popen(
            user_cmd("bringup", str(_deployment(tmp_path, endpoint, broken)), "--run-dir", str(tmp_path / "run")),
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    try:
        assert wait_until(lambda: "broken exited with code 2\n" in out.read_text(), 40.0), out.read_text()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = out.read_text()
    assert text.count("respawning") == 2
    assert code == 1  # a node failed for good: the run is reported as failed
    assert "below the minimum" in (tmp_path / "logs" / "broken.log").read_text()


def test_bad_deployment_is_refused_naming_key_and_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nnodes:\n  - name: a\n    kind: talker\n    parms: {}\n")
    proc = subprocess.run(
        user_cmd("bringup", str(path), "--run-dir", str(tmp_path / "run")), capture_output=True, timeout=30
    )
    assert proc.returncode == 2
    assert str(path).encode() in proc.stderr and b"unknown key 'parms'" in proc.stderr
