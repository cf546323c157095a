"""How commands run, apart from the command itself: `RunOptions`, declared once for every path.

`RunOptions` holds what a caller usually fixes once and reuses for many commands (the shell,
the limits, the environment, the sandbox); what changes with every call — the command, its
working directory, its live-output callback — is passed next to it. `run_command` and
`arun_command` take the options whole (`options=`), and each field also as a keyword of its
own (`RunOptionFields`), which replaces that field for one call:

    options = RunOptions(shell="/bin/dash", max_output_chars=2_000)
    run_command("make", cwd="/src", options=options, timeout=600)

The graph's `Executor` builds its options once per agent from `AgentConfig`; background jobs
(`tools/jobs/table.py`) start from the same object. Nothing here is checked when the options
are built: a bad value (a negative timeout) is the command's `args_error`, never an exception.

## The longest command (tools/text.py), and why: Linux's limit on one argument

The command reaches the shell as one argument of `bash -c` (after a short preamble, see
`launch`). Linux refuses to `exec` with any single argument longer than `MAX_ARG_STRLEN`
(32 pages: 131072 bytes, the terminating NUL included) with E2BIG, so a longer command could
never run. The tool refuses it up front as an `args_error`, and the approval rules never read
it: their work grows with the command's length, and this bounds it.

## The environment: inherited, minus anything that looks like a secret

A model-driven shell will print `env` sooner or later, and whatever it prints lands in the model's
context, the checkpoints and the logs. So every inherited variable whose name looks like a
credential (the rules: `safety/secret_names.py`) is dropped before the command starts, unless the
caller names it in `pass_env`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypedDict

from bashgraph.tools.safety.sandbox import Sandbox
from bashgraph.tools.safety.secret_names import has_secret_value, is_secret_name

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_OUTPUT_CHARS = 10_000
DEFAULT_GRACE = 2.0

PathArg = str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Everything about running a command except the command, its cwd and `on_output`."""

    timeout: float | None = None
    """Seconds before the command's process tree is stopped; None: `DEFAULT_TIMEOUT`, `math.inf`:
    no limit."""

    grace: float = DEFAULT_GRACE
    """Seconds between SIGTERM and SIGKILL when the command is stopped."""

    env: Mapping[str, str] | None = None
    """Variables set on top of the inherited environment (not scrubbed: the caller chose them)."""

    pass_env: Iterable[str] = ()
    """Inherited variables to keep even though their names look secret (kept as a tuple)."""

    inherit_env: bool = True
    """False: start from a minimal environment (PATH, HOME, the locale, ...) instead."""

    shell: str = "bash"
    """The POSIX shell that runs `shell -c command`: a name looked up on PATH, or a path."""

    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    """Characters kept per stream, at most; a stream of more UTF-8 bytes than this is spilled
    whole to a file in `spill_dir` (so text of multi-byte characters spills sooner: 400 CJK
    characters are 1,200 bytes). The cap is checked on bytes as they are read, without decoding
    them, so a spill starts while the command runs, off the event loop."""

    spill_dir: PathArg | None = None
    """Where spill files go; None: `<temp dir>/bashgraph-spill`."""

    sandbox: Sandbox | None = None
    """Run the shell inside this sandbox (`safety.sandbox.BwrapSandbox`)."""

    process_cwd: str | None = None
    """This process's working directory, when the caller knows it (an async caller must not ask
    on the event loop); None: `os.getcwd()` at each run. It must be current: the shell starts
    there, and no `cd` is made when it is the command's cwd."""

    def __post_init__(self) -> None:
        # Options are shared by many runs: an iterator given here would be empty from the second.
        if type(self.pass_env) is not tuple:
            object.__setattr__(self, "pass_env", tuple(self.pass_env))


class RunOptionFields(TypedDict, total=False):
    """`RunOptions`' fields as keywords of `run_command` / `arun_command` (see `RunOptions` for
    what each means). The type checker holds every key to a field of the same type; a test holds
    every field to a key."""

    timeout: float | None
    grace: float
    env: Mapping[str, str] | None
    pass_env: Iterable[str]
    inherit_env: bool
    shell: str
    max_output_chars: int
    spill_dir: PathArg | None
    sandbox: Sandbox | None
    process_cwd: str | None


