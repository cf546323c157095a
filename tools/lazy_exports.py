"""Module `__getattr__` / `__dir__` for a package whose public names load on first use.

Both packages export this way, so the `bashgraph` command's quick paths (`--help`, `threads`)
import neither LangChain nor LangGraph just by importing a package.
"""

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(
    package: str, homes: Mapping[str, str], names: Sequence[str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(`__getattr__`, `__dir__`) for `package`: `homes` maps each public name to its module,
    relative to `package` (`"policy"`, or `".text"` for a module of the package above)."""

    def __getattr__(name: str) -> Any:
        """A public name, imported from its module when first asked for."""
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f".{home}", package)
        # Every export of that module at once: importing a submodule sets the package attribute
        # of its name to the module, which must not hide an export of the same name (`visible`).
        namespace.update((other, getattr(module, other)) for other, where in homes.items() if where == home)
        return namespace[name]

    def __dir__() -> list[str]:
        return sorted([*namespace, *names])

    return __getattr__, __dir__
