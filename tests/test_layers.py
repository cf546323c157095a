"""One layer per folder: no two folders of the package import each other, however indirectly.

Each module counts as its folder (the packages pyproject.toml lists: `graph/`, `graph/store/`,
`tools/runner/`, ...); an import of a module in another folder is an edge, and the folder graph
must have no cycle. Imports are read from each file's syntax tree, inside functions too: a
deferred import still makes the folder need the other one.

The layers, bottom first (the intended order; the test holds the code to "no cycle", which this
order satisfies):

* `tools/` — what every part of the tools shares: a command's result and how it is told
  (`results.py`, `failures.py`), the command size limit, text made safe to show (`text.py`);
  then `tools/safety/` (rules, sandbox, secret names); `tools/runner/` (one command, run in the
  sandbox safety makes); and over the runner `tools/jobs/` (background commands) and
  `tools/model_tools/` (the tools the model calls).
* `graph/errors/` — the errors every layer of the agent raises; then `graph/models/` (chat
  models and the texts said to them) and `graph/store/` (checkpoints, journals and their rows,
  locks, threads), neither importing the other; then `graph/`, the core: the state, the nodes,
  the compiled graph and the sessions that run it over a store; at the very top `graph/cli/`.
  All of `graph/` is above all of `tools/`.

Not edges: imports under `if TYPE_CHECKING:`. They never run (a type checker reads them), so
they cannot make a folder need another at run time. That allows a layer to name a type from
above it in annotations only (`graph/models/` annotates with `AgentConfig`), and lets each
package's `__init__` list where its exports live: it exports lazily (`lazy_exports`: module
names as strings, imported on a name's first use, never at import time), and every such home is
today in the package's own folder or below it.
"""

from __future__ import annotations

import ast
import importlib.util
import tomllib
from collections.abc import Iterator, Mapping
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: folder -> {folder it imports: where (the first import of it, as `path:line`)}
Graph = dict[str, dict[str, str]]


def packages(root: Path) -> dict[str, Path]:
    """Every package pyproject.toml installs, with its folder: `bashgraph.graph.cli` -> graph/cli."""
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    homes: dict[str, str] = setuptools["package-dir"]
    folders = {}
    for package in setuptools["packages"]:
        top = next(name for name in homes if package == name or package.startswith(name + "."))
        folders[package] = root / homes[top] / Path(*package.removeprefix(top).split(".")[1:])
    return folders


def folder_of(module: str, folders: Mapping[str, Path]) -> str | None:
    """The package (folder) `module` lives in; None outside the project."""
    while module and module not in folders:
        module = module.rpartition(".")[0]
    return module or None


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported(statements: list[ast.stmt], package: str) -> Iterator[tuple[int, str]]:
    """(line, module) of every import among `statements` that runs, at module level or in a
    function; `from package import name` also yields `package.name` (it may be a module).

    Only statements are visited (an import is one), not expressions: parsing is the cost here."""
    for node in statements:
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = importlib.util.resolve_name("." * node.level + base, package)
            yield node.lineno, base
            yield from ((node.lineno, f"{base}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.If) and is_type_checking(node):
            yield from imported(node.orelse, package)
        else:
            for block in blocks(node):
                yield from imported(block, package)


def blocks(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement lists inside `node`: a body, an else, a finally, each handler's and case's."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list):
            yield block
    for inner in [*getattr(node, "handlers", ()), *getattr(node, "cases", ())]:
        yield inner.body


def folder_graph(root: Path) -> Graph:
    folders = packages(root)
    graph: Graph = {package: {} for package in folders}
    for package, folder in folders.items():
        for path in sorted(folder.glob("*.py")):
            module = package if path.name == "__init__.py" else f"{package}.{path.stem}"
            own = package if path.name == "__init__.py" else module.rpartition(".")[0]
            for line, name in imported(ast.parse(path.read_bytes(), str(path)).body, own):
                other = folder_of(name, folders)
                if other is not None and other != package:
                    graph[package].setdefault(other, f"{path.relative_to(root)}:{line}")
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """In each group of folders that import each other (a strongly connected component of more
    than one folder), a shortest cycle through each folder, as [a, b, ..., a]; no cycle twice."""
    found: list[list[str]] = []
    for group in components(graph):
        for start in sorted(group) if len(group) > 1 else ():
            cycle = path_back(graph, start, group)
            if not any(set(pairwise(cycle)) == set(pairwise(seen))
                       for seen in found):
                found.append(cycle)
    return found


def components(graph: Graph) -> list[set[str]]:
    """Strongly connected components: two folders are in one when each reaches the other."""
    reach = {node: reachable(graph, node) for node in graph}
    groups: list[set[str]] = []
    for node in sorted(graph):
        if not any(node in group for group in groups):
            groups.append({other for other in reach[node] if node in reach[other]} | {node})
    return groups


def reachable(graph: Graph, start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for other in graph.get(todo.pop(), {}):
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return seen


def path_back(graph: Graph, start: str, group: set[str]) -> list[str]:
    """A shortest cycle from `start` back to itself inside `group` (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for other in sorted(graph[node]):
                if other == start:
                    steps = [node]
                    while steps[-1] != start:
                        steps.append(came_from[steps[-1]])
                    return [start, *reversed(steps[:-1]), start]
                if other in group and other not in came_from:
                    came_from[other] = node
                    following.append(other)
        frontier = following
    raise AssertionError(f"{start} is in a cycle but none leads back to it")


def described(graph: Graph, cycle: list[str]) -> str:
    """`a -> b (where) -> a (where)`: each edge with the first import that makes it."""
    return cycle[0] + "".join(f" -> {b} ({graph[a][b]})" for a, b in pairwise(cycle))


def test_no_folder_imports_itself_through_others() -> None:
    graph = folder_graph(ROOT)
    assert len(graph) >= 8
    assert [described(graph, cycle) for cycle in cycles(graph)] == []


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project of three folders: `a` over `a.low` and `a.up`, the way pyproject.toml lists them."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools]\npackages = ["p.a", "p.a.low", "p.a.up"]\n'
        '[tool.setuptools.package-dir]\n"p.a" = "a"\n')
    for folder in ("a", "a/low", "a/up"):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
    return tmp_path


def test_a_cycle_is_named_with_the_imports_that_make_it(project: Path) -> None:
    """Relative and deferred imports count, and `from package import module` names the module."""
    (project / "a" / "core.py").write_text("from .up import tool\n")
    (project / "a" / "up" / "tool.py").write_text("def later():\n    from ..low import thing\n")
    (project / "a" / "low" / "thing.py").write_text("import os\nfrom p.a import core\n")
    graph = folder_graph(project)
    assert [described(graph, cycle) for cycle in cycles(graph)] == [
        "p.a -> p.a.up (a/core.py:1) -> p.a.low (a/up/tool.py:2) -> p.a (a/low/thing.py:2)"]


def test_type_checking_imports_and_lazy_exports_are_no_edges(project: Path) -> None:
    (project / "a" / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.a.up import tool\n"
        "else:\n    from p.a.low import thing\n_HOMES = {'tool': 'up.tool'}\n")
    (project / "a" / "up" / "tool.py").write_text("from p.a import x\n")
    assert folder_graph(project) == {"p.a": {"p.a.low": "a/__init__.py:5"}, "p.a.low": {},
                                     "p.a.up": {"p.a": "a/up/tool.py:1"}}
    assert cycles(folder_graph(project)) == []
