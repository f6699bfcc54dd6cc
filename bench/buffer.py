"""Benchmark of the persistent replay buffer (`user.buffer`, issue 4) against in-memory and TorchRL baselines.

Everything runs in one invocation on the same transitions: 128x128 RGB views from two cameras ("wrist",
"front"), JPEG quality 90 (about 5.4 KB each), a 32-float state and a 7-float action, 100 steps per episode.
Each transition carries its observation and its next observation, so four images (about 22 KB of JPEG); the
buffer stores each frame once (a step's next frames are the next step's: `user.buffer.disk.next_frames`), as a
message on its camera's topic right after the record (`user.buffer.disk.camera_topics`), so a miss reads the next
step's record and frames as well.
Sample-rate trials are interleaved round by round and medians taken, so machine noise hits every
configuration alike: read the ratios, not the absolute numbers.

1. Ingest: `ReplayBuffer.add` of N transitions into a fresh buffer with the default storage settings
   (fsync per episode, segments of 50 episodes) and cache_ratio 1.0. Target: >= 2,000 transitions/s.
2. Sampling, batch 256, uniform sampler, prefetch 2 (`buffer.sample()`), at cache ratios 1.0, 0.5, 0.25,
   0.1. The cache of each ratio holds what ingest with that ratio leaves behind: the newest ceil(ratio*N)
   transitions (FIFO). Two output forms, both reported:
     bytes  -- batches carry the compressed JPEG bytes (decode_images=False);
     pixels -- batches carry decoded (B, 128, 128, 3) uint8 pixels (decode_images=True): a cached transition's
               frames come decoded from the frame cache (filled as ingest decodes ahead, frames of the cached
               transitions only); a miss decodes its 4 JPEGs, each distinct frame once, on the decoder's threads
               while the prefetch worker reads the next batch. Frames are distinct per step (a camera's).
   The "plain in-memory buffer" is a Python list of the very same `Transition` objects (CDR-decoded,
   images still JPEG bytes, exactly what our cache holds), the same uniform draw (numpy integers over
   [0, N)) and the same batch assembly (`user.buffer.collate` with the same decode_images), in the
   caller's thread (no prefetch, no disk, no cache, no lock). Target: ours at ratio 1.0 >= 0.9x it.
   Cached rows of a batch are gathered by column (`user.buffer.row_ring`); the rest are read and collated.
   Cost of one cache miss, measured on its own over random transitions (page cache warm): `pread` of the
   record, CDR decode, conversion to a `Transition`, its row of `collate`, and (paid by pixel batches on a
   miss) the decode of its four JPEGs on one thread. Target ("the paper's trend"): the rate at ratio r is no
   lower than the cache-1.0 rate slowed by 256*(1-r) misses of that cost (within 15 %).
3. TorchRL: `torchrl.data.ReplayBuffer(LazyMemmapStorage(N), RandomSampler, batch_size=256)` filled with
   the same transitions as raw arrays (observation/next observation pixels as uint8 HxWx3, states,
   action, reward, done flags), no prefetch. Its sample rate beside ours (pixels vs pixels is like for
   like; bytes shown too), and allocated bytes on disk per transition. Targets: ours at ratio 1.0 >= 1x
   TorchRL's rate; our bytes on disk <= 0.2x TorchRL's.
4. Reopen after kill -9: a writer process fills a buffer (about 100k transitions with the real images, and
   in the default run about 1M state-only transitions, 1000-step episodes, fsync 'never'), leaves 49
   committed episodes in its open segment plus half an episode pending, and is killed with SIGKILL. A
   fresh process times `ReplayBuffer.open` (crash recovery + index load) and its first batch.
   Target: open <= 5 s at 1M.
5. Memory: a separate process ingests real-image transitions (each with its own image bytes) into a
   buffer with a fixed cache of C transitions, sampling a batch per episode, and reads VmRSS from /proc
   and its peak (ru_maxrss). Target: peak RSS <= RSS of the empty opened buffer + cache ceiling
   (C x measured bytes of one cached transition) + 64 MiB fixed overhead, and flat once the cache is full.

Run: python3 bench/buffer.py [--quick]      (default about 4-5 min on 2 cores, --quick under 1 min)
Needs torch and torchrl (the `bench` extra). Temporary data goes under $TMPDIR and is removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from user.buffer import BufferConfig, ReplayBuffer, SamplerConfig, StorageConfig, collate
from user.buffer.disk.next_frames import is_elided, restore
from user.buffer.disk.segments import TRANSITION_TYPE
from user.interfaces.domain import Action, EncodedImage, Observation, Transition, transition_from_msg
from user.interfaces.images import decode_image, encode_jpeg

REPO = Path(__file__).resolve().parent.parent
BATCH = 256
RATIOS = (1.0, 0.5, 0.25, 0.1)
CAMERAS = ("wrist", "front")
STATE_DIM = 32
ACTION_DIM = 7
STEPS = 100  # steps per episode (image data)
BASE_NS = 1_700_000_000_000_000_000
POOL = 48  # distinct JPEG frames per camera
CHILD_TIMEOUT_S = 240.0  # every subprocess wait is bounded by this
INGEST_TARGET = 2000.0
MEM_RATIO_TARGET = 0.9
TORCHRL_RATIO_TARGET = 1.0
HALF_RATIO_TARGET = 0.9  # pixels at cache 0.5 against TorchRL
DISK_RATIO_TARGET = 0.2
REOPEN_TARGET_S = 5.0
TREND_TOLERANCE = 0.85
RSS_FIXED_MIB = 64.0


# ------------------------------------------------------------------------------------------------ data


def make_image(seed: int) -> np.ndarray:
    """128x128 RGB: smooth gradients plus sensor-like noise (about 5.4 KB as JPEG at quality 90)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:128, 0:128]
    base = np.stack([x * 2, (y * 2 + seed * 16) % 256, (x + y) // 2 + 40], axis=-1).astype(np.float64)
    return np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype(np.uint8)


class Frames:
    """JPEG frames per camera (and their decoded pixels, for the raw-array baseline).

    With `episodes` > 0 every step of those episodes has a frame of its own (STEPS + 1 per episode: the next
    observation of step t is the observation of step t+1), as a camera gives: a pool image with the frame's
    number stamped in its corner. With 0, a pool of POOL frames is reused (enough where decoding is not timed)."""

    def __init__(self, episodes: int = 0) -> None:
        pool = {cam: [make_image(k * 7 + c) for k in range(POOL)] for c, cam in enumerate(CAMERAS)}
        self.distinct = episodes > 0
        count = episodes * (STEPS + 1) if self.distinct else POOL
        self.jpeg = {cam: [encode_jpeg(self._stamped(pool[cam], g), 90) for g in range(count)] for cam in CAMERAS}
        self.pixels = {cam: np.stack([decode_image(j) for j in self.jpeg[cam]]) for cam in CAMERAS}

    def _stamped(self, pool: list[np.ndarray], g: int) -> np.ndarray:
        if not self.distinct:
            return pool[g]
        img: np.ndarray = pool[g % POOL].copy()
        for b in range(3):  # three 8x8 blocks carry the frame number's bytes: no two frames alike
            img[0:8, 8 * b : 8 * b + 8] = (g >> (8 * b)) & 0xFF
        return img

    def frame(self, episode: int, step: int) -> int:
        if self.distinct:
            return episode * (STEPS + 1) + step
        return (episode * 31 + step) % POOL


def observation(frames: Frames | None, robot: str, episode: int, step: int, own_bytes: bool = False) -> Observation:
    stamp = BASE_NS + (episode * 10_000 + step) * 100_000_000
    images: tuple[EncodedImage, ...] = ()
    if frames is not None:
        k = frames.frame(episode, step)
        images = tuple(
            EncodedImage(
                cam, "jpeg", bytes(bytearray(frames.jpeg[cam][k])) if own_bytes else frames.jpeg[cam][k], stamp
            )
            for cam in CAMERAS
        )
    state = np.full(STATE_DIM, (episode % 1000) + step / 1000.0, dtype=np.float32)
    return Observation(robot, "peg_insertion", episode, step, state, stamp, images)


def transition(
    frames: Frames | None, episode: int, step: int, steps: int, *, robot: str = "franka_1", own_bytes: bool = False
) -> Transition:
    last = step == steps - 1
    return Transition(
        observation=observation(frames, robot, episode, step, own_bytes),
        action=Action(robot, episode, step, np.full(ACTION_DIM, step / steps, dtype=np.float32)),
        reward=1.0 if last else 0.0,
        next_observation=observation(frames, robot, episode, step + 1, own_bytes),
        terminated=last,
        success=last,
        stamp_ns=BASE_NS + (episode * 10_000 + step) * 100_000_000 + 1,
    )


def transitions(frames: Frames | None, episodes: int, steps: int, first_episode: int = 0) -> Iterator[Transition]:
    for e in range(first_episode, first_episode + episodes):
        for s in range(steps):
            yield transition(frames, e, s, steps)


def disk_bytes(path: Path) -> int:
    """Allocated bytes (st_blocks) of every file under `path`."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def hwm_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


# ------------------------------------------------------------------------------------------------ children


def child_fill(directory: str, episodes: int, steps: int, images: bool, fsync: str) -> None:
    """Fill a buffer, leave an open segment with committed episodes and one half episode pending, then wait
    (the parent kills this process with SIGKILL)."""
    frames = Frames() if images else None
    config = BufferConfig(storage=StorageConfig(fsync=fsync, cache_size=256), prefetch=0)  # type: ignore[arg-type]
    buf = ReplayBuffer.open(directory, config)
    started = time.perf_counter()
    for t in transitions(frames, episodes, steps):
        buf.add(t)
    elapsed = time.perf_counter() - started
    for s in range(steps // 2):  # the unfinished episode: in the writer's memory only
        buf.add(transition(frames, episodes, s, steps))
    print(json.dumps({"transitions": len(buf), "ingest_s": elapsed}), flush=True)
    time.sleep(CHILD_TIMEOUT_S)  # bounded: never outlives the parent's deadline by much
    os._exit(0)


def child_reopen(directory: str) -> None:
    before = rss_mib()
    started = time.perf_counter()
    buf = ReplayBuffer.open(directory, BufferConfig(sampler=SamplerConfig(kind="uniform"), prefetch=0))
    open_s = time.perf_counter() - started
    report = buf.recovery
    started = time.perf_counter()
    buf.sample(BATCH, timeout_s=30.0)
    first_s = time.perf_counter() - started
    out = {
        "transitions": len(buf),
        "open_s": open_s,
        "first_batch_s": first_s,
        "rewritten": len(report.rewritten) if report else 0,
        "rss_growth_mib": rss_mib() - before,
    }
    buf.close()
    print(json.dumps(out), flush=True)


def child_rss(directory: str, transitions_total: int, cache_size: int, decode_images: bool) -> None:
    """Ingest with a fixed cache while sampling; report RSS along the way."""
    import tracemalloc

    frames = Frames()
    # bytes one cached transition holds: build some the way the cache gets them (own image bytes) and count
    tracemalloc.start()
    held = [transition(frames, 10_000 + k // STEPS, k % STEPS, STEPS, own_bytes=True) for k in range(500)]
    per_transition = tracemalloc.get_traced_memory()[0] / len(held)
    tracemalloc.stop()
    del held
    config = BufferConfig(
        storage=StorageConfig(cache_size=cache_size),
        sampler=SamplerConfig(kind="uniform"),
        prefetch=2,
        decode_images=decode_images,
    )
    buf = ReplayBuffer.open(directory, config)
    base = rss_mib()
    trace: list[tuple[int, float, float]] = []  # (transitions, RSS MiB, peak RSS MiB)
    started = time.perf_counter()
    for n in range(transitions_total):
        t = transition(frames, n // STEPS, n % STEPS, STEPS, own_bytes=True)
        if buf.add(t) is not None:
            if len(buf) >= BATCH:
                buf.sample(timeout_s=30.0)
            trace.append((len(buf), rss_mib(), hwm_mib()))
    elapsed = time.perf_counter() - started
    buf.close()
    out = {
        "base_mib": base,
        "per_transition_bytes": per_transition,
        "trace": trace,
        "peak_mib": hwm_mib(),  # VmHWM: ru_maxrss would carry the parent's RSS across fork + exec
        "ingest_per_s": transitions_total / elapsed,
        "disk_mib": disk_bytes(Path(directory)) / 2**20,
    }
    print(json.dumps(out), flush=True)


def run_child(args: list[str], timeout_s: float = CHILD_TIMEOUT_S) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child {args[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def fill_and_kill(directory: Path, episodes: int, steps: int, images: bool, fsync: str) -> dict[str, Any]:
    """Run the filling writer, wait (bounded) for its report, then SIGKILL it."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "fill", str(directory)]
    cmd += [str(episodes), str(steps), "1" if images else "0", fsync]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    try:
        while not lines and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if not lines:
            raise RuntimeError(f"filling writer gave no report (rc {proc.poll()}): {(proc.stderr or [''])}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10.0)
        if proc.returncode != -signal.SIGKILL:
            raise RuntimeError(f"filling writer ended with {proc.returncode}, not SIGKILL")
        result: dict[str, Any] = json.loads(lines[0])
        return result
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10.0)


# ------------------------------------------------------------------------------------------------ sampling


class InMemoryBuffer:
    """The plain baseline: a list of Transitions, a uniform numpy draw, `collate`, all in the caller's thread."""

    def __init__(self, items: list[Transition], decode_images: bool, seed: int = 0) -> None:
        self.items = items
        self.decode_images = decode_images
        self.rng = np.random.default_rng(seed)

    def sample(self) -> Any:
        indices = self.rng.integers(0, len(self.items), size=BATCH)
        return collate([self.items[i] for i in indices], indices, decode_images=self.decode_images)


class OurTrial:
    """A read-only view of the on-disk buffer whose cache holds the newest ceil(ratio*N) transitions."""

    def __init__(self, directory: Path, ratio: float, decode_images: bool, items: list[Transition]) -> None:
        config = BufferConfig(
            storage=StorageConfig(cache_ratio=ratio),
            sampler=SamplerConfig(kind="uniform"),
            prefetch=2,
            decode_images=decode_images,
        )
        self.buf = ReplayBuffer.open(directory, config, read_only=True)
        cache = self.buf.storage.cache
        newest = range(len(items) - cache.capacity, len(items))
        for i in newest:  # what ingest with this ratio leaves cached
            cache.put(i, items[i])
        if self.buf.frames is not None:  # and the frames ingest decodes ahead, those of the cached transitions
            prime(self.buf.frames, [items[i] for i in newest], cache.capacity)

    def sample(self) -> Any:
        return self.buf.sample(timeout_s=30.0)

    def close(self) -> None:
        self.buf.close()


def prime(stage: Any, items: list[Transition], capacity: int) -> None:
    """Decode the frames of `items` ahead into `stage`'s cache (sized for `capacity` transitions), as ingest
    does episode by episode; waits (bounded) whenever the backlog is full."""
    stage.follow(capacity)
    for lo in range(0, len(items), STEPS):
        while not stage.prime(items[lo : lo + STEPS]):
            if not stage.wait_primed(CHILD_TIMEOUT_S):
                raise RuntimeError("frames were not decoded ahead in time")
    if not stage.wait_primed(CHILD_TIMEOUT_S):
        raise RuntimeError("frames were not decoded ahead in time")


def batches_per_second(sample: Callable[[], Any], seconds: float, min_batches: int = 3) -> float:
    """Steady-state rate: the first batch (start-up, prefetch fill) is not timed."""
    sample()
    count, started = 0, time.perf_counter()
    while count < min_batches or time.perf_counter() - started < seconds:
        sample()
        count += 1
    return count / (time.perf_counter() - started)


@dataclass
class Rates:
    samples: dict[str, list[float]] = field(default_factory=dict)

    def add(self, key: str, value: float) -> None:
        self.samples.setdefault(key, []).append(value)

    def median(self, key: str) -> float:
        return statistics.median(self.samples[key])

    def tps(self, key: str) -> float:
        """Transitions per second: the median batches per second times the batch size."""
        return self.median(key) * BATCH


def torchrl_fill(scratch: Path, frames: Frames, items: list[Transition]) -> tuple[Any, float]:
    import torch
    from tensordict import TensorDict
    from torchrl.data import LazyMemmapStorage
    from torchrl.data import ReplayBuffer as TorchRLBuffer
    from torchrl.data.replay_buffers.samplers import RandomSampler

    rb = TorchRLBuffer(
        storage=LazyMemmapStorage(len(items), scratch_dir=str(scratch)), sampler=RandomSampler(), batch_size=BATCH
    )
    # the raw arrays of the same transitions (pixels are the decoded JPEGs)
    frame = {cam: {id(b): k for k, b in enumerate(frames.jpeg[cam])} for cam in CAMERAS}

    def pixels(obs: list[Observation]) -> dict[str, torch.Tensor]:
        out = {"state": torch.from_numpy(np.stack([o.state for o in obs]))}
        for c, cam in enumerate(CAMERAS):
            ks = [frame[cam][id(o.images[c].data)] for o in obs]
            out[cam] = torch.from_numpy(frames.pixels[cam][ks])
        return out

    started = time.perf_counter()
    for lo in range(0, len(items), 500):
        chunk = items[lo : lo + 500]
        n = len(chunk)
        flags = {
            "reward": torch.tensor([[t.reward] for t in chunk], dtype=torch.float32),
            "terminated": torch.tensor([[t.terminated] for t in chunk]),
            "truncated": torch.tensor([[t.truncated] for t in chunk]),
            "done": torch.tensor([[t.done] for t in chunk]),
        }
        td = TensorDict(
            {
                "observation": pixels([t.observation for t in chunk]),
                "action": torch.from_numpy(np.stack([t.action.data for t in chunk])),
                "next": {"observation": pixels([t.next_observation for t in chunk]), **flags},
            },
            batch_size=[n],
        )
        rb.extend(td)
    return rb, len(items) / (time.perf_counter() - started)


@dataclass(frozen=True)
class MissCost:
    read_us: float
    cdr_us: float
    convert_us: float
    collate_us: float  # its row of the batch (`collate`); a cached row is gathered by column instead
    images_us: float

    @property
    def miss_us(self) -> float:
        return self.read_us + self.cdr_us + self.convert_us + self.collate_us


def _timed_read(storage: Any, view: Any, i: int) -> tuple[Transition, tuple[int, int, int]]:
    """Record `i` as it is stored (its camera frames taken back in), and the ns its read, CDR decode and
    conversion took (reading and decoding the frames after the record counts as its read)."""
    seg, pos = view.position(i)
    t0 = time.perf_counter_ns()
    payload = storage.read_payload(seg, pos)
    t1 = time.perf_counter_ns()
    msg = storage.codec.decode(payload, TRANSITION_TYPE)
    t2 = time.perf_counter_ns()
    t = transition_from_msg(msg)
    t3 = time.perf_counter_ns()
    t = storage.with_frames(t, seg, pos)  # the frames on camera topics after the record (`camera_topics`)
    return t, (t1 - t0 + time.perf_counter_ns() - t3, t2 - t1, t3 - t2)


def miss_cost(directory: Path, n: int, count: int) -> MissCost:
    buf = ReplayBuffer.open(directory, BufferConfig(storage=StorageConfig(cache_size=0)), read_only=True)
    try:
        storage = buf.storage
        view = storage.view()
        rng = np.random.default_rng(1)
        storage.read_payload(*view.position(0))  # opens the segment reader
        read = cdr = convert = images = stack = 0
        done = 0
        while done < count:  # like a batch's misses: distinct numbers, read in file order
            picks = sorted({int(i) for i in rng.integers(0, n, size=BATCH)}, key=view.position)
            batch: list[Transition] = []
            for i in picks:
                t, (r, c, v) = _timed_read(storage, view, i)
                if is_elided(t):  # its next frames are in the next step's record (`user.buffer.disk.next_frames`)
                    successor, (r2, c2, v2) = _timed_read(storage, view, i + 1)
                    t, r, c, v = restore(t, successor), r + r2, c + c2, v + v2
                t3 = time.perf_counter_ns()
                if done % 4 == 0:
                    for o in (t.observation, t.next_observation):
                        for img in o.images:
                            decode_image(img.data)
                    images += time.perf_counter_ns() - t3
                read, cdr, convert = read + r, cdr + c, convert + v
                batch.append(t)
                done += 1
            t4 = time.perf_counter_ns()
            collate(batch, np.asarray(picks), decode_images=False)
            stack += time.perf_counter_ns() - t4
    finally:
        buf.close()
    us = 1e-3 / done
    return MissCost(read * us, cdr * us, convert * us, stack * us, images * us * 4)


# ------------------------------------------------------------------------------------------------ main


@dataclass(frozen=True)
class Plan:
    transitions: int
    rounds: int
    trial_s: float
    reopen: tuple[tuple[str, int, int, bool, str], ...]  # label, episodes, steps, images, fsync
    rss_transitions: int
    rss_cache: int
    misses: int  # cache misses timed for the cost of one


PLANS = {
    "default": Plan(
        8_000,
        5,
        0.6,
        (("~100k, images", 999, STEPS, True, "episode"), ("~1M, state-only", 999, 1000, False, "never")),
        20_000,
        2_000,
        2_000,
    ),
    "quick": Plan(3_000, 2, 0.3, (("~100k, state-only", 999, STEPS, False, "never"),), 6_000, 1_000, 600),
}


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def run_child_command(child: list[str]) -> None:
    """The work of a child process (`--child KIND ARGS...`): see the `child_*` functions."""
    kind, rest = child[0], child[1:]
    if kind == "fill":
        child_fill(rest[0], int(rest[1]), int(rest[2]), rest[3] == "1", rest[4])
    elif kind == "reopen":
        child_reopen(rest[0])
    elif kind == "rss":
        child_rss(rest[0], int(rest[1]), int(rest[2]), rest[3] == "1")


Summary = list[tuple[str, str, bool]]  # (target, measured value, met)


def bench_ingest(items: list[Transition], ours_dir: Path, summary: Summary) -> float:
    """1. Ingest into a fresh buffer; returns our bytes on disk per transition."""
    config = BufferConfig(storage=StorageConfig(cache_ratio=1.0), prefetch=0)
    started = time.perf_counter()
    with ReplayBuffer.open(ours_dir, config) as buf:
        for t in items:
            buf.add(t)
        ingest = len(items) / (time.perf_counter() - started)  # what a robot sees: add() returning
        assert buf.frames is not None
        buf.frames.wait_primed(CHILD_TIMEOUT_S)  # frames still being decoded ahead in the background
        with_frames = len(items) / (time.perf_counter() - started)
        skipped, held = buf.frames.primed_skipped, len(buf.frames.cache)
    ours_bytes = disk_bytes(ours_dir) / len(items)
    print(
        f"1. ingest: {ingest:,.0f} transitions/s (fsync per episode, {len(items)} transitions, "
        f"{ours_bytes / 1000:.1f} KB on disk each)\n   frames decoded ahead on a background thread: {held:,} "
        f"({skipped} episodes left to decode when drawn); until the last was decoded {with_frames:,.0f}/s"
    )
    summary.append(("ingest >= 2,000/s", f"{ingest:,.0f}/s", ingest >= INGEST_TARGET))
    return ours_bytes


def sample_rates(plan: Plan, items: list[Transition], ours_dir: Path, rb: Any) -> Rates:
    """Batches/s of every configuration (in-memory, ours per output form and cache ratio, TorchRL), interleaved
    round by round."""
    keys: list[tuple[str, Callable[[], Any]]] = []
    for mode, decode in (("bytes", False), ("pixels", True)):
        keys.append((f"mem/{mode}", functools.partial(InMemoryBuffer, items, decode)))
        for r in RATIOS:
            keys.append((f"ours/{mode}/{r}", functools.partial(OurTrial, ours_dir, r, decode, items)))
    keys.append(("torchrl/pixels", lambda: rb))
    rates = Rates()
    for rnd in range(plan.rounds):
        order = keys[rnd % len(keys) :] + keys[: rnd % len(keys)]
        for key, make in order:
            target = make()
            try:
                trial_s = plan.trial_s * (1.5 if "pixels" in key else 1.0)
                rates.add(key, batches_per_second(target.sample, trial_s))
            finally:
                if isinstance(target, OurTrial):
                    target.close()
    return rates


def report_rates(plan: Plan, rates: Rates) -> None:
    """2. The table of sample rates, against the in-memory buffer and TorchRL."""
    print(f"\n2. sample rate, batch {BATCH}, uniform, transitions/s (median of {plan.rounds} rounds)")
    print("   plain in-memory buffer = list of the same Transitions + numpy uniform draw + collate, no prefetch")
    print(f"   {'':22s}{'bytes':>12s}{'x mem':>8s}{'pixels':>12s}{'x mem':>8s}{'x TorchRL':>11s}")
    tr_rate = rates.tps("torchrl/pixels")
    print(
        f"   {'in-memory':22s}{rates.tps('mem/bytes'):12,.0f}{1.0:8.2f}{rates.tps('mem/pixels'):12,.0f}{1.0:8.2f}"
        f"{rates.tps('mem/pixels') / tr_rate:11.2f}"
    )
    for r in RATIOS:
        b, p = rates.tps(f"ours/bytes/{r}"), rates.tps(f"ours/pixels/{r}")
        print(
            f"   {'ours, cache ' + str(r):22s}{b:12,.0f}{b / rates.tps('mem/bytes'):8.2f}{p:12,.0f}"
            f"{p / rates.tps('mem/pixels'):8.2f}{p / tr_rate:11.2f}"
        )
    print(
        f"   {'TorchRL memmap':22s}{'':12s}{'':8s}{tr_rate:12,.0f}{tr_rate / rates.tps('mem/pixels'):8.2f}{1.0:11.2f}"
    )
    print(f"   ours/bytes at 1.0 vs TorchRL pixels: {rates.tps('ours/bytes/1.0') / tr_rate:.2f}x")


def report_trend(rates: Rates, cost: MissCost) -> bool:
    """The cost of a miss, and whether the rate at each cache ratio follows from it; True when it does."""
    print(
        f"\n   one cache miss: read {cost.read_us:.1f} us + CDR decode {cost.cdr_us:.1f} us + to Transition "
        f"{cost.convert_us:.1f} us + its row of the batch {cost.collate_us:.1f} us = {cost.miss_us:.1f} us; "
        f"JPEG decode of its 4 images {cost.images_us:.0f} us "
        "(pixel batches pay that on a miss, on one thread)"
    )
    print(
        f"   trend: predicted rate = 1 / (batch time at 1.0 + {BATCH}*(1-r)*miss (+ its JPEGs for pixels)), "
        "measured/predicted:"
    )
    trend_ok = True
    for mode in ("bytes", "pixels"):
        t1 = 1.0 / rates.median(f"ours/{mode}/1.0")
        parts = []
        for r in RATIOS[1:]:
            miss_us = cost.miss_us + (cost.images_us if mode == "pixels" else 0.0)
            predicted = BATCH / (t1 + BATCH * (1 - r) * miss_us * 1e-6)
            measured = rates.tps(f"ours/{mode}/{r}")
            ratio = measured / predicted
            trend_ok &= ratio >= TREND_TOLERANCE
            parts.append(f"{r}: {measured:,.0f} vs {predicted:,.0f} ({ratio:.2f})")
        print(f"   {mode:7s}" + "; ".join(parts))
    return trend_ok


def summarise_rates(rates: Rates, trend_ok: bool, summary: Summary) -> None:
    """The sample-rate targets: ours at cache 1.0 against the in-memory buffer and TorchRL, and the trend."""
    m_bytes = rates.tps("ours/bytes/1.0") / rates.tps("mem/bytes")
    m_pix = rates.tps("ours/pixels/1.0") / rates.tps("mem/pixels")
    summary.append(("cache 1.0 >= 0.9x in-memory (bytes)", f"{m_bytes:.2f}x", m_bytes >= MEM_RATIO_TARGET))
    summary.append(("cache 1.0 >= 0.9x in-memory (pixels)", f"{m_pix:.2f}x", m_pix >= MEM_RATIO_TARGET))
    tr_rate = rates.tps("torchrl/pixels")
    t_pix = rates.tps("ours/pixels/1.0") / tr_rate
    t_bytes = rates.tps("ours/bytes/1.0") / tr_rate
    summary.append(("cache 1.0 >= 1x TorchRL (pixels vs pixels)", f"{t_pix:.2f}x", t_pix >= TORCHRL_RATIO_TARGET))
    summary.append(("cache 1.0 >= 1x TorchRL (our bytes vs its pixels)", f"{t_bytes:.2f}x", t_bytes >= 1.0))
    t_half = rates.tps("ours/pixels/0.5") / tr_rate
    summary.append(("cache 0.5 >= 0.9x TorchRL (pixels vs pixels)", f"{t_half:.2f}x", t_half >= HALF_RATIO_TARGET))
    summary.append(("rate vs cache ratio within miss-cost model", "see 2.", trend_ok))


def bench_sampling(root: Path, plan: Plan, frames: Frames, items: list[Transition], summary: Summary) -> float:
    """2. Sample rates of ours (the buffer in root/ours), the in-memory buffer and TorchRL; returns TorchRL's bytes
    on disk per transition."""
    ours_dir = root / "ours"
    torch_dir = root / "torchrl"
    rb, torch_ingest = torchrl_fill(torch_dir, frames, items)
    torch_bytes = disk_bytes(torch_dir) / len(items)
    print(
        f"   TorchRL LazyMemmapStorage extend: {torch_ingest:,.0f} transitions/s (raw arrays given), "
        f"{torch_bytes / 1000:.1f} KB on disk each"
    )
    cost = miss_cost(ours_dir, len(items), plan.misses)
    rates = sample_rates(plan, items, ours_dir, rb)
    del rb  # unmaps TorchRL's files
    report_rates(plan, rates)
    trend_ok = report_trend(rates, cost)
    summarise_rates(rates, trend_ok, summary)
    shutil.rmtree(torch_dir, ignore_errors=True)
    return torch_bytes


def report_disk(ours_bytes: float, torch_bytes: float, summary: Summary) -> None:
    """3. Bytes on disk per transition, ours against TorchRL's."""
    disk_ratio = ours_bytes / torch_bytes
    print(
        f"\n3. bytes on disk per transition: ours {ours_bytes:,.0f} B, TorchRL {torch_bytes:,.0f} B ({disk_ratio:.3f}x)"
    )
    summary.append(("bytes on disk <= 0.2x TorchRL", f"{disk_ratio:.3f}x", disk_ratio <= DISK_RATIO_TARGET))


def bench_reopen(root: Path, plan: Plan, summary: Summary) -> None:
    """4. Reopen after kill -9, for each buffer of the plan."""
    print(
        "\n4. reopen after kill -9 (open segment with 49 committed episodes + half an episode pending; page cache warm)"
    )
    for label, episodes, steps, images, fsync in plan.reopen:
        d = root / f"reopen_{episodes}_{steps}"
        filled = fill_and_kill(d, episodes, steps, images, fsync)
        size = disk_bytes(d)
        re = run_child(["reopen", str(d)])
        print(
            f"   {label}: {re['transitions']:,} transitions, {size / 2**20:,.0f} MiB, written at "
            f"{filled['transitions'] / filled['ingest_s']:,.0f}/s; open {re['open_s']:.2f} s "
            f"({re['rewritten']} segment rewritten), first batch {re['first_batch_s'] * 1000:.0f} ms, "
            f"RSS +{re['rss_growth_mib']:.0f} MiB"
        )
        if re["transitions"] >= 900_000:
            summary.append(("reopen <= 5 s at 1M", f"{re['open_s']:.2f} s", re["open_s"] <= REOPEN_TARGET_S))
        else:
            summary.append((f"reopen at {label} (info; target is at 1M)", f"{re['open_s']:.2f} s", True))
        shutil.rmtree(d, ignore_errors=True)


def bench_memory(root: Path, plan: Plan, summary: Summary) -> None:
    """5. RSS of a process ingesting with a fixed cache, against the cache ceiling."""
    rs = run_child(["rss", str(root / "rss"), str(plan.rss_transitions), str(plan.rss_cache), "0"])
    ceiling = plan.rss_cache * rs["per_transition_bytes"] / 2**20
    limit = rs["base_mib"] + ceiling + RSS_FIXED_MIB
    trace = rs["trace"]
    full = next((rss for n, rss, _ in trace if n >= 2 * plan.rss_cache), trace[-1][1])
    last = trace[-1][1]
    print(
        f"\n5. memory while growing on disk: cache {plan.rss_cache} transitions x "
        f"{rs['per_transition_bytes'] / 1000:.1f} KB = ceiling {ceiling:.0f} MiB; empty buffer "
        f"{rs['base_mib']:.0f} MiB RSS"
    )
    marks = [trace[k] for k in np.linspace(0, len(trace) - 1, 6).astype(int)]
    print("   RSS at " + ", ".join(f"{n:,}: {r:.0f} MiB" for n, r, _ in marks))
    print(
        f"   peak RSS {rs['peak_mib']:.0f} MiB (limit {limit:.0f} = empty + ceiling + {RSS_FIXED_MIB:.0f}); "
        f"{last - full:+.0f} MiB from {2 * plan.rss_cache:,} to {trace[-1][0]:,} transitions; "
        f"{rs['disk_mib']:.0f} MiB on disk; ingest {rs['ingest_per_s']:,.0f}/s with a batch per episode"
    )
    summary.append(("peak RSS <= empty + cache ceiling + 64 MiB", f"{rs['peak_mib']:.0f} MiB", rs["peak_mib"] <= limit))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller run (under a minute)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child_command(args.child)
        return 0

    plan = PLANS["quick" if args.quick else "default"]
    root = Path(tempfile.mkdtemp(prefix="bench_buffer_"))
    summary: Summary = []
    wall = time.perf_counter()
    try:
        print(
            f"buffer benchmark ({'quick' if args.quick else 'default'}): N={plan.transitions} transitions, "
            f"2 cameras 128x128 JPEG q90, batch {BATCH}, {plan.rounds} interleaved rounds, medians"
        )
        frames = Frames(plan.transitions // STEPS)
        jpeg_kb = statistics.mean(len(j) for cam in CAMERAS for j in frames.jpeg[cam]) / 1000
        print(f"mean JPEG {jpeg_kb:.2f} KB; 4 images per transition (observation + next observation)\n")
        items = list(transitions(frames, plan.transitions // STEPS, STEPS))
        ours_bytes = bench_ingest(items, root / "ours", summary)
        torch_bytes = bench_sampling(root, plan, frames, items, summary)
        report_disk(ours_bytes, torch_bytes, summary)
        items.clear()
        bench_reopen(root, plan, summary)
        bench_memory(root, plan, summary)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(f"\nsummary ({time.perf_counter() - wall:.0f} s)")
    for name, value, ok in summary:
        print(f"   {verdict(ok)}  {name:52s} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
