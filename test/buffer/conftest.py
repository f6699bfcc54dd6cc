"""Fixtures of the buffer tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from user.buffer.writer import EpisodeWriter


@pytest.fixture
def writers() -> Iterator[list[EpisodeWriter]]:
    """Writers made by a test, closed with their storage and index at its end."""
    made: list[EpisodeWriter] = []
    yield made
    for w in made:
        w.close()
        w.storage.close()
        w.index.close()
