"""The four sections of `AgentConfig`, one docstring per setting (graph/config.py puts them
together and reads them from the environment).

Every setting also has a flat name: the keyword `AgentConfig(max_steps=20)` takes, and the
environment variable `BASHGRAPH_MAX_STEPS`. It is the field's name unless the field's metadata
says otherwise (`flat`); how commands run is `RunOptions` itself, whose flat names are listed on
`ExecutionSettings.options`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from bashgraph.graph.models.prompts import DEFAULT_SYSTEM_PROMPT
from bashgraph.tools import DEFAULT_TIMEOUT, RunOptions

EnvironmentErrorPolicy = Literal["ask", "stop", "model"]
ApprovalMode = Literal["never", "rules", "always"]

#: Flat names of the `RunOptions` fields the agent's settings include. Of the others, the
#: Executor sets `env`, `sandbox` and `process_cwd`; `inherit_env` is only set in Python.
RUN_OPTION_NAMES = {
    "shell": "shell",  # the POSIX shell that runs each command as `SHELL -c COMMAND`
    "timeout_s": "timeout",  # a command's time limit when the model does not ask for one
    "grace_s": "grace",  # time between SIGTERM and SIGKILL when a command is stopped
    "max_output_chars": "max_output_chars",  # what the model reads; the rest goes to a spill file
    "pass_env": "pass_env",  # variables passed to commands although their names look secret
    "spill_dir": "spill_dir",  # where full outputs go (default: a bashgraph folder in temp)
}


@dataclass(frozen=True)
class ExecutionSettings:
    """Where and how the agent's commands run."""

    workdir: str = "."
    """Directory the first command runs in; a `cd` in one command holds for the next."""

    options: RunOptions = field(default=RunOptions(timeout=DEFAULT_TIMEOUT),
                                metadata={"flat": RUN_OPTION_NAMES})
    """How every command runs (shell, limits, environment): `run_command`'s own options. A
    timeout of None is `RunOptions`' default; `env`, `sandbox` and `process_cwd` must stay None:
    the Executor sets them (the call's marker, `SafetySettings.sandbox`, this process's cwd)."""

    max_timeout_s: float = 600.0
    """Largest time limit the model may ask for; larger requests are an args error."""


@dataclass(frozen=True)
class BudgetSettings:
    """How much one run may try before it stops, and what it does when retrying cannot help."""

    max_steps: int = 50
    """Model calls allowed in one run before it stops as failed (LangGraph's own limit is 10,000)."""

    replan_after: int = 3
    """Consecutive exit-code failures after which the model is asked for a new plan."""

    max_replans: int = 2
    """Re-plans allowed in one run; one more means the agent is stuck and the run fails."""

    max_args_errors: int = 3
    """Consecutive invalid tool calls after which the run fails."""

    max_jobs: int = 4
    """Background jobs one run may hold running at a time; a start past it is an args error."""

    max_spawn_retries: int = 2
    """Automatic re-runs of a command that hit a transient spawn error (the kinds marked transient
    in the table of kinds, docs/graph.md)."""

    retry_backoff_s: float = 0.5
    """First retry delay; it doubles each time, with jitter, up to `retry_backoff_max_s`."""

    retry_backoff_max_s: float = 8.0
    """Longest delay between two automatic retries."""

    on_environment_error: EnvironmentErrorPolicy = "ask"
    """What an environment fault that retrying cannot cure does (a non-transient kind, or retries
    spent): ask a person, stop the run, or tell the model. A refusal (`denied`) never comes here."""

    failure_history: int = 10
    """How many recent failures are kept in state (for re-plan messages and loop detection)."""


@dataclass(frozen=True)
class ChatSettings:
    """The chat model: which one, where, and how it is asked."""

    model: str | None = None
    """Chat model name on the OpenAI-compatible server, or "local" for the bundled model."""

    base_url: str | None = None
    """OpenAI-compatible endpoint (default: OPENAI_BASE_URL, else the OpenAI API)."""

    request_timeout_s: float = 120.0
    """Time limit of one model request."""

    max_retries: int = field(default=2, metadata={"flat": "model_max_retries"})
    """Retries of a model request on 429, 5xx and connection errors (with backoff)."""

    retry_after_max_s: float = field(default=60.0, metadata={"flat": "model_retry_after_max_s"})
    """Longest wait a rate-limited (or overloaded) server may ask for with `Retry-After` that is
    waited out; a longer one stops the request at once, saying when to try again."""

    streaming: bool = field(default=True, metadata={"flat": "model_streaming"})
    """Stream model replies when tokens are shown live; false for servers that cannot stream tool
    calls (llama-cpp-python's chatml-function-calling): replies then arrive whole."""

    keep_think: bool = False
    """Keep a leading `<think>…</think>` block in the model's text. By default it is set aside as
    the reply's reasoning: never shown as the answer, nor sent back as text."""

    context_window: int | None = None
    """Tokens the model takes in one request, its reply included. None: what the server reports
    (vLLM's `max_model_len`, llama.cpp's `n_ctx`), else 32,768. Older turns are compacted before
    a request would outgrow it (docs/graph.md#context)."""

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    """Instructions given to the model before the task; explains the outcome vocabulary."""


@dataclass(frozen=True)
class SafetySettings:
    """Who must agree to a command, and what a command can reach and show (docs/safety.md)."""

    approval: ApprovalMode = "rules"
    """When to ask a person before a command: never, when a rule says ask, or always."""

    rules: tuple[str, ...] = field(default=(), metadata={"separator": ";"})
    """Extra rules `ACTION:PATTERN` (allow/ask/deny), checked before the file's and defaults."""

    policy_file: str | None = None
    """TOML or JSON file of approval rules (see docs/safety.md)."""

    sandbox: bool = False
    """Run every command inside bubblewrap: read-only root, writable workdir, no network (the
    Executor builds `RunOptions.sandbox` from this)."""

    allow_network: bool = False
    """With `sandbox`: keep the network (it is cut by default)."""

    redact: bool = True
    """Replace secret values and well-known key shapes in command output before anyone sees it."""
