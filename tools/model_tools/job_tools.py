"""The job tools the model calls: `bash_output` and `bash_kill`, their schemas and argument checks.

Both take one argument, `job_id` (the id a `bash` call with `background: true` returned). Their
answers are `CommandResult`s in the usual outcome vocabulary (see `jobs.Job.read`); an invalid
argument or an unknown job id is an `args_error`, which never raises. The tools are run by the
agent graph's Executor, which holds the run's jobs; `make_job_tools` gives the LangChain tools the
model is bound to (their own function only answers that no job exists outside the graph).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from bashgraph.tools.results import CommandResult, args_error, render_for_model

OUTPUT_TOOL_NAME = "bash_output"
KILL_TOOL_NAME = "bash_kill"
JOB_TOOL_NAMES = (OUTPUT_TOOL_NAME, KILL_TOOL_NAME)
JOB_TOOL_SCHEMA_TEXT = '{"job_id": "<id from a background bash call>"}'
_MAX_ID_CHARS = 64

_DESCRIPTIONS = {
    OUTPUT_TOOL_NAME: "What a background job wrote since the last read, and its state.",
    KILL_TOOL_NAME: "Stop a background job and every process it started.",
}


def job_schema() -> dict[str, Any]:
    """The arguments' JSON schema of both job tools."""
    return {
        "type": "object",
        "properties": {
            "job_id": {"type": "string", "description": "The id a background bash call returned."},
        },
        "required": ["job_id"],
        "additionalProperties": False,
    }


def validate_job_args(raw: object) -> str | CommandResult:
    """The job id of valid arguments, else an args_error CommandResult. Never raises."""
    problem = _problem(raw)
    if problem is not None:
        return args_error(f"{problem}. Expected {JOB_TOOL_SCHEMA_TEXT}")
    assert isinstance(raw, Mapping)
    return str(raw["job_id"]).strip()


def _problem(raw: object) -> str | None:
    if not isinstance(raw, Mapping):
        return "arguments must be an object"
    unknown = [key for key in raw if key != "job_id"]
    if unknown:
        return f"unknown argument {str(unknown[0])[:40]!r} (allowed: job_id)"
    job_id = raw.get("job_id")
    if not isinstance(job_id, str) or not job_id.strip():
        return "'job_id' must be a non-empty string"
    if len(job_id) > _MAX_ID_CHARS or not job_id.isprintable():
        return "'job_id' is not a job id"
    return None


def unknown_job(job_id: str, known: list[str]) -> CommandResult:
    """The answer for an id that names no job of this run."""
    listing = ", ".join(known) if known else "none started yet"
    return args_error(f"no background job {job_id[:_MAX_ID_CHARS]!r} in this run (jobs: {listing})")


def make_job_tools() -> list[BaseTool]:
    """`bash_output` and `bash_kill` as LangChain tools (their schemas are what the model sees)."""

    def outside_graph(**_: Any) -> tuple[str, dict[str, Any]]:
        result = args_error("background jobs exist only inside the bashgraph agent graph")
        return render_for_model(result), result.to_dict()

    return [
        StructuredTool(name=name, description=_DESCRIPTIONS[name], args_schema=job_schema(),
                       func=outside_graph, response_format="content_and_artifact")
        for name in JOB_TOOL_NAMES
    ]
