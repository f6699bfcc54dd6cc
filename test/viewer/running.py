"""Starting `user view` and the deployment it watches, as subprocesses of a test."""

from __future__ import annotations

import sys

from test.conftest import user_cmd
from user.cli.main import COMMANDS

# Until `view` is one of `user`'s commands, the tests run the command's own parser the way `user` would.
_RUN_VIEW = (
    "import argparse, sys\n"
    "from user.cli import view_cmd\n"
    "from user.runtime.logs import setup_logging\n"
    "parser = argparse.ArgumentParser(prog='user')\n"
    "view_cmd.add_parser(parser.add_subparsers(dest='command', required=True))\n"
    "args = parser.parse_args(sys.argv[1:])\n"
    "setup_logging('INFO')\n"
    "sys.exit(args.func(args))\n"
)


def view_cmd(*args: str) -> list[str]:
    """The command line of `user view ARGS`."""
    if "view" in COMMANDS:
        return user_cmd("view", *args)
    return [sys.executable, "-c", _RUN_VIEW, "view", *args]
