"""Ctrl-C for `run` and `resume`: the first cancels the run's task, a second exits at once.

Cancelling the task cancels the graph's running node: `arun_command` kills the command's
process tree, the thread keeps its last checkpoint, so it can be resumed. The exit happens
after that clean-up; a second Ctrl-C does not wait for it (`os._exit(130)`).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

INTERRUPTED_EXIT = 130
T = TypeVar("T")


class SigintGuard:
    """Runs one coroutine on a fresh event loop with the two-step Ctrl-C behaviour."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._pressed = 0

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` to its end. On Ctrl-C it is cancelled: it decides what to return."""
        loop = self._loop = asyncio.new_event_loop()
        try:
            task: asyncio.Task[T] = loop.create_task(work)
            self._task = task
            loop.add_signal_handler(signal.SIGINT, self._on_sigint)
            return loop.run_until_complete(task)
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def _on_sigint(self) -> None:
        self._pressed += 1
        if self._pressed > 1:
            os.write(2, b"\nbashgraph: interrupted again; exiting now\n")
            os._exit(INTERRUPTED_EXIT)
        os.write(2, b"\nbashgraph: stopping the run (Ctrl-C again to exit at once)\n")
        if self._task is not None:
            self._task.cancel()

    @contextmanager
    def default(self) -> Iterator[None]:
        """Inside the block Ctrl-C raises KeyboardInterrupt, for a blocking prompt.

        With the loop's handler a blocking `input()` would not see Ctrl-C at all: the loop
        only notices the signal once it runs again.
        """
        loop = self._loop
        if loop is not None:
            loop.remove_signal_handler(signal.SIGINT)
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
            if loop is not None:
                loop.add_signal_handler(signal.SIGINT, self._on_sigint)
