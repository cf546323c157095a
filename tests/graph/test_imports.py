"""Import rules, read from each file's syntax tree (an import inside a function counts too):

* the CLI (graph/cli/) uses only the public API: names in the `__all__` of a package
  (`bashgraph.graph`, `bashgraph.graph.store`, `bashgraph.graph.models`, `bashgraph.tools`,
  `bashgraph.tools.safety`, ...), and its own modules;
* the whole graph layer (graph/) imports the tools layer only through public names: the
  `__all__` of `bashgraph.tools` and of its packages (`safety`, `runner`, `jobs`), never one of
  their modules (docs/graph.md); the one exception is `lazy_exports`, how the packages of both
  layers export their names (packaging, not API);
* no production module imports the test double `bashgraph.graph.testing` (only itself).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The source folders and the packages they are installed as (pyproject.toml's package-dir).
SOURCES = {"graph": "bashgraph.graph", "tools": "bashgraph.tools"}
CLI = "bashgraph.graph.cli"
TESTING = "bashgraph.graph.testing"
TOOLS = "bashgraph.tools"
#: How the packages of both layers export their names on first use: packaging, not API.
PACKAGING = "bashgraph.tools.lazy_exports"


def module_of(path: Path) -> str:
    """`graph/cli/app.py` -> `bashgraph.graph.cli.app`."""
    top, *rest = path.relative_to(ROOT).with_suffix("").parts
    parts = [SOURCES[top], *rest]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of every import in `path`, in line order; name None for `import module`."""
    return sorted(_imports(path), key=lambda found: found[0])


def _imports(path: Path) -> Iterator[tuple[int, str, str | None]]:
    module = module_of(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level \
                else node.module or ""
            for alias in node.names:
                yield node.lineno, base, alias.name


def is_public(module: str, name: str | None) -> bool:
    """`from module import name` names the public API or the CLI's own modules."""
    if module == CLI or module.startswith(CLI + "."):
        return True
    if name is None:
        return False
    spec = importlib.util.find_spec(module)
    if spec is None or spec.submodule_search_locations is None:
        return False  # not a package: a module's names are its own business
    package = importlib.import_module(module)
    return name in getattr(package, "__all__", ()) or name in getattr(package, "PUBLIC_MODULES", ())


def private_imports(paths: list[Path]) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line} {module}{'' if name is None else ' import ' + name}"
            for path in paths for line, module, name in imports(path)
            if module.split(".")[0] == "bashgraph" and not is_public(module, name)]


def private_tools_imports(paths: list[Path]) -> list[str]:
    """Imports from the tools layer that are not a public name of one of its packages."""
    return [f"{path.relative_to(ROOT)}:{line} {module}{'' if name is None else ' import ' + name}"
            for path in paths for line, module, name in imports(path)
            if (module == TOOLS or module.startswith(TOOLS + ".")) and module != PACKAGING
            and not is_public(module, name)]


def imports_testing(paths: list[Path]) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line}" for path in paths for line, module, name in imports(path)
            if module == TESTING or module.startswith(TESTING + ".") or f"{module}.{name}" == TESTING]


def test_the_cli_imports_only_the_public_api() -> None:
    cli = sorted((ROOT / "graph" / "cli").glob("*.py"))
    assert len(cli) > 5
    assert private_imports(cli) == []


def test_the_graph_imports_the_tools_only_through_public_names() -> None:
    graph = sorted((ROOT / "graph").rglob("*.py"))
    assert len(graph) > 40
    assert private_tools_imports(graph) == []


def test_no_production_module_imports_the_test_double() -> None:
    production = [path for folder in SOURCES for path in sorted((ROOT / folder).rglob("*.py"))
                  if path != ROOT / "graph" / "testing.py"]
    assert len(production) > 50
    assert imports_testing(production) == []


@pytest.fixture
def sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file placed as if it were graph/cli/sample.py, to check the checks themselves."""
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "graph" / "cli").mkdir(parents=True)
    return tmp_path / "graph" / "cli" / "sample.py"


def test_the_rules_catch_what_they_forbid(sample: Path) -> None:
    """Private modules, names outside `__all__`, whole modules and relative imports are flagged;
    public names and the CLI's own modules are not."""
    sample.write_text(
        "from bashgraph.graph import AgentConfig, open_session\n"
        "from bashgraph.graph.cli import questions\n"
        "from bashgraph.graph.cli.status import ExitStatus\n"
        "from bashgraph.tools.safety import one_line\n"
        "from bashgraph.graph.store.locks import thread_lock\n"
        "def later():\n"
        "    from bashgraph.graph import Agent\n"
        "import bashgraph.tools.results\n"
        "from ..testing import ScriptedChatModel\n"
        "from bashgraph.graph import testing\n"
    )
    assert private_imports([sample]) == [
        "graph/cli/sample.py:5 bashgraph.graph.store.locks import thread_lock",
        "graph/cli/sample.py:7 bashgraph.graph import Agent",
        "graph/cli/sample.py:8 bashgraph.tools.results",
        "graph/cli/sample.py:9 bashgraph.graph.testing import ScriptedChatModel",
        "graph/cli/sample.py:10 bashgraph.graph import testing",
    ]
    assert imports_testing([sample]) == ["graph/cli/sample.py:9", "graph/cli/sample.py:10"]


def test_the_tools_rule_allows_only_the_packages_public_names(sample: Path) -> None:
    sample.write_text(
        "from bashgraph.tools import CommandResult, CallRunner\n"
        "from bashgraph.tools.runner import in_thread\n"
        "from bashgraph.tools.jobs import JobTable\n"
        "from bashgraph.tools.lazy_exports import lazy_exports\n"
        "from bashgraph.tools.results import clip\n"
        "from bashgraph.tools.runner.process import run_command\n"
        "from bashgraph.tools.runner import supervisor\n"
        "import bashgraph.tools.safety.redact\n"
        "from bashgraph.graph.store.locks import thread_lock\n"
    )
    assert private_tools_imports([sample]) == [
        "graph/cli/sample.py:5 bashgraph.tools.results import clip",
        "graph/cli/sample.py:6 bashgraph.tools.runner.process import run_command",
        "graph/cli/sample.py:7 bashgraph.tools.runner import supervisor",
        "graph/cli/sample.py:8 bashgraph.tools.safety.redact",
    ]
