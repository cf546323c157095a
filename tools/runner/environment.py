"""The environment a command runs with: inherited, minus anything that looks like a secret.

A model-driven shell will print `env` sooner or later, and whatever it prints lands in the model's
context, the checkpoints and the logs. So every inherited variable whose *name* looks like a
credential (`is_secret_name`), or whose value carries a password inside a URL
(`has_secret_value`), is dropped before the command starts, unless the caller names it in
`pass_env`. The rules are safety's (tools/safety/secret_names.py): redaction and the secret
guard apply the same ones.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from bashgraph.tools.safety.secret_names import has_secret_value, is_secret_name

#: What a command gets with `inherit_env=False` (when the parent has them), before `pass_env`.
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
