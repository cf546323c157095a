"""The graph's state: what a caller passes in (`AgentInput`), what a run reports
(`PublicState`), and what the nodes keep for each other (`Bookkeeping`). `AgentState` is all of
them. Plain JSON-able values only.

Tool results travel as ToolMessages whose `artifact` is `CommandResult.to_dict()`; routing reads
those artifacts, never the message text.

`messages` is a DeltaChannel reduced by `merge_message_batches`: with it each checkpoint stores
only the messages written in its step, so size grows linearly.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Sequence
from functools import reduce
from typing import Annotated, Any, Literal, cast

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel

# Not typing.TypedDict: on Python < 3.12 pydantic refuses it, so the compiled graph would have no
# input/output JSON schema (LangGraph Studio shows no input form, the server logs a warning).
from typing_extensions import TypedDict

from bashgraph.graph.checks import PolicyChecks
from bashgraph.graph.context import ContextRecord
from bashgraph.tools import CommandResult

RunStatus = Literal["running", "done", "failed", "aborted", "environment_fault"]
#: Statuses after which no node runs again on this thread (until a fork).
FINAL_STATUSES: frozenset[str] = frozenset({"done", "failed", "aborted", "environment_fault"})

Hop = Literal["agent", "replan", "retry", "escalate", "__end__"]
#: `tools` writes "agent" (a clean batch) or "route" (a batch with a failure); `route` a `Hop`.
NextHop = Literal["agent", "replan", "retry", "escalate", "__end__", "route"]


class Failure(TypedDict):
    """One failed tool call, kept briefly for re-plan messages and loop detection."""

    command: str
    outcome: str
    code: str
    """Exit code, or the spawn error kind, or "args": with `command`, what makes a repeat."""
    evidence: str


def merge_message_batches(state: list[AnyMessage], writes: Sequence[Any]) -> list[AnyMessage]:
    """Reducer of the `messages` DeltaChannel: `add_messages` folded over each write in order.

    A fold is batching-invariant by construction (`f(f(s, xs), ys) == f(s, xs + ys)`), which
    DeltaChannel requires to replay stored writes in any grouping. The one non-deterministic
    step of `add_messages`, a random id for a message without one, is replaced by an id derived
    from the conversation so far: replaying the same writes always rebuilds the same ids.
    """
    return reduce(_merge_one, writes, list(state))


def _merge_one(state: list[AnyMessage], write: Any) -> list[AnyMessage]:
    from langchain_core.messages import BaseMessage, convert_to_messages
    from langgraph.graph.message import add_messages

    batch = write if isinstance(write, list) else [write]
    messages = [m if isinstance(m, BaseMessage) else convert_to_messages([m])[0] for m in batch]
    anchor = f"{len(state)}:{state[-1].id if state else ''}"
    for index, message in enumerate(messages):
        if not message.id:
            seed = f"{anchor}:{index}:{message.type}:{message.content!r}"
            messages[index] = message.model_copy(update={"id": str(uuid.uuid5(uuid.NAMESPACE_URL, seed))})
    if _only_new(state, messages):
        return [*state, *cast("list[AnyMessage]", messages)]  # add_messages' result, without its work
    merged = add_messages(cast(Any, state), cast(Any, messages))
    return cast("list[AnyMessage]", merged)


_ID_OF = operator.attrgetter("id")


def _only_new(state: list[AnyMessage], messages: list[Any]) -> bool:
    """True when every message of the write is a whole message (no chunk, no removal) whose id
    is new, and the stored ones are whole messages with ids (as this reducer and add_messages
    always store them): add_messages would then append the write unchanged, in order."""
    from langchain_core.messages import BaseMessageChunk, RemoveMessage

    ids = {message.id for message in messages}
    if len(ids) != len(messages):
        return False
    if any(isinstance(message, (BaseMessageChunk, RemoveMessage)) for message in messages):
        return False
    # Over the stored messages, the same checks as one pass in C (map, set): this runs at every
    # write, and a Python-level loop over a long thread's messages grew every step with it.
    stored_ids = set(map(_ID_OF, state))
    if None in stored_ids or not ids.isdisjoint(stored_ids):
        return False
    return not any(issubclass(kind, BaseMessageChunk) for kind in set(map(type, state)))


#: The conversation channel: a DeltaChannel, so each checkpoint stores only the messages its
#: step wrote (linear size). One alias for every schema that names `messages`: LangGraph requires
#: a channel to be declared the same way wherever it appears.
Messages = Annotated[list[AnyMessage], DeltaChannel(merge_message_batches)]


class AgentInput(TypedDict):
    """What a caller passes to start a run, or to give a finished thread new work.

    `{"messages": [("user", "task")]}` is enough (LangGraph coerces message tuples and dicts).
    Continuing a stopped run takes `None`, answering a question `Command(resume=...)`: neither is
    input. Keys other than `messages` are not input and are ignored.
    """

    messages: Messages
    """The task: usually one user message, appended to the thread's conversation."""


