"""The loops that drive a `Supervisor`, and the hand-over from the event loop to a thread.

`poll_loop` is the sync loop (`poll(2)`), used by `run_command` and by a handed-over async run.

`LoopDriver` is the async loop: the run's descriptors sit in a selector of their own (epoll on
Linux), and only that one is registered with the event loop — one `add_reader` per command, not
one per descriptor. It steps the supervisor when a descriptor is ready or a deadline passes, and
stops as soon as the supervisor says the next step may block (`Supervisor.needs_thread`): a
spill file to write, a process tree to stop. `finish_in_thread` then runs the rest of the run —
`poll_loop` and `result()` — in a thread of its own (one per handed-over run, so a queue of them can
never delay a timeout), while the coroutine waits for it without blocking the loop. Live output
produced there is brought back to the loop's thread, in the context variables of the coroutine
that started the run (`OutputRelay`): a LangGraph node's stream writer reads its run's config
from them.

Cancelling the coroutine while the thread drives the run sets a flag and wakes the thread's
`poll` through a pipe; the thread kills the process tree (`Supervisor.abort`), and the
cancellation propagates once it has. Cancelled while still on the loop, the kill runs in a
thread too (`abort_in_thread`): it scans /proc and waits for the processes to go.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import math
import os
import select
import selectors
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from bashgraph.tools.results import CommandResult
from bashgraph.tools.runner.live import OutputCallback
from bashgraph.tools.runner.supervisor import Supervisor

_T = TypeVar("_T")


def poll_loop(
    sup: Supervisor, poller: select.poll, stop: threading.Event | None = None, wake_fd: int = -1
) -> None:
    """Run `sup` until it is done with `poll(2)` on its descriptors (and on `wake_fd`, which
    is made readable to end the loop early once `stop` is set)."""
    while not sup.done:
        wait = sup.wait_time(time.monotonic())
        for fd, _ in poller.poll(None if wait is None else math.ceil(wait * 1000)):
            if fd != wake_fd:
                sup.on_ready(fd)
        if stop is not None and stop.is_set():
            return
        sup.step(time.monotonic())
        if pause := sup.take_pause():
            time.sleep(pause)


class ReadySet:
    """The run's descriptors in an epoll instance of its own, registered with the event loop as
    one descriptor. Raw `select.epoll` where there is one: `selectors` builds a key object per
    registration and a list of them per check, a measurable share of a short command's cost.
    """

    def __init__(self) -> None:
        """Raises OSError when no instance can be made (out of descriptors)."""
        self._epoll: select.epoll | None = None
        self._selector: selectors.DefaultSelector | None = None
        if hasattr(select, "epoll"):
            self._epoll = select.epoll()
        else:
            self._selector = selectors.DefaultSelector()

    def fileno(self) -> int:
        return self._epoll.fileno() if self._epoll is not None else self._require().fileno()

    def register(self, fd: int) -> None:
        if self._epoll is not None:
            self._epoll.register(fd, select.EPOLLIN)
        else:
            self._require().register(fd, selectors.EVENT_READ)

    def unregister(self, fd: int) -> None:
        """Forget `fd`; a descriptor not (or no longer) registered is ignored."""
        try:
            if self._epoll is not None:
                self._epoll.unregister(fd)
            else:
                self._require().unregister(fd)
        except (KeyError, OSError, ValueError):
            return

    def ready(self) -> list[int]:
        """The descriptors readable right now (does not wait)."""
        if self._epoll is not None:
            return [fd for fd, _ in self._epoll.poll(0)]
        return [key.fd for key, _ in self._require().select(0)]

    def close(self) -> None:
        if self._epoll is not None:
            self._epoll.close()
        elif self._selector is not None:
            self._selector.close()

    def _require(self) -> selectors.DefaultSelector:
        assert self._selector is not None
        return self._selector


class OutputRelay:
    """Calls `callback` directly, or — once the run moved to a thread — on the loop's thread.

    Made by the coroutine that runs the command: it keeps a copy of that coroutine's context
    variables, and a call from the thread runs in it. Without them the callback would run in
    the thread's empty context (`call_soon_threadsafe` takes the caller's), and a callback that
    needs its run's context — LangGraph's stream writer asks for the run's config — would fail.
    """

    def __init__(self, callback: OutputCallback) -> None:
        self.callback = callback
        self.loop: asyncio.AbstractEventLoop | None = None
        self.context = contextvars.copy_context()

    def __call__(self, stream: str, text: str) -> None:
        if self.loop is None:
            self.callback(stream, text)
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is listening
            self.loop.call_soon_threadsafe(self.callback, stream, text, context=self.context)


class LoopDriver:
    """Steps one supervisor from the event loop until it is done or must move to a thread."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, inner: ReadySet, sup: Supervisor
    ) -> None:
        self.loop = loop
        self.inner = inner
        self.poll_fd = inner.fileno()
        self.sup = sup
        self.wake: asyncio.Future[None] = loop.create_future()
        self.wake_at = math.inf  # when the coroutine wakes up by itself if nothing happens
        self.handing_over = False
        self.watching = False  # the run's selector is registered with the loop

    async def run(self) -> bool:
        """True when the run finished here; False when the rest must run in a thread."""
        sup = self.sup
        self.loop.add_reader(self.poll_fd, self._ready)
        self.watching = True
        try:
            while not sup.done:
                now = time.monotonic()
                if self.handing_over or sup.needs_thread(now):
                    return False
                wait = sup.wait_time(now)
                if wait is None or wait > 0:
                    await self._sleep(now, wait)
                now = time.monotonic()
                if sup.needs_thread(now):
                    return False
                sup.step(now)
            return True
        finally:
            self._stop_watching()

    async def _sleep(self, now: float, wait: float | None) -> None:
        self.wake_at = math.inf if wait is None else now + wait
        timer = None if wait is None else self.loop.call_later(wait, _settle, self.wake)
        try:
            await self.wake
        finally:
            if timer is not None:
                timer.cancel()
            self.wake = self.loop.create_future()

    def _ready(self) -> None:
        """The run's selector is readable: read what is ready; wake the coroutine if needed."""
        sup = self.sup
        phase, changed = sup.phase, False
        for fd in self.inner.ready():
            changed |= sup.on_ready(fd)
        now = time.monotonic()
        if sup.needs_thread(now):
            # Nothing more here: the next read would write a file or stop processes.
            self.handing_over = True
            self._stop_watching()
            _settle(self.wake)
            return
        if changed:
            sup.step(now)
            wait = sup.wait_time(now)
            sooner = wait is not None and now + wait < self.wake_at
            if sup.done or sup.phase is not phase or sooner:
                _settle(self.wake)
        if sup.done:
            self._stop_watching()

    def _stop_watching(self) -> None:
        """Unregister from the loop, once (a second `remove_reader` costs an exception)."""
        if self.watching:
            self.watching = False
            self.loop.remove_reader(self.poll_fd)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def in_thread(loop: asyncio.AbstractEventLoop, func: Callable[[], _T]) -> asyncio.Future[_T]:
    """Run `func` in a new thread (no event loop there); its outcome as a future of `loop`."""
    future: asyncio.Future[_T] = loop.create_future()

    def main() -> None:
        try:
            outcome: tuple[bool, object] = (True, func())
        except BaseException as exc:  # handed to the awaiting coroutine, which re-raises it
            outcome = (False, exc)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(_deliver, future, outcome)

    threading.Thread(target=main, name="bashgraph-run", daemon=True).start()
    return future


