"""bashgraph.graph.store: where runs are kept — checkpoints, the command journal, thread locks, threads
and time travel. The sessions that bind them to one database are above it: `bashgraph.graph`.

Every public name is imported on first use (module `__getattr__`): `read_threads`,
`read_history` and `locate` serve the `bashgraph` command's quick paths without LangChain or
LangGraph.
"""

from typing import TYPE_CHECKING

from bashgraph.tools.lazy_exports import lazy_exports

__all__ = [
    "CheckpointRow",
    "Location",
    "ThreadInfo",
    "aopen_checkpointer",
    "default_db_path",
    "locate",
    "open_checkpointer",
    "read_history",
    "read_threads",
]

if TYPE_CHECKING:
    from bashgraph.graph.store.checkpoint_rows import CheckpointRow, ThreadInfo, read_history, read_threads
    from bashgraph.graph.store.checkpoints import (
        Location,
        aopen_checkpointer,
        default_db_path,
        locate,
        open_checkpointer,
    )

#: Where each public name lives.
_HOMES = {
    **dict.fromkeys(("CheckpointRow", "ThreadInfo", "read_history", "read_threads"), "checkpoint_rows"),
    **dict.fromkeys(("Location", "aopen_checkpointer", "default_db_path", "locate", "open_checkpointer"),
                    "checkpoints"),
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__, globals())
