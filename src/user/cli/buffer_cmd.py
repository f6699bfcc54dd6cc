"""`user buffer info | verify | import-bag | export | reindex`: inspect, check and reuse a replay buffer directory.

Each takes a buffer directory, or a run directory of `user bringup` (its deployment.yaml beside buffer/), whose
buffer it then uses, saying so in one line on stderr."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from pathlib import Path

from user.buffer.bags.bag_import import ImportResult, import_bag
from user.buffer.bags.export import EpisodeFilter, export_dataset
from user.buffer.bags.importer import ImportMapping
from user.buffer.config import BufferConfig
from user.buffer.disk.directory import SEGMENTS_DIR, has_segments
from user.buffer.episode_window import WindowStats
from user.buffer.errors import BufferError
from user.buffer.index import INDEX_FILE, Index
from user.buffer.info import BufferInfo, buffer_info
from user.buffer.repair.reindex import reindex
from user.buffer.repair.verify import verify
from user.buffer.storage import DiskStorage
from user.cli.progress import Phases
from user.config.strict import ConfigError, from_mapping, load_yaml
from user.deploy.run_dir import BUFFER_DIR, SAVED_DEPLOYMENT
from user.interfaces.codec import UnknownTypeError, default_codec

_log = logging.getLogger("user.buffer")
EXIT_PROBLEMS = 1
EXIT_ERROR = 2
DIRECTORY_HELP = "buffer directory, or a run directory (its buffer/ is used)"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("buffer", help="inspect, verify, import into and export a replay buffer directory")
    bsub = p.add_subparsers(dest="buffer_command", required=True, metavar="VERB")

    info = bsub.add_parser("info", help="counts, episodes, robots, policy versions, sizes, success rate")
    info.add_argument("directory", type=Path, help=DIRECTORY_HELP)
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(func=_guard(run_info))

    ver = bsub.add_parser("verify", help="check the index against the segments (read-only; exit 1 on problems)")
    ver.add_argument("directory", type=Path, help=DIRECTORY_HELP)
    ver.add_argument("--no-decode", action="store_true", help="skip reading every indexed message back")
    ver.add_argument("--json", action="store_true", help="print JSON")
    ver.set_defaults(func=_guard(run_verify))

    imp = bsub.add_parser("import-bag", help="add a bag recorded by `ros2 bag record` as whole episodes")
    imp.add_argument("bag", type=Path, help="bag directory, .db3 or .mcap file")
    imp.add_argument("--into", type=Path, required=True, help="buffer directory (created if missing) or run directory")
    imp.add_argument("--mapping", type=Path, required=True, help="YAML mapping of topics to transitions")
    imp.add_argument("--as-demos", action="store_true", help="mark the transitions as demonstrations")
    imp.set_defaults(func=_guard(run_import))

    exp = bsub.add_parser("export", help="write whole episodes to a plain dataset directory (npz + images)")
    exp.add_argument("directory", type=Path, help=DIRECTORY_HELP)
    exp.add_argument("out", type=Path)
    exp.add_argument("--robot", help="only this robot's episodes")
    exp.add_argument("--task", help="only this task's episodes")
    demo = exp.add_mutually_exclusive_group()
    demo.add_argument("--demos-only", action="store_true")
    demo.add_argument("--online-only", action="store_true")
    exp.add_argument("--success-only", action="store_true")
    exp.add_argument("--no-images", action="store_true", help="leave the camera frames out")
    exp.set_defaults(func=_guard(run_export))

    rei = bsub.add_parser("reindex", help="rebuild the index from the segments (when it is missing or damaged)")
    rei.add_argument("directory", type=Path, help=DIRECTORY_HELP)
    rei.add_argument("--json", action="store_true", help="print JSON")
    rei.set_defaults(func=_guard(run_reindex))


class NotABufferDirectoryError(BufferError):
    """A directory argument that is neither a buffer directory nor a run directory holding one."""


def _holds_buffer(directory: Path) -> bool:
    return (directory / INDEX_FILE).is_file() or has_segments(directory)


def buffer_dir(path: Path, *, create: bool = False) -> Path:
    """The buffer directory that the argument `path` names: `path` itself when it holds a buffer, the `buffer/`
    of a run directory (said in one line), or, with `create` (import-bag --into), `path` for a new buffer.
    NotABufferDirectoryError naming `path` otherwise."""
    run_buffer = path / BUFFER_DIR
    is_run = (path / SAVED_DEPLOYMENT).is_file()
    if _holds_buffer(path):
        return path
    if _holds_buffer(run_buffer) or (create and is_run):
        _log.info("%s is a run directory: using its buffer %s", path, run_buffer)
        return run_buffer
    if create:
        return path
    if is_run:
        raise NotABufferDirectoryError(
            f"{path} is a run directory without a buffer ({run_buffer} holds no {INDEX_FILE} and no segments: "
            "its learner has stored no episode)"
        )
    what = "no such directory" if not path.exists() else "not a buffer directory"
    raise NotABufferDirectoryError(
        f"{path}: {what}: expected a buffer directory (holding {INDEX_FILE} or {SEGMENTS_DIR}/) or a run directory "
        f"of `user bringup` (holding {SAVED_DEPLOYMENT} and {BUFFER_DIR}/)"
    )


def _guard(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return int(fn(args))
        except (BufferError, ConfigError, UnknownTypeError, OSError) as exc:
            _log.error("%s", exc)
            return EXIT_ERROR

    return wrapped


def _print_info(info: BufferInfo) -> None:
    mib = info.bytes_on_disk / (1024 * 1024)
    print(f"buffer:        {info.directory}")
    print(f"transitions:   {info.transitions} ({info.demo_transitions} demo, {info.intervened_transitions} intervened)")
    print(
        f"episodes:      {info.episodes} (success rate {info.success_rate:.1%}, online {info.online_success_rate:.1%})"
    )
    print(f"segments:      {info.segments_closed} closed, {info.segments_open} open, {mib:.1f} MiB on disk")
    versions = info.policy_versions
    shown = f"{versions[0]}..{versions[-1]} ({len(versions)} distinct)" if versions else "none"
    print(f"policy:        versions {shown}")
    print(f"recent:        {_recent_text(info.recent, info.recent_window)}")
    for robot, r in info.robots.items():
        print(
            f"robot {robot}: {r.episodes} episodes ({r.demo_episodes} demo), {r.transitions} transitions, "
            f"success {r.success_rate:.1%}; recent: {_recent_text(r.recent, info.recent_window)}"
        )
    for task, n in info.tasks.items():
        print(f"task {task or '(none)'}: {n} episodes")


def _recent_text(stats: WindowStats | None, window: int) -> str:
    """The window of latest online episodes in words, e.g. for `user buffer info`."""
    if stats is None:
        return "no online episodes"
    return (
        f"{stats.episodes} online episodes (window {window}): return mean {stats.mean_return:.2f}, "
        f"last {stats.last_return:.2f}; length {stats.mean_length:.1f} steps; success {stats.success_rate:.1%}; "
        f"interventions {stats.mean_interventions:.1f} steps/episode"
    )


def run_info(args: argparse.Namespace) -> int:
    directory = buffer_dir(args.directory)
    index = Index(directory, read_only=True)
    try:
        info = buffer_info(index, directory)
    finally:
        index.close()
    if args.json:
        print(json.dumps(info.to_dict(), indent=2))
    else:
        _print_info(info)
    return 0


def run_verify(args: argparse.Namespace) -> int:
    directory = buffer_dir(args.directory)
    index = Index(directory, read_only=True)
    try:
        report = verify(directory, index, default_codec(), decode=not args.no_decode)
    finally:
        index.close()
    if args.json:
        print(json.dumps({"ok": report.ok, **report.__dict__}, indent=2))
    else:
        for problem in report.problems:
            print(f"PROBLEM: {problem}")
        state = "OK" if report.ok else f"{len(report.problems)} problem(s)"
        print(f"{state}: {report.transitions} transitions, {report.episodes} episodes, {report.segments} segments")
    return 0 if report.ok else EXIT_PROBLEMS


def run_import(args: argparse.Namespace) -> int:
    mapping = from_mapping(ImportMapping, load_yaml(args.mapping), where=str(args.mapping))
    into = buffer_dir(args.into, create=True)
    with Phases() as progress:  # on stderr: a bar on a terminal, a line every few seconds otherwise
        result = import_bag(args.bag, into, mapping, as_demos=args.as_demos, progress=progress)
    for line in _import_lines(result, args.bag, into):
        print(line)
    return 0


def _import_lines(result: ImportResult, bag: Path, into: Path) -> list[str]:
    r = result.record
    kind = "demonstration" if r.as_demos else "online"
    ids = f"episodes {r.first_episode_id}..{r.episode_ids.stop - 1} of {r.robot_id}" if r.episodes else "no episodes"
    if result.outcome == "already":
        other = "" if result.same_mapping else " with another mapping or --as-demos"
        earlier = f"imported from {r.bag}: {ids}, {r.transitions} transitions"
        return [f"{bag} is already in {into}{other} ({earlier}); nothing imported"]
    lines = [f"imported {r.episodes} {kind} episodes ({r.transitions} transitions) from {bag} into {into} ({ids})"]
    if result.outcome == "resumed":
        lines.append(
            f"finished an interrupted import of this bag: {result.already_stored} of its episodes were already stored"
        )
    if result.skipped_steps:
        lines.append(f"skipped {result.skipped_steps} action messages received before every observed topic had data")
    return lines


def run_export(args: argparse.Namespace) -> int:
    selection = EpisodeFilter(
        robot_id=args.robot,
        task=args.task,
        is_demo=True if args.demos_only else (False if args.online_only else None),
        success=True if args.success_only else None,
    )
    directory = buffer_dir(args.directory)
    index = Index(directory, read_only=True)
    storage = DiskStorage(directory, index, default_codec(), BufferConfig().storage)
    try:
        with Phases() as progress:
            info = export_dataset(storage, args.out, selection, images=not args.no_images, progress=progress)
    finally:
        storage.close()
        index.close()
    print(f"exported {info['episodes']} episodes ({info['transitions']} transitions) to {args.out}")
    return 0


def run_reindex(args: argparse.Namespace) -> int:
    directory = buffer_dir(args.directory)
    report = reindex(directory)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0
    for line in report.lines:
        print(line)
    print(
        f"reindexed {directory}: {report.transitions} transitions, {report.episodes} episodes "
        f"in {report.segments} segments"
    )
    if report.quarantined:
        print(f"kept aside (not deleted): {', '.join(report.quarantined)}")
    return 0
