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
import select
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
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


#: How long the clean-up a stopped run left behind may take before it is cancelled.
LEFT_BEHIND_GRACE = 5.0


def _finish_left_behind(loop: asyncio.AbstractEventLoop) -> None:
    """Let the tasks a stopped run left behind end before the loop closes.

    LangChain shields a run's error callbacks from cancellation, so a run ended by an error
    (stdout closed) or a signal can leave them pending; a closed loop would destroy them with
    "Task was destroyed but it is pending!" on stderr. They get a grace period, then a cancel.
    """
    pending = asyncio.all_tasks(loop)
    if not pending:
        return
    _, late = loop.run_until_complete(asyncio.wait(pending, timeout=LEFT_BEHIND_GRACE))
    for task in late:
        task.cancel()
    if late:
        loop.run_until_complete(asyncio.gather(*late, return_exceptions=True))


class SigintGuard:
    """Runs one coroutine on a fresh event loop with the two-step stop behaviour."""

    def __init__(self, on_signal: Callable[[], None] | None = None) -> None:
        self._on_first = on_signal
        """Called at the first stopping signal, before its message (a live area must stop
        first, or it is left frozen on the screen above the message)."""
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
            _finish_left_behind(loop)
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
        if self._on_first is not None:
            with contextlib.suppress(Exception):  # the stop goes on whatever the screen does
                self._on_first()
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


class SignalAwareStdin:
    """A person's answer read from stdin, in a way a stopping signal always interrupts.

    A blocking `input()` is woken only if the kernel hands the signal to the main thread. Other
    threads are alive at a prompt (the database's, the event loop's executor), and a signal that
    lands on one of them leaves `input()` waiting for a line: Ctrl-C would seem to do nothing.
    Here the read waits on stdin and on a wakeup pipe that Python's signal handling writes to
    from whichever thread received the signal; the main thread then runs the handler, which
    raises `KeyboardInterrupt` inside `SigintGuard.default`. It is a `stream` for rich's prompts.
    """

    def __init__(self) -> None:
        self._pending = bytearray()  # read past the line given out (a pipe may bring several)

    def readline(self) -> str:
        """The next line without its newline (as `input()` gives it); EOFError at the end.

        Only the main thread receives Python's signal handlers (and may set the wakeup pipe);
        anywhere else this is `input()`.
        """
        if threading.current_thread() is not threading.main_thread():
            return input()
        wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        previous = signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
        try:
            line = self._next_line(sys.stdin.fileno(), wake_read)
        finally:
            signal.set_wakeup_fd(previous)
            os.close(wake_read)
            os.close(wake_write)
        return line.decode(sys.stdin.encoding or "utf-8", errors="replace")

    def _next_line(self, fd: int, wake: int) -> bytes:
        poller = select.poll()  # not select(): it fails on descriptors past 1023
        poller.register(fd, select.POLLIN)
        poller.register(wake, select.POLLIN)
        while b"\n" not in self._pending:
            ready = {ready_fd for ready_fd, _ in poller.poll()}
            if wake in ready:
                # A signal: its handler runs at the next bytecode boundary (and raises), not later.
                os.read(wake, 64)
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                return self._last_line()
            self._pending += chunk
        line, _, rest = bytes(self._pending).partition(b"\n")
        self._pending = bytearray(rest)
        return line.removesuffix(b"\r")

    def _last_line(self) -> bytes:
        if not self._pending:
            raise EOFError
        line, self._pending = bytes(self._pending), bytearray()
        return line


def _say(message: bytes) -> None:
    # After SIGHUP the terminal may be gone: writing to it fails, which must not stop the stop.
    with contextlib.suppress(OSError):
        os.write(2, message)
