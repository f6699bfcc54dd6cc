"""A node that fails while it runs (`Node.fail`: its control thread died, its training stopped) ends its process as
failed (exit code 1, the reason in its status line), after its own shutdown, so the launcher respawns it or reports
it gone instead of supervising a live process that does nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from user.runtime.status import ENV_STATUS_FILE, EXIT_FAILED, FAILED, read_status

FAILING_NODE = """
import threading
import user.runtime.runner as runner
from user.runtime.logs import setup_logging
from user.runtime.node import Node

class Bus:  # what the base class reads of a bus
    name = "failing"

class Failing(Node):
    def __init__(self, bus):
        super().__init__(bus)
        threading.Timer(0.3, self.fail, args=("the control loop died: RuntimeError: arm fault",)).start()

    def destroy(self):
        print("destroyed", flush=True)

setup_logging()
runner.load_kind = lambda kind: Failing
raise SystemExit(runner.serve("failing", "failing", Bus(), lambda: print("closed", flush=True), runner.StopSignal()))
"""


def test_a_node_that_fails_ends_its_process_as_failed_with_the_reason(tmp_path: Path) -> None:
    status = tmp_path / "failing.status"
    env = {**os.environ, ENV_STATUS_FILE: str(status)}
    done = subprocess.run([sys.executable, "-c", FAILING_NODE], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == EXIT_FAILED, done.stderr
    assert done.stdout.splitlines() == ["destroyed", "closed"]  # shut down in order, as on a signal
    read = read_status(status)
    assert read is not None and read.state == FAILED and read.reason == "the control loop died: RuntimeError: arm fault"
    assert "node failing failed: the control loop died" in done.stderr + done.stdout


def test_fail_is_said_once_and_asks_the_runner_once() -> None:
    from user.runtime.node import Node

    class Bus:
        name = "n"

    node = Node(Bus())  # type: ignore[arg-type]
    asked: list[int] = []
    node.request_stop = lambda: asked.append(1)
    node.fail("first")
    node.fail("second")
    assert node.failure == "first" and asked == [1]
