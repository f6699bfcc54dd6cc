"""The prefetch worker after a failure: an item that could not be produced is reported by the `get` that would
have returned it, and the worker goes on (issue 13, finding 6: it used to stop for good, and every later `get`
raised the same error, so one unreadable record ended training)."""

from collections.abc import Iterator

import pytest

from user.buffer.errors import CorruptRecordError
from user.buffer.frames.prefetch import Prefetcher


class Crash(BaseException):
    """Not an Exception: the worker itself is going down."""


def test_a_failed_item_is_raised_once_and_the_worker_goes_on() -> None:
    produced: Iterator[int | Exception] = iter([0, CorruptRecordError("seg_0.mcap", 42, "opcode 0xff"), 2, 3])

    def produce(_timeout: float) -> int | None:
        item = next(produced, None)
        if isinstance(item, Exception):
            raise item
        return item

    pre: Prefetcher[int] = Prefetcher(produce, depth=1)
    try:
        assert pre.get(5.0) == 0
        with pytest.raises(CorruptRecordError, match="seg_0.mcap: bad record at byte 42"):
            pre.get(5.0)
        assert [pre.get(5.0), pre.get(5.0)] == [2, 3]
    finally:
        pre.close()


def test_an_error_that_ends_the_worker_is_raised_by_every_later_get() -> None:
    def produce(_timeout: float) -> int:
        raise Crash("worker going down")

    pre: Prefetcher[int] = Prefetcher(produce, depth=1)
    try:
        for _ in range(2):
            with pytest.raises(Crash, match="worker going down"):
                pre.get(5.0)
    finally:
        pre.close()
