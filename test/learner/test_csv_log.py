"""A run's CSV files: rows appended under a fixed header, an older file's rows kept under today's header."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from user.learner.csv_log import CsvLog, header, read_rows, upgrade


def test_rows_of_an_older_header_are_kept_under_the_new_one_and_rewritten_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "log.csv"
    path.write_text("a,old_b,gone\n1,2,3\n7,8,9,extra\n", encoding="utf-8")  # the last row: longer than its header
    with caplog.at_level(logging.INFO, logger="user.learner.progress"):
        assert upgrade(path, ("a", "b", "c"), {"old_b": "b"}) is True
    assert f"{path}: rewritten under today's columns (it had a, old_b, gone)" in caplog.messages
    assert upgrade(path, ("a", "b", "c"), {}) is False  # today's columns lead: nothing to rewrite
    log = CsvLog(path, ("a", "b", "c"), {"old_b": "b"})
    log.append({"a": 4, "b": 5})
    log.close()
    assert header(path) == ["a", "b", "c", "gone"]  # nothing dropped
    assert read_rows(path) == [
        {"a": "1", "b": "2", "c": "", "gone": "3"},
        {"a": "7", "b": "8", "c": "", "gone": "9"},
        {"a": "4", "b": "5", "c": "", "gone": ""},
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["log.csv"]  # no temporary file left


def test_a_new_or_empty_file_gets_the_header_and_a_value_for_no_column_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_text("", encoding="utf-8")  # created, then killed before its header
    log = CsvLog(path, ("a", "b"))
    try:
        log.append({"a": 1})
        with pytest.raises(ValueError, match="log.csv: no column named c, d$"):
            log.append({"a": 1, "d": 2, "c": 3})
    finally:
        log.close()
    assert path.read_bytes() == b"a,b\r\n1,\r\n"
    assert read_rows(tmp_path / "none.csv") == []


def test_a_row_a_kill_cut_short_is_ended_before_the_next_and_a_whole_file_is_continued_as_it_is(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.csv"
    path.write_bytes(b"a,b\r\n1,2\r\n3,")  # the process was killed while writing its last row
    for row in ({"a": 5, "b": 6}, {"a": 7, "b": 8}):  # resumed twice: the second finds the file whole
        log = CsvLog(path, ("a", "b"))
        log.append(row)
        log.close()
    assert path.read_bytes() == b"a,b\r\n1,2\r\n3,\r\n5,6\r\n7,8\r\n"  # the next row never joins the cut one
