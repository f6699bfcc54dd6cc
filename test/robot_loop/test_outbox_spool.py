"""OutboxSpool: an outbox's completed episodes on disk until their receipt; what a killed process left is loaded
back whole, a damaged file is moved aside (never re-sent half); the outbox writes, removes and restores."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from test.buffer import factories as f
from test.interfaces.older import older_codec, older_transition_msg
from user.interfaces.codec import Codec, default_codec
from user.interfaces.domain import transition_from_msg, transition_to_msg
from user.robot_loop.outbox import EpisodeOutbox, Resend
from user.robot_loop.outbox_spool import OutboxSpool, SpoolChannel, SpoolError, write_mcap


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


def _spool(tmp_path: Path) -> OutboxSpool:
    return OutboxSpool(tmp_path / "arm.outbox", lambda m: str(m).encode(), lambda raw: raw.decode())


def _episode(box: EpisodeOutbox, episode_id: int, steps: int = 3) -> None:
    for k in range(steps):
        box.add(episode_id, f"{episode_id}:{k}", done=k == steps - 1)


def test_saved_episodes_load_back_in_id_order_and_removed_ones_do_not(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    spool.save(12, ["12:0", "", "12:2"])  # an empty message is a message
    spool.save(3, ["3:0", ""])  # also the last one
    spool.save(7, ["7:0", "7:1"])
    spool.remove(7)
    spool.remove(99)  # not there: nothing to do
    assert spool.load() == [(3, ["3:0", ""]), (12, ["12:0", "", "12:2"])]
    assert not list(spool.directory.glob(".*.tmp"))  # written under a temporary name, renamed into place


def test_a_cut_or_misnamed_file_is_moved_aside_and_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    spool = _spool(tmp_path)
    spool.save(1, ["1:0", "1:1"])
    spool.save(2, ["2:0", "2:1"])
    whole = spool.path(2).read_bytes()
    spool.path(2).write_bytes(whole[:-1])  # the last message runs past the end
    spool.save(4, ["4:0"])
    spool.path(4).write_bytes(spool.path(4).read_bytes()[:2])  # a length cut short
    (spool.directory / "x.episode").write_bytes(whole)  # not an episode id
    spool.path(5).write_bytes(b"")  # no message at all
    with caplog.at_level(logging.ERROR, logger="user.robot_loop.outbox_spool"):
        assert spool.load() == [(1, ["1:0", "1:1"])]
    aside = sorted(p.name for p in spool.directory.glob("*.unreadable"))
    assert aside == ["2.episode.unreadable", "4.episode.unreadable", "5.episode.unreadable", "x.episode.unreadable"]
    text = caplog.text
    assert "runs past the end" in text and "cut short" in text and "not named" in text
    five = spool.path(5)
    line = f"outbox spool: {five} is unreadable (no message); moved aside to {five}.unreadable, not re-sent"
    assert line in [r.getMessage() for r in caplog.records]
    assert spool.load() == [(1, ["1:0", "1:1"])]  # moved aside once, not again


def test_a_spool_directory_that_cannot_be_made_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(SpoolError, match=r"arm.outbox: cannot create the outbox spool \(Not a directory\)$"):
        OutboxSpool(tmp_path / "file" / "arm.outbox", str.encode, bytes.decode)
    nested = OutboxSpool(tmp_path / "state" / "robots" / "arm.outbox", str.encode, bytes.decode)  # parents made
    assert nested.directory.is_dir()


def test_the_outbox_keeps_completed_episodes_on_disk_until_their_receipt(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    box = EpisodeOutbox(max_episodes=5, resend_after_s=1.0, spool=spool)
    box.acknowledge(-1)
    _episode(box, 0)
    box.add(1, "1:0", done=False)  # being recorded: not on disk
    assert spool.load() == [(0, ["0:0", "0:1", "0:2"])]
    box.add(1, "1:1", done=False)
    assert box.end_early(1, lambda m: f"{m}:truncated")  # an operator reset: on disk as stored
    assert spool.load() == [(0, ["0:0", "0:1", "0:2"]), (1, ["1:0", "1:1:truncated"])]
    assert box.acknowledge(0)
    assert spool.load() == [(1, ["1:0", "1:1:truncated"])]


def test_a_restarted_outbox_resends_what_the_killed_one_left(tmp_path: Path) -> None:
    first = EpisodeOutbox(max_episodes=5, resend_after_s=1.0, spool=_spool(tmp_path))
    _episode(first, 4)
    _episode(first, 5)
    del first  # killed: no receipt ever came
    clock = Clock()
    spool = _spool(tmp_path)
    second = EpisodeOutbox(max_episodes=5, resend_after_s=1.0, clock=clock, spool=spool)
    second.restore(spool.load())
    assert second.pending() == [4, 5]
    second.acknowledge(4)  # the learner had it already: a receipt, and the learner is there
    clock.t = 2.0
    assert [(r.episode_id, r.messages) for r in second.due()] == [(5, ["5:0", "5:1", "5:2"])]
    assert spool.load() == [(5, ["5:0", "5:1", "5:2"])]


def _receipt_while_written(tmp_path: Path, episode_id: int, receipt: Callable[[], object]) -> OutboxSpool:
    """A spool that runs `receipt` (the bus thread's receipt) while episode `episode_id`'s file is being written:
    after the outbox let go of its lock, before the file is renamed into place; the interleaving, made exact."""

    def encode(message: object) -> bytes:
        if message == f"{episode_id}:0":
            receipt()
        return str(message).encode()

    return OutboxSpool(tmp_path / "arm.outbox", encode, lambda raw: raw.decode())


def test_a_receipt_that_comes_while_the_episode_is_written_leaves_no_file(tmp_path: Path) -> None:
    """The receipt used to find no file to remove yet, and the file written after it stayed: re-sent by every
    later start of the robot, though the learner had it."""
    clock = Clock()
    box = EpisodeOutbox(max_episodes=5, resend_after_s=1.0, clock=clock)
    box.spool = spool = _receipt_while_written(tmp_path, 3, lambda: box.acknowledge(3))
    _episode(box, 3)
    assert box.acknowledged == 1 and box.pending() == []
    assert spool.load() == [] and not list(spool.directory.iterdir())
    _episode(box, 4)  # no receipt: written and kept as before
    assert spool.load() == [(4, ["4:0", "4:1", "4:2"])]
    clock.t = 5.0
    assert [r.episode_id for r in box.due()] == [4]


def test_an_episode_given_up_while_it_is_written_leaves_no_file(tmp_path: Path) -> None:
    box = EpisodeOutbox(max_episodes=1, resend_after_s=1.0)
    box.acknowledge(-1)
    more = [(10, ["10:0"]), (11, ["11:0"])]  # the outbox is over full while episode 0 is written: 0 goes
    box.spool = spool = _receipt_while_written(tmp_path, 0, lambda: box.restore(more))
    _episode(box, 0)
    assert box.pending() == [10, 11] and box.given_up == 1
    assert spool.load() == []


def test_a_restarted_outbox_resends_only_what_had_no_receipt_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = EpisodeOutbox(max_episodes=5, resend_after_s=1.0)
    first.spool = _receipt_while_written(tmp_path, 1, lambda: first.acknowledge(1))
    _episode(first, 1)  # acknowledged while written
    first.add(2, "2:0", done=False)
    first.acknowledge(2)  # acknowledged before it completed here
    first.add(2, "2:1", done=True)
    _episode(first, 3)  # no receipt
    _episode(first, 4)  # then killed: nothing more of `first` runs
    clock = Clock()
    spool = _spool(tmp_path)
    second = EpisodeOutbox(max_episodes=5, resend_after_s=1.0, clock=clock, spool=spool)
    second.restore(spool.load())
    assert second.pending() == [3, 4]
    second.acknowledge(-1)  # the learner answers
    clock.t = 1.0
    with caplog.at_level(logging.INFO, logger="user.robot_loop.outbox"):
        assert second.due() == [Resend(3, ["3:0", "3:1", "3:2"], True), Resend(4, ["4:0", "4:1", "4:2"], True)]
        assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
            (logging.INFO, "episodes left without a receipt by the last run of this robot: re-sending 2 (3, 4)")
        ]
        caplog.clear()
        second.acknowledge(3)
        clock.t = 2.0  # episode 4's receipt did not come after its re-send: now that is worth a warning
        assert second.due() == [Resend(4, ["4:0", "4:1", "4:2"], False)]
        assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert [e for e, _ in spool.load()] == [4]


def test_an_episode_the_full_outbox_gives_up_leaves_the_disk_too(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    box = EpisodeOutbox(max_episodes=2, resend_after_s=1.0, spool=spool)
    box.acknowledge(-1)
    for e in range(4):
        _episode(box, e)
    assert [e for e, _ in spool.load()] == [1, 2, 3]


def test_a_spool_that_cannot_be_written_leaves_the_episode_in_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool = _spool(tmp_path)
    spool.directory.rmdir()  # gone under the outbox's feet
    (tmp_path / "arm.outbox").write_text("")  # and a file in its place
    box = EpisodeOutbox(max_episodes=5, resend_after_s=1.0, spool=spool)
    with caplog.at_level(logging.ERROR, logger="user.robot_loop.outbox"):
        _episode(box, 0)
    assert box.pending() == [0]
    assert "cannot keep episode 0 on disk" in caplog.text


def _transition(codec: Codec, step: int) -> object:
    return transition_to_msg(f.transition("arm", 4, step, 3), codec)


def test_a_robot_spool_is_mcap_readable_by_standard_tools(tmp_path: Path) -> None:
    """What the robot node spools: an MCAP file per episode that `mcap` and rosbag2-style readers open."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    codec = default_codec()
    spool = OutboxSpool.of(tmp_path / "arm.outbox", codec, "user/msg/Transition", "/arm/transitions")
    spool.save(4, [_transition(codec, k) for k in range(3)])
    assert spool.path(4).name == "4.mcap"
    with open(spool.path(4), "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        assert reader.get_header().profile == "ros2"
        got = [(ch.topic, sch.name if sch else None, msg.step) for sch, ch, _, msg in reader.iter_decoded_messages()]
    assert got == [("/arm/transitions", "user/msg/Transition", k) for k in range(3)]
    loaded = spool.load()
    assert [(e, [m.step for m in msgs]) for e, msgs in loaded] == [(4, [0, 1, 2])]
    spool.remove(4)
    assert spool.load() == []


def test_a_cut_mcap_spool_file_is_moved_aside(tmp_path: Path) -> None:
    codec = default_codec()
    spool = OutboxSpool.of(tmp_path / "arm.outbox", codec, "user/msg/Transition", "/arm/transitions")
    spool.save(1, [_transition(codec, 0)])
    spool.save(2, [_transition(codec, 0), _transition(codec, 1)])
    spool.path(2).write_bytes(spool.path(2).read_bytes()[:-40])  # the footer and more cut off
    (spool.directory / "3.mcap").write_bytes(b"\x89MCAP0\r\n")  # a header alone: no message
    assert [e for e, _ in spool.load()] == [1]
    assert sorted(p.name for p in spool.directory.glob("*.unreadable")) == ["2.mcap.unreadable", "3.mcap.unreadable"]


def test_episodes_spooled_by_an_older_version_still_load(tmp_path: Path) -> None:
    codec = default_codec()
    old = OutboxSpool(tmp_path / "arm.outbox", lambda m: codec.encode(m, "user/msg/Transition"),
                      lambda raw: codec.decode(raw, "user/msg/Transition"))  # fmt: skip
    old.save(7, [_transition(codec, 0)])
    new = OutboxSpool.of(tmp_path / "arm.outbox", codec, "user/msg/Transition", "/arm/transitions")
    assert [e for e, _ in new.load()] == [7]
    new.remove(7)
    assert new.load() == []


def _older_spool_file(spool: OutboxSpool, episode_id: int, older: Codec, steps: int) -> None:
    """An episode as a version with `older`'s definitions spooled it (before an upgrade)."""
    typename = "user/msg/Transition"
    channel = SpoolChannel("/arm/transitions", typename, older.definition(typename))
    raws = [older.encode(older_transition_msg(f.transition("arm", episode_id, k, steps), older)) for k in range(steps)]
    with open(spool.path(episode_id), "wb") as stream:
        write_mcap(stream, channel, raws)


def test_episodes_spooled_before_a_message_changed_load_as_today_s_type(tmp_path: Path) -> None:
    codec = default_codec()
    spool = OutboxSpool.of(tmp_path / "arm.outbox", codec, "user/msg/Transition", "/arm/transitions")
    _older_spool_file(spool, 5, older_codec(), 3)
    loaded = spool.load()
    assert [(e, [m.step for m in msgs]) for e, msgs in loaded] == [(5, [0, 1, 2])]
    for msg in loaded[0][1]:  # today's type: re-sent with today's codec, chunk provenance at its default
        back = transition_from_msg(codec.decode(codec.encode(msg, "user/msg/Transition"), "user/msg/Transition"))
        assert (back.action.chunk_seq, back.action.chunk_index, back.episode_id) == (0, 0, 5)


def test_a_spooled_episode_with_a_field_today_s_type_dropped_is_moved_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    codec = default_codec()
    spool = OutboxSpool.of(tmp_path / "arm.outbox", codec, "user/msg/Transition", "/arm/transitions")
    _older_spool_file(spool, 6, older_codec(dropped=(), extra="uint32 retired_field\n"), 2)
    with caplog.at_level(logging.ERROR):
        assert spool.load() == []
    assert [p.name for p in spool.directory.glob("*.unreadable")] == ["6.mcap.unreadable"]
    assert "retired_field" in caplog.text
