"""AgentConfig: every knob of the agent, in four sections, with environment overrides.

The sections (graph/settings.py) say what each setting does: `execution` (where and how
commands run, built on `RunOptions`), `budgets`, `chat` (the model) and `safety`. Every setting
also has one flat name, for the keywords `AgentConfig(workdir=".", max_steps=20)` takes, the
`BASHGRAPH_<NAME>` environment variables and the CLI's flags.

Precedence (highest first): explicit arguments / CLI flags, `BASHGRAPH_<NAME>` environment
variables, the defaults. Secrets (API keys) are never settings: they stay in the environment.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_args
from urllib.parse import urlsplit

from bashgraph.graph.errors import ConfigError
from bashgraph.graph.settings import (
    ApprovalMode,
    BudgetSettings,
    ChatSettings,
    EnvironmentErrorPolicy,
    ExecutionSettings,
    SafetySettings,
)
from bashgraph.tools import DEFAULT_TIMEOUT

__all__ = ["ENV_PREFIX", "MIN_CONTEXT_WINDOW", "AgentConfig", "ApprovalMode", "BudgetSettings",
           "ChatSettings", "EnvironmentErrorPolicy", "ExecutionSettings", "SafetySettings", "flat_names"]

ENV_PREFIX = "BASHGRAPH_"
#: Below this no system prompt, task and reply fit together.
MIN_CONTEXT_WINDOW = 2_048

#: A setting's place: its section, then the field in it (and in `RunOptions` for `options`).
Path = tuple[str, ...]
_SECTIONS = {"execution": ExecutionSettings, "budgets": BudgetSettings, "chat": ChatSettings,
             "safety": SafetySettings}


@dataclass(frozen=True, init=False)
class AgentConfig:
    """Settings of one agent. Immutable: derive variants with `dataclasses.replace`, by section
    (`replace(config, budgets=...)`) or by flat name (`replace(config, max_steps=10)`)."""

    execution: ExecutionSettings
    budgets: BudgetSettings
    chat: ChatSettings
    safety: SafetySettings

    def __init__(self, execution: ExecutionSettings | None = None,
                 budgets: BudgetSettings | None = None, chat: ChatSettings | None = None,
                 safety: SafetySettings | None = None, **flat: Any) -> None:
        """Sections (None: the defaults), then settings by flat name on top of them. The flat
        keywords are how the config was made before it had sections; `dataclasses.replace`
        uses them too."""
        given = {"execution": execution, "budgets": budgets, "chat": chat, "safety": safety}
        sections = {name: _SECTIONS[name]() if value is None else value for name, value in given.items()}
        sections = _with_flat(sections, flat)
        sections["execution"] = _default_timeout(sections["execution"])
        for name, section in sections.items():
            object.__setattr__(self, name, section)
        _check(self)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> AgentConfig:
        """Defaults, then `BASHGRAPH_<NAME>` variables, then `overrides` by flat name (None
        means unset)."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name in flat_names():
            raw = environ.get(ENV_PREFIX + name.upper())
            if raw is not None:
                found = _field_at(flat_names()[name])
                values[name] = _parse(name, found.type, raw, found.metadata.get("separator", ","))
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def setting(self, name: str) -> Any:
        """The value of the setting of this flat name (`config.setting("timeout_s")`)."""
        place = flat_names().get(name)
        if place is None:
            raise KeyError(name)
        return functools.reduce(getattr, place, self)

    if not TYPE_CHECKING:  # hidden from type checkers: they name the new place themselves

        def __getattr__(self, name: str) -> Any:
            """A flat name read as an attribute says where the setting is now."""
            place = flat_names().get(name)
            if place is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            raise AttributeError(f"AgentConfig.{name} is config.{'.'.join(place)} (flat names are "
                                 f"for AgentConfig(...), replace() and BASHGRAPH_{name.upper()})")


@functools.cache
def flat_names() -> Mapping[str, Path]:
    """Every setting's flat name and its place, read off the sections' fields (one source)."""
    names: dict[str, Path] = {}
    for section, kind in _SECTIONS.items():
        for found in dataclasses.fields(kind):
            flat = found.metadata.get("flat", found.name)
            if isinstance(flat, Mapping):  # a nested dataclass: RunOptions
                names.update({name: (section, found.name, inner) for name, inner in flat.items()})
            else:
                names[flat] = (section, found.name)
    return names


