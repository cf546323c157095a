"""The tables of `bashgraph threads` and `history`: for people on a terminal, stable in a pipe.

* On a terminal: aligned columns under a header, times local and relative ("3 min ago"),
  columns empty in every row left out, long text cut to the terminal's width with `…`. Ids are
  never cut (they are copied into other commands). When the widest column would be too narrow
  to read, it moves to a line of its own under its row.
* In a pipe: a header of column names, then one tab-separated line per row, every column
  always present, times as stored (ISO 8601, UTC). `--json`: one JSON object per row.
  Both formats are documented in docs/cli.md and do not change with the terminal.

Every cell goes through `one_line`: a task holding an escape sequence or a line break prints
as one line of visible symbols.
"""

from __future__ import annotations

import json
import re
import shutil
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TextIO

from bashgraph.tools.safety import one_line

GAP = "  "
ELLIPSIS = "…"
#: Below this width the wide column goes to a line of its own under its row.
MIN_WIDE = 20
ID_COLUMNS = frozenset({"thread_id", "checkpoint_id"})
TIME_COLUMNS = frozenset({"updated_at", "created_at"})
#: Header words on a terminal (a pipe's header keeps the field names).
HEADERS = {"thread_id": "thread", "updated_at": "updated", "created_at": "created",
           "forked_from": "forked from", "checkpoint_id": "checkpoint"}
_OUTCOME_WORDS = re.compile(r"\b(exit_error|spawn_error|args_error)(?:\((\w+)\))?")


@dataclass(frozen=True)
class Table:
    """What one command lists: its rows, the columns in order, and which column may be cut."""

    columns: Sequence[str]
    rows: Sequence[Mapping[str, Any]]
    wide: str
    """The column that takes the width left over (the task, the outcomes)."""
    empty: str
    """What a terminal shows when there are no rows."""


def print_table(table: Table, as_json: bool, out: TextIO, *, terminal: bool,
                now: datetime | None = None, width: int | None = None) -> None:
    if as_json:
        for row in table.rows:
            out.write(json.dumps(dict(row), default=str) + "\n")
    elif terminal:
        for line in terminal_lines(table, now or datetime.now().astimezone(),
                                   width or shutil.get_terminal_size().columns):
            out.write(line + "\n")
    else:
        out.write("\t".join(table.columns) + "\n")
        for row in table.rows:
            out.write("\t".join(_tsv_cell(row[name]) for name in table.columns) + "\n")


def _tsv_cell(value: Any) -> str:
    return _cell(value).replace("\t", " ")


def _cell(value: Any) -> str:
    """One line, control characters shown as symbols (a task or thread id may hold anything)."""
    return "" if value is None else one_line(str(value))


# ----------------------------------------------------------------------------- terminal


def terminal_lines(table: Table, now: datetime, width: int) -> list[str]:
    """The table as aligned lines no longer than `width`."""
    if not table.rows:
        return [table.empty]
    cells = [{name: _shown(name, row[name], now) for name in table.columns} for row in table.rows]
    columns = [name for name in table.columns if any(row[name] for row in cells)]
    widths = {name: max(cells_of(_header(name)), *(cells_of(row[name]) for row in cells)) for name in columns}
    wide = table.wide if table.wide in columns else None
    if wide is not None:
        fixed = sum(widths[name] + len(GAP) for name in columns if name != wide)
        room = width - fixed
        if room >= MIN_WIDE:
            widths[wide] = min(widths[wide], room)
        else:  # too narrow to read: under its row, indented, as wide as the terminal allows
            columns.remove(wide)
    lines = [_line([_header(name) for name in columns], columns, widths)]
    for row in cells:
        lines.append(_line([row[name] for name in columns], columns, widths))
        if wide is not None and wide not in columns and row[wide]:
            lines.append(_cut("    " + row[wide], width))
    return lines


def _line(values: Sequence[str], columns: Sequence[str], widths: Mapping[str, int]) -> str:
    parts = [_pad(_cut(value, widths[name]), widths[name]) for value, name in zip(values, columns, strict=True)]
    return GAP.join(parts).rstrip()


def _header(name: str) -> str:
    return HEADERS.get(name, name)


def _shown(name: str, value: Any, now: datetime) -> str:
    if name in TIME_COLUMNS and value:
        return one_line(relative_time(str(value), now))  # unparsable, it is the stored text
    text = _cell(value)
    if name == "status":
        return text.replace("_", " ")  # environment_fault -> environment fault
    return _OUTCOME_WORDS.sub(_outcome_words, text) if name == "outcomes" else text


def _outcome_words(match: re.Match[str]) -> str:
    """`exit_error(2)` -> `exit 2`, `spawn_error(timeout)` -> `timeout`, `args_error` -> `args error`."""
    kind, code = match.group(1), match.group(2)
    if kind == "exit_error":
        return f"exit {code}" if code else "exit error"
    if kind == "spawn_error":
        return code.replace("_", " ") if code else "spawn error"
    return "args error"


def _cut(text: str, width: int) -> str:
    """`text` in at most `width` terminal cells, cut with `…`."""
    if cells_of(text) <= width:
        return text
    kept, used = [], 0
    for char in text:
        used += _char_cells(char)
        if used > width - 1:
            break
        kept.append(char)
    return "".join(kept) + ELLIPSIS


def _pad(text: str, width: int) -> str:
    return text + " " * (width - cells_of(text))


def cells_of(text: str) -> int:
    """How many terminal cells `text` takes: two for a wide (CJK, most emoji) character, none
    for a mark drawn on the character before or a format character (a zero-width joiner)."""
    return len(text) if text.isascii() else sum(map(_char_cells, text))


def _char_cells(char: str) -> int:
    # Marks drawn on the character before (Thai vowel signs, Devanagari signs, a keycap) and
    # format characters (joiners, variation selectors) take no cell of their own.
    if unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in "WF" else 1


def relative_time(iso: str, now: datetime) -> str:
    """"just now", "42 s ago", "3 min ago", "5 h ago"; older: the local date ("Nov 29 17:30",
    or "2025-11-29" in another year); a time ahead of `now` (another machine's clock): its date."""
    try:
        then = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if then.tzinfo is None:
        return iso  # no zone: which local time it is cannot be known
    age = now - then
    if age < timedelta(0):
        return then.astimezone(now.tzinfo).strftime("%Y-%m-%d %H:%M")
    seconds = int(age.total_seconds())
    if seconds < 5:
        return "just now"
    if seconds < 60:
        return f"{seconds} s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h ago"
    local = then.astimezone(now.tzinfo)
    return local.strftime("%b %d %H:%M" if local.year == now.year else "%Y-%m-%d")
