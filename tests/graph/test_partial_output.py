"""The record a cancelled command leaves for its resume is read back whatever it printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bashgraph.graph.call_journal import PartialOutput, record_path
from bashgraph.graph.call_journal import load_partial as load
from bashgraph.graph.call_journal import save_partial as save


@pytest.mark.parametrize("char", ["\ufffd", "😀", "x"])
def test_the_biggest_record_save_writes_is_read_back(tmp_path: Path, char: str) -> None:
    """Binary output shows as `�`, and emoji are common: a record of both streams full of them
    was written as JSON escapes (6 and 12 bytes a character), over the size `load` reads, so
    the resume lost the command's duration and output."""
    seen = PartialOutput()
    for stream in ("stdout", "stderr"):
        for _ in range(10):
            seen.add(stream, char * 3_000 + "\n")
    partial = seen.stopped_now()
    path = record_path(tmp_path, "m1")
    save(path, partial)
    assert load(path) == partial