def _with_flat(sections: dict[str, Any], flat: Mapping[str, Any]) -> dict[str, Any]:
    """`sections` with the settings named in `flat` replaced, each section once."""
    unknown = sorted(set(flat) - set(flat_names()))
    if unknown:
        raise TypeError(f"AgentConfig() got unexpected keyword arguments: {', '.join(unknown)}")
    changes: dict[str, dict[Path, Any]] = {}
    for name, value in flat.items():
        section, *rest = flat_names()[name]
        changes.setdefault(section, {})[tuple(rest)] = value
    return {name: _replaced(section, changes.get(name, {})) for name, section in sections.items()}


def _replaced(value: Any, changes: Mapping[Path, Any]) -> Any:
    """`value` (a dataclass) with the fields at these paths replaced."""
    if not changes:
        return value
    direct = {path[0]: new for path, new in changes.items() if len(path) == 1}
    nested: dict[str, dict[Path, Any]] = {}
    for path, new in changes.items():
        if len(path) > 1:
            nested.setdefault(path[0], {})[path[1:]] = new
    direct.update({name: _replaced(getattr(value, name), inner) for name, inner in nested.items()})
    return dataclasses.replace(value, **direct)


def _default_timeout(execution: ExecutionSettings) -> ExecutionSettings:
    """A timeout of None means `RunOptions`' default: made explicit, as the checks need it."""
    if execution.options.timeout is not None:
        return execution
    return dataclasses.replace(execution, options=dataclasses.replace(execution.options,
                                                                      timeout=DEFAULT_TIMEOUT))


def _field_at(place: Path) -> dataclasses.Field[Any]:
    """The dataclass field at `place` (its type and metadata say how to read a variable)."""
    kind: Any = _SECTIONS[place[0]]
    for name in place[1:]:
        found = {f.name: f for f in dataclasses.fields(kind)}[name]
        kind = type(found.default)  # a nested section's class is its default's
    return found


def _check(config: AgentConfig) -> None:
    """Refuse a setting that is no value, naming it by its flat name."""
    _check_positive(config, "timeout_s", "max_timeout_s", "max_output_chars", "max_steps",
                    "replan_after", "max_args_errors", "request_timeout_s", "max_jobs")
    _check_choice(config, "approval", ApprovalMode)
    _check_choice(config, "on_environment_error", EnvironmentErrorPolicy)
    if config.setting("timeout_s") > config.setting("max_timeout_s"):
        raise ConfigError("timeout_s cannot exceed max_timeout_s")
    _check_not_negative(config, "grace_s", "max_spawn_retries", "retry_backoff_s", "retry_backoff_max_s",
                        "failure_history", "model_max_retries", "max_replans", "model_retry_after_max_s")
    window = config.chat.context_window
    if window is not None and window < MIN_CONTEXT_WINDOW:
        raise ConfigError(f"context_window must be at least {MIN_CONTEXT_WINDOW} tokens, got {window!r}")
    if config.chat.base_url:  # empty: not set (OPENAI_BASE_URL, else the OpenAI API), as before
        _check_url(config.chat.base_url)
    options = config.execution.options
    executors = [name for name in ("env", "sandbox", "process_cwd") if getattr(options, name) is not None]
    if executors:  # each run sets them (its call's marker; `safety.sandbox`; this process's cwd)
        raise ConfigError(f"execution.options.{executors[0]} is set by the Executor: leave it None")


def _check_choice(config: AgentConfig, name: str, choices: Any) -> None:
    value = config.setting(name)
    if value not in get_args(choices):
        raise ConfigError(f"{name} must be one of {get_args(choices)}, got {value!r}")


def _check_positive(config: AgentConfig, *names: str) -> None:
    for name in names:
        value = config.setting(name)
        _check_finite(name, value)
        if value <= 0:
            raise ConfigError(f"{name} must be positive, got {value!r}")


def _check_not_negative(config: AgentConfig, *names: str) -> None:
    for name in names:
        value = config.setting(name)
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
        if kind.startswith(("tuple", "Iterable")):
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
