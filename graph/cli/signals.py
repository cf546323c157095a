"""Ctrl-C, SIGTERM and SIGHUP for `run` and `resume`: the first cancels the run's task, a
second exits at once.

SIGTERM is what `timeout`, systemd, docker and CI runners send; SIGHUP comes when the terminal
goes away. Both are handled like Ctrl-C: cancelling the task cancels the graph's running node,
`arun_command` kills the command's process tree, the thread keeps its last checkpoint, so it can
be resumed. The exit happens after that clean-up, with status 128 + the signal (130, 143, 129);
a second signal does not wait for it (`os._exit`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

INTERRUPTED_EXIT = 130
T = TypeVar("T")

#: The signals that stop a run, each with the stop status it ends with and how it is named.
STOPPING_SIGNALS: dict[signal.Signals, tuple[str, str]] = {
    signal.SIGINT: ("interrupted", "Ctrl-C"),
    signal.SIGTERM: ("terminated", "SIGTERM"),
    signal.SIGHUP: ("hangup", "SIGHUP"),
}


class SigintGuard:
    """Runs one coroutine on a fresh event loop with the two-step stop behaviour."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._pressed = 0
        self.received: signal.Signals = signal.SIGINT
        """The first stopping signal received (SIGINT until one is)."""

    @property
    def status(self) -> str:
        """The stop status of the signal received: interrupted, terminated or hangup."""
        return STOPPING_SIGNALS[self.received][0]

    @property
    def name(self) -> str:
        """How people call that signal: Ctrl-C, SIGTERM, SIGHUP."""
        return STOPPING_SIGNALS[self.received][1]

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` to its end. On a stopping signal it is cancelled: it decides what to return."""
        loop = self._loop = asyncio.new_event_loop()
        try:
            task: asyncio.Task[T] = loop.create_task(work)
            self._task = task
            self._add_handlers(loop)
            return loop.run_until_complete(task)
        finally:
            self._remove_handlers(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def _add_handlers(self, loop: asyncio.AbstractEventLoop) -> None:
        for signum in STOPPING_SIGNALS:
            loop.add_signal_handler(signum, self._on_signal, signum)

    def _remove_handlers(self, loop: asyncio.AbstractEventLoop) -> None:
        for signum in STOPPING_SIGNALS:
            loop.remove_signal_handler(signum)

    def _on_signal(self, signum: signal.Signals) -> None:
        self._pressed += 1
        if self._pressed > 1:
            _say(b"\nbashgraph: interrupted again; exiting now\n")
            os._exit(128 + self.received)
        self.received = signum
        again = "Ctrl-C" if signum == signal.SIGINT else "the signal"
        _say(f"\nbashgraph: {self.name}: stopping the run ({again} again to exit at once)\n"
             .encode())
        if self._task is not None:
            self._task.cancel()

    @contextmanager
    def default(self) -> Iterator[None]:
        """Inside the block a stopping signal raises KeyboardInterrupt, for a blocking prompt.

        With the loop's handlers a blocking `input()` would not see the signal at all: the
        loop only notices it once it runs again. `received` says which signal it was.
        """
        loop = self._loop
        if loop is not None:
            self._remove_handlers(loop)
        previous = {signum: signal.signal(signum, self._raise) for signum in STOPPING_SIGNALS}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            if loop is not None:
                self._add_handlers(loop)

    def _raise(self, signum: int, frame: Any) -> None:
        self.received = signal.Signals(signum)
        raise KeyboardInterrupt


def _say(message: bytes) -> None:
    # After SIGHUP the terminal may be gone: writing to it fails, which must not stop the stop.
    with contextlib.suppress(OSError):
        os.write(2, message)
