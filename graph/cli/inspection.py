"""`bashgraph threads`, `history`, `fork` and `graph`: look at threads and the graph.

Tables are aligned for people on a terminal, tab-separated in a pipe, JSON lines with --json
(graph/cli/tables.py). `threads`, `history` on SQLite and `graph --format mermaid|ascii` start
quickly: they read the tables directly (`read_threads`, `read_history`) and print the stored
drawing (graph/cli/stored_drawing.py), without importing LangChain or LangGraph. `fork`,
PostgreSQL and the other drawing formats build the graph — without a chat model: nothing here
calls one, so no endpoint, key or weights are needed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from bashgraph.graph import BashgraphError, ConfigError, StoreError
from bashgraph.graph.cli.status import ExitStatus, ResumeHint, absolute
from bashgraph.graph.cli.tables import Table, print_table
from bashgraph.graph.store import CheckpointRow, Location, ThreadInfo, locate, read_history, read_threads
from bashgraph.tools.safety import one_line

if TYPE_CHECKING:
    from bashgraph.graph import Session

THREAD_COLUMNS = ("thread_id", "status", "updated_at", "task", "forked_from")
HISTORY_COLUMNS = ("checkpoint_id", "step", "node", "outcomes", "next", "created_at")


def run_inspection(command: str, args: argparse.Namespace) -> int:
    """Run one inspection command; its errors become one line on stderr and an exit status."""
    try:
        if command == "graph":
            return draw_graph(args.format, args.output)
        location = locate(args.db)
        if command == "threads":
            return list_threads(_threads(location), args.json)
        if command == "history":
            return show_history(_history(location, args.thread), args.thread, location, args.json)
        with _session(location) as session:
            return fork_thread(session, args)
    except (ConfigError, StoreError) as exc:
        return _fail(str(exc), ExitStatus.USAGE)
    except BashgraphError as exc:
        return _fail(str(exc), ExitStatus.FAILED)


def _session(location: Location) -> AbstractContextManager[Session]:
    """A session whose agent has no model (none is made unless something calls it)."""
    from bashgraph.graph import open_session

    return open_session(location.target)


def _threads(location: Location) -> list[ThreadInfo]:
    if location.kind == "sqlite":
        return read_threads(location.target)
    with _session(location) as session:
        return session.threads()


def _history(location: Location, thread_id: str) -> list[CheckpointRow] | None:
    if location.kind == "sqlite":
        return read_history(location.target, thread_id)
    with _session(location) as session:
        if session.state(thread_id).created_at is None:  # (history() of an unknown thread raises)
            return None
        return session.history(thread_id)


def list_threads(threads: Sequence[ThreadInfo], as_json: bool) -> int:
    rows = [asdict(info) for info in threads]
    _print(Table(THREAD_COLUMNS, rows, wide="task", empty="no threads yet"), as_json)
    return ExitStatus.OK


def show_history(history: Sequence[CheckpointRow] | None, thread_id: str, location: Location,
                 as_json: bool) -> int:
    if history is None:
        return _fail(f"no thread {thread_id} in the checkpoint database {location.label}", ExitStatus.USAGE)
    rows = [asdict(row) for row in history]
    for row in rows:
        row["next"] = ", ".join(row["next"])
    _print(Table(HISTORY_COLUMNS, rows, wide="outcomes", empty="no checkpoints"), as_json)
    return ExitStatus.OK


def _print(table: Table, as_json: bool) -> None:
    print_table(table, as_json, sys.stdout, terminal=sys.stdout.isatty())
    sys.stdout.flush()


def fork_thread(session: Session, args: argparse.Namespace) -> int:
    new_thread = session.fork(args.thread, args.checkpoint, args.new_thread)
    hint = ResumeHint(("--db", absolute(args.db)) if args.db else ())
    # stderr first: the fork is made, so its id must reach someone even if stdout is closed.
    # Through one_line: an id made from the source's may hold anything the source's did.
    print(one_line(f"continue it with: {hint.command(new_thread)}"), file=sys.stderr)
    print(one_line(new_thread))
    return ExitStatus.OK


def draw_graph(format: str, output: str | None) -> int:
    picture: str | bytes
    if format in ("mermaid", "ascii"):
        from bashgraph.graph.cli.stored_drawing import ASCII, MERMAID

        picture = MERMAID if format == "mermaid" else ASCII
    else:
        from bashgraph.graph import build_graph, draw

        picture = draw(build_graph(), format)  # type: ignore[arg-type]  # argparse checked it
    data = picture.encode() if isinstance(picture, str) else picture
    if output:
        try:
            Path(output).write_bytes(data)
        except OSError as exc:
            return _fail(f"cannot write {output}: {exc.strerror}", ExitStatus.USAGE)
        return ExitStatus.OK
    if isinstance(picture, bytes) and sys.stdout.isatty():
        return _fail("a PNG image cannot be shown on a terminal: pass -o FILE or redirect stdout",
                     ExitStatus.USAGE)
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    return ExitStatus.OK


def _fail(message: str, status: ExitStatus) -> int:
    print(f"bashgraph: error: {one_line(message)}", file=sys.stderr)
    return status
