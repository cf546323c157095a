"""bashgraph.tools.jobs: background jobs — commands that keep running after their tool call returned.

Every public name is imported on first use (module `__getattr__`), as in `bashgraph.tools`.
"""

from typing import TYPE_CHECKING

from bashgraph.tools.lazy_exports import lazy_exports

__all__ = [
    "Job",
    "JobRequest",
    "JobTable",
    "started_result",
    "sweep_marker",
]

if TYPE_CHECKING:
    from bashgraph.tools.jobs.sweep import sweep_marker
    from bashgraph.tools.jobs.table import Job, JobRequest, JobTable, started_result

#: Where each public name lives.
_HOMES = {
    **dict.fromkeys(("Job", "JobRequest", "JobTable", "started_result"), "table"),
    "sweep_marker": "sweep",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__, globals())
