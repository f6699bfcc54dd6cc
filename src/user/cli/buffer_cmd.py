"""`user buffer info | verify | import-bag | export`: inspect, check and reuse a replay buffer directory."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from pathlib import Path

from user.buffer.bagread import BagReader
from user.buffer.config import BufferConfig
from user.buffer.errors import BufferError
from user.buffer.export import EpisodeFilter, export_dataset
from user.buffer.importer import BagImporter, ImportMapping
from user.buffer.index import Index
from user.buffer.info import BufferInfo, buffer_info
from user.buffer.replay import ReplayBuffer
from user.buffer.storage import DiskStorage
from user.buffer.verify import verify
from user.config.strict import ConfigError, from_mapping, load_yaml
from user.interfaces.codec import UnknownTypeError, default_codec

_log = logging.getLogger("user.buffer")
EXIT_PROBLEMS = 1
EXIT_ERROR = 2


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("buffer", help="inspect, verify, import into and export a replay buffer directory")
    bsub = p.add_subparsers(dest="buffer_command", required=True, metavar="VERB")

    info = bsub.add_parser("info", help="counts, episodes, robots, policy versions, sizes, success rate")
    info.add_argument("directory", type=Path)
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(func=_guard(run_info))

    ver = bsub.add_parser("verify", help="check the index against the segments (read-only; exit 1 on problems)")
    ver.add_argument("directory", type=Path)
    ver.add_argument("--no-decode", action="store_true", help="skip reading every indexed message back")
    ver.add_argument("--json", action="store_true", help="print JSON")
    ver.set_defaults(func=_guard(run_verify))

    imp = bsub.add_parser("import-bag", help="add a bag recorded by `ros2 bag record` as whole episodes")
    imp.add_argument("bag", type=Path, help="bag directory, .db3 or .mcap file")
    imp.add_argument("--into", type=Path, required=True, help="buffer directory (created if missing)")
    imp.add_argument("--mapping", type=Path, required=True, help="YAML mapping of topics to transitions")
    imp.add_argument("--as-demos", action="store_true", help="mark the transitions as demonstrations")
    imp.set_defaults(func=_guard(run_import))

    exp = bsub.add_parser("export", help="write whole episodes to a plain dataset directory (npz + images)")
    exp.add_argument("directory", type=Path)
    exp.add_argument("out", type=Path)
    exp.add_argument("--robot", help="only this robot's episodes")
    exp.add_argument("--task", help="only this task's episodes")
    demo = exp.add_mutually_exclusive_group()
    demo.add_argument("--demos-only", action="store_true")
    demo.add_argument("--online-only", action="store_true")
    exp.add_argument("--success-only", action="store_true")
    exp.add_argument("--no-images", action="store_true", help="leave the camera frames out")
    exp.set_defaults(func=_guard(run_export))


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
    for robot, r in info.robots.items():
        print(f"robot {robot}: {r.episodes} episodes, {r.transitions} transitions, success {r.success_rate:.1%}")
    for task, n in info.tasks.items():
        print(f"task {task or '(none)'}: {n} episodes")


def run_info(args: argparse.Namespace) -> int:
    index = Index(args.directory, read_only=True)
    try:
        info = buffer_info(index, args.directory)
    finally:
        index.close()
    if args.json:
        print(json.dumps(info.to_dict(), indent=2))
    else:
        _print_info(info)
    return 0


def run_verify(args: argparse.Namespace) -> int:
    index = Index(args.directory, read_only=True)
    try:
        report = verify(args.directory, index, default_codec(), decode=not args.no_decode)
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
    reader = BagReader(args.bag)
    codec = default_codec()
    with ReplayBuffer.open(args.into, BufferConfig(prefetch=0), codec=codec) as buf:
        rows = buf.storage.index.fetchall("SELECT MAX(episode_id) FROM episodes WHERE robot_id = ?", [mapping.robot_id])
        first = 0 if rows[0][0] is None else int(rows[0][0]) + 1
        importer = BagImporter(mapping, codec, as_demos=args.as_demos, first_episode_id=first)
        episodes = steps = 0
        for transitions in importer.episodes(reader):
            for t in transitions:
                buf.add(t, wall_ns=t.stamp_ns)
            episodes += 1
            steps += len(transitions)
    kind = "demonstration" if args.as_demos else "online"
    print(f"imported {episodes} {kind} episodes ({steps} transitions) from {args.bag} into {args.into}")
    if importer.skipped_steps:
        print(f"skipped {importer.skipped_steps} action messages received before every observed topic had data")
    return 0


def run_export(args: argparse.Namespace) -> int:
    selection = EpisodeFilter(
        robot_id=args.robot,
        task=args.task,
        is_demo=True if args.demos_only else (False if args.online_only else None),
        success=True if args.success_only else None,
    )
    index = Index(args.directory, read_only=True)
    storage = DiskStorage(args.directory, index, default_codec(), BufferConfig().storage)
    try:
        info = export_dataset(storage, args.out, selection, images=not args.no_images)
    finally:
        storage.close()
        index.close()
    print(f"exported {info['episodes']} episodes ({info['transitions']} transitions) to {args.out}")
    return 0
