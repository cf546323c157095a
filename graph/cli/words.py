"""The words people read for bashgraph's machine names (`--json` keeps the names themselves)."""

#: A spawn error kind, as a progress badge and in a question.
SPAWN_WORDS = {
    "not_found": "not found", "permission_denied": "permission denied", "timeout": "timeout",
    "signal": "killed by signal", "resource": "no resources", "interrupted": "interrupted",
    "sandbox": "sandbox failed", "denied": "denied",
}

#: How a run stopped, in the status line.
STATUS_WORDS = {
    "done": "done", "failed": "failed", "aborted": "aborted", "environment_fault": "environment fault",
    "paused": "paused, waiting for an answer", "interrupted": "interrupted", "model_error": "model error",
    "running": "stopped before the end", "busy": "busy", "config_error": "usage error",
    "store_error": "database error",
}
