"""A rank under `user.distributed.launch` for test_launch: rank 0 hands the exit code argv[1] to the launcher as a
learner's lead does (`handed_over`) and exits 0; the launcher must end with that code, not restart the group."""

from __future__ import annotations

import os
import sys

from user.nodes.learner_ranks import handed_over

if __name__ == "__main__":
    code = int(sys.argv[1]) if os.environ.get("RANK") == "0" else 0
    sys.exit(handed_over(code))
