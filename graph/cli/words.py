"""The words people read for bashgraph's machine names (`--json` keeps the names themselves)."""

from bashgraph.tools import KINDS

#: A spawn error kind, as a progress badge and in a question (declared with the kind).
SPAWN_WORDS = {kind.value: entry.words for kind, entry in KINDS.items()}

#: How a run stopped, in the status line.
STATUS_WORDS = {
    "done": "done", "failed": "failed", "aborted": "aborted", "environment_fault": "environment fault",
    "paused": "paused, waiting for an answer", "interrupted": "interrupted", "model_error": "model error",
    "running": "stopped before the end", "busy": "busy", "config_error": "usage error",
    "store_error": "database error",
}
