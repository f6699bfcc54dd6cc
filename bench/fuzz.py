"""Coverage-guided fuzzing (atheris, libFuzzer) of every parser of outside data, one target per run.

Each target feeds the fuzzer's bytes to one parser the way outside data reaches it (a peer's CDR message, a
deployment file, a segment or index file on disk, weight chunks, a pedal's or a SpaceMouse's events) and accepts
only the parser's own typed errors: any other exception, a crash or a hang is a finding, which libFuzzer reports
with the input that caused it (saved as `findings-TARGET-crash-*` / `-timeout-*` beside the corpus). The property
tests in test/fuzz/ cover the same parsers in the default test run; this runs them for minutes with coverage
feedback (the CDR deserializer rosbags generates at run time is exercised but not instrumented).

Run (atheris is in the `bench` extra; about `--minutes` per target, corpus kept under `--corpus`):

    python bench/fuzz.py TARGET [--minutes 10] [--corpus runs/fuzz]     # TARGET: cdr settings segment index
                                                                        #   weights devices, or all
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

TARGETS = ("cdr", "settings", "segment", "index", "weights", "devices")


def _cdr() -> Callable[[bytes], None]:
    from test.interfaces.test_codec import STANDARD_TYPES_USED, _own_types
    from user.interfaces import DecodeError, default_codec

    codec = default_codec()
    types = _own_types() + STANDARD_TYPES_USED

    def one(data: bytes) -> None:
        if not data:
            return
        typename = types[data[0] % len(types)]
        with contextlib.suppress(DecodeError):
            codec.encode(codec.decode(data[1:], typename))

    return one


def _settings() -> Callable[[bytes], None]:
    import yaml

    from user.config.strict import ConfigError, from_mapping
    from user.deploy.deployment import Deployment
    from user.runtime.kinds import KINDS, load_kind

    specs = [Deployment] + [load_kind(kind).Params for kind in sorted(KINDS)]

    def one(data: bytes) -> None:
        if not data:
            return
        spec = specs[data[0] % len(specs)]
        try:
            document = yaml.safe_load(data[1:].decode("utf-8"))
        except (UnicodeDecodeError, yaml.YAMLError, RecursionError):
            return  # load_yaml turns these into ConfigError naming the file (test/fuzz/test_settings.py)
        with contextlib.suppress(ConfigError):
            from_mapping(spec, document, where="fuzz.yaml")

    return one


def _segment() -> Callable[[bytes], None]:
    from user.buffer.disk.mcapscan import ScanError, scan
    from user.buffer.disk.segments import Position, SegmentReader
    from user.buffer.errors import BufferError

    directory = Path(tempfile.mkdtemp(prefix="fuzz-segment-"))
    path = directory / "seg.mcap"

    def one(data: bytes) -> None:
        try:
            result = scan(data, expect_magic=True)
        except ScanError:
            return
        path.write_bytes(data)
        try:
            with SegmentReader(path) as reader:
                for record in result.messages[:8]:
                    reader.read(Position(record.offset, record.length))
        except BufferError:
            pass

    return one


def _index() -> Callable[[bytes], None]:
    from user.buffer.errors import BufferError
    from user.buffer.index import INDEX_FILE, Index

    def one(data: bytes) -> None:
        with tempfile.TemporaryDirectory(prefix="fuzz-index-") as tmp:
            (Path(tmp) / INDEX_FILE).write_bytes(data)
            try:
                index = Index(Path(tmp), read_only=True)
            except BufferError:
                return
            try:
                index.segments()
                index.episodes()
                index.transitions()
            except BufferError:
                pass
            finally:
                index.close()

    return one


def _weights() -> Callable[[bytes], None]:
    from user.interfaces import DecodeError, default_codec
    from user.sync.assembler import Assembler
    from user.sync.chunking import chunk_from_msg, decode_payload
    from user.sync.errors import WeightSyncError

    codec = default_codec()

    def one(data: bytes) -> None:
        if data[:1] == b"P":
            with contextlib.suppress(WeightSyncError):
                decode_payload(data[2:], "float32" if data[1:2] == b"f" else "bfloat16", 1)
            return
        assembler = Assembler("arm")
        for part in data.split(b"\xff\xfe"):
            try:
                assembler.add(chunk_from_msg(codec.decode(part, "user/msg/WeightChunk")))
            except (DecodeError, WeightSyncError):
                continue

    return one


def _devices() -> Callable[[bytes], None]:
    import atheris

    from test.fuzz.test_devices import _FakeDevice
    from test.teleop.pyspacemouse_standin import AXES, ManualClock, SpaceMouseHardware, make_module
    from user.interfaces.refusals import Refusals
    from user.teleop import DeviceError, EvdevPedal, SpaceMouseTeleop

    hardware = SpaceMouseHardware(ManualClock())
    sys.modules["pyspacemouse"] = make_module(hardware)
    refused = Refusals(logging.getLogger("fuzz.pedal"), level=logging.DEBUG)

    def one(data: bytes) -> None:
        fdp = atheris.FuzzedDataProvider(data)
        device = SpaceMouseTeleop(fdp.ConsumeProbability())
        values = [fdp.ConsumeRegularFloat() for _ in AXES]
        hardware.report(**dict(zip(AXES, values, strict=True)), buttons=[fdp.ConsumeIntInRange(0, 1) for _ in range(2)])
        action = device.read()
        device.close()
        assert action is None or all(-1.0 <= float(a) <= 1.0 for a in action), action
        events = [_event(fdp) for _ in range(fdp.ConsumeIntInRange(0, 8))]
        pedal = EvdevPedal.__new__(EvdevPedal)
        pedal._device = _FakeDevice(events)
        keys = {30: "KEY_A", 46: ["KEY_C", "KEY_CAPS"], 256: ("BTN_0", "BTN_MISC")}
        pedal._ecodes = type("Codes", (), {"EV_KEY": 1, "KEY": keys, "keys": keys})
        pedal.path = "/dev/input/fuzz"
        pedal.refused = refused  # as the constructor sets it (the harness had missed it: its first finding)
        try:
            for press in pedal.poll():
                assert press.key and isinstance(press.stamp_ns, int), press
        except DeviceError:
            pass

    return one


def _event(fdp: Any) -> Any:
    from test.fuzz.test_devices import _Event

    kind, code, value = fdp.ConsumeIntInRange(0, 4), fdp.ConsumeInt(2), fdp.ConsumeIntInRange(-1, 2)
    return _Event(kind, code, value, fdp.ConsumeRegularFloat())


_BUILDERS: dict[str, Callable[[], Callable[[bytes], None]]] = {
    "cdr": _cdr,
    "settings": _settings,
    "segment": _segment,
    "index": _index,
    "weights": _weights,
    "devices": _devices,
}


def _seeds(target: str) -> list[bytes]:
    """Valid inputs the fuzzer starts from (it mutates them), so it explores past the first checks."""
    if target == "cdr":
        from test.interfaces.test_codec import STANDARD_TYPES_USED, _own_types, _sample
        from user.interfaces import default_codec
        from user.interfaces.convert import from_data

        codec = default_codec()
        types = _own_types() + STANDARD_TYPES_USED
        return [bytes([i]) + codec.encode(from_data(t, _sample(t), codec)) for i, t in enumerate(types)]
    if target == "settings":
        from user.deploy.deployment import CONFIG_DIR

        return [b"\x00" + path.read_bytes() for path in sorted(CONFIG_DIR.glob("*.yaml"))]
    if target == "weights":
        from test.fuzz.test_weight_chunks import REAL
        from user.interfaces import default_codec
        from user.sync.chunking import chunk_to_msg

        codec = default_codec()
        return [b"\xff\xfe".join(codec.encode(chunk_to_msg(c, codec, 0)) for c in REAL)]
    if target in ("segment", "index"):
        return [_small_buffer_file(target)]
    return []


def _small_buffer_file(which: str) -> bytes:
    """The bytes of a real segment or index: a buffer of a few episodes written by the project's writer."""
    from test.buffer.factories import episode
    from user.buffer.config import BufferConfig
    from user.buffer.replay import ReplayBuffer

    with tempfile.TemporaryDirectory(prefix="fuzz-seed-") as tmp:
        with ReplayBuffer.open(Path(tmp), BufferConfig()) as buf:
            for k in range(3):
                for t in episode("arm", k, 4, images=False):
                    buf.add(t)
        from user.buffer.index import INDEX_FILE

        name = INDEX_FILE if which == "index" else "*.mcap"
        return next(Path(tmp).rglob(name)).read_bytes()


