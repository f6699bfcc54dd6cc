"""Three sites as three network namespaces (issue 15): `cloud` (router and learner), `lab_a` (its router, a sim
arm, rollout and expert over Zenoh) and `lab_b` (a ROS 2 site: arm, rollout and expert on rclpy/DDS under
`ros2 launch`, and a bridge node), each lab joined to the cloud by its own veth pair rate-limited to 20 Mbit/s,
every Zenoh link TLS with mutual authentication. Each site is started by its own command inside its namespace,
as on three machines (`user bringup FILE --site`). The cloud's learner stores both arms' demos and online
episodes and the policy acting on both arms advances; a process in lab_a with a valid certificate of another
identity publishing on the weights key is refused by lab_a's router (the learner's identity is not: the rollout
then refuses the forged chunk itself); a process without a certificate cannot join lab_a's router."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from test.conftest import user_cmd, wait_until
from test.deploy.test_ros_site import _stored
from test.helpers.deployments import arm_nodes, learner_node, ros_site
from test.helpers.netns import Netns, available
from user.security.zenoh_files import tls, write

pytest.importorskip("mujoco")
pytestmark = [pytest.mark.ros, pytest.mark.timeout(420)]

LOCAL, LINK = 7447, 7448  # the same ports in every namespace: each has its own loopback


@pytest.fixture
def netns() -> Iterator[Netns]:
    why = available()
    if why is not None:
        pytest.skip(why)
    spaces = Netns(f"u{os.getpid() % 10000}", ["lab_a", "lab_b"], rate_mbit=20.0)
    yield spaces
    spaces.close()


def _zenoh_sites(tmp_path: Path, net: Netns) -> Path:
    path = tmp_path / "sites.yaml"
    path.write_text(
        f"""name: netns_sites
domain: ns
security: {{certs_dir: {tmp_path / "certs"}, identities: [bridge_b, rogue]}}
sites:
  cloud: {{endpoints: [tls/127.0.0.1:{LOCAL}], link: [tls/0.0.0.0:{LINK}],
           dial: [tls/{net.cloud_address("lab_a")}:{LINK}]}}
  lab_a: {{endpoints: [tls/127.0.0.1:{LOCAL}], connect: [cloud]}}
nodes:
{learner_node(["arm_z", "arm_r"])}{arm_nodes("arm_z", "lab_a", 1)}"""
    )
    return path


def _ros_site(tmp_path: Path, net: Netns) -> Path:
    path = tmp_path / "ros_site.yaml"
    path.write_text(ros_site(f"tls/{net.cloud_address('lab_b')}:{LINK}", "ns"))
    return path


FORGE = """
import sys, time
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings
from user.interfaces.codec import default_codec
from user.sync.chunking import Chunk, chunk_to_msg
endpoint, config, seconds = sys.argv[1], sys.argv[2] or None, float(sys.argv[3])
bus = ZenohBus("forger", ZenohSettings(router=[endpoint], config_file=config, mode="client", domain="ns",
                                       router_timeout_s=5.0))
codec = default_codec()
forged = Chunk("policy", 10**6, 0, 1, 4, 0, "float32", b"\\0\\0\\0\\0", "learner")  # a bad CRC, named as the learner
pub = bus.create_publisher("/policy/weights", "user/msg/WeightChunk")
end = time.monotonic() + seconds
while time.monotonic() < end:
    pub.publish(codec.encode(chunk_to_msg(forged, codec, 0), "user/msg/WeightChunk"))
    time.sleep(0.2)
bus.close()
"""


def _forge(net: Netns, tmp_path: Path, identity: str | None, seconds: float = 6.0) -> int:
    """Publish forged weight chunks into lab_a's router as `identity` (None: without a certificate)."""
    config = ""
    if identity is not None:
        config = str(
            write(tmp_path / f"{identity}.json5", {"transport": {"link": {"tls": tls(tmp_path / "certs", identity)}}})
        )
    with open(tmp_path / f"forge_{identity}.out", "wb") as out:
        proc = net.popen("lab_a", [sys.executable, "-c", FORGE, f"tls/127.0.0.1:{LOCAL}", config, str(seconds)], out)
        return int(proc.wait(60))


def test_three_secured_namespaces_one_of_them_ros_learn_together(netns: Netns, tmp_path: Path) -> None:
    sites = _zenoh_sites(tmp_path, netns)
    made = subprocess.run(user_cmd("certs", str(tmp_path / "certs"), "--deployment", str(sites), "--host",
                                   netns.cloud_address("lab_a"), "--host", netns.cloud_address("lab_b")),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert made.returncode == 0, made.stderr
    bridge_config = write(
        tmp_path / "bridge_b.json5", {"transport": {"link": {"tls": tls(tmp_path / "certs", "bridge_b")}}}
    )
    run = tmp_path / "cloud_run"
    outs = {site: open(tmp_path / f"{site}.out", "wb") for site in ("cloud", "lab_a", "lab_b")}  # noqa: SIM115
    procs = {
        "cloud": netns.popen("cloud", user_cmd("bringup", str(sites), "--site", "cloud", "--run-dir", str(run)),
                             outs["cloud"]),
        "lab_a": netns.popen("lab_a", user_cmd("bringup", str(sites), "--site", "lab_a", "--run-dir",
                                               str(tmp_path / "lab_a_run")), outs["lab_a"]),
        "lab_b": netns.popen("lab_b", ["ros2", "launch", "user", "bringup.launch.py",
                                       f"config:={_ros_site(tmp_path, netns)}", f"run_dir:={tmp_path / 'lab_b_run'}"],
                             outs["lab_b"], env=dict(os.environ, USER_ZENOH_CONFIG=str(bridge_config))),
    }  # fmt: skip

    def text(site: str) -> str:
        return (tmp_path / f"{site}.out").read_text(errors="replace")[-3000:]

    try:

        def both_learn() -> bool:
            found = _stored(run)
            return all(arm in found and found[arm][0] >= 2 and found[arm][1] >= 3 for arm in ("arm_z", "arm_r"))

        assert wait_until(both_learn, 360.0, 2.0), (_stored(run), text("cloud"), text("lab_a"), text("lab_b"))
        rollout_log = tmp_path / "lab_a_run" / "logs" / "rollout_arm_z.log"
        assert _forge(netns, tmp_path, "rogue") == 0  # it connected and published: lab_a's router dropped it all
        assert "refused weights" not in rollout_log.read_text()
        assert _forge(netns, tmp_path, "learner") == 0  # the learner's identity passes the router ...
        assert wait_until(lambda: "refused weights" in rollout_log.read_text(), 20.0)  # ... the rollout refuses it
        assert _forge(netns, tmp_path, None, seconds=0.0) != 0  # no certificate: cannot join
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        codes = {}
        for site, proc in procs.items():
            try:
                codes[site] = proc.wait(90)
            except subprocess.TimeoutExpired:
                proc.kill()
                codes[site] = proc.wait(10)
        for out in outs.values():
            out.close()
    assert codes["cloud"] == 0 and codes["lab_a"] == 0, (codes, text("cloud"), text("lab_a"))