class PublicState(TypedDict, total=False):
    """What a run reports: the graph's output (`invoke`, the LangGraph server's run results).

    New input on a finished thread starts a new run: the counters, `failures`, `status` and
    `reason` start again; `messages` and `cwd` carry on. docs/graph.md#state has the table.
    """

    messages: Messages
    """The conversation: task, model replies, tool results (capped text + `CommandResult`
    artifact), re-plan and escalation messages."""
    status: RunStatus
    """"running" until the run ends; then why it ended."""
    reason: str | None
    """One line on why the run ended or paused, for people and the CLI."""
    cwd: str | None
    """Working directory of the next command (None: the configured workdir)."""
    steps: int
    """Model calls made so far in this run (the limit is `max_steps`)."""
    exit_streak: int
    """Consecutive tool batches with an exit-code failure (a re-plan at `replan_after`)."""
    args_errors: int
    """Consecutive tool batches with invalid arguments (the run fails at `max_args_errors`)."""
    spawn_retries: int
    """Automatic re-runs spent on the current transient spawn failure (`max_spawn_retries`)."""
    replans: int
    """Re-plan messages sent in this run (`max_replans`)."""
    failures: list[Failure]
    """Recent failures, oldest first, at most `BudgetSettings.failure_history`; cleared by a batch
    whose every call succeeds."""


class Bookkeeping(TypedDict, total=False):
    """What the nodes keep for each other: read by the graph, not part of its output.

    These are channels like the public fields, so checkpoints hold them, `get_state().values`
    and `stream(stream_mode="values")` show them, and `update_state` can write them; `invoke`
    does not return them. Their names are stored in checkpoints: renaming one breaks resuming.
    """

    next_hop: NextHop
    """Where `tools` or `route` decided to go; read by the edges after them."""
    routed_reply: str | None
    """Id of the model reply whose batch `route` last decided on."""
    route_base: dict[str, Any] | None
    """Counters and failures as they were before that batch (re-routes after a retry start here)."""
    attempt_serial: int
    """Retries run so far in this thread; numbers each re-run apart in the command journal."""
    policy_checks: PolicyChecks | None
    """The policy's checks of the newest reply's calls, made once by `agent` (graph/checks.py)."""
    environment_told: str | None
    """The environment fault last handed to the model (on_environment_error="model")."""
    rejected: dict[str, str] | None
    """Commands a person rejected in this run, each with the refusal's words: asked again
    unchanged, they are answered from it instead of asking again (graph/approval.py)."""
    context: ContextRecord | None
    """How the model's view of `messages` is cut: stubs, summary (graph/context.py). Written only
    by `compact`; `messages` keeps everything."""
    compact_due: dict[str, Any] | None
    """Set by `agent` when the next request would not fit (or the server refused it as too
    long): `compact` runs before the call, and clears it."""


class AgentState(PublicState, Bookkeeping, total=False):
    """The graph's state, what every node reads: the public fields and the bookkeeping.

    The graph takes `AgentInput` and returns `PublicState` (graph/build.py).
    """


def last_ai_message(messages: list[AnyMessage]) -> AIMessage | None:
    """The newest model reply, if any."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message
    return None


def latest_results(messages: list[AnyMessage]) -> list[tuple[ToolMessage, CommandResult]]:
    """Tool messages answering the newest model reply, with their parsed artifacts."""
    found: list[tuple[ToolMessage, CommandResult]] = []
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            break
        if isinstance(message, ToolMessage) and isinstance(message.artifact, dict):
            found.append((message, CommandResult.from_dict(message.artifact)))
    found.reverse()
    return found


def tool_message_id(message_id: str, tool_call_id: str) -> str:
    """Stable id of a call's answer, so a re-run replaces the earlier answer in place.

    It includes the model reply's id because some servers reuse tool-call ids across replies.
    """
    return f"result-{message_id}-{tool_call_id}"
