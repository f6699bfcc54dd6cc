"""Sites as Linux network namespaces for tests and benchmarks (root only): a `cloud` namespace and one per lab,
each lab joined to the cloud by its own veth pair on a private /30 (10.215.<k>.1 cloud side, .2 lab side),
optionally rate-limited with `tbf` on both ends. Processes run inside with `ip netns exec`. Everything is
created by `Netns()` and removed by `close()` (deleting a namespace removes its veth ends).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from typing import IO, Any

SUBNET = "10.215"  # private test addresses, only inside the namespaces


def available() -> str | None:
    """Why namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Netns:
    """`cloud` plus `labs`, each lab linked to the cloud; `rate_mbit` > 0 shapes every link with tbf."""

    def __init__(self, tag: str, labs: Sequence[str], rate_mbit: float = 0.0) -> None:
        self.tag = tag[:6]
        self.labs = list(labs)
        self.names = {site: f"{self.tag}_{site}" for site in ["cloud", *self.labs]}
        self.made: list[str] = []
        try:
            for name in self.names.values():
                _ip("netns", "add", name)
                self.made.append(name)
                _ip("-n", name, "link", "set", "lo", "up")
            for k, lab in enumerate(self.labs, 1):
                self._link(k, lab, rate_mbit)
        except Exception:
            self.close()
            raise

    def _link(self, k: int, lab: str, rate_mbit: float) -> None:
        cloud_if, lab_if = f"{self.tag}c{k}", f"{self.tag}l{k}"
        _ip("link", "add", cloud_if, "netns", self.names["cloud"], "type", "veth", "peer", "name", lab_if,
            "netns", self.names[lab])  # fmt: skip
        for ns, dev, host in ((self.names["cloud"], cloud_if, 1), (self.names[lab], lab_if, 2)):
            _ip("-n", ns, "addr", "add", f"{SUBNET}.{k}.{host}/30", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            if rate_mbit > 0:
                _ip("netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{rate_mbit}mbit",
                    "burst", "64kb", "latency", "400ms")  # fmt: skip

    def cloud_address(self, lab: str) -> str:
        """The cloud's address on `lab`'s link."""
        return f"{SUBNET}.{self.labs.index(lab) + 1}.1"

    def popen(self, site: str, argv: Sequence[str], out: IO[bytes], env: dict[str, str] | None = None) -> Any:
        return subprocess.Popen(["ip", "netns", "exec", self.names[site], *argv], stdout=out,
                                stderr=subprocess.STDOUT, env=env)  # fmt: skip

    def close(self) -> None:
        for name in reversed(self.made):
            with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
                _ip("netns", "del", name)
        self.made.clear()