#: The options of a call that gives none.
DEFAULT_OPTIONS = RunOptions()


def merged(options: RunOptions, overrides: RunOptionFields) -> RunOptions:
    """`options` with the fields named in `overrides` replaced (the same object when none are)."""
    if not overrides:
        return options
    if options is DEFAULT_OPTIONS:
        return RunOptions(**overrides)  # the same result as `replace`, at half its cost
    return dataclasses.replace(options, **overrides)


def argument_problem(command: object, options: RunOptions) -> str | None:
    """Why `command` cannot run with `options` (the text of its `args_error`), or None."""
    if not isinstance(command, str):
        return f"'command' must be a string, got {type(command).__name__}"
    if "\0" in command:
        return "'command' contains NUL bytes"
    timeout, grace = options.timeout, options.grace
    if timeout is not None and not timeout > 0:
        return f"'timeout' must be a positive number of seconds, got {timeout!r}"
    if not (grace >= 0 and math.isfinite(grace)):
        return f"'grace' must be a finite number of seconds >= 0, got {grace!r}"
    if options.max_output_chars < 0:
        return f"'max_output_chars' must be >= 0, got {options.max_output_chars!r}"
    return None


MINIMAL_NAMES = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ",
                 "TMPDIR")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def scrub_env(environ: Mapping[str, str], pass_env: Iterable[str] = ()) -> dict[str, str]:
    """A copy of `environ` without secrets; names in `pass_env` are kept whatever they look like."""
    keep = frozenset(pass_env)
    return {
        name: value
        for name, value in environ.items()
        if name in keep or not (is_secret_name(name) or has_secret_value(value))
    }


def minimal_env(environ: Mapping[str, str], pass_env: Iterable[str] = ()) -> dict[str, str]:
    """Only `MINIMAL_NAMES` (and `pass_env`) from `environ`, with a default PATH."""
    names = (*MINIMAL_NAMES, *pass_env)
    env = {name: environ[name] for name in names if name in environ}
    env.setdefault("PATH", DEFAULT_PATH)
    return scrub_env(env, pass_env)


def build_env(
    *,
    extra: Mapping[str, str] | None,
    pass_env: Iterable[str],
    inherit_env: bool,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of one command: scrubbed inheritance, then the caller's `extra` on top.

    `extra` is the caller's explicit choice, so it is not scrubbed.
    """
    passed = tuple(pass_env)
    if environ is None:
        env = _from_process_environ(passed, inherit_env)
    else:
        env = scrub_env(environ, passed) if inherit_env else minimal_env(environ, passed)
    if extra:
        env.update(extra)
    return env


_Snapshot = dict[bytes, bytes]
_cache: dict[tuple[tuple[str, ...], bool], tuple[_Snapshot, dict[str, str]]] = {}


def _from_process_environ(pass_env: tuple[str, ...], inherit_env: bool) -> dict[str, str]:
    """`scrub_env`/`minimal_env` of `os.environ`, recomputed only when `os.environ` changed.

    Scrubbing costs tens of microseconds per command, as much as the rest of the bookkeeping;
    comparing the raw environment with a snapshot costs well under one.
    """
    raw: _Snapshot | None = getattr(os.environ, "_data", None)
    key = (pass_env, inherit_env)
    hit = _cache.get(key)
    if raw is not None and hit is not None and hit[0] == raw:
        return dict(hit[1])
    snapshot = dict(raw) if raw is not None else {}
    source = {os.fsdecode(k): os.fsdecode(v) for k, v in snapshot.items()} if raw else os.environ
    env = scrub_env(source, pass_env) if inherit_env else minimal_env(source, pass_env)
    if raw is not None:
        if len(_cache) >= 32:
            _cache.clear()
        _cache[key] = (snapshot, env)
    return dict(env)
