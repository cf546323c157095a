"""What a command printed before its run was cancelled (Ctrl-C, SIGTERM), kept for the resume.

A cancelled command has no result: its journal row stays open, and the resume reports it
`interrupted` (graph/call_journal.py). So that the report says how long it ran and what it
printed, the executor records, while it runs, the start and the end of each stream's live
output (already redacted and made visible, as shown live), and when the run is cancelled writes
them with the time it stopped to a small file next to the spill files, named by the call's
journal marker. The resume reads it back. Both ends are bounded (`KEEP` characters a stream),
and a file that is missing, too big or unreadable is simply not used: the report then says
what it said before (no duration, no output).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from bashgraph.tools.runner.live import OutputCallback

#: Characters kept of each end of a stream.
KEEP = 4_000
CUT = "\n[... output cut ...]\n"
#: A record bigger than this is not read (it was not written by `save`). `save` writes JSON
#: escapes: a character outside the Basic Multilingual Plane (an emoji) takes 12 bytes, so two
#: streams of `2 * KEEP` such characters, and the rest of the record, fit.
MAX_RECORD_BYTES = 2 * (2 * KEEP + len(CUT)) * len(json.dumps("\U0001f600")) + 1024


@dataclass(frozen=True)
class Partial:
    """A cancelled run, as recorded: when it stopped, and what it printed (head and tail)."""

    ended_at: float
    stdout: str = ""
    stderr: str = ""


class PartialOutput:
    """The live output of one run so far: each stream's first and last `KEEP` characters."""

    def __init__(self) -> None:
        self._head: dict[str, str] = {}
        self._tail: dict[str, str] = {}
        self._cut: set[str] = set()

    def add(self, stream: str, text: str) -> None:
        head = self._head.get(stream, "")
        if len(head) < KEEP:
            room = KEEP - len(head)
            self._head[stream], text = head + text[:room], text[room:]
        if text:
            tail = self._tail.get(stream, "") + text
            if len(tail) > KEEP:
                self._cut.add(stream)
            self._tail[stream] = tail[-KEEP:]

    def text(self, stream: str) -> str:
        between = CUT if stream in self._cut else ""
        return self._head.get(stream, "") + between + self._tail.get(stream, "")

    def stopped_now(self) -> Partial:
        return Partial(time.time(), self.text("stdout"), self.text("stderr"))


def recording(seen: PartialOutput | None, callback: OutputCallback | None) -> OutputCallback | None:
    """`callback`, with each piece of live output also kept by `seen` (when given)."""
    if seen is None:
        return callback

    def both(stream: str, text: str) -> None:
        seen.add(stream, text)
        if callback is not None:
            callback(stream, text)

    return both


def record_path(spill_dir: str | os.PathLike[str], marker: str) -> Path:
    return Path(spill_dir) / f"interrupted-{marker}.json"


def save(path: Path, partial: Partial) -> None:
    """Write the record (blocking; mode 0600, in the spill directory, made 0700 if missing).
    A failure to write loses only the report's details."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = json.dumps({"ended_at": partial.ended_at, "stdout": partial.stdout, "stderr": partial.stderr})
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(data)


def load(path: Path) -> Partial | None:
    """The record at `path`, or None when there is none that can be read (blocking)."""
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_RECORD_BYTES + 1)
        if len(raw) > MAX_RECORD_BYTES:
            return None
        values = json.loads(raw)
        return Partial(float(values["ended_at"]), str(values.get("stdout") or "")[:2 * KEEP + len(CUT)],
                       str(values.get("stderr") or "")[:2 * KEEP + len(CUT)])
    except (OSError, ValueError, TypeError, KeyError):
        return None
