"""The decoded-frame cache: frames back bit for bit, FIFO eviction, the memory ceiling, growth by blocks, threads."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from user.buffer.frames.frame_cache import BLOCK, FrameCache

TINY = (2, 2, 3)  # 12 bytes a frame: hundreds of frames cost nothing
TINY_BYTES = math.prod(TINY)
JOIN_S = 30.0


def key(i: int) -> bytes:
    return f"frame-{i}".encode()


def tiny(i: int) -> np.ndarray:
    """A frame unique to `i` (its number in the first 4 bytes)."""
    flat = np.full(TINY_BYTES, i % 251, dtype=np.uint8)
    flat[:4] = np.frombuffer(int(i).to_bytes(4, "little"), dtype=np.uint8)
    return flat.reshape(TINY)


def gathered(cache: FrameCache, camera: str, ids: list[int]) -> tuple[np.ndarray, list[int]]:
    out = np.zeros((len(ids), *TINY), dtype=np.uint8)
    missing = cache.gather(camera, [key(i) for i in ids], out)
    return out, missing


def held(cache: FrameCache, camera: str, ids: range) -> list[int]:
    return [i for i in ids if (camera, key(i)) in cache]


def assert_readable(cache: FrameCache, camera: str, ids: list[int]) -> None:
    out, missing = gathered(cache, camera, ids)
    assert missing == []
    for row, i in enumerate(ids):
        assert np.array_equal(out[row], tiny(i)), f"frame {i} came back as another"


def test_a_put_frame_is_gathered_back_bit_identically() -> None:
    cache = FrameCache(4, 2**20)
    pixels = np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    assert cache.put("wrist", b"jpeg", pixels)
    expected = pixels.copy()
    pixels[:] = 0  # the cache holds a copy, not the caller's array
    out = np.zeros((1, 16, 16, 3), dtype=np.uint8)
    assert cache.gather("wrist", [b"jpeg"], out) == []
    assert np.array_equal(out[0], expected)
    assert cache.shape("wrist") == (16, 16, 3) and cache.shape("front") is None


def test_gather_reports_missing_rows_and_fills_held_ones() -> None:
    cache = FrameCache(8, 2**20)
    for i in (0, 2):
        cache.put("wrist", key(i), tiny(i))
    sentinel = 77
    out = np.full((4, *TINY), sentinel, dtype=np.uint8)
    missing = cache.gather("wrist", [key(i) for i in range(4)], out)
    assert missing == [1, 3]
    assert np.array_equal(out[0], tiny(0)) and np.array_equal(out[2], tiny(2))
    assert (out[[1, 3]] == sentinel).all()  # rows not held are left as they were
    assert (cache.stats.hits, cache.stats.misses) == (2, 2)
    assert cache.gather("front", [key(0), key(1)], out[:2]) == [0, 1]  # a camera never seen: all missing


def test_the_same_bytes_put_twice_is_held_once() -> None:
    cache = FrameCache(8, 2**20)
    assert cache.put("wrist", key(0), tiny(0))
    assert cache.put("wrist", key(0), tiny(1))
    assert len(cache) == 1 and cache.stats.inserted == 1
    assert_readable(cache, "wrist", [0])  # the first pixels stay


def test_fifo_eviction_at_capacity() -> None:
    cache = FrameCache(3, 2**20)
    for i in range(5):
        assert cache.put("wrist", key(i), tiny(i))
    assert held(cache, "wrist", range(5)) == [2, 3, 4]
    assert cache.stats.evicted == 2
    assert_readable(cache, "wrist", [2, 3, 4])


def test_no_evict_refuses_when_full_and_keeps_the_held_frames() -> None:
    cache = FrameCache(2, 2**20)
    for i in range(2):
        assert cache.put("wrist", key(i), tiny(i), evict=False)
    assert not cache.put("wrist", key(2), tiny(2), evict=False)
    assert held(cache, "wrist", range(3)) == [0, 1] and cache.stats.evicted == 0
    assert_readable(cache, "wrist", [0, 1])


def test_the_memory_ceiling_limits_frames() -> None:
    cache = FrameCache(100, 3 * TINY_BYTES)
    for i in range(5):
        cache.put("wrist", key(i), tiny(i))
    assert held(cache, "wrist", range(5)) == [2, 3, 4]
    assert cache.nbytes() <= cache.max_bytes


def test_the_memory_ceiling_is_split_between_cameras() -> None:
    cache = FrameCache(100, 4 * TINY_BYTES)
    for i in range(4):
        cache.put("wrist", key(i), tiny(i))
    assert held(cache, "wrist", range(4)) == [0, 1, 2, 3]
    cache.put("front", key(10), tiny(10))  # a second camera: the wrist's share halves, its oldest leave
    assert held(cache, "wrist", range(4)) == [2, 3]
    for i in range(11, 14):
        cache.put("front", key(i), tiny(i))
    assert held(cache, "front", range(10, 14)) == [12, 13]
    assert held(cache, "wrist", range(4)) == [2, 3]  # one camera's frames never push out another's
    assert_readable(cache, "wrist", [2, 3])
    assert_readable(cache, "front", [12, 13])


def test_allocated_memory_stays_within_the_ceiling_when_a_camera_joins() -> None:
    cache = FrameCache(100, 4 * TINY_BYTES)
    for i in range(4):
        cache.put("wrist", key(i), tiny(i))
    for i in range(2):
        cache.put("front", key(i), tiny(i))
    assert cache.nbytes() <= cache.max_bytes
    assert_readable(cache, "wrist", [2, 3])
    assert_readable(cache, "front", [0, 1])


def test_shrinking_frees_memory_and_keeps_the_newest_frames_readable() -> None:
    count = 2 * BLOCK + 10
    cache = FrameCache(count, 2**30)
    for i in range(count):
        cache.put("wrist", key(i), tiny(i))
    keep = BLOCK // 2
    cache.set_capacity(keep)
    assert cache.nbytes() <= keep * TINY_BYTES  # the blocks are given back, not only the slots
    assert held(cache, "wrist", range(count)) == list(range(count - keep, count))
    assert_readable(cache, "wrist", list(range(count - keep, count)))
    cache.set_capacity(count)  # and it grows again from there, FIFO order kept
    for i in range(count, count + BLOCK):
        assert cache.put("wrist", key(i), tiny(i))
    ids = list(range(count - keep, count + BLOCK))
    assert held(cache, "wrist", range(count + BLOCK)) == ids
    assert_readable(cache, "wrist", ids)
    cache.set_capacity(3)
    assert held(cache, "wrist", range(count + BLOCK)) == ids[-3:]  # the oldest still leave first
    assert_readable(cache, "wrist", ids[-3:])


def test_a_frame_of_another_shape_is_refused() -> None:
    cache = FrameCache(8, 2**20)
    assert cache.put("wrist", key(0), tiny(0))
    assert not cache.put("wrist", key(1), np.zeros((3, 3, 3), dtype=np.uint8))
    assert not cache.put("wrist", key(2), tiny(2).astype(np.float32))
    assert held(cache, "wrist", range(3)) == [0]
    assert cache.shape("wrist") == TINY


@pytest.mark.parametrize(("capacity", "max_bytes"), [(0, 2**20), (8, 0)])
def test_a_cache_without_room_refuses_a_frame(capacity: int, max_bytes: int) -> None:
    cache = FrameCache(capacity, max_bytes)
    assert not cache.put("wrist", key(0), tiny(0))
    assert len(cache) == 0


def test_set_capacity_shrinking_evicts_the_oldest() -> None:
    cache = FrameCache(5, 2**20)
    for i in range(5):
        cache.put("wrist", key(i), tiny(i))
    cache.set_capacity(2)
    assert cache.capacity == 2
    assert held(cache, "wrist", range(5)) == [3, 4]
    cache.put("wrist", key(5), tiny(5))
    assert held(cache, "wrist", range(6)) == [4, 5]
    assert_readable(cache, "wrist", [4, 5])


def test_growing_beyond_one_block_keeps_every_frame_readable() -> None:
    count = 2 * BLOCK + 10
    cache = FrameCache(count, 2**30)
    for i in range(count):
        assert cache.put("wrist", key(i), tiny(i))
    assert len(cache) == count and cache.nbytes() == count * TINY_BYTES
    assert_readable(cache, "wrist", list(range(count))[::-1])
    for i in range(count, count + 5):  # full: FIFO across blocks
        cache.put("wrist", key(i), tiny(i))
    assert held(cache, "wrist", range(count + 5)) == list(range(5, count + 5))
    assert_readable(cache, "wrist", list(range(5, count + 5)))


@pytest.mark.parametrize("limits", [(10, BLOCK + 40), (10, 20, BLOCK + 5), (BLOCK - 1, 2 * BLOCK + 3)])
def test_a_short_last_block_grows_when_the_limit_is_raised(limits: tuple[int, ...]) -> None:
    cache = FrameCache(limits[0], 2**30)
    put = 0
    for limit in limits:
        cache.set_capacity(limit)
        while put < limit:
            assert cache.put("wrist", key(put), tiny(put))
            put += 1
        assert len(cache) == limit
        assert_readable(cache, "wrist", list(range(limit)))
    assert cache.nbytes() == limits[-1] * TINY_BYTES  # slots are neither lost nor allocated twice


def test_concurrent_put_and_gather_do_not_corrupt() -> None:
    frames = 3 * BLOCK
    cache = FrameCache(BLOCK + 44, 2**30)  # grows past a block and evicts while threads read
    errors: list[str] = []

    def writer(part: int) -> None:
        for i in range(part, frames, 2):
            cache.put("wrist", key(i), tiny(i))

    def reader(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(200):
            ids = rng.integers(0, frames, 32).tolist()
            out, missing = gathered(cache, "wrist", ids)
            for row in sorted(set(range(len(ids))) - set(missing)):
                if not np.array_equal(out[row], tiny(ids[row])):
                    errors.append(f"row {row} holds another frame than {ids[row]}")

    threads = [threading.Thread(target=writer, args=(p,)) for p in range(2)]
    threads += [threading.Thread(target=reader, args=(s,)) for s in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
        assert not t.is_alive(), "a thread did not finish"
    assert errors == []
    assert_readable(cache, "wrist", held(cache, "wrist", range(frames)))
    assert len(cache) == BLOCK + 44
