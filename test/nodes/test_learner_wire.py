"""The learner stores a transition's bytes as they arrived on the wire: byte-identical to what was published
(and to what encoding the decoded transition gives), decoding back to the same transition; bytes it could not
store as they came are encoded afresh, and so are transitions with images, whose next frames are stored once, in
the next step's record (read back, they are byte-identical to what was published). Over real Zenoh, live and
re-sent episodes."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from test.buffer import factories
from test.conftest import wait_until
from user.buffer.disk.camera_topics import record
from user.buffer.disk.segments import Position
from user.bus.base import BEST_EFFORT
from user.bus.zenoh_bus import ZenohBus
from user.interfaces import default_codec
from user.interfaces.domain import Transition, transition_to_msg
from user.interfaces.episode_events import EpisodeEvent, EpisodeKind, episode_event_to_msg

pytestmark = pytest.mark.timeout(60)

CODEC = default_codec()
ROBOT = "arm_wire"
LEARNING = {
    "mlp": {"state_dim": 7, "action_dim": 4, "hidden": [8]},
    "rlpd": {"num_critics": 2, "critic_hidden": [8], "batch_size": 8},
}


@pytest.fixture
def learner(make_bus: Callable[..., ZenohBus], tmp_path: Path) -> Iterator[Any]:
    from user.nodes.learner import LearnerNode

    params = {
        "robots": [ROBOT],
        "run_dir": str(tmp_path / "run"),
        "learning": LEARNING,
        "torch_threads": 1,
        "pacing": {"min_transitions": 10_000},
    }  # fmt: skip  (stores only: too few transitions to train)
    node = LearnerNode(make_bus("learner", params))
    yield node
    node.destroy()


def episode(robot: str, episode_id: int, steps: int, *, images: bool = True) -> list[Transition]:
    """The buffer tests' episode with its actions inside the normalised action space [-1, 1] (the learner's door
    refuses others)."""
    return [
        replace(t, action=replace(t.action, data=t.action.data / steps))
        for t in factories.episode(robot, episode_id, steps, images=images)
    ]


def _encode(t: Transition) -> bytes:
    return bytes(CODEC.encode(transition_to_msg(t, CODEC)))


def _stored(learner: Any) -> list[tuple[bytes, Transition]]:
    """(bytes in the segment, the transition read back from disk) of every stored transition, in buffer order."""
    storage = learner.session.buffer.storage
    out = []
    for row in storage.index.transitions():
        payload = storage.read_payload(row.segment_id, Position(row.offset, row.length))
        out.append((payload, storage.read(row.index)))
    return out


def _publish(make_bus: Callable[..., ZenohBus], topic: str, payloads: list[bytes]) -> None:
    bus = make_bus("robot")
    pub = bus.create_publisher(topic, "user/msg/Transition")
    assert wait_until(lambda: bus.count_subscribers(topic) >= 1, 10.0)
    for payload in payloads:
        pub.publish(payload)


def _count_encodes(learner: Any, monkeypatch: pytest.MonkeyPatch) -> list[Transition]:
    """Every transition the buffer's writer encodes itself from now on."""
    writer = learner.session.buffer.writer
    encoded: list[Transition] = []
    encode: Callable[..., bytes] = writer.encode

    def recording_encode(t: Transition, *, keep_next: bool = True) -> bytes:
        encoded.append(t)
        return encode(t, keep_next=keep_next)

    monkeypatch.setattr(writer, "encode", recording_encode)
    return encoded


def test_transitions_are_stored_byte_identical_to_the_wire(
    learner: Any, make_bus: Callable[..., ZenohBus], monkeypatch: pytest.MonkeyPatch
) -> None:
    live = episode(ROBOT, 0, 3, images=False)
    sent = [_encode(t) for t in live]
    encoded = _count_encodes(learner, monkeypatch)
    _publish(make_bus, f"/{ROBOT}/transitions", sent)
    assert wait_until(lambda: learner.session.counters.episodes == 1, 20.0)
    assert encoded == []  # stored as they came, not encoded again
    stored = _stored(learner)
    assert [payload for payload, _ in stored] == sent
    assert [_encode(t) for _, t in stored] == sent  # decodes to the transition that was sent, arrays included
    assert learner.rejected == 0


def test_a_resent_episode_is_stored_byte_identical(
    learner: Any, make_bus: Callable[..., ZenohBus], monkeypatch: pytest.MonkeyPatch
) -> None:
    resent = episode(ROBOT, 4, 2, images=False)
    sent = [_encode(t) for t in resent]
    encoded = _count_encodes(learner, monkeypatch)
    _publish(make_bus, f"/{ROBOT}/transitions/replay", sent)
    assert wait_until(lambda: learner.replayed_episodes == 1, 20.0)
    assert encoded == []
    assert [payload for payload, _ in _stored(learner)] == sent