def fuzz(target: str, seconds: int, corpus: Path) -> None:
    """Run libFuzzer on `target` in this process for `seconds` (exits the process when done)."""
    import atheris

    with atheris.instrument_imports(include=["user", "rosbags", "yaml"]):
        one = _BUILDERS[target]()
    corpus.mkdir(parents=True, exist_ok=True)
    if not any(corpus.iterdir()):
        for k, seed in enumerate(_seeds(target)):
            (corpus / f"seed-{k:03d}").write_bytes(seed)
    findings = corpus.parent / f"findings-{target}-"  # crash-*/timeout-* inputs land beside the corpus
    options = [f"-max_total_time={seconds}", "-timeout=10", "-rss_limit_mb=4096", f"-artifact_prefix={findings}"]
    atheris.Setup([sys.argv[0], *options, str(corpus)], one)
    atheris.Fuzz()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", choices=(*TARGETS, "all"))
    parser.add_argument("--minutes", type=float, default=10.0, help="fuzzing time per target")
    parser.add_argument("--corpus", type=Path, default=Path("runs/fuzz"), help="corpus directory (one per target)")
    args = parser.parse_args()
    seconds = max(1, round(60 * args.minutes))
    if args.target != "all":
        fuzz(args.target, seconds, args.corpus / args.target)  # libFuzzer exits the process at the end
        return 0
    failed = []
    for target in TARGETS:  # each target in its own process: libFuzzer ends the process when it is done
        argv = [sys.executable, __file__, target, "--minutes", str(args.minutes), "--corpus", str(args.corpus)]
        done = subprocess.run(argv, env={**os.environ, "PYTHONPATH": _pythonpath()}, check=False)
        print(f"{target}: exit {done.returncode}", flush=True)
        if done.returncode != 0:
            failed.append(target)
    print("findings in: " + (", ".join(failed) if failed else "none"), flush=True)
    return 1 if failed else 0


def _pythonpath() -> str:
    root = Path(__file__).resolve().parents[1]
    return os.pathsep.join([str(root), str(root / "src"), os.environ.get("PYTHONPATH", "")])


if __name__ == "__main__":
    sys.path[:0] = [str(Path(__file__).resolve().parents[1])]
    sys.exit(main())
