"""`bashgraph.tools` alone: the execution layer imports without LangChain; the tool on demand."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_run_command_does_not_import_langchain() -> None:
    code = ("import sys; from bashgraph.tools import run_command, CommandResult; "
            "print(sorted(m for m in sys.modules if m.startswith(('langchain', 'langgraph'))))")
    assert run_python(code) == "[]"


def test_the_tool_is_imported_when_first_asked_for() -> None:
    code = ("import bashgraph.graph.build; from bashgraph.tools import bash, BASH_TOOL_NAME; "
            "from langchain_core.tools import BaseTool; print(isinstance(bash, BaseTool), bash.name)")
    assert run_python(code) == "True bash"


def test_every_exported_name_resolves() -> None:
    from bashgraph import tools

    for name in tools.__all__:
        assert getattr(tools, name) is not None, name
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = tools.no_such_name


def test_every_name_of_the_graph_package_resolves() -> None:
    """`bashgraph.graph` exports its names lazily too: each resolves, unknown names raise."""
    from bashgraph import graph

    for name in graph.__all__:
        assert getattr(graph, name) is not None, name
    assert set(graph.__all__) <= set(dir(graph))
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = graph.no_such_name


#: Every package that exports names (the public API the CLI may use).
PACKAGES = ("bashgraph.graph", "bashgraph.graph.store", "bashgraph.graph.models", "bashgraph.tools",
            "bashgraph.tools.safety", "bashgraph.tools.runner", "bashgraph.tools.jobs")


@pytest.mark.parametrize("package", PACKAGES)
def test_each_exported_name_is_the_export_not_a_submodule(package: str) -> None:
    """In a fresh interpreter, every name of `__all__`, asked for in order, resolves, and is the
    function or class itself: importing a submodule (`tools.safety.visible`, the home of
    `one_line`) must not leave its module where the export of that name (`visible`) belongs."""
    code = (f"import importlib, types; package = importlib.import_module({package!r}); "
            "print([n for n in package.__all__ if getattr(package, n) is None "
            "or isinstance(getattr(package, n), types.ModuleType)], len(package.__all__))")
    wrong, count = run_python(code).rsplit(" ", 1)
    assert (wrong, int(count) > 0) == ("[]", True)


def test_the_cli_module_imports_neither_langchain_nor_langgraph() -> None:
    code = (f"import sys, bashgraph.graph.cli, {', '.join(PACKAGES)}; "
            "print(sorted(m for m in sys.modules if m.startswith(('langchain', 'langgraph'))))")
    assert run_python(code) == "[]"
