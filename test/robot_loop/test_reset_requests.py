"""`ResetRequests`: the service thread asks, the control thread takes and answers; the asker waits with a
deadline and is released when the node stops."""

from __future__ import annotations

import threading
from collections.abc import Callable

from test.conftest import wait_until
from user.robot_loop.reset_requests import ResetOutcome, ResetRequests


def _ask_in_thread(requests: ResetRequests, seed: int, timeout_s: float) -> tuple[threading.Thread, list[ResetOutcome]]:
    out: list[ResetOutcome] = []
    thread = threading.Thread(target=lambda: out.append(requests.ask(seed, timeout_s)))
    thread.start()
    return thread, out


def _taken(requests: ResetRequests, seed: int) -> Callable[[], bool]:
    return lambda: requests.take() == seed


def test_an_asked_reset_is_taken_once_and_its_answer_comes_back() -> None:
    wakes: list[int] = []
    requests = ResetRequests(lambda: wakes.append(1))
    assert requests.take() is None
    thread, out = _ask_in_thread(requests, 7, 20.0)
    assert wait_until(lambda: bool(wakes), 10.0)  # the control thread's wait for an action was interrupted
    assert wait_until(lambda: requests.take() == 7, 10.0)
    assert requests.take() is None  # taken once
    requests.done(None)
    thread.join(10.0)
    assert out == [ResetOutcome(True, None)]


def test_every_request_in_turn_gets_its_own_answer() -> None:
    requests = ResetRequests()
    for seed, refusal in ((1, None), (2, "e-stopped"), (3, None)):
        thread, out = _ask_in_thread(requests, seed, 20.0)
        assert wait_until(_taken(requests, seed), 10.0)
        requests.done(refusal)
        thread.join(10.0)
        assert out == [ResetOutcome(True, refusal)]


def test_a_refused_reset_returns_the_reason() -> None:
    requests = ResetRequests()
    thread, out = _ask_in_thread(requests, -2, 20.0)
    assert wait_until(lambda: requests.take() == -2, 10.0)
    requests.done("robot 'arm' is e-stopped")
    thread.join(10.0)
    assert out == [ResetOutcome(True, "robot 'arm' is e-stopped")]


def test_an_unanswered_reset_is_not_served_after_its_deadline() -> None:
    requests = ResetRequests()
    assert requests.ask(3, 0.05) == ResetOutcome(False)


def test_an_answer_to_an_older_request_does_not_answer_a_newer_one() -> None:
    requests = ResetRequests()
    requests.done(None)  # served before anyone asked
    assert requests.ask(1, 0.05) == ResetOutcome(False)


def test_closing_releases_a_waiting_ask() -> None:
    requests = ResetRequests()
    thread, out = _ask_in_thread(requests, 1, 60.0)
    assert wait_until(lambda: requests.take() == 1, 10.0)
    requests.close()
    thread.join(10.0)
    assert not thread.is_alive() and out == [ResetOutcome(False)]
