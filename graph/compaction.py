"""Keeping a thread's requests inside the model's context window: the budget, and `compact`.

Before each model call `agent` asks `ContextKeeper.prepare` for the view (graph/context.py) and
whether it still fits: a request past the budget's high mark goes to `compact` first, never
after. `compact` works in one large step down to the budget's target, well under it:

1. old tool outputs become stubs (outcome, command, size, spill file), the newest turns stay;
2. if that is not enough, the older turns are summarised by the model, and the summary carries
   the tasks verbatim, the working directory, the live background jobs and a ledger of the
   summarised commands' outcomes (failures first, with their evidence).

A context-length refusal from the server (`agent` catches it) compacts harder, with the window
the refusal named, and the call is made again; it is not a model error. The checkpoints keep
every message: only the thread's `context` record changes, and each compaction is a
`compaction` event.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable

from bashgraph.graph.config import AgentConfig
from bashgraph.graph.context import ContextRecord, failure_evidence, is_turn_start, model_messages, outcome_words
from bashgraph.graph.models import prompts
from bashgraph.graph.models.reasoning import split_think
from bashgraph.graph.models.window import ask_window, overflow_of
from bashgraph.graph.state import AgentState
from bashgraph.graph.tokens import (
    CHARS_PER_TOKEN,
    DEFAULT_WINDOW,
    MESSAGE_OVERHEAD_TOKENS,
    Budget,
    message_tokens,
    request_tokens,
    text_tokens,
)
from bashgraph.tools import clip

#: Below this estimate no window matters: the server is not asked until a request passes it.
ASK_SERVER_ABOVE = 4_096
#: Context-length refusals in a row, with nothing new to compact, before the run stops.
MAX_OVERFLOWS = 3
#: Characters of one output a summary request shows the model (the ledger keeps the outcome).
TRANSCRIPT_OUTPUT_CHARS = 600
#: Share of the usable window the tasks kept verbatim before a summary may take: a thread given
#: request after request would otherwise outgrow any window with its tasks alone.
TASKS_SHARE = 0.12


class ContextKeeper:
    """The budget of one graph's model calls, and the work of its `compact` node."""

    def __init__(self, config: AgentConfig, model: Runnable[Any, Any], fixed_tokens: int,
                 jobs: Any = None, served: Any = None) -> None:
        self.config = config
        self.summarizer = model.bind(tool_choice="none")
        self.fixed_tokens = fixed_tokens  # the tool schemas every request carries
        # ... and the system prompt: the part of every request no compaction makes smaller.
        self.fixed_request = fixed_tokens + text_tokens(config.chat.system_prompt) + MESSAGE_OVERHEAD_TOKENS
        self.jobs = jobs
        self.served = served  # the chat model, when known: its window may be read from it
        self._window: int | None = config.chat.context_window
        self._asked = config.chat.context_window is not None
        self._lock = threading.Lock()

    # -- before each call (agent) -----------------------------------------------------------
    def prepare(self, state: AgentState) -> tuple[list[AnyMessage], dict[str, Any] | None]:
        """The view to send, and the update that sends the run to `compact` instead (or None)."""
        view, tokens = self._measure(state)
        if tokens > ASK_SERVER_ABOVE and not self._asked:
            self._ask_server()
        return view, self._due(state, tokens)

    async def aprepare(self, state: AgentState) -> tuple[list[AnyMessage], dict[str, Any] | None]:
        view, tokens = self._measure(state)
        if tokens > ASK_SERVER_ABOVE and not self._asked:
            await asyncio.to_thread(self._ask_server)  # HTTP: never on the event loop
        return view, self._due(state, tokens)

    def _measure(self, state: AgentState) -> tuple[list[AnyMessage], int]:
        messages, record = state.get("messages", []), state.get("context") or {}
        budget = self.budget(record)
        view = model_messages(messages, record, self.config.chat.system_prompt, budget.turn_cap)
        return view, request_tokens(view, self.fixed_tokens, since=_first_new(view, record, len(messages)))

    def _due(self, state: AgentState, tokens: int) -> dict[str, Any] | None:
        record = state.get("context") or {}
        if record.get("at") == len(state.get("messages", [])) or tokens <= self.budget(record).high:
            return None  # fits, or nothing new since the last compaction: let the server say
        return {"compact_due": {"trigger": "budget", "tokens": tokens}}

    def overflowed(self, exc: BaseException, state: AgentState) -> dict[str, Any]:
        """A refusal for length sends the run to `compact` (harder); any other error is raised."""
        overflow = overflow_of(exc)
        if overflow is None:
            raise exc
        _, tokens = self._measure(state)
        return {"compact_due": {"trigger": "overflow", "window": overflow.window, "tokens": tokens,
                                "error": str(overflow)}}

    # -- the window ---------------------------------------------------------------------------
    def budget(self, record: ContextRecord, harder: bool = False) -> Budget:
        return Budget(record.get("window") or self._window or DEFAULT_WINDOW, harder, self.fixed_request)

    def _ask_server(self) -> None:
        with self._lock:
            if not self._asked:
                self._window = self._window or served_window(self.config, self.served)
                self._asked = True

    # -- compact --------------------------------------------------------------------------------
    def plan(self, state: AgentState, thread: str | None) -> Plan:
        """What `compact` will do; `plan.request` is the summary request, when one is needed."""
        return Plan(self, state, thread)

    def finish(self, plan: Plan, reply: Any) -> dict[str, Any]:
        return plan.update(_reply_text(reply))


