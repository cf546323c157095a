"""How a command ended, as plain data, and the one function that shows it to the model.

Everything here is pure: no processes, no I/O. The execution layer builds `CommandResult`s, the
graph routes on their fields, and `render_for_model` is the only place their text is made.

Two more ways its text is shown, at the end of this module:

* Binary output is described, not shown (`describe_binary`). A model reads escaped bytes as a
  flood of symbols (3 KB of `/bin/ls` cost 8,290 tokens, a capped binary stream 18,379): it
  learns nothing from them. A stream whose first 8 KiB are more than a tenth bytes that are
  neither UTF-8 text nor ordinary whitespace (NULs, other control bytes, invalid UTF-8) is
  described in one line instead (`looks_binary`): its size, its kind (from the magic numbers
  below), its first 32 bytes in hex, and where the whole of it is; text it printed at its very
  end (a log line after a dump) is still shown (`text_end`).
* A few lines of the output for the person watching (`preview_fields`): its head and tail,
  collapsed. The model reads the whole (capped) output; a person reads this preview under the
  command's line (`command_end` events carry it, see docs/cli.md) and the spill file for the
  rest. The text is the result's: already capped by `max_output_chars`, decoded and made
  visible by the runner. The preview adds its own bounds: at most `HEAD_LINES + TAIL_LINES`
  lines of at most `LINE_CHARS` characters each, found by looking at the text's two ends only,
  so a stream of one endless line or of binary bytes costs one count of its line feeds and
  nothing more.
"""

from __future__ import annotations

import dataclasses
import signal as _signal
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bashgraph.tools.failures import KINDS, TRANSIENT_KINDS, SpawnErrorKind, is_refusal
from bashgraph.tools.text import one_line

# The kinds are declared with their taxonomy (failures.py); they stay public here, where callers
# and stored checkpoints have always found them.
__all__ = [
    "NO_OUTPUT", "TRANSIENT_KINDS", "CommandResult", "Outcome", "SpawnErrorKind", "args_error", "clip",
    "describe_binary", "exit_hint", "preview_fields", "render_for_model", "signal_name", "spawn_failure",
]


class Outcome(StrEnum):
    """The four ways a tool call can end. Public and stable."""

    OK = "ok"
    EXIT_ERROR = "exit_error"
    SPAWN_ERROR = "spawn_error"
    ARGS_ERROR = "args_error"


#: Shown to the model when a command printed nothing at all (an empty tool message is
#: rejected by some providers and reads as "the tool broke" to others).
NO_OUTPUT = "(no output)"


@dataclass(frozen=True, slots=True)
class CommandResult:
    """The whole evidence of one command, in plain values (it is stored in checkpoints).

    `stdout`/`stderr` are already capped (head and tail kept, the middle replaced by a marker);
    `stdout_bytes`/`stderr_bytes` count what the command really wrote, and the spill files, when
    set, hold every byte of a stream that went over the cap.
    """

    outcome: Outcome
    command: str
    cwd: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    spawn_error: SpawnErrorKind | None = None
    errno: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    truncated: bool = False
    duration_s: float = 0.0
    hint: str | None = None
    detail: str | None = None
    stdout_file: str | None = None
    stderr_file: str | None = None
    final_cwd: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def status(self) -> str:
        """The ToolMessage status: derived from the outcome, never stored twice."""
        return "success" if self.ok else "error"

    @property
    def transient(self) -> bool:
        """Running the same command again may succeed (the kind's entry in `failures.KINDS`)."""
        return self.spawn_error is not None and KINDS[self.spawn_error].transient

    @property
    def refused(self) -> bool:
        """A rule or a person said no (`spawn_error/denied`): the command never ran."""
        return self.outcome is Outcome.SPAWN_ERROR and is_refusal(self.spawn_error)

    @property
    def environment_fault(self) -> bool:
        """A spawn error that is not a refusal: the environment kept the command from running
        or finishing. Only these are retried or escalated."""
        return self.outcome is Outcome.SPAWN_ERROR and not self.refused

    @property
    def output_file(self) -> str | None:
        """The spill file of stdout, else of stderr: where the full output can be read."""
        return self.stdout_file or self.stderr_file

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (enums become their string values)."""
        # Every field is a plain value: a shallow copy is the JSON form (asdict deep-copies).
        data = {name: getattr(self, name) for name in _FIELD_NAMES}
        data["outcome"] = self.outcome.value
        data["spawn_error"] = self.spawn_error.value if self.spawn_error else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CommandResult:
        """Inverse of `to_dict`; unknown keys are ignored so old checkpoints keep loading."""
        values = {k: v for k, v in data.items() if k in _FIELD_SET}
        values["outcome"] = Outcome(values["outcome"])
        kind = values.get("spawn_error")
        values["spawn_error"] = SpawnErrorKind(kind) if kind else None
        return cls(**values)


#: Read on every tool result (routing parses artifacts at each step), so computed once.
_FIELD_NAMES: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(CommandResult))
_FIELD_SET = frozenset(_FIELD_NAMES)


def args_error(problem: str, command: str = "") -> CommandResult:
    """The result of a tool call whose arguments were invalid: nothing ran."""
    return CommandResult(outcome=Outcome.ARGS_ERROR, command=command, detail=problem)


def spawn_failure(
    kind: SpawnErrorKind, command: str, detail: str, *, cwd: str | None = None, **extra: Any
) -> CommandResult:
    """A command that never ran or never finished, with `detail` saying why in one line."""
    return CommandResult(
        outcome=Outcome.SPAWN_ERROR, command=command, cwd=cwd, spawn_error=kind, detail=detail,
        **extra,
    )


def exit_hint(exit_code: int) -> str | None:
    """What the shell's conventional exit codes mean, for the model."""
    if exit_code == 127:
        return "command not found"
    if exit_code == 126:
        return "found but not executable (permission denied or not a program)"
    if exit_code > 128 and exit_code - 128 < _signal.NSIG:
        return f"a process inside the command was killed by {signal_name(exit_code - 128)}"
    return None