def test_bytes_that_are_not_what_an_encode_gives_are_encoded_afresh(
    learner: Any, make_bus: Callable[..., ZenohBus], monkeypatch: pytest.MonkeyPatch
) -> None:
    live = episode(ROBOT, 0, 2, images=False)
    encoded = _count_encodes(learner, monkeypatch)
    odd = transition_to_msg(live[0], CODEC)
    odd.header.frame_id = "not the observation's frame"  # a field the stored transition does not keep
    sent = [bytes(CODEC.encode(odd)), _encode(live[1]) + b"\x00\x00"]  # and trailing alignment bytes
    _publish(make_bus, f"/{ROBOT}/transitions", sent)
    assert wait_until(lambda: learner.session.counters.episodes == 1, 20.0)
    stored = _stored(learner)
    assert [payload for payload, _ in stored] == [_encode(t) for t in live]
    assert all(payload != wire for (payload, _), wire in zip(stored, sent, strict=True))
    assert len(encoded) == 2


def test_transitions_with_images_store_each_frame_once_and_read_back_as_sent(
    learner: Any, make_bus: Callable[..., ZenohBus], monkeypatch: pytest.MonkeyPatch
) -> None:
    live = episode(ROBOT, 0, 3)
    sent = [_encode(t) for t in live]
    encoded = _count_encodes(learner, monkeypatch)
    _publish(make_bus, f"/{ROBOT}/transitions", sent)
    assert wait_until(lambda: learner.session.counters.episodes == 1, 20.0)
    stored = _stored(learner)
    assert [_encode(t) for _, t in stored] == sent  # read back: what was sent, frames included
    records = [record(t, keep_next=False) for t in live[:2]] + [record(live[2], keep_next=True)]  # frames on topics
    assert [payload for payload, _ in stored] == [_encode(t) for t in records]
    assert [t.step for t in encoded] == [0, 1, 2, 2]  # each without its next frames, then the last one whole
    assert learner.rejected == 0


def test_an_episode_a_reset_cut_short_is_stored_truncated_and_acknowledged(
    learner: Any, make_bus: Callable[..., ZenohBus]
) -> None:
    """An operator reset ends an episode without a done step: the robot's END event (which may overtake the
    steps, on another topic) makes the learner store the steps it got, the last one truncated, and answer."""
    bus = make_bus("robot")
    steps = episode(ROBOT, 0, 5)[:3]
    events = bus.create_publisher(f"/{ROBOT}/episode_events", "user/msg/EpisodeEvent")
    transitions = bus.create_publisher(f"/{ROBOT}/transitions", "user/msg/Transition")
    acks: list[int] = []
    bus.create_subscription(f"/{ROBOT}/episode_acks", "user/msg/EpisodeAck", lambda p: acks.append(
        int(CODEC.decode(p, "user/msg/EpisodeAck").episode_id)))  # fmt: skip
    for topic in (f"/{ROBOT}/episode_events", f"/{ROBOT}/transitions"):
        assert wait_until(lambda t=topic: bus.count_subscribers(t) >= 1, 10.0)  # type: ignore[misc]
    assert learner._acks[ROBOT].raw.wait_for_subscribers(10.0)
    end = EpisodeEvent(ROBOT, "peg_insertion", 0, EpisodeKind.END, 0, steps=3)
    transitions.publish(_encode(steps[0]))
    events.publish(CODEC.encode(episode_event_to_msg(end, CODEC)))  # before the last two steps
    for t in steps[1:]:
        transitions.publish(_encode(t))
    assert wait_until(lambda: len(learner.session.buffer) == 3 and acks == [0], 10.0), (
        len(learner.session.buffer),
        acks,
    )
    stored = [t for _, t in _stored(learner)]
    assert [t.step for t in stored] == [0, 1, 2] and [t.truncated for t in stored] == [False, False, True]


# ---- the door (issue 13: nothing bad gets in) ---------------------------------------------------------


def _refusal_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused ")]


