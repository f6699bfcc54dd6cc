"""`python -m user.distributed.launch TORCHRUN_ARGS`: torchrun (`torch.distributed.run`), with two differences.

- A stop by signal (Ctrl-C, the launcher's SIGTERM) is a stop, not a failure: torchrun's agent raises
  `SignalException` once it has passed the signal to its ranks and they ended; the ranks say themselves how they
  ended (the lead writes the node's status), so this exits 0 with one line instead of a traceback and exit code 1.
- A rank's own exit code other than 0 would make torchrun restart the group, so a lead whose run is complete
  exits 0 and leaves its code in the file `EXIT_FILE_ENV` names; this process then exits with it (the learner's
  run-complete code, on which `user bringup` stops the deployment).

A rank that fails is still torchrun's failure: restarts, then its summary and exit code 1."""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
from pathlib import Path

from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.run import main as torchrun

_log = logging.getLogger("user.distributed.launch")
EXIT_FILE_ENV = "USER_RANKS_EXIT_FILE"  # where the lead leaves the exit code this launcher ends with


def main(argv: list[str] | None = None) -> int:
    with tempfile.TemporaryDirectory(prefix="user-ranks-") as tmp:
        exit_file = Path(tmp) / "exit_code"
        os.environ[EXIT_FILE_ENV] = str(exit_file)  # the ranks inherit it
        code = _run(sys.argv[1:] if argv is None else argv)
        if code == 0 and exit_file.is_file():
            code = int(exit_file.read_text().strip() or 0)
    return code


def _run(argv: list[str]) -> int:
    try:
        torchrun(argv)
    except SignalException as exc:
        if exc.sigval not in (signal.SIGINT, signal.SIGTERM):
            raise
        logging.basicConfig(level=logging.INFO, format="[%(levelname)s] [%(name)s]: %(message)s")
        _log.info("the learner's ranks stopped on %s", signal.Signals(exc.sigval).name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
