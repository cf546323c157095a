"""A background job's stream: reads return only what is new, capped head and tail, and the
bytes past the disk limit are counted and said to be lost."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from bashgraph.tools.jobs.stream import JobStream


def test_each_read_returns_what_arrived_since_the_last(tmp_path: Path) -> None:
    stream = JobStream(tmp_path / "s.stdout")
    stream.append(b"one\n")
    assert stream.read_new(100).text == "one\n"
    assert stream.read_new(100).text == ""
    stream.append(b"two\n\x1b[31mred\x1b[0m\n")
    piece = stream.read_new(100)
    assert (piece.text, piece.new_bytes, piece.truncated) == ("two\nred\n", 17, False)
    stream.close()


def test_a_long_piece_keeps_its_head_and_tail_and_names_the_file(tmp_path: Path) -> None:
    stream = JobStream(tmp_path / "s.stdout")
    stream.append(b"".join(b"line %05d\n" % n for n in range(10_000)))
    piece = stream.read_new(1_000)
    assert piece.truncated
    assert piece.text.startswith("line 00000\n")
    assert piece.text.endswith("line 09999\n")
    assert f"bytes omitted; full output: {tmp_path / 's.stdout'}]" in piece.text
    assert len(piece.text) < 1_100
    assert piece.new_bytes == 110_000
    stream.close()


def test_bytes_past_the_limit_are_not_written_and_the_read_says_so_once(tmp_path: Path) -> None:
    stream = JobStream(tmp_path / "s.stdout", limit_bytes=100)
    stream.append(b"x" * 250)
    assert (tmp_path / "s.stdout").stat().st_size == 100
    assert stream.dropped == 150
    assert "[150 more bytes were written but not kept: past the 100-byte limit" in stream.read_new(1_000).text
    assert stream.read_new(1_000).text == ""
    stream.close()


def test_a_read_while_a_chunk_is_being_written_reports_nothing_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes on their way to the file are not lost bytes: a read in between says nothing of
    them, and the next read returns them (no "not kept" note, no negative count)."""
    stream = JobStream(tmp_path / "s.stdout")
    writing, go_on = threading.Event(), threading.Event()
    real_write = os.write

    def slow_write(fd: int, data: Any) -> int:
        writing.set()
        go_on.wait(10)
        return real_write(fd, data)

    monkeypatch.setattr("bashgraph.tools.jobs.stream.os.write", slow_write)
    pump = threading.Thread(target=stream.append, args=(b"passed\n",))
    pump.start()
    assert writing.wait(10)
    during = stream.read_new(1_000)
    go_on.set()
    pump.join()
    after = stream.read_new(1_000)
    assert (during.text, during.new_bytes) == ("", 0)
    assert (after.text, after.new_bytes) == ("passed\n", 7)
    stream.close()
