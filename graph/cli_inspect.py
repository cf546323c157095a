"""`bashgraph threads`, `history`, `fork` and `graph`: look at threads and the graph.

Tables are rich tables on a terminal, tab-separated lines in a pipe, JSON lines with --json.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bashgraph.graph.cli_status import ExitStatus, ResumeHint, absolute
from bashgraph.graph.config import AgentConfig
from bashgraph.graph.errors import BashgraphError, ConfigError, StoreError
from bashgraph.graph.session import Session, open_session
from bashgraph.tools.visible import one_line

ID_COLUMNS = frozenset({"thread_id", "checkpoint_id"})


def run_inspection(command: str, args: argparse.Namespace) -> int:
    """Run one inspection command; its errors become one line on stderr and an exit status."""
    try:
        if command == "graph":
            return draw_graph(args.format, args.output)
        from bashgraph.graph.cli_session import inspection_model

        with open_session(args.db, model=inspection_model(), config=AgentConfig()) as session:
            if command == "threads":
                return list_threads(session, args.json)
            if command == "history":
                return show_history(session, args.thread, args.json)
            return fork_thread(session, args)
    except (ConfigError, StoreError) as exc:
        return _fail(str(exc), ExitStatus.USAGE)
    except BashgraphError as exc:
        return _fail(str(exc), ExitStatus.FAILED)


def list_threads(session: Session, as_json: bool) -> int:
    rows = [asdict(info) for info in session.threads()]
    columns = ("thread_id", "status", "updated_at", "task", "forked_from")
    print_table(f"threads in {session.url}", columns, rows, as_json)
    return ExitStatus.OK


def show_history(session: Session, thread_id: str, as_json: bool) -> int:
    if session.state(thread_id).created_at is None:  # (history() of an unknown thread raises)
        return _fail(f"no thread {thread_id} in the checkpoint database {session.url}", ExitStatus.USAGE)
    rows = [asdict(row) for row in session.history(thread_id)]
    for row in rows:
        row["next"] = ", ".join(row["next"])
    columns = ("checkpoint_id", "step", "node", "outcomes", "next", "created_at")
    print_table(f"history of {thread_id}", columns, rows, as_json)
    return ExitStatus.OK


def fork_thread(session: Session, args: argparse.Namespace) -> int:
    new_thread = session.fork(args.thread, args.checkpoint, args.new_thread)
    print(new_thread)
    hint = ResumeHint(("--db", absolute(args.db)) if args.db else ())
    print(f"continue it with: {hint.command(new_thread)}", file=sys.stderr)
    return ExitStatus.OK


def draw_graph(format: str, output: str | None) -> int:
    from bashgraph.graph.cli_session import inspection_agent
    from bashgraph.graph.draw import draw

    picture = draw(inspection_agent(), format)  # type: ignore[arg-type]  # argparse checked it
    data = picture.encode() if isinstance(picture, str) else picture
    if output:
        Path(output).write_bytes(data)
        return ExitStatus.OK
    if isinstance(picture, bytes) and sys.stdout.isatty():
        return _fail("a PNG is not for the terminal: pass -o FILE or redirect stdout", ExitStatus.USAGE)
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    return ExitStatus.OK


def print_table(title: str, columns: Sequence[str], rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        for row in rows:
            print(json.dumps(row, default=str))
    elif sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(title=title, title_justify="left")
        for name in columns:
            # Ids are copied into other commands (fork --checkpoint): never cut them short.
            widest = max((len(_cell(row[name])) for row in rows), default=0)
            table.add_column(name, no_wrap=name in ID_COLUMNS,
                             min_width=widest if name in ID_COLUMNS else None)
        for row in rows:
            table.add_row(*(Text(_cell(row[name])) for name in columns))
        Console(highlight=False).print(table)
    else:
        print("\t".join(columns))
        for row in rows:
            print("\t".join(_cell(row[name]).replace("\t", " ").replace("\n", " ") for name in columns))


def _cell(value: Any) -> str:
    """One line, control characters shown as symbols (a task or thread id may hold anything)."""
    return "" if value is None else one_line(str(value))


def _fail(message: str, status: ExitStatus) -> int:
    print(f"bashgraph: error: {one_line(message)}", file=sys.stderr)
    return status