class Plan:
    """One compaction worked out from the state: stubs first, then the summary if needed."""

    def __init__(self, keeper: ContextKeeper, state: AgentState, thread: str | None) -> None:
        self.keeper, self.state, self.thread = keeper, state, thread
        messages = self.messages = state.get("messages", [])
        old = self.old = state.get("context") or {}
        due = self.due = state.get("compact_due") or {"trigger": "budget"}
        learned = due.get("window") or old.get("window")
        if due.get("trigger") == "overflow" and not learned:
            learned = int(due.get("tokens", DEFAULT_WINDOW) * 0.75)  # the server said no number
        self.budget = Budget(learned or keeper.budget(old).window, harder=due.get("trigger") == "overflow",
                             fixed=keeper.fixed_request)
        self.start = min(old.get("summary_upto", 0), len(messages))
        self.cut = recent_start(messages, self.start, self.budget)
        self.record: ContextRecord = {
            **old, "window": learned, "at": len(messages), "compactions": old.get("compactions", 0) + 1,
            "cleared_upto": max(old.get("cleared_upto", 0), self.cut),
            "overflows": _overflows(old, due, len(messages)),
        }
        self.tokens_after = self._tokens(self.record)
        self.request: list[AnyMessage] | None = None
        self.kept: list[int] = []
        self.dropped: list[int] = []
        if self.tokens_after > self.budget.target and self.cut > self.start:
            tasks = [*[i for i in old.get("kept", []) if i < self.start],
                     *[i for i in range(self.start, self.cut) if is_task(messages[i])]]
            self.kept, self.dropped = bound_tasks(messages, tasks, int(self.budget.usable * TASKS_SHARE))
            self.request = self._summary_request()

    def _tokens(self, record: ContextRecord) -> int:
        view = model_messages(self.messages, record, self.keeper.config.chat.system_prompt, self.budget.turn_cap)
        return request_tokens(view, self.keeper.fixed_tokens, since=len(view))

    def _summary_request(self) -> list[AnyMessage]:
        older_tasks = [self.messages[i] for i in self.dropped if i < self.start]  # no longer kept
        lines = [line for m in [*older_tasks, *self.messages[self.start:self.cut]] if (line := transcript_line(m))]
        room = int(self.budget.usable * 0.6) * CHARS_PER_TOKEN
        transcript = clip("\n".join([*self._earlier(), *lines]), room)
        return [SystemMessage(prompts.SUMMARY_INSTRUCTIONS), HumanMessage(transcript)]

    def _earlier(self) -> list[str]:
        summary = self.old.get("summary")
        return [f"[summary of the turns before these]\n{summary}"] if summary else []

    def update(self, summary_text: str | None) -> dict[str, Any]:
        """The writes of `compact`: the new record, the due flag cleared; the event to emit."""
        record, summarised = self.record, 0
        if self.request is not None:
            record = self._summarised(record, summary_text)
            summarised = self.cut - self.start
            self.tokens_after = self._tokens(record)
        cleared = sum(1 for m in self.messages[self.old.get("cleared_upto", 0):record["cleared_upto"]]
                      if isinstance(m, ToolMessage))
        last = {"trigger": self.due.get("trigger", "budget"), "window": self.budget.window,
                "tokens_before": int(self.due.get("tokens") or 0), "tokens_after": self.tokens_after,
                "cleared": cleared, "summarised": summarised, "model_summary": bool(summary_text)}
        update: dict[str, Any] = {"context": {**record, "last": last}, "compact_due": None}
        if record["overflows"] >= MAX_OVERFLOWS:
            update |= {"status": "failed", "reason": (
                f"the request does not fit the model's context window ({self.budget.window:,} tokens) "
                "even after compaction")}
        return update

    def _summarised(self, record: ContextRecord, text: str | None) -> ContextRecord:
        ledger, dropped = bound_ledger([*self.old.get("ledger", []), *ledger_lines(self.messages[self.start:self.cut])],
                                       int(self.budget.usable * 0.08) * CHARS_PER_TOKEN)
        omitted = self.old.get("ledger_omitted", 0) + dropped
        summary = prompts.compacted_summary(
            summarised=self.cut, cwd=self.state.get("cwd") or self.keeper.config.execution.workdir,
            jobs=live_jobs(self.keeper.jobs, self.thread), text=text, ledger=ledger, omitted=omitted)
        return {**record, "summary": summary, "summary_upto": self.cut, "ledger": ledger,
                "ledger_omitted": omitted,
                "kept": self.kept, "cleared_upto": max(record["cleared_upto"], self.cut)}


