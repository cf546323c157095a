"""The spawn error kinds, each declared once: what it means, who says so, and how it is routed.

A `spawn_error` says the shell never ran or never finished; its kind says why. `KINDS` holds one
entry per kind, and everything else reads it: the classifier (which errnos map to which kind),
`CommandResult.transient` and `CommandResult.environment_fault`, the router, the words the CLI
shows, and the table of kinds in docs/graph.md (generated from here; a test fails when it is
stale). Adding a kind, or moving an errno to another kind, is an edit to this file.

Pure data: no processes, no I/O, no LangChain (the CLI's quick paths import it).
"""

from __future__ import annotations

import errno as _errno
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final, Literal


class SpawnErrorKind(StrEnum):
    """Why the shell never ran or never finished (only when the outcome is `spawn_error`).

    Public and stable: the values are stored in checkpoints and shown to models and people.
    What each one means is its entry in `KINDS`.
    """

    NOT_FOUND = "not_found"
    PERMISSION_DENIED = "permission_denied"
    TIMEOUT = "timeout"
    SIGNAL = "signal"
    RESOURCE = "resource"
    INTERRUPTED = "interrupted"
    SANDBOX = "sandbox"
    DENIED = "denied"
    NOT_RUN = "not_run"


class Nature(StrEnum):
    """What a kind says about the world, which decides whether the graph may retry or escalate it."""

    #: The environment kept the command from running or finishing: a person, a retry or a
    #: change of plan may help, the same command unchanged usually does not.
    ENVIRONMENT_FAULT = "environment fault"
    #: Someone said no (an approval rule or a person), or moved on before the command started
    #: (new input instead of an answer): nothing is wrong with the environment.
    REFUSAL = "refusal"


#: Where the graph sends a batch with this kind (`route`'s hops; docs/graph.md has every rule).
Route = Literal["retry", "escalate", "agent"]


@dataclass(frozen=True)
class KindEntry:
    """One spawn error kind, as the rest of bashgraph reads it."""

    meaning: str
    """What happened, in one line."""

    produced_by: str
    """Which part of bashgraph reports it."""

    words: str
    """How a person reads it (the CLI's badge and questions)."""

    transient: bool = False
    """Running the same command again may succeed: the graph retries it on its own, with backoff."""

    nature: Nature = Nature.ENVIRONMENT_FAULT

    errnos: frozenset[int] = frozenset()
    """The errnos of a failed spawn (or of the working directory) that the runner files here."""

    @property
    def route(self) -> Route:
        """Where `route` sends a batch whose only failure is this kind, with retries left."""
        if self.nature is Nature.REFUSAL:
            return "agent"  # it never ran: the model must choose another way
        return "retry" if self.transient else "escalate"


KINDS: Final = MappingProxyType({
    SpawnErrorKind.NOT_FOUND: KindEntry(
        meaning="the shell or the working directory does not exist",
        produced_by="the runner (spawn, entering the working directory), the sandbox",
        words="not found",
        errnos=frozenset({_errno.ENOENT, _errno.ENOTDIR, _errno.ELOOP, _errno.ENAMETOOLONG}),
    ),
    SpawnErrorKind.PERMISSION_DENIED: KindEntry(
        meaning="the shell is not executable, or the working directory not accessible",
        produced_by="the runner (spawn, entering the working directory), the sandbox",
        words="permission denied",
        errnos=frozenset({_errno.EACCES, _errno.EPERM, _errno.ENOEXEC}),
    ),
    SpawnErrorKind.TIMEOUT: KindEntry(
        meaning="the command ran past its time limit; its whole process group was killed",
        produced_by="the runner (supervision)",
        words="timeout",
    ),
    SpawnErrorKind.SIGNAL: KindEntry(
        meaning="the shell was killed by a signal bashgraph did not send",
        produced_by="the runner (classification)",
        words="killed by signal",
        transient=True,
    ),
    SpawnErrorKind.RESOURCE: KindEntry(
        meaning="the system was short of something (processes, memory, descriptors) to start the shell",
        produced_by="the runner (spawn; also an errno no kind lists), the sandbox wrapper's spawn",
        words="no resources",
        transient=True,
        errnos=frozenset({_errno.EAGAIN, _errno.ENOMEM, _errno.EMFILE, _errno.ENFILE, _errno.ETXTBSY}),
    ),
    SpawnErrorKind.INTERRUPTED: KindEntry(
        meaning="the command or job started, but the run stopped before it finished; it is never run twice",
        produced_by="the graph, on resume (the command journal, background jobs)",
        words="interrupted",
    ),
    SpawnErrorKind.SANDBOX: KindEntry(
        meaning="bubblewrap could not be started or could not set the sandbox up",
        produced_by="the sandbox",
        words="sandbox failed",
    ),
    SpawnErrorKind.DENIED: KindEntry(
        meaning="an approval rule or a person refused the command; it never ran",
        produced_by="`approve` (the approval rules, or a person's answer)",
        words="denied",
        nature=Nature.REFUSAL,
    ),
    SpawnErrorKind.NOT_RUN: KindEntry(
        meaning="the run moved on before the command started (new input came after a cancel, a crash "
                "or instead of an approval); it never ran",
        produced_by="the graph, before the model is called again (the command journal shows no start)",
        words="not run",
        nature=Nature.REFUSAL,
    ),
})

#: The kind of a failed spawn whose errno no kind lists: the system refused for a reason we do
#: not know, so it is worth one more try.
UNLISTED_ERRNO_KIND: Final = SpawnErrorKind.RESOURCE

#: Kinds worth running again unchanged: the fault may be gone a moment later.
TRANSIENT_KINDS: Final = frozenset(kind for kind, entry in KINDS.items() if entry.transient)


def kind_of_errno(code: int) -> SpawnErrorKind | None:
    """The kind whose entry lists `code`, or None when none does."""
    return next((kind for kind, entry in KINDS.items() if code in entry.errnos), None)


def is_refusal(kind: SpawnErrorKind | None) -> bool:
    """Someone said no: the command never ran, and nothing is wrong with the environment."""
    return kind is not None and KINDS[kind].nature is Nature.REFUSAL