def signal_name(number: int) -> str:
    try:
        return _signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def clip(text: str, limit: int) -> str:
    """Keep the head and tail of `text` within `limit` characters, marking what was cut."""
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit:,} characters omitted ...]\n"
    room = max(limit - len(marker), 0)
    head = room // 2
    return text[:head] + marker + text[len(text) - (room - head) :]


def render_for_model(result: CommandResult, max_chars: int | None = None) -> str:
    """The exact text the model reads for `result` (see docs and tests for every shape).

    When `max_chars` is given the text never exceeds it: the streams are clipped middle-out.
    """
    header = _header(result)
    budget = None if max_chars is None else max(max_chars - len(header) - 1, 0)
    body = _body(result, budget)
    text = f"{header}\n{body}" if header and body else header or body
    return clip(text, max_chars) if max_chars is not None else text


def _header(result: CommandResult) -> str:
    if result.outcome is Outcome.OK:
        return ""
    if result.outcome is Outcome.EXIT_ERROR:
        hint = f" {result.hint}" if result.hint else ""
        return f"[exit code {result.exit_code}]{hint}"
    if result.outcome is Outcome.ARGS_ERROR:
        return f"[args error] {result.detail or 'invalid arguments'}"
    kind = result.spawn_error.value if result.spawn_error else "unknown"
    if result.detail and result.detail.startswith(f"{kind} "):
        return f"[spawn error: {result.detail}]"  # "timeout after 30s — …" already names it
    detail = f" — {result.detail}" if result.detail else ""
    return f"[spawn error: {kind}{detail}]"


def _body(result: CommandResult, budget: int | None) -> str:
    if result.outcome is Outcome.ARGS_ERROR:
        return ""
    stdout, stderr = _strip_newline(result.stdout), _strip_newline(result.stderr)
    if budget is not None and len(stdout) + len(stderr) > budget:
        stdout, stderr = _share(stdout, stderr, budget)
    parts = _stream_parts(result, stdout, stderr)
    if result.final_cwd and result.cwd and result.final_cwd != result.cwd:
        # A directory name is text the command chose: escapes and line breaks shown as symbols.
        parts.append(f"[cwd] {one_line(result.final_cwd)}")
    if not parts and result.outcome is not Outcome.SPAWN_ERROR:
        return NO_OUTPUT
    return "\n".join(parts)


def _stream_parts(result: CommandResult, stdout: str, stderr: str) -> list[str]:
    parts: list[str] = []
    if result.outcome is Outcome.OK:
        # Success reads like a terminal: stdout as it is, warnings after it tagged [stderr].
        if stdout:
            parts.append(stdout)
    elif stdout:
        parts.append(f"[stdout] {stdout}")
    if stderr:
        parts.append(f"[stderr] {stderr}")
    return parts


def _share(stdout: str, stderr: str, budget: int) -> tuple[str, str]:
    """Split `budget` between the streams, giving a short one all it needs."""
    overhead = 40  # tags, newlines and the omission markers clip() inserts
    room = max(budget - overhead, 0)
    half = room // 2
    if len(stderr) <= half:
        return clip(stdout, room - len(stderr)), stderr
    if len(stdout) <= half:
        return stdout, clip(stderr, room - len(stdout))
    return clip(stdout, half), clip(stderr, room - half)


def _strip_newline(text: str) -> str:
    return text[:-1] if text.endswith("\n") else text


# -- binary output, described instead of shown ------------------------------------------

#: How much of a stream's head decides whether it is binary.
SAMPLE_BYTES = 8_192
HEX_BYTES = 32
MIN_ODD = 4
_MAGIC: tuple[tuple[bytes, int, str], ...] = (
    (b"\x7fELF", 0, "ELF executable or library"), (b"\x89PNG\r\n\x1a\n", 0, "PNG image"),
    (b"\xff\xd8\xff", 0, "JPEG image"), (b"GIF8", 0, "GIF image"), (b"%PDF", 0, "PDF document"),
    (b"PK\x03\x04", 0, "zip archive"), (b"\x1f\x8b", 0, "gzip data"), (b"BZh", 0, "bzip2 data"),
    (b"\xfd7zXZ\x00", 0, "xz data"), (b"\x28\xb5\x2f\xfd", 0, "zstd data"),
    (b"SQLite format 3\x00", 0, "SQLite database"), (b"\x00asm", 0, "WebAssembly module"),
    (b"ustar", 257, "tar archive"), (b"MZ", 0, "DOS/Windows executable"), (b"RIFF", 0, "RIFF media"),
    (b"OggS", 0, "Ogg media"), (b"\xca\xfe\xba\xbe", 0, "Java class or Mach-O universal binary"),
    (b"\xcf\xfa\xed\xfe", 0, "Mach-O executable"),
)
_TEXT_CONTROLS = frozenset(b"\n\r\t\f\b\x1b")


