"""`threads` and `history` tables: aligned for people on a terminal, stable in a pipe and in JSON."""

from __future__ import annotations

import io
import json
import os
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from bashgraph.graph.cli.inspection import HISTORY_COLUMNS, THREAD_COLUMNS
from bashgraph.graph.cli.tables import Table, cells_of, print_table, relative_time, terminal_lines
from tests.graph.cli.conftest import Cli
from tests.graph.cli.test_terminal import terminal
from tests.support.openai_server import FakeOpenAIServer, text, tool_call

NOW = datetime(2026, 12, 2, 17, 30, tzinfo=UTC)
LONG_TASK = "find every unused import in the source tree, count them per file and write a short report " * 3


def thread(thread_id: str, minutes_ago: float, task: str, status: str = "done",
           forked_from: str | None = None) -> dict[str, object]:
    updated = (NOW - timedelta(minutes=minutes_ago)).isoformat()
    return {"thread_id": thread_id, "status": status, "updated_at": updated, "task": task,
            "forked_from": forked_from}


ROWS = [thread("20261202-172700-ab12cd", 3, LONG_TASK),
        thread("20261202-120000-ee00ff", 330, "list the files", status="environment_fault"),
        thread("short", 60 * 24 * 3, "an old one", status="paused")]


def starts(line: str, words: list[str]) -> list[int]:
    return [line.index(word) for word in words]


def test_terminal_threads_are_aligned_cut_to_the_width_and_relative() -> None:
    lines = terminal_lines(Table(THREAD_COLUMNS, ROWS, wide="task", empty="none"), NOW, 80)
    assert lines[0].split() == ["thread", "status", "updated", "task"]  # forked from: empty, left out
    assert all(len(line) <= 80 for line in lines)
    columns = starts(lines[0], ["status", "updated", "task"])
    for line, row in zip(lines[1:], ROWS, strict=True):
        assert line.startswith(str(row["thread_id"]) + " ")
        assert starts(line, [str(row["status"]).replace("_", " ")])[0] == columns[0]
        assert line[columns[2]:columns[2] + 3] == str(row["task"])[:3]
    assert "3 min ago" in lines[1]
    assert "5 h ago" in lines[2]
    local = (NOW - timedelta(days=3)).strftime("%b %d %H:%M")  # in the zone of `now`
    assert local in lines[3]  # older than a day: the local date and time
    assert "environment fault" in lines[2]
    assert lines[1].endswith("…")  # the long task, cut at the 80th column
    assert len(lines[1]) == 80


@pytest.mark.parametrize("task", ["整理源代码目录并写一份关于未使用导入的简短报告" * 3,
                                  "🚀 deploy 🚀 the 🚀 rockets " * 8, "e\u0301" * 200])
@pytest.mark.parametrize("width", [60, 80])
def test_wide_and_combining_characters_are_cut_by_terminal_cells(task: str, width: int) -> None:
    """A CJK character or an emoji takes two cells, a combining accent none: cut by `len`, the
    line would wrap (or stop short) on the terminal."""
    rows = [thread("20261202-172700-ab12cd", 3, task)]
    for lines in (terminal_lines(Table(THREAD_COLUMNS, rows, wide="task", empty="none"), NOW, width),
                  terminal_lines(Table(THREAD_COLUMNS, rows, wide="task", empty="none"), NOW, 30)):
        assert max(cells_of(line) for line in lines) <= max(width, 30)
    line = terminal_lines(Table(THREAD_COLUMNS, rows, wide="task", empty="none"), NOW, width)[-1]
    assert line.endswith("…")  # the task's line: its row's, or its own under a narrow row
    assert cells_of(line) >= width - 1  # filled to the edge (a wide character may leave one cell)


def test_a_stored_time_that_is_not_a_time_is_shown_visibly() -> None:
    row = {**thread("t", 1, "a task"), "updated_at": "\x1b]0;owned\x07\x1b[2J"}
    lines = terminal_lines(Table(THREAD_COLUMNS, [row], wide="task", empty="none"), NOW, 80)
    assert "␛]0;owned␇␛[2J" in lines[1]


def test_cells_are_counted_as_a_terminal_draws_them() -> None:
    """As glibc's wcswidth counts them (a terminal drawing an emoji sequence as one glyph is
    not assumed)."""
    samples = ("abc", "整理", "🚀", "e\u0301", "ภาษาไทย", "हिंदी", "1\ufe0f\u20e3")
    assert [cells_of(text) for text in samples] == [3, 4, 2, 1, 7, 4, 1]


def test_a_narrow_terminal_moves_the_wide_column_under_its_row_and_never_cuts_ids() -> None:
    forked = [thread("20261202-172700-ab12cd-fork-1234abcd", 1, "a task",
                     forked_from="20261202-172700-ab12cd@1f1eebff-785f-6ab6-8008-3b998c6d2496")]
    lines = terminal_lines(Table(THREAD_COLUMNS, forked, wide="task", empty="none"), NOW, 80)
    assert lines[0].split() == ["thread", "status", "updated", "forked", "from"]
    assert "20261202-172700-ab12cd-fork-1234abcd" in lines[1]
    assert "1f1eebff-785f-6ab6-8008-3b998c6d2496" in lines[1]
    assert lines[2] == "    a task"