def _first_new(view: Sequence[AnyMessage], record: ContextRecord, count: int) -> int:
    """Index in `view` of the first message added after the last compaction (len(view): none)."""
    if not record:
        return 0
    return max(len(view) - (count - record.get("at", count)), 0)


def _overflows(old: ContextRecord, due: dict[str, Any], count: int) -> int:
    if due.get("trigger") != "overflow":
        return 0
    return old.get("overflows", 0) + 1 if old.get("at") == count else 1


def recent_start(messages: Sequence[AnyMessage], start: int, budget: Budget) -> int:
    """Where the newest turns kept whole begin: a turn start after `start`, holding at most
    `budget.recent` tokens, and never past the newest turn (the model must see it)."""
    total, cut = 0, len(messages)
    for index in range(len(messages) - 1, start - 1, -1):
        total += min(message_tokens(messages[index]), budget.turn_cap)
        if total > budget.recent:
            break
        cut = index
    newest = next((i for i in range(len(messages) - 1, start - 1, -1) if is_turn_start(messages[i])), start)
    while cut < len(messages) and not is_turn_start(messages[cut]):
        cut += 1
    return max(start, min(cut, newest))


def is_task(message: AnyMessage) -> bool:
    """A person's request (kept verbatim), not a message the graph wrote (a re-plan...)."""
    return isinstance(message, HumanMessage) and not str(message.content).startswith(prompts.GRAPH_MESSAGE_PREFIXES)


