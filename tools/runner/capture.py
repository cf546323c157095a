"""Bounded capture of one output stream: head, tail, and a spill file for everything else.

Memory stays bounded whatever a command prints. A stream is buffered in memory until it passes
the cap; from then on every byte goes to a spill file, read 1 MiB at a time into one reused
buffer, and only the head stays in memory. Not `splice(2)`: splicing a pipe into a file holds the
pipe's lock while the file is written, so the command cannot write while we do, and a fast
producer ran 1.2-1.3x slower than its own `> file` (plain reads: 1.0x; docs/benchmarks.md).
The spill file is created by the next `pump` (or by `finish`), never by the read that passed the
cap: so `on_disk` tells the runner, before any file is touched, that this stream's next step is
disk I/O (the async runner moves that part of the run off the event loop).
The tail is read back from the spill file at the end. Past `MAX_SPILL_BYTES` (or when the spill
file cannot be written) the rest is discarded, keeping a small tail ring in memory instead.

The text kept for the model is made safe: UTF-8 decoded with replacement, ANSI escape sequences
removed, CR turned into a line break, then every other control character (and every character
that hides or reorders text) shown as a visible symbol by `visible.visible`, the sanitiser of all
text bashgraph prints. Each replacement is one character for at least one byte, so the text
never has more characters than the bytes it came from.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import re
import tempfile
from pathlib import Path
from typing import NamedTuple

from bashgraph.tools.results import describe_binary, text_end
from bashgraph.tools.runner import spill_prune
from bashgraph.tools.runner.pacing import ReadPacer
from bashgraph.tools.text import visible

CHUNK_BYTES = 64 * 1024
#: One read of a spilling stream: as much as the enlarged pipe holds.
SPILL_READ_BYTES = 1024 * 1024
#: A stream longer than this is not written to disk any further (a runaway `yes` would fill it).
MAX_SPILL_BYTES = 1 << 30
#: Pipe capacity asked for once a stream spills: fewer wake-ups per byte on large outputs.
BIG_PIPE_BYTES = 1024 * 1024

# _PENDING: over the cap, the spill file not created yet (the next pump or finish creates it).
_MEMORY, _PENDING, _SPILLING, _DISCARDING = range(4)

_Bytes = bytes | bytearray | memoryview

# A string sequence (OSC, DCS, ...) is removed only with its terminator on the same line: an
# unterminated one would otherwise hide the rest of the output. Its introducer alone is then
# removed as a two-byte escape, and its text stays visible.
_ANSI = re.compile(
    r"""
      \x1b\[[0-?]*[ -/]*[@-~]?                 # CSI: colours, cursor moves, erase
    | \x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)     # OSC: window titles, hyperlinks
    | \x1b[PX^_][^\x1b\n]*\x1b\\              # DCS, SOS, PM, APC strings
    | \x1b[ -/]*[0-~]                          # two-byte escapes (charset selection, ...)
    | \x9b[0-?]*[ -/]*[@-~]?                   # 8-bit CSI
    """,
    re.VERBOSE,
)


def safe_text(data: _Bytes) -> str:
    """`data` as text a model can read and a terminal can print without being driven by it."""
    text = bytes(data).decode("utf-8", "replace")
    if "\x1b" in text or "\x9b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return visible(text)


@functools.cache
def default_spill_dir() -> Path:
    """`<temp dir>/bashgraph-spill`, created (mode 0700) when the first stream spills."""
    return Path(tempfile.gettempdir()) / "bashgraph-spill"


class Captured(NamedTuple):
    """What one stream left behind: its safe (capped) text and the facts about its size."""

    text: str
    total_bytes: int
    truncated: bool
    spill_path: str | None


class StreamCapture:
    """Collects one stream in bounded memory; `pump(fd)` moves what is ready, `finish()` ends it."""

    def __init__(self, name: str, limit: int, spill_dir: Path | None, tag: str) -> None:
        """`spill_dir` None: `default_spill_dir()`, looked up only if the stream spills."""
        self.name = name
        self.limit = max(limit, 0)
        self.total = 0
        self._spill_dir = spill_dir
        self._tag = tag
        self._mode = _MEMORY
        self._buffer = bytearray()  # the whole stream until it passes the cap, then the head
        self._tail = bytearray()  # only while discarding
        self._spill_fd = -1
        self._spill_path: str | None = None
        self._spilled = 0
        self._problem: str | None = None
        self._chunk: bytearray | None = None  # the reused read buffer, once the stream spills
        self.big_pipe = False  # the pipe was enlarged to BIG_PIPE_BYTES when the stream spilled
        self._pacer: ReadPacer | None = None  # made when the stream first spills to a big pipe

    def pause_after(self, moved: int) -> float:
        """Seconds to wait before reading this stream again, after a read that moved `moved`.

        Only a spilling stream on an enlarged pipe is ever paused (see `pacing`); on a 64 KiB
        pipe a pause would block a fast producer instead.
        """
        if not (self.big_pipe and self._mode == _SPILLING):
            return 0.0
        if self._pacer is None:
            self._pacer = ReadPacer(BIG_PIPE_BYTES)
        return self._pacer.after_read(moved)

    @property
    def on_disk(self) -> bool:
        """True when reading this stream further means writing to (or creating) its spill file."""
        return self._mode in (_PENDING, _SPILLING)

    def recent(self, count: int) -> bytes:
        """Up to the last `count` bytes of the stream, as far as they are still kept.

        From memory, or from the spill file (a disk read) while spilling; after the cap with the
        spill stopped, from the tail ring (which may hold fewer).
        """
        if count <= 0:
            return b""
        if self._mode == _SPILLING:
            start = max(self._spilled - count, 0)
            try:
                return os.pread(self._spill_fd, self._spilled - start, start)
            except OSError:
                return b""
        kept = self._tail if self._mode == _DISCARDING else self._buffer
        return bytes(kept[-count:])

    @property
    def _head_room(self) -> int:
        return self.limit // 2

    @property
    def _tail_room(self) -> int:
        return self.limit - self.limit // 2

    def pump(self, fd: int) -> int:
        """Move what `fd` has ready: bytes moved, 0 at end of file, -1 when nothing was ready."""
        if self._mode == _PENDING:
            self._start_spill(fd)
        try:
            if self._mode == _SPILLING:
                return self._read_to_spill(fd)
            data = os.read(fd, CHUNK_BYTES)
        except BlockingIOError:
            return -1
        except OSError:
            return 0  # our own pipe failed: treat it as closed rather than spin on it
        if data:
            self.feed(data, fd)
        return len(data)

    def feed(self, data: _Bytes, fd: int = -1) -> None:
        """Add bytes read from the stream (`fd`, when known, is the pipe they came from)."""
        self.total += len(data)
        if self._mode == _PENDING:
            self._start_spill(fd)
        if self._mode == _MEMORY:
            self._buffer += data
            if len(self._buffer) > self.limit:
                self._mode = _PENDING  # the file is created by the next pump, or by finish
        elif self._mode == _SPILLING:
            self._write_spill(data)
        else:
            self._keep_tail(data)

    def _read_to_spill(self, fd: int) -> int:
        """One read of up to a pipe's worth into the reused buffer, written on to the spill file
        (no new bytes object per read: memory stays flat however long the stream)."""
        if self._chunk is None:
            self._chunk = bytearray(SPILL_READ_BYTES)
        moved = os.readv(fd, [self._chunk])
        if moved:
            self.feed(memoryview(self._chunk)[:moved])
        return moved

    def _start_spill(self, fd: int) -> None:
        try:
            directory = self._spill_dir or default_spill_dir()
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            if directory == default_spill_dir():  # ours to clean; a chosen directory is not
                spill_prune.prune_if_due(directory)
            self._spill_fd, self._spill_path = tempfile.mkstemp(
                prefix=f"{self._tag}-{self.name}-", suffix=".log", dir=directory
            )
        except OSError as exc:
            self._mode = _DISCARDING
            self._problem = f"spill file not written: {exc.strerror or exc}"
            self._keep_tail(bytes(self._buffer))
            del self._buffer[self._head_room :]
            return
        self._mode = _SPILLING
        whole, self._buffer = self._buffer, self._buffer[: self._head_room]
        self._write_spill(whole)
        if fd >= 0 and hasattr(fcntl, "F_SETPIPE_SZ"):
            with contextlib.suppress(OSError):
                self.big_pipe = fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, BIG_PIPE_BYTES) >= BIG_PIPE_BYTES

    def _write_spill(self, data: _Bytes) -> None:
        view = memoryview(data)
        room = max(MAX_SPILL_BYTES - self._spilled, 0)
        done = 0
        try:
            while done < min(len(view), room):
                written = os.write(self._spill_fd, view[done:room])
                self._spilled += written
                done += written
        except OSError as exc:
            self._stop_spill(f"spill file incomplete: {exc.strerror or exc}")
        if done < len(view):
            if self._mode == _SPILLING:
                self._stop_spill(f"the spill file holds the first {self._spilled:,} bytes")
            self._keep_tail(view[done:])

    def _stop_spill(self, problem: str) -> None:
        """Stop writing to disk; keep the tail in memory from here on."""
        self._mode = _DISCARDING
        self._problem = problem
        self._tail = bytearray(self._read_spill_tail())
        self._chunk = None  # reads of 64 KiB from here on

    def _keep_tail(self, data: _Bytes) -> None:
        room = self._tail_room
        if len(data) >= room:
            self._tail = bytearray(data[len(data) - room :]) if room else bytearray()
        else:
            self._tail += data
            del self._tail[: max(len(self._tail) - room, 0)]

    def _read_spill_tail(self) -> bytes:
        start = max(self._spilled - self._tail_room, 0)
        try:
            return os.pread(self._spill_fd, self._spilled - start, start)
        except OSError:
            return b""

    def finish(self) -> Captured:
        """The capped, safe text of the stream; closes the spill file. Binary output is described
        (size, kind, first bytes; `results.describe_binary`), not shown as escaped bytes."""
        if self._mode == _PENDING:
            self._start_spill(-1)
        if self._mode == _MEMORY:
            where = "not kept: pipe the command through `xxd | head` to read it"
            described = describe_binary(self._buffer, self.total, where)
            return Captured(described or (safe_text(self._buffer) if self.total else ""), self.total, False, None)
        tail = self._tail if self._mode == _DISCARDING else self._read_spill_tail()
        self.close()
        described = describe_binary(self._buffer, self.total, self._problem or f"full output: {self._spill_path}")
        end = text_end(bytes(tail[-self._tail_room:])) if described else b""
        if end.strip():
            # Text after a binary head (a log line after a dump): its end is shown as text.
            described = f"{described}\n[the end of the output, as text:]\n{safe_text(end)}"
        return Captured(described or self._join(self._buffer, tail), self.total, True, self._spill_path)

    def close(self) -> None:
        self._chunk = None
        if self._spill_fd >= 0:
            os.close(self._spill_fd)
            self._spill_fd = -1

    def discard(self) -> None:
        """Close and delete the spill file: for a run that ends without a result."""
        self.close()
        if self._spill_path:
            with contextlib.suppress(OSError):
                os.unlink(self._spill_path)

    def _join(self, head: _Bytes, tail: _Bytes) -> str:
        """head + marker + tail, within `limit` characters when the marker takes at most half.

        With a cap so small that the marker would crowd out the text, half the cap is still
        given to the text and the result is longer than the cap.
        """
        where = self._problem or f"full output: {self._spill_path}"
        longest_marker = len(_marker(self.total, where))
        room = max(self.limit - longest_marker, self.limit // 2)
        head_len = _line_cut(head, _utf8_cut(head, min(len(head), room // 2)))
        tail_len = _line_suffix(tail, _utf8_suffix(tail, min(len(tail), room - room // 2)))
        head_part = safe_text(head[:head_len])
        tail_part = safe_text(tail[len(tail) - tail_len :]) if tail_len else ""
        marker = _marker(self.total - head_len - tail_len, where)
        if head_part.endswith("\n") or not head_part:
            marker = marker[1:]  # the head already ends its line
        return head_part + marker + tail_part


def _marker(omitted: int, where: str) -> str:
    return f"\n[... {omitted:,} bytes omitted; {where}] ...\n"


#: How far a cut may move to land on a line boundary (so lines are not shown half).
_LINE_SNAP_BYTES = 200


def _line_cut(data: _Bytes, end: int) -> int:
    """`end`, moved back to just after a newline when one is close enough."""
    if end >= len(data):
        return end
    window = min(_LINE_SNAP_BYTES, end // 4)
    newline = bytes(data[end - window : end]).rfind(b"\n")
    return end - window + newline + 1 if newline >= 0 else end


def _line_suffix(data: _Bytes, length: int) -> int:
    """`length` of a suffix, shortened to start just after a newline when one is close enough."""
    start = len(data) - length
    if start <= 0:
        return length
    window = min(_LINE_SNAP_BYTES, length // 4)
    newline = bytes(data[start : start + window]).find(b"\n")
    return length - newline - 1 if newline >= 0 else length


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _utf8_cut(data: _Bytes, end: int) -> int:
    """`end`, moved back (at most 3 bytes) so that `data[:end]` does not split a character."""
    probe = end
    while 0 < probe < len(data) and end - probe < 3 and _is_continuation(data[probe]):
        probe -= 1
    return probe if probe < len(data) and not _is_continuation(data[probe]) else end


def _utf8_suffix(data: _Bytes, length: int) -> int:
    """`length`, shortened (at most 3 bytes) so that the suffix starts on a character boundary."""
    start = len(data) - length
    probe = start
    while probe < len(data) and probe - start < 3 and _is_continuation(data[probe]):
        probe += 1
    return len(data) - probe if probe == len(data) or not _is_continuation(data[probe]) else length
