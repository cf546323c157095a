"""The command journal in a LangGraph store: what makes resumes exactly-once under the server.

A graph served by the LangGraph server (`langgraph dev`, `langgraph up`, the Platform) has no
`open_session`, so none of our own tables; but the server hands every run its store (a
`BaseStore`: in memory for `langgraph dev`, PostgreSQL in production). When the graph was built
without a journal and the run has a store, each command's row lives there, in the namespace
`("bashgraph_journal", <thread id>)` under the key `"<attempt>/<call key>"`, with the same
meaning as a row of graph/store/journal.py: a start without a result is a command that was cut off,
which a resume reports as `spawn_error/interrupted` instead of running it again.

A start is an insert-if-absent (graph/store/store_claim.py): on langgraph's PostgreSQL stores
(the self-hosted server's), a second start of one call is refused atomically whatever the server
does, and the row is committed before the command starts. Other stores make it atomic
within one process only; across processes they rely on the server running one run per thread at a
time (its multitask strategy). Local sessions keep their own table (graph/store/journal.py), which
also fsyncs each start itself. `langgraph dev` keeps its store in memory and writes
it to `.langgraph_api/` every 10 s, together with its checkpoints: a crash of the dev server loses
up to the last 10 s of both (see docs/serving.md).
"""

from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING, Any

from bashgraph.graph.errors import StoreError
from bashgraph.graph.store.journal_rows import JournalEntry
from bashgraph.graph.store.store_claim import claim
from bashgraph.tools import CommandResult

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

NAMESPACE = "bashgraph_journal"


class StoreJournal:
    """The journal's rows in a `BaseStore` (any: in memory, SQLite, PostgreSQL, the server's)."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store

    def lookup(self, thread_id: str, call_id: str, attempt: int) -> JournalEntry | None:
        item = self.store.get(_namespace(thread_id), _key(call_id, attempt))
        return _entry(item.value) if item is not None else None

    def start(self, thread_id: str, call_id: str, attempt: int, command: str,
              marker: str | None = None) -> None:
        row = {"command": command, "started_at": time.time(), "result": None,
               "marker": marker, "host": socket.gethostname()}
        if not claim(self.store, _namespace(thread_id), _key(call_id, attempt), row):
            raise StoreError(
                f"command journal: call {call_id!r} (attempt {attempt}) of thread {thread_id!r} "
                "was already started; refusing to run it twice"
            )

    def finish(self, thread_id: str, call_id: str, attempt: int, result: CommandResult) -> None:
        namespace, key = _namespace(thread_id), _key(call_id, attempt)
        item = self.store.get(namespace, key)
        row = dict(item.value) if item is not None else {"command": result.command, "started_at": time.time()}
        self.store.put(namespace, key, {**row, "result": result.to_dict()}, index=False)


def store_of() -> BaseStore | None:
    """The store LangGraph gives the running node, if any (the server always gives one)."""
    from langgraph.config import get_store

    try:
        return get_store()
    except (RuntimeError, KeyError, AttributeError):  # not inside a run, or a run without a store
        return None


def _namespace(thread_id: str) -> tuple[str, str]:
    # Namespace labels may not contain "." or NUL; thread ids may. Percent-encode both (and "%").
    label = thread_id.replace("%", "%25").replace(".", "%2E").replace("\0", "%00")
    return (NAMESPACE, label)


def _key(call_id: str, attempt: int) -> str:
    return f"{attempt}/{call_id}"


def _entry(value: dict[str, Any]) -> JournalEntry:
    result = value.get("result")
    return JournalEntry(
        command=str(value.get("command", "")),
        started_at=float(value.get("started_at", 0.0)),
        result=CommandResult.from_dict(result) if result else None,
        marker=value.get("marker"),
        host=value.get("host"),
    )