def bound_tasks(messages: Sequence[AnyMessage], tasks: list[int], room: int) -> tuple[list[int], list[int]]:
    """(kept, summarised): the newest of the tasks at `tasks` that fit `room` tokens together,
    in order, and the older ones. The newest task is kept whatever its size: it is the request
    being worked on."""
    kept: list[int] = []
    used = 0
    for index in reversed(tasks):
        used += message_tokens(messages[index])
        if kept and used > room:
            break
        kept.append(index)
    return kept[::-1], tasks[:len(tasks) - len(kept)]


def transcript_line(message: AnyMessage) -> str:
    if isinstance(message, ToolMessage):
        artifact = message.artifact if isinstance(message.artifact, dict) else {}
        head = f"[result: {outcome_words(artifact)}]" if artifact else "[result]"
        return f"{head} {clip(str(message.content), TRANSCRIPT_OUTPUT_CHARS)}"
    if isinstance(message, AIMessage):
        calls = [f"[ran] {clip(str(c['args'].get('command', c['args'])), 300)}" for c in message.tool_calls]
        text = f"[assistant] {clip(str(message.text), 1_000)}" if message.text else ""
        return "\n".join(part for part in (text, *calls) if part)
    if isinstance(message, HumanMessage):
        return f"[user] {clip(str(message.text), 2_000)}"
    return ""


def ledger_lines(messages: Sequence[AnyMessage]) -> list[str]:
    """One line per command answered in `messages`: outcome · command (· why it failed)."""
    lines = []
    for message in messages:
        artifact = message.artifact if isinstance(message, ToolMessage) else None
        if not isinstance(artifact, dict):
            continue
        line = f"{outcome_words(artifact)} · `{clip(str(artifact.get('command') or ''), 120)}`"
        if artifact.get("outcome") != "ok" and (why := failure_evidence(artifact)):
            line += f" · {clip(why, 100)}"
        lines.append(line)
    return lines


def bound_ledger(lines: list[str], room: int) -> tuple[list[str], int]:
    """`lines` within `room` characters, and how many were left out: failures are kept before
    successes, newer lines before older ones; the kept ones stay in their order."""
    failures = [i for i, line in enumerate(lines) if not line.startswith("ok ")]
    others = [i for i, line in enumerate(lines) if line.startswith("ok ")]
    chosen, used = set(), 0
    for index in [*reversed(failures), *reversed(others)]:
        if used + len(lines[index]) + 1 > room:
            break
        chosen.add(index)
        used += len(lines[index]) + 1
    return [lines[i] for i in sorted(chosen)], len(lines) - len(chosen)


def live_jobs(jobs: Any, thread: str | None) -> list[str]:
    """The background jobs still running in this thread, one line each."""
    lister = getattr(jobs, "live", None)
    return list(lister(thread)) if lister is not None and thread is not None else []


def served_window(config: AgentConfig, model: Any) -> int | None:
    """The window the model's server reports. Not the bundled model's n_ctx: its adapter fits the
    ChatML it builds to it with the model's own tokenizer (`fit_turns`), and a summary there is a
    slow CPU generation; its budget keeps the default."""
    if getattr(model, "n_ctx", None) is not None:
        return None
    base_url = getattr(model, "openai_api_base", None) or config.chat.base_url or os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        return None  # OpenAI's own API lists no window; its refusals name it
    name = getattr(model, "model_name", None) or config.chat.model or os.environ.get("BASHGRAPH_MODEL")
    key = getattr(model, "openai_api_key", None)
    secret = key.get_secret_value() if key is not None and hasattr(key, "get_secret_value") else None
    return ask_window(base_url, name, secret or os.environ.get("OPENAI_API_KEY"))


def _reply_text(reply: Any) -> str | None:
    """The summary a reply holds: its text without a leading `<think>` block (thinking is not
    the summary, and clipped together the thinking would push the summary out)."""
    text = split_think(reply.text)[1] if isinstance(reply, AIMessage) else None
    return clip(text.strip(), 4_000) if text and text.strip() else None
