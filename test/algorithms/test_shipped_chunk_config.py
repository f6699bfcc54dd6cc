"""The shipped learner settings for learning on chunks (config/learning/vla_chunks.yaml) load as a learner reads
them, with the paper's defaults: chunks of 10, batches of 32, lr 1e-5 on a cosine schedule."""

from __future__ import annotations

import pytest

from test.conftest import REPO
from user.buffer.config import BufferConfig
from user.config.strict import from_mapping, load_yaml
from user.learner.config import LearningConfig

PATH = REPO / "config" / "learning" / "vla_chunks.yaml"


def test_the_shipped_chunk_settings_load_with_the_papers_defaults() -> None:
    data = load_yaml(PATH)
    assert set(data) == {"learning", "buffer"}
    learning = from_mapping(LearningConfig, data["learning"], where=f"{PATH}: learning")
    buffer = from_mapping(BufferConfig, data["buffer"], where=f"{PATH}: buffer")
    bc = learning.hg_dagger.bc
    assert (buffer.chunk_horizon, bc.batch_size, bc.lr, bc.lr_schedule) == (10, 32, 1e-5, "cosine")
    assert learning.batch_size == 32 and learning.hg_dagger.chunk_steps == "intervened"
    assert bc.rate(0) == pytest.approx(1e-5) and bc.rate(bc.decay_steps) == pytest.approx(1e-6)
