"""Each sync/async pair is written once: the async twin of `x` (`ax`, `_ax` for `_x`) does not
repeat the lines of `x`'s body. What they share lives in one place (a step generator both drive,
see tools/runner/twin.py, or a helper), leaving each twin its own I/O calls.

A pair is an `async def` named `a<name>` (`_a<name>` for `_<name>`) and a `def <name>` of the
same module: both at module level, or both methods (of one class, or of a class and its async
sibling, such as `Session.run` and `AsyncSession.arun`).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: "A few": what both forms look up first, the branch both take, the value each hands out.
MOST_REPEATED = 4
#: Lines that carry no logic of their own: the frame of a `try`, a bare `yield`, closing brackets.
_STRUCTURE = re.compile(r"(try|else|finally|yield|raise|pass|return|[)\]}]+)[:,]?")


def _body(source: list[str], function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The function's body as normalised lines: no docstring, blank line, comment or structure;
    `await` and `async` dropped, so `await f(x)` matches `f(x)`."""
    body = function.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if not body:
        return []
    lines = []
    for line in source[body[0].lineno - 1 : function.end_lineno]:
        text = line.strip().replace("await ", "").replace("async ", "")
        if text and not text.startswith("#") and not _STRUCTURE.fullmatch(text):
            lines.append(text)
    return lines


def _sync_name(name: str) -> str | None:
    if name.startswith("_a"):
        return "_" + name[2:]
    return name[1:] if name.startswith("a") else None


def _scopes(tree: ast.Module) -> Iterator[list[ast.stmt]]:
    """The module's functions, the methods of all its classes together, and the functions
    defined inside each function."""
    yield tree.body
    yield [statement for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for statement in node.body]
    yield from (node.body for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef))


def repeated_lines() -> dict[str, int]:
    """Each pair ("path:line:name/aname", at the async twin's line) and how many lines of the
    sync body its async twin repeats."""
    found: dict[str, int] = {}
    for path in sorted([*ROOT.joinpath("graph").rglob("*.py"), *ROOT.joinpath("tools").rglob("*.py")]):
        text = path.read_text()
        tree, source = ast.parse(text), text.splitlines()
        for scope in _scopes(tree):
            functions = [node for node in scope if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
            syncs = {node.name: node for node in functions if isinstance(node, ast.FunctionDef)}
            for twin in functions:
                name = _sync_name(twin.name)
                if not isinstance(twin, ast.AsyncFunctionDef) or name not in syncs:
                    continue
                shared = Counter(_body(source, syncs[name])) & Counter(_body(source, twin))
                found[f"{path.relative_to(ROOT)}:{twin.lineno}:{name}/{twin.name}"] = sum(shared.values())
    return found


def test_the_pairs_are_found() -> None:
    pairs = {re.sub(r":\d+:", ":", pair) for pair in repeated_lines()}
    assert "graph/execution.py:run/arun" in pairs
    assert "graph/nodes.py:agent/aagent" in pairs
    assert "graph/session.py:run/arun" in pairs
    assert "graph/store/setup_lock.py:setting_up/asetting_up" in pairs
    assert "tools/runner/process.py:run_command/arun_command" in pairs


def test_no_twin_repeats_more_than_a_few_lines() -> None:
    pairs = repeated_lines()
    too_many = {pair: count for pair, count in pairs.items() if count > MOST_REPEATED}
    assert not too_many, (f"{len(pairs)} pairs repeat {sum(pairs.values())} lines; these repeat more "
                          f"than {MOST_REPEATED}: {too_many}")
