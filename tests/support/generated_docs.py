"""Sections of the docs that are generated from the code, and the command that rewrites them.

A generated section sits between `<!-- generated: NAME … -->` and `<!-- end generated: NAME -->`;
only the lines between the two markers are rewritten. After a change to what a section is made
from, run `python -m tests.support.generated_docs` from the project's top folder;
tests/tools/test_failures.py fails while a section is stale.
"""

from __future__ import annotations

import errno
import re
import sys
from collections.abc import Callable
from pathlib import Path

from bashgraph.tools.failures import KINDS, UNLISTED_ERRNO_KIND, KindEntry

ROOT = Path(__file__).resolve().parents[2]

#: Where the graph sends a kind, in the words of docs/graph.md.
_ROUTE_WORDS = {
    "retry": "`retry` (then `escalate` when `max_spawn_retries` are spent)",
    "escalate": "`escalate`",
    "agent": "`agent`: back to the model",
}


def kinds_table() -> str:
    """The table of spawn error kinds, one row per entry of `failures.KINDS`."""
    rows = [
        "| kind | what happened | reported by | transient | counts as | the graph sends it to | errnos | people read |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *(f"| `{kind.value}` | {_row(entry)} |" for kind, entry in KINDS.items()),
        "",
        f"A failed spawn whose errno no kind lists is `{UNLISTED_ERRNO_KIND.value}`.",
    ]
    return "\n".join(rows)


def _row(entry: KindEntry) -> str:
    errnos = ", ".join(sorted(errno.errorcode[code] for code in entry.errnos)) or "—"
    cells = (entry.meaning, entry.produced_by, "yes" if entry.transient else "no", entry.nature.value,
             _ROUTE_WORDS[entry.route], errnos, entry.words)
    return " | ".join(cells)


#: Each generated section: its name, the file it is in, and what makes its text.
SECTIONS: dict[str, tuple[Path, Callable[[], str]]] = {
    "spawn-kinds": (ROOT / "docs" / "graph.md", kinds_table),
}


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- generated: {re.escape(name)}\b[^\n]*-->\n)(.*?)(^<!-- end generated: {re.escape(name)} -->)",
        re.DOTALL | re.MULTILINE,
    )


def section_text(name: str) -> str:
    """What the file holds now between the markers of section `name`."""
    path, _ = SECTIONS[name]
    found = _pattern(name).search(path.read_text())
    if found is None:
        raise LookupError(f"{path.relative_to(ROOT)} has no generated section {name!r}")
    return found.group(2)


def expected_text(name: str) -> str:
    """What section `name` should hold, made from the code now."""
    _, make = SECTIONS[name]
    return make() + "\n"


def rewrite(name: str) -> bool:
    """Write section `name` afresh; True when its text changed."""
    path, _ = SECTIONS[name]
    if section_text(name) == expected_text(name):
        return False
    text = _pattern(name).sub(lambda m: m.group(1) + expected_text(name) + m.group(3), path.read_text())
    path.write_text(text)
    return True


def main() -> int:
    for name, (path, _) in SECTIONS.items():
        changed = rewrite(name)
        print(f"{path.relative_to(ROOT)}: {name} {'rewritten' if changed else 'up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
