"""Labelling of buffer episodes for the success classifier."""

from __future__ import annotations

import numpy as np

from user.interfaces.domain import Action, Observation, Transition
from user.rewards.labels import LabelConfig, label_episode


def episode(n: int, success_from: int | None) -> list[Transition]:
    def obs(i: int) -> Observation:
        return Observation("r", "t", 0, i, np.zeros(3, dtype=np.float32), i)

    flags = [success_from is not None and i >= success_from for i in range(n)]
    return [Transition(obs(i), Action("r", 0, i, np.zeros(7)), 0.0, obs(i + 1), success=f) for i, f in enumerate(flags)]


def test_successful_episode_has_a_positive_tail_and_an_unlabelled_margin() -> None:
    labels = dict(label_episode(episode(20, 12), LabelConfig(positive_tail=3, margin=4)))
    assert [i for i, y in labels.items() if y] == [12, 13, 14]
    assert [i for i, y in labels.items() if not y] == list(range(8))


def test_failed_episode_is_all_negative() -> None:
    assert label_episode(episode(5, None), LabelConfig()) == [(i, False) for i in range(5)]
