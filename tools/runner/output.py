"""The output side of one run: what is read from its two pipes, and the live output.

`Supervisor` decides when to read, owns the descriptors (it closes a pipe at its end) and ends
the run; this holds what reading leaves behind: a `StreamCapture` per pipe (in the order of the
result: stdout, stderr), the pause the next read should wait (`pacing`), and the live output
(`live`) with whether a flush is waiting for its time — the loop that drives the run must then
wake up for it.
"""

from __future__ import annotations

import time

from bashgraph.tools.runner.capture import Captured, StreamCapture
from bashgraph.tools.runner.live import LiveOutput, OutputCallback
from bashgraph.tools.runner.spawn import Plan


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

