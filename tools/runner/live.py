"""The output side of one run: what is read from its two pipes, and the live output.

`Output` holds what reading leaves behind; `Supervisor` decides when to read, owns the
descriptors (it closes a pipe at its end) and ends the run. `Output` keeps a `StreamCapture` per
pipe (in the order of the result: stdout, stderr), the pause the next read should wait
(`pacing`), and the live output with whether a flush is waiting for its time — the loop that
drives the run must then wake up for it.

Live output is a command's recent text handed to a callback while it runs, a few times a
second. `LiveOutput` does no work per read. It remembers how many bytes of each stream it has already
handed on; when a flush is due (at most every `FLUSH_INTERVAL_S` per command, and once more when
the command ends) it asks each `StreamCapture` for what is new, keeping only the last
`MAX_CALL_BYTES` of it, and calls `callback(stream_name, text)` with that text made safe exactly
like the stored text (`capture.safe_text`: UTF-8 with replacement, ANSI escapes removed, control
characters shown as symbols by `visible`, the sanitiser of everything printed).

Between two flushes it holds back what could still change meaning with the next bytes: an
incomplete UTF-8 character, an unfinished escape sequence, a trailing CR (the first half of
CRLF). When more output arrived than one call carries, the text starts at a character boundary
and the skipped part is simply not shown (the stored result has it).

`LiveOutput` calls `callback` on the thread that reads the command's output (the async runner
brings the calls back to the event loop, in the context of the coroutine that started the run:
`drive.OutputRelay`); `guarded` makes a callback
that raises harmless — logged once, then not called again for that command.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import re
import time
from collections.abc import Callable, Sequence

from bashgraph.tools.runner.capture import Captured, StreamCapture, safe_text
from bashgraph.tools.runner.spawn import Plan

OutputCallback = Callable[[str, str], None]

FLUSH_INTERVAL_S = 0.1
MAX_CALL_BYTES = 2048
#: An escape sequence longer than this is not held back (it is garbage, not a colour code).
_MAX_HELD_ESCAPE = 64
_UNFINISHED_ESCAPE = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b\n]*|[PX^_][^\x1b\n]*|[ -/]*)?\Z")

_log = logging.getLogger(__name__)


class LiveOutput:
    """Hands new output of `streams` to `callback`, rate-limited; see the module docstring."""

    def __init__(self, streams: Sequence[StreamCapture], callback: OutputCallback) -> None:
        self._streams = list(streams)
        self._callback = callback
        self._shown = [0] * len(self._streams)  # bytes of each stream handed on (or skipped)
        self._checked = [0] * len(self._streams)  # stream size at the last flush
        self._last_flush = -math.inf

    def pending(self) -> bool:
        """True when a stream grew since the last flush."""
        return any(
            stream.total > checked for stream, checked in zip(self._streams, self._checked, strict=True)
        )

    def due_at(self) -> float | None:
        """When the next flush should happen (monotonic seconds), or None if nothing is new."""
        return self._last_flush + FLUSH_INTERVAL_S if self.pending() else None

    def flush_if_due(self, now: float) -> None:
        due = self.due_at()
        if due is not None and now >= due:
            self.flush(now)

    def flush(self, now: float, final: bool = False) -> None:
        """Hand on what is new in each stream; `final`: the command ended, hold nothing back."""
        self._last_flush = now
        for index, stream in enumerate(self._streams):
            self._checked[index] = stream.total
            text = self._take(index, stream, final)
            if text:
                self._callback(stream.name, text)

    def _take(self, index: int, stream: StreamCapture, final: bool) -> str:
        new = stream.total - self._shown[index]
        if new <= 0:
            return ""
        data = stream.recent(min(new, MAX_CALL_BYTES))
        start = _first_char(data) if len(data) < new else 0
        end = len(data) if final else len(data) - _unfinished_tail(data)
        if end <= start:
            return ""
        self._shown[index] = stream.total - (len(data) - end)
        return safe_text(data[start:end])


def guarded(callback: OutputCallback) -> OutputCallback:
    """`callback`, made harmless to the run: its first exception is logged, and it is not
    called again (a display problem must never end or slow down the command)."""
    failed = False

    def call(stream: str, text: str) -> None:
        nonlocal failed
        if failed:
            return
        try:
            callback(stream, text)
        except Exception:
            failed = True
            _log.warning("live output callback failed; no more live output for this command",
                         exc_info=True)

    return call


def _first_char(data: bytes) -> int:
    """Index of the first byte that does not continue a UTF-8 character (at most 3 skipped)."""
    index = 0
    while index < min(len(data), 3) and data[index] & 0xC0 == 0x80:
        index += 1
    return index


def _unfinished_tail(data: bytes) -> int:
    """How many trailing bytes the next bytes could still change: a partial character, an
    escape sequence without its final byte, or a CR that may be the first half of a CRLF."""
    held = _partial_utf8(data)
    body = data[: len(data) - held]
    escape = _UNFINISHED_ESCAPE.search(body, max(len(body) - _MAX_HELD_ESCAPE, 0))
    if escape is not None:
        return len(data) - escape.start()
    return held + 1 if body.endswith(b"\r") else held


def _partial_utf8(data: bytes) -> int:
    """Length of an incomplete UTF-8 sequence at the end of `data` (0 if none)."""
    for back in range(1, min(len(data), 4) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: look further back for the lead
        if byte >= 0xC0:
            needed = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return back if back < needed else 0
        return 0
    return 0


class Output:
    """What one run's pipes have produced so far; see the module docstring."""

    def __init__(self, plan: Plan, pipes: tuple[int, int], on_output: OutputCallback | None) -> None:
        tag, limit = plan.run_id[:12], plan.max_output_chars
        self.pipes = pipes
        self.streams = {
            pipes[0]: StreamCapture("stdout", limit, plan.spill_dir, tag),
            pipes[1]: StreamCapture("stderr", limit, plan.spill_dir, tag),
        }
        self._live = LiveOutput(list(self.streams.values()), on_output) if on_output else None
        self.live_armed = False  # a flush is waiting for its time (the loop must wake for it)
        self._pause: float | None = None  # None: no stream was read since the last pause

    @property
    def on_disk(self) -> bool:
        """True when reading a stream further, or finishing it, means disk I/O (a spill file)."""
        return any(stream.on_disk for stream in self.streams.values())

    def read(self, fd: int) -> int:
        """Move what pipe `fd` has ready: bytes moved, 0 at its end, -1 when nothing was ready."""
        stream = self.streams[fd]
        moved = stream.pump(fd)
        if moved:
            # The loop waits only as long as every stream read in this round wants: a fast
            # stream must not be held back by a slow one beside it.
            wanted = stream.pause_after(moved)
            self._pause = wanted if self._pause is None else min(self._pause, wanted)
        return moved

    def take_pause(self) -> float:
        """Seconds the loop should stop reading, to batch a large stream (then reset)."""
        pause, self._pause = self._pause, None
        return pause or 0.0

    def arm_live(self) -> bool:
        """After new output: flush it at once when its time has come, else arm the flush.

        True when the flush was newly armed (the loop's next wake-up may have to come sooner).
        """
        if self._live is None:
            return False
        due = self._live.due_at()
        if due is None:
            return False
        now = time.monotonic()
        if now >= due:
            self._live.flush(now)
            self.live_armed = False
            return False
        armed, self.live_armed = self.live_armed, True
        return not armed

    def live_wait(self, now: float) -> float:
        """Seconds until the armed flush is due (call when `live_armed`)."""
        assert self._live is not None
        return (self._live.due_at() or now) - now

    def flush_live_if_due(self, now: float) -> None:
        """Make the armed flush when its time has come (call when `live_armed`)."""
        assert self._live is not None
        self._live.flush_if_due(now)
        self.live_armed = self._live.pending()

    def drain(self, pipes: list[int], until: float) -> bool:
        """Read what `pipes` still hold, until `until` (an unkillable writer may remain); True
        when every one reached its end (nothing holds it open any more)."""
        ended = True
        for fd in pipes:
            while (moved := self.streams[fd].pump(fd)) > 0 and time.monotonic() < until:
                pass
            ended = ended and moved == 0
        return ended

    def final_flush(self, now: float) -> None:
        """The last live output, holding nothing back: the command has ended."""
        if self._live is not None:
            self._live.flush(now, final=True)
            self.live_armed = False

    def finish(self) -> tuple[Captured, Captured]:
        """The captured stdout and stderr (may read the spill files)."""
        return self.streams[self.pipes[0]].finish(), self.streams[self.pipes[1]].finish()

    def discard(self) -> None:
        """Drop both streams and their spill files: the run ends without their text."""
        for stream in self.streams.values():
            stream.discard()


class OutputRelay:
    """Calls `callback` directly, or — once the run moved to a thread — on the loop's thread.

    Made by the coroutine that runs the command: it keeps a copy of that coroutine's context
    variables, and a call from the thread runs in it. Without them the callback would run in
    the thread's empty context (`call_soon_threadsafe` takes the caller's), and a callback that
    needs its run's context — LangGraph's stream writer asks for the run's config — would fail.
    """

    def __init__(self, callback: OutputCallback) -> None:
        self.callback = callback
        self.loop: asyncio.AbstractEventLoop | None = None
        self.context = contextvars.copy_context()

    def __call__(self, stream: str, text: str) -> None:
        if self.loop is None:
            self.callback(stream, text)
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is listening
            self.loop.call_soon_threadsafe(self.callback, stream, text, context=self.context)
