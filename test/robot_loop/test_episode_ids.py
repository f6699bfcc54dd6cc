"""`EpisodeIds` / `DurableEpisodeIds`: ids increase, are on disk before they are used, continue after a
restart from the larger of the saved and the configured first id; a damaged file or a failed write is a
clear, typed error, never a silent restart at 0."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from user.config.strict import ConfigError
from user.robot_loop.episode_ids import DurableEpisodeIds, EpisodeIdError, EpisodeIds, EpisodeIdStateError


def _saved(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def test_in_memory_ids_increase_from_the_first() -> None:
    ids = EpisodeIds(7)
    assert [ids.take() for _ in range(3)] == [7, 8, 9] and ids.next_id == 10
    assert EpisodeIds().take() == 0 and EpisodeIds(0).next_id == 0
    with pytest.raises(ValueError, match="first episode id"):
        EpisodeIds(-1)


def test_each_id_is_on_disk_before_it_is_handed_out(tmp_path: Path) -> None:
    ids = DurableEpisodeIds(tmp_path / "run" / "robots", "arm")  # made with its parents
    assert ids.saved is None and ids.next_id == 0 and not ids.path.exists()
    assert ids.take() == 0
    assert _saved(ids.path) == {"robot_id": "arm", "next_episode_id": 1} and ids.saved == 1
    assert ids.take() == 1
    assert _saved(ids.path)["next_episode_id"] == 2
    assert [p.name for p in ids.path.parent.iterdir()] == [ids.path.name]  # no temporary file left


def test_a_restart_continues_after_every_id_used(tmp_path: Path) -> None:
    first = DurableEpisodeIds(tmp_path, "arm", 0)
    used = [first.take() for _ in range(4)]
    again = DurableEpisodeIds(tmp_path, "arm", 0)  # the respawned node, configured as before
    assert again.saved == 4 and again.take() == max(used) + 1
    other = DurableEpisodeIds(tmp_path, "other_arm", 0)  # each robot its own file
    assert other.take() == 0


def test_the_larger_of_the_first_id_and_the_saved_one_wins(tmp_path: Path) -> None:
    ids = DurableEpisodeIds(tmp_path, "arm", 0)
    for _ in range(3):
        ids.take()
    assert DurableEpisodeIds(tmp_path, "arm", 10).take() == 10  # `bringup --resume` knows of later episodes
    assert DurableEpisodeIds(tmp_path, "arm", 2).take() == 11  # the saved id is ahead of the configured one


def test_a_saved_zero_is_a_valid_next_id(tmp_path: Path) -> None:
    (tmp_path / "arm.episode.json").write_text('{"robot_id": "arm", "next_episode_id": 0}')
    ids = DurableEpisodeIds(tmp_path, "arm")
    assert ids.saved == 0 and ids.take() == 0


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{not json", "not JSON"),
        (b'{"robot_id": "arm", "next_episode_id": -3}', "non-negative integer"),
        (b'{"robot_id": "arm", "next_episode_id": true}', "non-negative integer"),
        (b'{"robot_id": "arm", "next_episode_id": "12"}', "non-negative integer"),
        (b"[12]", "non-negative integer"),
        (b'{"robot_id": "arm_2", "next_episode_id": 12}', "belongs to robot 'arm_2'"),
        (b"\xff\xfe\x00", "can't decode byte 0xff"),
    ],
)
def test_a_damaged_saved_id_stops_the_start_with_the_file_named(tmp_path: Path, content: bytes, why: str) -> None:
    (tmp_path / "arm.episode.json").write_bytes(content)
    with pytest.raises(EpisodeIdStateError, match=why) as info:
        DurableEpisodeIds(tmp_path, "arm", 0)
    assert str(info.value).startswith(f"robot 'arm': the saved episode id in {tmp_path / 'arm.episode.json'} ")
    assert str(info.value).endswith("or remove the file to start at first_episode_id")  # what the operator can do
    assert isinstance(info.value, ConfigError)  # the same start fails again: the node is not respawned


def test_a_saved_id_that_cannot_be_read_names_the_reason(tmp_path: Path) -> None:
    (tmp_path / "arm.episode.json").mkdir()
    with pytest.raises(EpisodeIdStateError, match="^robot 'arm': .*Is a directory"):
        DurableEpisodeIds(tmp_path, "arm")


def test_a_state_directory_that_cannot_exist_is_a_start_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(EpisodeIdStateError, match="state directory"):
        DurableEpisodeIds(blocker / "robots", "arm", 0)


def test_a_failed_write_hands_out_no_id_and_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = DurableEpisodeIds(tmp_path, "arm", 0)
    assert ids.take() == 0

    def disk_full(*_args: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(EpisodeIdError) as info:
        ids.take()
    assert str(info.value).endswith(f"cannot save the next episode id to {ids.path}: No space left on device")
    assert ids.next_id == 1 and _saved(ids.path)["next_episode_id"] == 1
    monkeypatch.undo()
    assert ids.take() == 1  # space again: the id that could not be kept is handed out now
