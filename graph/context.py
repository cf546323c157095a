"""The model's view of a thread: the one place where the messages sent to the model are built.

The checkpoints keep the whole conversation; what the model reads is derived from it and from
the thread's compaction record (`ContextRecord`, written only by the `compact` node,
graph/compaction.py), so history, fork and time travel still see every step:

    [system prompt] [tasks, verbatim] [summary of older turns] [the turns since, in full]

Tool outputs older than the record's `cleared_upto` are shown as one-line stubs that keep the
typed outcome, the command, its size and the spill file's path (the model can read it again
with a command). Between two compactions the view only grows at its end: every request starts
with the previous one, so servers' prefix caches stay warm.

The view's size is bounded by the context window, not by the length of the thread: building it
touches only the messages after the summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage

# Not typing.TypedDict: on Python < 3.12 pydantic refuses it (see graph/state.py).
from typing_extensions import TypedDict

from bashgraph.graph.models.prompts import SUMMARY_MESSAGE_ID
from bashgraph.graph.tokens import MESSAGE_OVERHEAD_TOKENS, message_tokens, text_tokens
from bashgraph.tools import clip

__all__ = ["ContextRecord", "model_messages"]

#: A cleared output shorter than this is kept as it is: its stub would be no shorter.
STUB_MIN_CHARS = 300


class ContextRecord(TypedDict, total=False):
    """How the model's view of a thread is cut: written by `compact`, read by `model_messages`.

    Indices are positions in the thread's `messages` (the list only grows; a retried call's
    answer replaces the earlier one in place)."""

    summary: str | None
    """The message standing for `messages[:summary_upto]` (tasks excepted), or None."""
    summary_upto: int
    """Messages before this index are summarised (the view starts here)."""
    kept: list[int]
    """Indices below `summary_upto` of the tasks, shown verbatim before the summary."""
    cleared_upto: int
    """Tool outputs before this index are shown as stubs."""
    ledger: list[str]
    """One line per summarised command (outcome · command · why it failed), in order; bounded,
    failures kept longest."""
    ledger_omitted: int
    """Summarised commands the ledger no longer lists."""
    last: dict[str, Any]
    """The latest compaction: trigger, window, tokens before and after, outputs cleared,
    messages summarised (what `history` and the `compaction` event show)."""
    window: int | None
    """The window a server's context-length error named (it beats every other source)."""
    at: int
    """How many messages the thread had when this record was made."""
    compactions: int
    """Compactions made in this thread."""
    overflows: int
    """Context-length errors in a row with nothing new to compact in between."""


def model_messages(
    messages: Sequence[AnyMessage], record: ContextRecord | None, system_prompt: str,
    turn_cap_tokens: int | None = None,
) -> list[AnyMessage]:
    """The messages sent to the model for a thread whose conversation is `messages`.

    `turn_cap_tokens`: the tool outputs answering one model reply are clipped (middle out) so
    that together they fit it: a single reply's outputs can never outgrow the window.
    """
    record = record or {}
    start = min(record.get("summary_upto", 0), len(messages))
    cleared = record.get("cleared_upto", 0)
    view: list[AnyMessage] = [SystemMessage(system_prompt)]
    view += [messages[i] for i in record.get("kept", []) if i < start]
    if record.get("summary"):
        view.append(HumanMessage(str(record["summary"]), id=SUMMARY_MESSAGE_ID))
    tail = [stub(m) if i < cleared and isinstance(m, ToolMessage) else m
            for i, m in enumerate(messages[start:], start)]
    view += cap_turns(tail, turn_cap_tokens) if turn_cap_tokens else tail
    return view


def stub(message: ToolMessage) -> ToolMessage:
    """`message` with its output replaced by one line: outcome, command, size, spill file."""
    content = str(message.content)
    if len(content) < STUB_MIN_CHARS:
        return message
    return message.model_copy(update={"content": stub_text(message.artifact, len(content))})


def stub_text(artifact: Any, chars: int) -> str:
    if not isinstance(artifact, dict):
        return f"[output cleared from the context: {chars:,} characters]"
    size = int(artifact.get("stdout_bytes") or 0) + int(artifact.get("stderr_bytes") or 0)
    parts = [outcome_words(artifact), f"`{clip(str(artifact.get('command') or ''), 200)}`",
             f"{size:,} bytes of output"]
    if artifact.get("outcome") != "ok" and (why := failure_evidence(artifact)):
        parts.append(why)
    spill = artifact.get("stdout_file") or artifact.get("stderr_file")
    parts.append(f"full output: {spill}" if spill else "output not kept on disk")
    return "[output cleared from the context: " + " · ".join(parts) + "]"


def outcome_words(artifact: dict[str, Any]) -> str:
    """`ok`, `exit 2`, `spawn_error/timeout`, `args_error`: the typed outcome, short."""
    outcome = str(artifact.get("outcome") or "?")
    if outcome == "exit_error":
        return f"exit {artifact.get('exit_code')}"
    if outcome == "spawn_error":
        return f"spawn_error/{artifact.get('spawn_error')}"
    return outcome


def failure_evidence(artifact: dict[str, Any]) -> str:
    """The last telling line of a failure (stderr, else the detail, else stdout), clipped."""
    for key in ("stderr", "detail", "stdout"):
        lines = [line for line in str(artifact.get(key) or "").strip().splitlines() if line.strip()]
        if lines:
            return clip(lines[-1], 160)
    return ""


def cap_turns(tail: list[AnyMessage], cap_tokens: int) -> list[AnyMessage]:
    """Each reply's tool outputs clipped to share `cap_tokens` (only when they exceed it)."""
    capped: list[AnyMessage] = []
    answers: list[ToolMessage] = []
    for message in [*tail, None]:
        if isinstance(message, ToolMessage):
            answers.append(message)
            continue
        capped += _fit(answers, cap_tokens)
        answers = []
        if message is not None:
            capped.append(message)
    return capped


def _fit(answers: list[ToolMessage], cap_tokens: int) -> list[ToolMessage]:
    if not answers or sum(message_tokens(m) for m in answers) <= cap_tokens:
        return answers
    share = max(cap_tokens // len(answers) - MESSAGE_OVERHEAD_TOKENS - 30, 64)  # 30: the marker
    return [_clipped(m, share) if message_tokens(m) > share else m for m in answers]


def _clipped(message: ToolMessage, tokens: int) -> ToolMessage:
    """`message` clipped middle-out to about `tokens` (digits count more than letters); the
    marker names the spill file, as the output's own marker (now cut out) did."""
    text = str(message.content)
    keep = int(tokens * len(text) / max(text_tokens(text), 1))
    artifact = message.artifact if isinstance(message.artifact, dict) else {}
    spill = artifact.get("stdout_file") or artifact.get("stderr_file")
    where = f"full output: {spill}" if spill else "cut to fit the model's context"
    head, tail = text[:keep // 2], text[len(text) - keep // 2:] if keep > 1 else ""
    marker = f"\n[... {len(text) - len(head) - len(tail):,} characters omitted; {where}]\n"
    return message.model_copy(update={"content": head + marker + tail})


def is_turn_start(message: AnyMessage) -> bool:
    """A place the view may start after a summary: never between a reply and its answers."""
    return isinstance(message, AIMessage | HumanMessage)
