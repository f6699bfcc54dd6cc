"""The FIFO cache: newest in, oldest out, bounded absolutely or as a ratio of what is stored."""

from test.buffer.factories import transition
from user.buffer.cache import TransitionCache, cache_capacity

T = transition("arm", 0, 0, 1, images=False)


def test_fifo_evicts_the_oldest() -> None:
    cache = TransitionCache(3)
    for i in range(5):
        cache.put(i, T)
    assert len(cache) == 3
    assert cache.get(1) is None and cache.get(2) is T and cache.get(4) is T
    assert (cache.hits, cache.misses) == (2, 1)


def test_a_hit_does_not_refresh_an_entry() -> None:
    cache = TransitionCache(2)
    cache.put(0, T)
    cache.put(1, T)
    cache.get(0)
    cache.put(2, T)
    assert 0 not in cache and 1 in cache  # FIFO, not LRU


def test_shrinking_evicts_and_zero_disables() -> None:
    cache = TransitionCache(4)
    for i in range(4):
        cache.put(i, T)
    cache.set_capacity(1)
    assert len(cache) == 1 and 3 in cache
    cache.set_capacity(0)
    cache.put(9, T)
    assert len(cache) == 0


def test_capacity_absolute_or_ratio() -> None:
    assert cache_capacity(100, 0.0, 10_000) == 100
    assert cache_capacity(100, 0.25, 10_000) == 2500
    assert cache_capacity(100, 0.25, 0) == 1