def test_a_forged_episode_with_values_that_are_not_finite_is_refused_once_and_never_stored(
    learner: Any, make_bus: Callable[..., ZenohBus], caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 1: a forged 1-step episode with NaN values on the replay topic was stored (and poisoned the critic)."""
    caplog.set_level(logging.INFO)
    (forged,) = episode(ROBOT, 900002, 1)
    forged = replace(forged, observation=replace(forged.observation, state=np.full(7, np.nan, np.float32)))
    real = episode(ROBOT, 4, 2)
    _publish(make_bus, f"/{ROBOT}/transitions/replay", [_encode(forged)] * 3 + [_encode(t) for t in real])
    assert wait_until(lambda: learner.replayed_episodes == 1, 20.0)  # the real re-send after the forged ones
    assert not learner.session.buffer.has_episode(ROBOT, 900002)
    assert [(t.episode_id, t.step) for _, t in _stored(learner)] == [(4, 0), (4, 1)]
    assert learner.refusals.counts == {"observation.state is not finite": 3}
    assert _refusal_lines(caplog) == [  # one line for three refusals of one cause
        f"refused transition on /{ROBOT}/transitions/replay (episode 900002 step 0): observation.state is not "
        "finite (7 of 7 values, first nan at index 0)"
    ]
    assert learner.rejected == 0


def test_a_reward_that_is_not_finite_is_refused_before_the_buffer_and_the_episode_in_progress_is_kept(
    learner: Any, make_bus: Callable[..., ZenohBus], caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 2: a NaN reward reached the segment before SQLite refused it (verify failed for good), and the
    robot's real episode in progress was dropped."""
    caplog.set_level(logging.INFO)
    real = episode(ROBOT, 3, 5)
    other = replace(episode(ROBOT, 7, 1)[0], reward=float("nan"))  # another episode: would end the real one
    same = replace(real[2], reward=float("inf"))  # the step due next, with a bad reward
    sent = [*real[:2], other, same, *real[2:]]
    _publish(make_bus, f"/{ROBOT}/transitions", [_encode(t) for t in sent])
    assert wait_until(lambda: learner.session.counters.episodes == 1, 20.0)
    stored = [t for _, t in _stored(learner)]
    assert [_encode(t) for t in stored] == [_encode(t) for t in real]  # stored whole, as sent
    assert learner.refusals.counts == {"reward is not finite": 2}
    assert len(_refusal_lines(caplog)) == 1 and "reward is not finite (nan)" in _refusal_lines(caplog)[0]
    report = learner.session.buffer.verify()
    assert report.ok and report.transitions == 5, report.problems
    assert not learner.session.buffer.has_episode(ROBOT, 7) and learner.rejected == 0


REFUSED: dict[str, Callable[[Transition], Transition]] = {  # cause -> how a real transition is changed to get it
    "observation.robot_id names another robot": lambda t: replace(
        t, observation=replace(t.observation, robot_id="franka_right")
    ),
    "action.data is out of range": lambda t: replace(t, action=replace(t.action, data=np.full(4, 1.5, np.float32))),
    "action.data has the wrong length": lambda t: replace(t, action=replace(t.action, data=np.zeros(6, np.float32))),
    "next_observation.episode_id does not match the transition": lambda t: replace(
        t, next_observation=replace(t.next_observation, episode_id=8)
    ),
}


@pytest.mark.parametrize("cause", list(REFUSED))
def test_transitions_the_door_refuses_are_counted_per_cause(
    learner: Any, make_bus: Callable[..., ZenohBus], cause: str
) -> None:
    real = episode(ROBOT, 2, 2)
    _publish(make_bus, f"/{ROBOT}/transitions", [_encode(real[0]), _encode(REFUSED[cause](real[1])), _encode(real[1])])
    assert wait_until(lambda: learner.session.counters.episodes == 1, 20.0)
    assert learner.refusals.counts == {cause: 1} and len(learner.session.buffer) == 2


def test_an_episode_event_for_another_robot_on_this_robot_s_topic_is_refused(
    learner: Any, make_bus: Callable[..., ZenohBus]
) -> None:
    bus = make_bus("robot")
    events = bus.create_publisher(f"/{ROBOT}/episode_events", "user/msg/EpisodeEvent")
    assert wait_until(lambda: bus.count_subscribers(f"/{ROBOT}/episode_events") >= 1, 10.0)
    forged = EpisodeEvent("franka_right", "peg_insertion", 0, EpisodeKind.END, 0, steps=1)
    events.publish(CODEC.encode(episode_event_to_msg(forged, CODEC)))
    assert wait_until(lambda: learner.refusals.total == 1, 10.0)
    assert learner.refusals.counts == {"event.robot_id names another robot": 1}


def test_a_learner_whose_training_stopped_ends_as_failed(learner: Any) -> None:
    """Training that stopped for good (batch after batch unreadable) is not hidden behind a live process: the node
    fails (its runner ends the process with exit code 1 and the reason, and the launcher respawns it)."""
    from user.learner.trainer import TrainingDataError

    asked: list[str] = []
    learner.request_stop = lambda: asked.append("stop")
    learner.session.trainer.failed = TrainingDataError("20 batches in a row could not be read")
    assert wait_until(lambda: learner.failure is not None and asked == ["stop"], 10.0), (learner.failure, asked)
    assert learner.failure == "training stopped: 20 batches in a row could not be read"


def test_a_learner_whose_publication_halted_ends_as_failed(learner: Any) -> None:
    learner.request_stop = lambda: None
    learner.session.publication.halt("training diverged at update call 7: critic_loss is not finite")
    assert wait_until(lambda: learner.failure is not None, 10.0)
    assert learner.failure == "publication halted: training diverged at update call 7: critic_loss is not finite"


def test_a_learner_that_reaches_its_stop_after_completes_the_run(
    make_bus: Callable[..., ZenohBus], tmp_path: Path
) -> None:
    """Issue 14, finding 5, in process: `stop_after.episodes` met, the node completes the run (its runner then ends
    the process with the run-complete exit code); before that, it runs on."""
    from user.nodes.learner import LearnerNode

    params = {"robots": [ROBOT], "run_dir": str(tmp_path / "run"), "learning": LEARNING, "torch_threads": 1,
              "pacing": {"min_transitions": 10_000}, "stats_period_s": 0.1, "stop_after": {"episodes": 2}}  # fmt: skip
    node = LearnerNode(make_bus("learner", params))
    try:
        asked: list[str] = []
        node.request_stop = lambda: asked.append("stop")
        _publish(make_bus, f"/{ROBOT}/transitions", [_encode(t) for t in episode(ROBOT, 0, 3)])
        assert wait_until(lambda: node.session.counters.episodes == 1, 10.0)
        assert not wait_until(lambda: node.completed is not None, 0.5)  # one episode: runs on
        _publish(make_bus, f"/{ROBOT}/transitions", [_encode(t) for t in episode(ROBOT, 1, 3)])
        assert wait_until(lambda: node.completed is not None and asked == ["stop"], 10.0), (node.completed, asked)
        assert node.completed == "2 episodes stored (stop_after.episodes 2)"
        assert node.failure is None
    finally:
        node.destroy()


@pytest.mark.parametrize("catch_up_s", [60.0, 0.5])
def test_a_learner_does_the_update_calls_owed_before_it_ends_the_run(
    make_bus: Callable[..., ZenohBus], tmp_path: Path, catch_up_s: float
) -> None:
    """Issue 14: `stop_after.env_steps` met while training lags (its training thread stopped here): the run ends
    only once the update calls the ratio owes for the transitions received by then are done, or at
    `catch_up_s` whatever is still owed."""
    from user.nodes.learner import LearnerNode

    stop_after = {"env_steps": 30, "catch_up_s": catch_up_s}
    params = {"robots": [ROBOT], "run_dir": str(tmp_path / "run"), "learning": LEARNING, "torch_threads": 1,
              "pacing": {"min_transitions": 8}, "stats_period_s": 0.1, "stop_after": stop_after}  # fmt: skip
    node = LearnerNode(make_bus("learner", params))
    limiter = node.session.buffer.rate_limiter
    try:
        node.request_stop = lambda: None
        trainer = node.session.trainer
        assert trainer.stop(10.0)  # training lags: stopped until the condition is met
        credits: list[int] = []  # the data credit robots that are not real time wait on
        make_bus("probe").create_subscription("/data_credit", "user/msg/DataCredit", lambda p: credits.append(
            int(CODEC.decode(p, "user/msg/DataCredit").credit)), BEST_EFFORT)  # fmt: skip
        assert wait_until(lambda: bool(credits) and credits[-1] > 0, 10.0)
        payloads = [_encode(t) for e in range(4) for t in episode(ROBOT, e, 10)]
        _publish(make_bus, f"/{ROBOT}/transitions", payloads)
        assert wait_until(lambda: node.ending is not None, 10.0)
        ending = node.ending
        assert ending is not None and ending.why.endswith("(stop_after.env_steps 30)")
        assert ending.owed(limiter, node.params.learning.batch_size) > 1
        heard = len(credits)
        assert wait_until(lambda: len(credits) > heard + 2, 10.0) and set(credits[heard + 1 :]) == {0}  # no more data
        ended_owing = wait_until(lambda: node.completed is not None, 1.0)
        assert ended_owing == (catch_up_s < 1.0)  # owed calls keep the run going until the deadline
        assert limiter.state_dict()["samples"] < ending.target  # no training meanwhile
        trainer.start_async()
        assert wait_until(lambda: node.completed is not None, 20.0)
        assert node.completed == ending.why and node.failure is None
        assert limiter.state_dict()["samples"] >= ending.target or ended_owing
    finally:
        node.destroy()


def test_a_learner_without_a_thread_count_leaves_a_core_to_the_nodes_beside_it(
    make_bus: Callable[..., ZenohBus], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    import user.nodes.learner as learner_module

    monkeypatch.setattr(learner_module, "usable_cores", lambda: 3)
    before = torch.get_num_threads()
    params = {"robots": [ROBOT], "run_dir": str(tmp_path / "run"), "learning": LEARNING,
              "pacing": {"min_transitions": 10_000}}  # fmt: skip
    try:
        node = learner_module.LearnerNode(make_bus("learner", params))
        node.destroy()
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
