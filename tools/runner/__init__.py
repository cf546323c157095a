"""bashgraph.tools.runner: running one shell command — spawn, supervise, capture, classify, and
clean up every process it started.

`run_command`, `arun_command` and `RunOptions` are exported by `bashgraph.tools`; here are the
runner's own parts other layers use. Every public name is imported on first use (module
`__getattr__`), as in `bashgraph.tools`.
"""

from typing import TYPE_CHECKING

from bashgraph.tools.lazy_exports import lazy_exports

__all__ = [
    "OutputCallback",
    "default_spill_dir",
    "in_thread",
    "sweep",
    "to_its_end",
]

#: Modules other layers may import whole: `twin`, one body driven sync or async (its names are
#: used qualified: `twin.run`, `twin.blocking`).
PUBLIC_MODULES = ("twin",)

if TYPE_CHECKING:
    from bashgraph.tools.runner.capture import default_spill_dir
    from bashgraph.tools.runner.live import OutputCallback
    from bashgraph.tools.runner.reaper import sweep
    from bashgraph.tools.runner.twin import in_thread, to_its_end

#: Where each public name lives.
_HOMES = {
    "OutputCallback": "live",
    "default_spill_dir": "capture",
    **dict.fromkeys(("in_thread", "to_its_end"), "twin"),
    "sweep": "reaper",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__, globals())
