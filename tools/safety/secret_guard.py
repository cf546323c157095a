"""Keep the agent's own secrets away from the commands it runs, where Linux allows it.

The environment a command gets is scrubbed (`options.scrub_env`), but without the sandbox a
command can still look at the agent process itself: `tr '\\0' '\\n' < /proc/$PPID/environ` prints
the environment the agent was started with, and `/proc/$PPID/mem` holds every value it read.
`protect_secrets()` closes what it can, once, at the start of the agent process:

1. **The start-up environment block is erased**: the values of secret-looking variables (the same
   rule as the scrubbing) are overwritten with NUL bytes where the kernel shows them as
   `/proc/<pid>/environ`. Python's `os.environ` is a copy made at start-up, so the agent still
   has them; libc's `getenv` and children started without an explicit environment do not.
2. **The process is made non-dumpable** (`prctl(PR_SET_DUMPABLE, 0)`): its `/proc/<pid>/mem`,
   `environ` and `fd` are then readable only with `CAP_SYS_PTRACE`. Commands are exec'd, which
   makes them dumpable again: nothing changes for them.
3. **`CAP_SYS_PTRACE` is dropped from the bounding set** (`prctl(PR_CAPBSET_DROP)`), when the
   process may (root, or `CAP_SETPCAP`): no command it starts can hold that capability, even
   as root, so step 2 holds against root commands too. The agent itself keeps its own.

What this does not stop: root has other ways into memory (`/proc/kcore`, kernel modules, raw
devices), and another process of the same user that was not started by the agent, or by a
process the agent started before this call, keeps whatever it could already do. The sandbox is
the boundary; this only narrows what a command run without it can read.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Iterable
from dataclasses import dataclass

from bashgraph.tools.safety.secret_names import has_secret_value, is_secret_name

_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_READ = 23
_PR_CAPBSET_DROP = 24
CAP_SYS_PTRACE = 19


@dataclass(frozen=True, slots=True)
class Protection:
    """What `protect_secrets` achieved in this process."""

    erased: tuple[str, ...]  # variables whose start-up values were erased from the environ block
    undumpable: bool  # /proc/<pid>/mem, environ and fd need CAP_SYS_PTRACE
    no_ptrace_for_children: bool  # CAP_SYS_PTRACE is out of the bounding set


def protect_secrets(keep: Iterable[str] = ()) -> Protection:
    """Apply the three steps of the module docstring; each one that the system refuses is skipped.

    `keep` names variables to leave in the environ block even when they look secret. Linux only;
    elsewhere nothing happens. Call it once, in the process that holds the secrets, before it
    starts commands (the CLI does); it changes the whole process and cannot be undone.
    """
    libc = _libc()
    if libc is None:
        return Protection((), False, False)
    erased = erase_startup_secrets(frozenset(keep))
    undumpable = libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    dropped = (libc.prctl(_PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0) == 0
               or libc.prctl(_PR_CAPBSET_READ, CAP_SYS_PTRACE, 0, 0, 0) == 0)
    return Protection(erased, undumpable, dropped)


def is_dumpable() -> bool:
    """False once `protect_secrets` made the process non-dumpable (True off Linux)."""
    libc = _libc()
    return libc is None or libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) != 0


def erase_startup_secrets(keep: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """Overwrite, in place, the secret values of the environment block the process started with.

    The block lies between `env_start` and `env_end` of `/proc/self/stat`; each entry keeps its
    length, its value becomes NUL bytes (so `getenv` reads it as empty). Returns the names.
    """
    bounds = _environ_bounds()
    if bounds is None:
        return ()
    start, end = bounds
    block = ctypes.string_at(start, end - start)
    erased: list[str] = []
    offset = 0
    for entry in block.split(b"\0"):
        name, eq, value = entry.partition(b"=")
        text_name, text_value = os.fsdecode(name), os.fsdecode(value)
        secret = is_secret_name(text_name) or has_secret_value(text_value)
        if eq and value and secret and text_name not in keep:
            ctypes.memset(start + offset + len(name) + 1, 0, len(value))
            erased.append(text_name)
        offset += len(entry) + 1
    return tuple(erased)


def _environ_bounds() -> tuple[int, int] | None:
    """(env_start, env_end) of this process: fields 50 and 51 of /proc/self/stat (Linux 3.5+)."""
    try:
        with open("/proc/self/stat", encoding="ascii", errors="replace") as stat:
            text = stat.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the name in parentheses may hold spaces
    if len(fields) < 49:
        return None
    start, end = int(fields[47]), int(fields[48])
    return (start, end) if 0 < start < end else None


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if not os.path.isdir("/proc/self"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
