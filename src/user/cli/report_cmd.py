"""`user report RUN_DIR [--out FILE]`: a run directory as a self-contained HTML report (learning curves, per-robot
success and intervention rates, the learner's timing, the buffer's composition, the configuration) and a PNG
summary beside it (`user.report`)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from user.report.errors import ReportError

_log = logging.getLogger("user.report")
EXIT_ERROR = 2


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("report", help="write a self-contained HTML report and a PNG summary of a run directory")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory (`user bringup --run-dir`)")
    p.add_argument(
        "--out",
        type=Path,
        help="the HTML file (default RUN_DIR/report.html); the PNG summary goes beside it (same name, .png)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from user.report.write import write_report  # matplotlib and the buffer's index only when the command runs

    try:
        files = write_report(args.run_dir, args.out)
    except (ReportError, OSError) as exc:
        _log.error("%s", exc)
        return EXIT_ERROR
    for line in files.notes:
        _log.warning("missing from the report: %s", line)
    print(f"report:  {files.html}")
    print(f"summary: {files.png if files.png is not None else '(none: see the warnings above)'}")
    return 0
