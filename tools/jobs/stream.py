"""One output stream of a background job: a spill file written as the job prints, read in pieces.

A job's output never stays in memory: a pump thread (`jobs.py`) appends every chunk it reads to
the stream's file, and `read_new` returns what arrived since the previous read, capped like every
result (head and tail kept, the middle replaced by a marker naming the file). Memory is bounded by
the cap, whatever the job prints. Past `MAX_SPILL_BYTES` nothing more is written to disk: the rest
is counted and said to be lost, so a runaway job cannot fill the disk either.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import NamedTuple

from bashgraph.tools.runner.capture import (
    MAX_SPILL_BYTES,
    _line_cut,
    _line_suffix,
    _marker,
    _utf8_cut,
    _utf8_suffix,
    safe_text,
)


class Piece(NamedTuple):
    """What a stream wrote since the last read: safe capped text and the byte count it stands for."""

    text: str
    new_bytes: int
    truncated: bool


class JobStream:
    """The spill file of one stream; `append` from the pump thread, `read_new` from anyone."""

    def __init__(self, path: Path, limit_bytes: int = MAX_SPILL_BYTES) -> None:
        self.path = path
        self.limit_bytes = limit_bytes
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        self._fd = os.open(path, flags, 0o600)
        self._lock = threading.Lock()
        self.written = 0  # bytes in the file
        self.dropped = 0
        """Bytes the job wrote past the limit (or that the disk refused), counted once lost: bytes
        still on their way to the file are neither written nor dropped yet."""
        self._read_to = 0  # the offset the next `read_new` starts at
        self._dropped_told = 0  # lost bytes already reported by `read_new`
        self._problem: str | None = None

    def append(self, data: bytes) -> None:
        """Write `data` at the end of the file, as far as the limit allows."""
        room = self.limit_bytes - self.written if self._problem is None else 0
        keep = memoryview(data)[: max(room, 0)]
        lost = len(data) - len(keep)
        try:
            while keep:
                done = os.write(self._fd, keep)
                keep = keep[done:]
                with self._lock:
                    self.written += done
        except OSError as exc:
            self._problem = f"the spill file could not be written ({exc.strerror})"
            lost += len(keep)
        if lost:
            with self._lock:
                self.dropped += lost

    def read_new(self, max_chars: int) -> Piece:
        """What arrived since the previous call, at most about `max_chars` characters of it."""
        with self._lock:
            start, end = self._read_to, self.written
            dropped, self._dropped_told = self.dropped - self._dropped_told, self.dropped
            self._read_to = end
        count = end - start
        if count <= max_chars:
            text = safe_text(self._pread(count, start))
            truncated = False
        else:
            text = self._head_and_tail(start, end, max_chars)
            truncated = True
        if dropped:
            why = self._problem or f"past the {self.limit_bytes:,}-byte limit of a job's stream"
            text += f"\n[{dropped:,} more bytes were written but not kept: {why}]\n"
        return Piece(text, count, truncated)

    def _head_and_tail(self, start: int, end: int, max_chars: int) -> str:
        where = f"full output: {self.path}"
        room = max(max_chars - len(_marker(end - start, where)), max_chars // 2)
        half = room // 2
        head = self._pread(half + 1, start)  # one byte more: is the cut inside a character?
        tail = self._pread(room - half, end - (room - half))
        head_len = _line_cut(head, _utf8_cut(head, half))
        tail_len = _line_suffix(tail, _utf8_suffix(tail, len(tail)))
        head_text = safe_text(head[:head_len])
        marker = _marker(end - start - head_len - tail_len, where)
        if head_text.endswith("\n") or not head_text:
            marker = marker[1:]
        return head_text + marker + safe_text(tail[len(tail) - tail_len :])

    def recent(self, count: int) -> bytes:
        """The last `count` bytes kept (for live output tails)."""
        end = self.written
        return self._pread(min(count, end), end - min(count, end))

    def _pread(self, count: int, offset: int) -> bytes:
        if count <= 0:
            return b""
        try:
            return os.pread(self._fd, count, offset)
        except OSError:
            return b""

    def close(self) -> None:
        """Close the file (it stays on disk: its path is shown to the model)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
