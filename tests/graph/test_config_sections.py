"""AgentConfig in sections: every flat name (keyword, `BASHGRAPH_*` variable, CLI flag) lands in
its section, and no `RunOptions` field is repeated in a section under another name."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bashgraph.graph import (
    AgentConfig,
    BudgetSettings,
    ChatSettings,
    ConfigError,
    ExecutionSettings,
    SafetySettings,
)
from bashgraph.graph.cli.app import _run_options, agent_config, build_parser
from bashgraph.graph.config import flat_names
from bashgraph.graph.run_setup import look_up
from bashgraph.graph.settings import RUN_OPTION_NAMES
from bashgraph.tools.runner.options import RunOptions

Read = Callable[[AgentConfig], Any]

#: Every flat name: a variable's text, where the setting must land, and the value it must have
#: there. Written out by hand on purpose: the config reads its table off its own fields.
ENVIRONMENT: dict[str, tuple[str, Read, Any]] = {
    "workdir": ("/srv/work", lambda c: c.execution.workdir, "/srv/work"),
    "shell": ("/bin/dash", lambda c: c.execution.options.shell, "/bin/dash"),
    "timeout_s": ("7", lambda c: c.execution.options.timeout, 7.0),
    "max_timeout_s": ("70", lambda c: c.execution.max_timeout_s, 70.0),
    "grace_s": ("0.5", lambda c: c.execution.options.grace, 0.5),
    "max_output_chars": ("500", lambda c: c.execution.options.max_output_chars, 500),
    "pass_env": ("A_KEY, B_TOKEN", lambda c: c.execution.options.pass_env, ("A_KEY", "B_TOKEN")),
    "spill_dir": ("/tmp/spill", lambda c: c.execution.options.spill_dir, "/tmp/spill"),
    "max_steps": ("9", lambda c: c.budgets.max_steps, 9),
    "replan_after": ("4", lambda c: c.budgets.replan_after, 4),
    "max_replans": ("0", lambda c: c.budgets.max_replans, 0),
    "max_args_errors": ("5", lambda c: c.budgets.max_args_errors, 5),
    "max_jobs": ("1", lambda c: c.budgets.max_jobs, 1),
    "max_spawn_retries": ("6", lambda c: c.budgets.max_spawn_retries, 6),
    "retry_backoff_s": ("0.1", lambda c: c.budgets.retry_backoff_s, 0.1),
    "retry_backoff_max_s": ("3", lambda c: c.budgets.retry_backoff_max_s, 3.0),
    "on_environment_error": ("model", lambda c: c.budgets.on_environment_error, "model"),
    "failure_history": ("2", lambda c: c.budgets.failure_history, 2),
    "system_prompt": ("Be brief.", lambda c: c.chat.system_prompt, "Be brief."),
    "model": ("served", lambda c: c.chat.model, "served"),
    "base_url": ("http://127.0.0.1:8000/v1", lambda c: c.chat.base_url, "http://127.0.0.1:8000/v1"),
    "request_timeout_s": ("12", lambda c: c.chat.request_timeout_s, 12.0),
    "model_max_retries": ("0", lambda c: c.chat.max_retries, 0),
    "model_retry_after_max_s": ("5", lambda c: c.chat.retry_after_max_s, 5.0),
    "model_streaming": ("false", lambda c: c.chat.streaming, False),
    "keep_think": ("yes", lambda c: c.chat.keep_think, True),
    "context_window": ("4096", lambda c: c.chat.context_window, 4096),
    "approval": ("always", lambda c: c.safety.approval, "always"),
    "rules": ("ask:git push *; deny:curl *", lambda c: c.safety.rules, ("ask:git push *", "deny:curl *")),
    "policy_file": ("rules.toml", lambda c: c.safety.policy_file, "rules.toml"),
    "sandbox": ("1", lambda c: c.safety.sandbox, True),
    "allow_network": ("on", lambda c: c.safety.allow_network, True),
    "redact": ("0", lambda c: c.safety.redact, False),
}

#: Every `run`/`resume` flag that is a setting: its words, where it must land, its value there.
FLAGS: dict[str, tuple[list[str], Read, Any]] = {
    "--workdir": (["--workdir", "/srv/work"], lambda c: c.execution.workdir, "/srv/work"),
    "--timeout": (["--timeout", "7"], lambda c: c.execution.options.timeout, 7.0),
    "--max-steps": (["--max-steps", "9"], lambda c: c.budgets.max_steps, 9),
    "--on-env-error": (["--on-env-error", "stop"], lambda c: c.budgets.on_environment_error, "stop"),
    "--model": (["--model", "served"], lambda c: c.chat.model, "served"),
    "--base-url": (["--base-url", "http://127.0.0.1:8000/v1"], lambda c: c.chat.base_url,
                   "http://127.0.0.1:8000/v1"),
    "--request-timeout": (["--request-timeout", "12"], lambda c: c.chat.request_timeout_s, 12.0),
    "--model-retries": (["--model-retries", "0"], lambda c: c.chat.max_retries, 0),
    "--retry-after-max": (["--retry-after-max", "5"], lambda c: c.chat.retry_after_max_s, 5.0),
    "--keep-think": (["--keep-think"], lambda c: c.chat.keep_think, True),
    "--context-window": (["--context-window", "4096"], lambda c: c.chat.context_window, 4096),
    "--approval": (["--approval", "never"], lambda c: c.safety.approval, "never"),
    "--rule": (["--rule", "ask:git push *", "--rule", "deny:curl *"], lambda c: c.safety.rules,
               ("ask:git push *", "deny:curl *")),
    "--policy": (["--policy", "rules.toml"], lambda c: c.safety.policy_file, "rules.toml"),
    "--sandbox": (["--sandbox"], lambda c: c.safety.sandbox, True),
    "--allow-network": (["--allow-network"], lambda c: c.safety.allow_network, True),
}
#: Flags of `run`/`resume` that are not settings of the agent.
NOT_SETTINGS = {"--help", "--db", "--json"}


def test_every_flat_name_is_checked_here() -> None:
    assert set(ENVIRONMENT) == set(flat_names())


@pytest.mark.parametrize("name", sorted(ENVIRONMENT))
def test_each_variable_lands_in_its_section(name: str) -> None:
    raw, read, expected = ENVIRONMENT[name]
    config = AgentConfig.from_env({f"BASHGRAPH_{name.upper()}": raw})
    assert read(config) == expected
    assert read(AgentConfig()) != expected, "the value checked must not be the default"
    assert config.setting(name) == expected


@pytest.mark.parametrize("name", sorted(ENVIRONMENT))
def test_each_flat_keyword_lands_where_its_variable_does(name: str) -> None:
    _, read, expected = ENVIRONMENT[name]
    assert read(AgentConfig(**{name: expected})) == expected


def test_every_setting_flag_is_checked_here() -> None:
    parser = argparse.ArgumentParser()
    _run_options(parser)
    flags = {action.option_strings[-1] for action in parser._actions}
    assert flags - NOT_SETTINGS == set(FLAGS)


@pytest.mark.parametrize("flag", sorted(FLAGS))
def test_each_flag_lands_in_its_section(flag: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in [name for name in os.environ if name.startswith("BASHGRAPH_")]:
        monkeypatch.delenv(variable)
    words, read, expected = FLAGS[flag]
    for command in (["run", "task"], ["resume", "thread"]):
        config = agent_config(build_parser().parse_args([*command, *words]))
        assert read(config) == expected
        assert read(AgentConfig()) != expected


def test_a_flag_wins_over_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BASHGRAPH_MAX_STEPS", "3")
    monkeypatch.setenv("BASHGRAPH_REPLAN_AFTER", "1")
    config = agent_config(build_parser().parse_args(["run", "task", "--max-steps", "8"]))
    assert (config.budgets.max_steps, config.budgets.replan_after) == (8, 1)


def test_no_run_option_is_repeated_under_another_name() -> None:
    """How commands run is `ExecutionSettings.options`, a `RunOptions`: a section field that
    names a `RunOptions` field again (`timeout_s`, `grace_s`, `max_output_chars`, ...) would be
    a second copy to keep in step. `SafetySettings.sandbox` is the one switch the Executor
    turns into `RunOptions.sandbox` (a bubblewrap sandbox for the workdir)."""
    option_names = {f.name for f in dataclasses.fields(RunOptions)} | set(RUN_OPTION_NAMES)
    switches = {("safety", "sandbox")}
    for section, kind in (("execution", ExecutionSettings), ("budgets", BudgetSettings),
                          ("chat", ChatSettings), ("safety", SafetySettings)):
        for found in dataclasses.fields(kind):
            if found.type == "RunOptions" or (section, found.name) in switches:
                continue
            names = {found.name, found.name.removesuffix("_s"), found.metadata.get("flat", found.name)}
            assert not names & option_names, f"{section}.{found.name} repeats a RunOptions field"
    assert set(RUN_OPTION_NAMES.values()) <= {f.name for f in dataclasses.fields(RunOptions)}
    places = list(flat_names().values())
    assert len(places) == len(set(places)), "two flat names for one setting"
    named = sum(len(f.metadata["flat"]) if f.type == "RunOptions" else 1
                for kind in (ExecutionSettings, BudgetSettings, ChatSettings, SafetySettings)
                for f in dataclasses.fields(kind))
    assert named == len(places), "one flat name for two settings"


def test_flat_keywords_build_the_sections() -> None:
    """`AgentConfig(workdir=..., max_steps=...)` as before the sections: the examples, the
    benchmarks and many callers make configs this way."""
    config = AgentConfig(workdir="/srv", timeout_s=5, max_steps=7, model="served", approval="always")
    assert config == AgentConfig(
        execution=ExecutionSettings(workdir="/srv", options=RunOptions(timeout=5)),
        budgets=BudgetSettings(max_steps=7), chat=ChatSettings(model="served"),
        safety=SafetySettings(approval="always"),
    )


def test_flat_keywords_change_given_sections_and_keep_the_rest() -> None:
    config = AgentConfig(budgets=BudgetSettings(max_steps=7), replan_after=1, grace_s=0.0)
    assert (config.budgets.max_steps, config.budgets.replan_after) == (7, 1)
    assert config.execution.options.grace == 0.0
    assert config.execution.options.timeout == 30.0


def test_replace_takes_flat_names_too() -> None:
    """`dataclasses.replace(config, max_steps=10)` keeps working (typed code replaces sections)."""
    config = AgentConfig(workdir="/srv", max_steps=7, model="served")
    changed = dataclasses.replace(config, max_steps=10, on_environment_error="stop")  # type: ignore[call-arg]
    assert changed.budgets == BudgetSettings(max_steps=10, on_environment_error="stop")
    assert (changed.execution, changed.chat, changed.safety) == (config.execution, config.chat, config.safety)


def test_settings_checked_together_are_set_together() -> None:
    """A time limit above the old largest one is fine when the largest one grows in the same call."""
    config = AgentConfig(timeout_s=700, max_timeout_s=800)
    assert (config.execution.options.timeout, config.execution.max_timeout_s) == (700, 800)
    with pytest.raises(ConfigError, match="timeout_s cannot exceed max_timeout_s"):
        AgentConfig(timeout_s=700)


def test_an_unknown_flat_name_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="unexpected keyword arguments: max_stpes"):
        AgentConfig(max_stpes=3)


def test_a_flat_name_read_as_an_attribute_says_where_it_went() -> None:
    with pytest.raises(AttributeError, match=r"AgentConfig.max_steps is config.budgets.max_steps"):
        AgentConfig().max_steps  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        AgentConfig().nothing  # type: ignore[attr-defined]  # noqa: B018


def test_a_timeout_left_to_run_options_is_its_default() -> None:
    config = AgentConfig(execution=ExecutionSettings(options=RunOptions(shell="dash")))
    assert config.execution.options.timeout == 30.0


@pytest.mark.parametrize("option", [{"env": {"A": "1"}}, {"process_cwd": "/"}])
def test_the_executors_options_are_refused(option: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=f"execution.options.{next(iter(option))} is set by the Executor"):
        AgentConfig(execution=ExecutionSettings(options=RunOptions(**option)))


def test_the_commands_run_with_the_configured_options(tmp_path: Path) -> None:
    """The Executor's options are the config's, with the shell's path, spill dir and sandbox."""
    options = RunOptions(timeout=4, grace=0.25, pass_env=("A_KEY",), inherit_env=False,
                         max_output_chars=99, spill_dir=str(tmp_path))
    setup = look_up(AgentConfig(execution=ExecutionSettings(workdir=str(tmp_path), options=options)))
    assert dataclasses.replace(setup.options, shell="bash") == options
    assert setup.options.shell.endswith("/bash")
