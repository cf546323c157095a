"""How a command ended, as plain data, and the one function that shows it to the model.

Everything here is pure: no processes, no I/O. The execution layer builds `CommandResult`s, the
graph routes on their fields, and `render_for_model` is the only place their text is made.
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
    "exit_hint", "render_for_model", "signal_name", "spawn_failure",
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