def _deliver(future: asyncio.Future[_T], outcome: tuple[bool, object]) -> None:
    if future.done():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)  # type: ignore[arg-type]
    else:
        assert isinstance(value, BaseException)
        future.set_exception(value)


async def to_its_end(work: asyncio.Future[_T]) -> _T:
    """`await work`, which no cancellation cuts short: the waiting goes on through every cancel,
    and once `work` has ended a cancellation is raised (or `work`'s own error).

    `asyncio.shield` alone is not enough for work that must finish (a kill, a release): it keeps
    `work` running, but a second cancel ends the wait at once, and a thread of `in_thread` is a
    daemon that dies with the interpreter, leaving what it was killing alive.
    """
    cancelled = False
    while not work.done():
        try:
            await asyncio.shield(work)
        except asyncio.CancelledError:
            cancelled = True
    result = work.result()
    if cancelled:
        raise asyncio.CancelledError
    return result


async def abort_in_thread(loop: asyncio.AbstractEventLoop, sup: Supervisor) -> None:
    """Kill the run's process tree from a thread; wait for it even if cancelled again."""
    await to_its_end(in_thread(loop, sup.abort))


async def finish_in_thread(
    loop: asyncio.AbstractEventLoop, sup: Supervisor, relay: OutputRelay | None
) -> CommandResult:
    """Drive the rest of the run and build its result in a thread of its own."""
    if relay is not None:
        relay.loop = loop
    stop = threading.Event()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    future = in_thread(loop, functools.partial(_finish, sup, stop, wake_read))
    try:
        result = await asyncio.shield(future)
    except asyncio.CancelledError:
        stop.set()
        # Wakes the thread's poll. Non-blocking; a thread that has already ended closed the
        # read end, and the write fails with EPIPE: nothing is left to wake.
        with contextlib.suppress(OSError):
            os.write(wake_write, b"x")
        # The thread kills the process tree, then returns; a second cancel waits for it too.
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await to_its_end(future)
        if future.exception() is None and (late := future.result()) is not None:
            remove_spill_files(late)  # the run ended before the cancel reached it: dropped
        raise
    finally:
        os.close(wake_write)
    assert result is not None  # None only when stopped, and only a cancellation stops it
    return result


def remove_spill_files(result: CommandResult) -> None:
    """Delete the spill files of a result nobody will read, as a cancelled run leaves none."""
    for path in (result.stdout_file, result.stderr_file):
        if path:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _finish(sup: Supervisor, stop: threading.Event, wake_read: int) -> CommandResult | None:
    """The thread's part: drive `sup` to the end with poll(2), then build the result (None
    when stopped: the process tree is killed instead)."""
    poller = select.poll()
    sup.forget = functools.partial(_unregister, poller)
    try:
        for fd in sup.watched():
            poller.register(fd, select.POLLIN)
        poller.register(wake_read, select.POLLIN)
        poll_loop(sup, poller, stop, wake_read)
        return None if stop.is_set() else sup.result()
    finally:
        sup.abort()
        os.close(wake_read)


def _unregister(poller: select.poll, fd: int) -> None:
    with contextlib.suppress(KeyError, OSError):
        poller.unregister(fd)
