"""AgentConfig: every knob of the agent, one docstring each, with environment overrides.

Precedence (highest first): explicit arguments / CLI flags, `BASHGRAPH_<FIELD>` environment
variables, the defaults below. Secrets (API keys) are never fields: they stay in the environment.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from bashgraph.graph.errors import ConfigError
from bashgraph.graph.models.prompts import DEFAULT_SYSTEM_PROMPT

EnvironmentErrorPolicy = Literal["ask", "stop", "model"]
ApprovalMode = Literal["never", "rules", "always"]
ENV_PREFIX = "BASHGRAPH_"
#: Below this no system prompt, task and reply fit together.
MIN_CONTEXT_WINDOW = 2_048


@dataclass(frozen=True)
class AgentConfig:
    """Settings of one agent. Immutable: derive variants with `dataclasses.replace`."""

    workdir: str = "."
    """Directory the first command runs in; a `cd` in one command holds for the next."""

    shell: str = "bash"
    """POSIX shell that runs each command as `SHELL -c COMMAND`."""

    timeout_s: float = 30.0
    """Time limit of a command when the model does not ask for one."""

    max_timeout_s: float = 600.0
    """Largest time limit the model may ask for; larger requests are an args error."""

    grace_s: float = 2.0
    """Time between SIGTERM and SIGKILL when a command's process group is stopped."""

    max_output_chars: int = 10_000
    """Cap of the text the model reads for one command; the full output goes to a spill file."""

    pass_env: tuple[str, ...] = ()
    """Environment variables passed to commands even though their names look secret."""

    spill_dir: str | None = None
    """Where full outputs over the cap are written (default: a bashgraph folder in the temp dir)."""

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

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    """Instructions given to the model before the task; explains the outcome vocabulary."""

    model: str | None = None
    """Chat model name on the OpenAI-compatible server, or "local" for the bundled model."""

    base_url: str | None = None
    """OpenAI-compatible endpoint (default: OPENAI_BASE_URL, else the OpenAI API)."""

    request_timeout_s: float = 120.0
    """Time limit of one model request."""

    model_max_retries: int = 2
    """Retries of a model request on 429, 5xx and connection errors (with backoff)."""

    model_retry_after_max_s: float = 60.0
    """Longest wait a rate-limited (or overloaded) server may ask for with `Retry-After` that is
    waited out; a longer one stops the request at once, saying when to try again."""

    model_streaming: bool = True
    """Stream model replies when tokens are shown live; false for servers that cannot stream tool
    calls (llama-cpp-python's chatml-function-calling): replies then arrive whole."""

    keep_think: bool = False
    """Keep a leading `<think>…</think>` block in the model's text. By default it is set aside as
    the reply's reasoning: never shown as the answer, nor sent back as text."""

    context_window: int | None = None
    """Tokens the model takes in one request, its reply included. None: what the server reports
    (vLLM's `max_model_len`, llama.cpp's `n_ctx`), else 32,768. Older turns are compacted before
    a request would outgrow it (docs/graph.md#context)."""

    approval: ApprovalMode = "rules"
    """When to ask a person before a command: never, when a rule says ask, or always."""

    rules: tuple[str, ...] = field(default=(), metadata={"separator": ";"})
    """Extra rules `ACTION:PATTERN` (allow/ask/deny), checked before the file's and defaults."""

    policy_file: str | None = None
    """TOML or JSON file of approval rules (see docs/safety.md)."""

    sandbox: bool = False
    """Run every command inside bubblewrap: read-only root, writable workdir, no network."""

    allow_network: bool = False
    """With `sandbox`: keep the network (it is cut by default)."""

    redact: bool = True
    """Replace secret values and well-known key shapes in command output before anyone sees it."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> AgentConfig:
        """Defaults, then `BASHGRAPH_<FIELD>` variables, then `overrides` (None means unset)."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = environ.get(ENV_PREFIX + f.name.upper())
            if raw is not None:
                values[f.name] = _parse(f.name, f.type, raw, f.metadata.get("separator", ","))
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def __post_init__(self) -> None:
        _check_positive(self, "timeout_s", "max_timeout_s", "max_output_chars", "max_steps",
                        "replan_after", "max_args_errors", "request_timeout_s", "max_jobs")
        if self.approval not in get_args(ApprovalMode):
            raise ConfigError(f"approval must be one of {get_args(ApprovalMode)}, got {self.approval!r}")
        if self.on_environment_error not in get_args(EnvironmentErrorPolicy):
            raise ConfigError(
                f"on_environment_error must be one of {get_args(EnvironmentErrorPolicy)}, "
                f"got {self.on_environment_error!r}"
            )
        if self.timeout_s > self.max_timeout_s:
            raise ConfigError("timeout_s cannot exceed max_timeout_s")
        _check_not_negative(self, "grace_s", "max_spawn_retries", "retry_backoff_s", "retry_backoff_max_s",
                            "failure_history", "model_max_retries", "max_replans",
                            "model_retry_after_max_s")
        if self.context_window is not None and self.context_window < MIN_CONTEXT_WINDOW:
            raise ConfigError(
                f"context_window must be at least {MIN_CONTEXT_WINDOW} tokens, got {self.context_window!r}")
        if self.base_url:  # empty: not set (OPENAI_BASE_URL, else the OpenAI API), as before
            _check_url(self.base_url)


def _check_positive(config: AgentConfig, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        _check_finite(name, value)
        if value <= 0:
            raise ConfigError(f"{name} must be positive, got {value!r}")


def _check_not_negative(config: AgentConfig, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        _check_finite(name, value)
        if value < 0:
            raise ConfigError(f"{name} must be zero or more, got {value!r}")


def _check_finite(name: str, value: float) -> None:
    if not math.isfinite(value):  # NaN compares false with everything: it would pass any bound
        raise ConfigError(f"{name} must be a finite number, got {value!r}")


def _check_url(url: str) -> None:
    """An http(s) URL with a host: checked here so a bad one is a setting's error, not the
    HTTP client's traceback at the first request."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - reading it checks the port
    except ValueError as exc:
        raise ConfigError(f"base_url {url!r} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"base_url must be an http:// or https:// URL with a host, got {url!r}")


def _parse(name: str, annotation: object, raw: str, separator: str) -> Any:
    """Turn an environment string into the field's type (annotations are strings here)."""
    kind = str(annotation)
    try:
        if kind.startswith("bool"):
            return _boolean(raw)
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
        if kind.startswith("tuple"):
            return tuple(part.strip() for part in raw.split(separator) if part.strip())
    except ValueError:
        raise ConfigError(f"{ENV_PREFIX}{name.upper()}={raw!r} is not a valid {kind}") from None
    return raw


def _boolean(raw: str) -> bool:
    text = raw.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(raw)