def describe_binary(head: bytes | bytearray | memoryview, total: int, where: str) -> str | None:
    """One line describing a binary stream whose first bytes are `head` (None: it is text)."""
    sample = bytes(head[:SAMPLE_BYTES])
    if not sample or not looks_binary(sample):
        return None
    return (f"[binary output: {total:,} bytes, {kind_of(sample)}; first bytes: "
            f"{sample[:HEX_BYTES].hex(' ')}; {where}]")


def looks_binary(sample: bytes) -> bool:
    """More than a tenth of the sample (and at least `MIN_ODD` characters) is neither UTF-8 text
    nor ordinary whitespace: a stray NUL or bad byte in text leaves it text."""
    text = sample.decode("utf-8", "replace")
    if sample and len(sample) == SAMPLE_BYTES:  # a character cut at the sample's end is not a fault
        text = text.removesuffix("\ufffd")
    odd = text.count("\ufffd") + sum(1 for char in text if ord(char) < 32 and ord(char) not in _TEXT_CONTROLS)
    return odd >= MIN_ODD and odd * 10 > len(text)


def kind_of(sample: bytes) -> str:
    for magic, offset, kind in _MAGIC:
        if sample[offset:offset + len(magic)] == magic:
            return kind
    return "unknown binary data"


def text_end(tail: bytes) -> bytes:
    """The longest run of text bytes (printable, whitespace, UTF-8) at the end of `tail`: what a
    binary stream printed last as text, or nothing."""
    start = len(tail)
    while start > 0 and (tail[start - 1] >= 32 or tail[start - 1] in _TEXT_CONTROLS):
        start -= 1
    run = tail[start:]
    return b"" if looks_binary(run) else run


# -- a preview for people --------------------------------------------------------------

HEAD_LINES = 3
TAIL_LINES = 3
#: What a preview keeps of one line (a long line is cut with `…`).
LINE_CHARS = 200
ELLIPSIS = "…"


def stream_preview(text: str, *, whole: bool = True) -> list[str]:
    """The first and last lines of `text`, with `… N more lines …` between when some are left
    out (`… more lines …` when `text` is not `whole`: its middle was cut, so the count is not known)."""
    if text.endswith("\n"):
        text = text[:-1]
    if not text.strip():
        return []
    total = text.count("\n") + 1
    if total <= HEAD_LINES + TAIL_LINES:
        region = (HEAD_LINES + TAIL_LINES) * (LINE_CHARS + 1)
        if len(text) <= region:
            return [_cut(line) for line in text.split("\n")]
    region = HEAD_LINES * (LINE_CHARS + 1)
    head = _ends(text[:region].split("\n"), HEAD_LINES, cut_last=True)
    tail = _ends(text[-region:].split("\n"), TAIL_LINES, cut_last=False)
    left_out = total - len(head) - len(tail)
    if not whole:
        marker = f"{ELLIPSIS} more lines {ELLIPSIS}"
    elif left_out > 0:
        marker = f"{ELLIPSIS} {left_out:,} more line{'s' * (left_out != 1)} {ELLIPSIS}"
    else:
        marker = ELLIPSIS  # few lines, but long ones: their middle is left out
    return [*head, marker, *tail]


def _ends(pieces: list[str], count: int, *, cut_last: bool) -> list[str]:
    """`count` lines from one end of a region of the text, each cut to `LINE_CHARS`. Fewer
    pieces than `count` mean a long line crosses the region's edge: it is shown cut there."""
    partial = len(pieces) <= count
    lines = pieces[:count] if cut_last else pieces[-count:]
    lines = [_cut(line) for line in lines]
    if partial and cut_last and not lines[-1].endswith(ELLIPSIS):
        lines[-1] += ELLIPSIS
    elif partial and not cut_last:
        lines[0] = ELLIPSIS + pieces[-len(lines)][-(LINE_CHARS - 1):]
    return lines


def _cut(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS - 1] + ELLIPSIS


def preview_fields(result: CommandResult) -> dict[str, Any]:
    """The preview fields of a `command_end` event: each stream's preview, and the spill file
    that holds all of the output when it went over the cap."""
    return {
        "stdout_preview": stream_preview(result.stdout, whole=not (result.truncated or result.stdout_file)),
        "stderr_preview": stream_preview(result.stderr, whole=not (result.truncated or result.stderr_file)),
        "output_file": result.stdout_file or result.stderr_file,
    }
