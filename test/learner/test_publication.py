"""`Publication`: weights go out until an update's statistics are not finite or the sink refuses the weights; then
publication halts for good with one error line naming the cause and the version robots keep."""

from __future__ import annotations

import logging

import pytest

from user.learner.publication import Publication
from user.sync.errors import PayloadError

LOG = logging.getLogger("test.publication")


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_finite_statistics_and_accepted_weights_publish() -> None:
    publication = Publication(LOG, lambda: 4)
    assert publication.check(1, {"loss/critic": 0.5, "temperature": 0.1})
    assert publication.publish(lambda: 5) == 5 and publication.publish(lambda: None) is None
    assert publication.halted is None


def test_a_statistic_that_is_not_finite_halts_publication_for_good(caplog: pytest.LogCaptureFixture) -> None:
    publication = Publication(LOG, lambda: 4)
    assert not publication.check(3, {"loss/critic": float("nan"), "loss/actor": float("inf"), "q": 1.0})
    assert publication.halted == "training diverged at update call 3: loss/actor = inf, loss/critic = nan"
    assert not publication.check(4, {"loss/critic": 0.5})  # poisoned from then on
    assert publication.publish(lambda: 5) is None
    (alarm,) = _errors(caplog)
    assert alarm.startswith(f"{publication.halted}; weights are no longer published")
    assert "robots keep acting with version 4" in alarm


def test_weights_the_sink_refuses_halt_publication(caplog: pytest.LogCaptureFixture) -> None:
    publication = Publication(LOG, lambda: 2)

    def refuse() -> int:
        raise PayloadError("weights of policy 'p' version 3 not published: weights.w are not finite")

    assert publication.publish(refuse) is None
    assert publication.halted == "weights of policy 'p' version 3 not published: weights.w are not finite"
    assert publication.publish(lambda: 3) is None and not publication.check(9, {})
    assert len(_errors(caplog)) == 1