def test_history_outcomes_read_as_words_on_a_terminal() -> None:
    row = {"checkpoint_id": "1f1eebff-625a-6e54-8002-6fd9e6cffe49", "step": 2, "node": "tools",
           "outcomes": "ok `ls`; exit_error(2) `cat x`; spawn_error(permission_denied) `./run`",
           "next": "route", "created_at": NOW.isoformat()}
    lines = terminal_lines(Table(HISTORY_COLUMNS, [row], wide="outcomes", empty="none"), NOW, 120)
    assert "ok `ls`; exit 2 `cat x`; permission denied `./run`" in lines[1]
    assert "just now" in lines[1]


def test_no_rows_is_a_sentence_on_a_terminal_and_a_header_in_a_pipe() -> None:
    table = Table(THREAD_COLUMNS, [], wide="task", empty="no threads yet")
    assert terminal_lines(table, NOW, 80) == ["no threads yet"]
    piped = io.StringIO()
    print_table(table, False, piped, terminal=False)
    assert piped.getvalue() == "\t".join(THREAD_COLUMNS) + "\n"


def test_piped_and_json_formats_are_stable_whatever_the_width() -> None:
    """Every column, in order, ISO times, tabs in values turned into spaces; JSON: every field."""
    rows = [*ROWS, thread("tabbed", 1, "a\ttab")]
    outputs = []
    for width in ("40", "200"):
        os.environ["COLUMNS"] = width
        piped, as_json = io.StringIO(), io.StringIO()
        print_table(Table(THREAD_COLUMNS, rows, wide="task", empty=""), False, piped, terminal=False)
        print_table(Table(THREAD_COLUMNS, rows, wide="task", empty=""), True, as_json, terminal=False)
        outputs.append((piped.getvalue(), as_json.getvalue()))
    del os.environ["COLUMNS"]
    assert outputs[0] == outputs[1]
    piped_lines = outputs[0][0].splitlines()
    assert piped_lines[0].split("\t") == list(THREAD_COLUMNS)
    assert piped_lines[1].split("\t") == ["20261202-172700-ab12cd", "done", ROWS[0]["updated_at"], LONG_TASK, ""]
    assert piped_lines[-1].split("\t")[3] == "a tab"
    assert [json.loads(line) for line in outputs[0][1].splitlines()] == rows


@pytest.mark.parametrize(("age", "words"), [
    (timedelta(seconds=2), "just now"), (timedelta(seconds=42), "42 s ago"),
    (timedelta(minutes=3, seconds=10), "3 min ago"), (timedelta(hours=5, minutes=59), "5 h ago"),
])
def test_relative_times(age: timedelta, words: str) -> None:
    assert relative_time((NOW - age).isoformat(), NOW) == words


def test_an_older_time_is_a_local_date() -> None:
    assert relative_time("2025-01-01T12:00:00+00:00", NOW) == "2025-01-01"
    then = NOW - timedelta(days=2)
    assert relative_time(then.isoformat(), NOW) == then.astimezone(NOW.tzinfo).strftime("%b %d %H:%M")


def test_a_time_without_a_zone_or_not_a_time_is_shown_as_stored() -> None:
    assert relative_time("2026-12-02T17:00:00", NOW) == "2026-12-02T17:00:00"
    assert relative_time("yesterday", NOW) == "yesterday"


def test_the_cli_prints_a_table_on_a_terminal_and_tabs_in_a_pipe(
    cli: Cli, openai_server: FakeOpenAIServer
) -> None:
    """Through the real command: a terminal gets the aligned table, a pipe the stable format."""
    openai_server.add(tool_call("bash", {"command": "echo hi"}), text("done"))
    assert cli("run", "say hi", "--thread", "tab1").code == 0
    piped = cli("threads")
    assert piped.out.splitlines()[0] == "\t".join(THREAD_COLUMNS)
    with terminal() as (screen, tty):
        running = cli.start("threads", tty=tty, COLUMNS="80")
        result = screen.wait(running)
    assert result.code == 0
    shown = [line for line in screen.screen.splitlines() if line.strip()]
    assert shown[0].split() == ["thread", "status", "updated", "task"]
    assert shown[1].split()[:2] == ["tab1", "done"]
    assert "just now" in shown[1] or "s ago" in shown[1]
    assert "\t" not in screen.screen


def test_postgres_threads_and_history_go_through_langgraph(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """On PostgreSQL the rows come from LangGraph's saver: same columns, same stable format."""
    url = os.environ.get("BASHGRAPH_TEST_POSTGRES")
    if not url:
        pytest.skip("BASHGRAPH_TEST_POSTGRES is not set")
    thread_id = f"tables-{uuid.uuid4().hex[:10]}"
    openai_server.add(tool_call("bash", {"command": "echo hi"}), text("done"))
    try:
        assert cli("run", "say hi", "--thread", thread_id, "--db", url).code == 0
        listed = [t for t in cli("threads", "--db", url, "--json").events if t["thread_id"] == thread_id]
        assert [(t["status"], t["task"]) for t in listed] == [("done", "say hi")]
        history = cli("history", thread_id, "--db", url)
        assert history.out.splitlines()[0].split("\t") == list(HISTORY_COLUMNS)
        assert "ok `echo hi`" in history.out
    finally:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            for table in ("checkpoint_writes", "checkpoint_blobs", "checkpoints", "bashgraph_journal"):
                if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0]:  # type: ignore[index]
                    conn.execute(f"DELETE FROM {table} WHERE thread_id = %s", (thread_id,))
