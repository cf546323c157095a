"""One body driven two ways, sync and async: a function and its twin, and a running command.

A function and its async twin are one step generator.  Where the two forms differ — a call that blocks in the sync
form and is awaited, or handed to a thread, in the async one — it yields a `Step` holding both
forms of that call, and gets the call's outcome back at the `yield`: its value, or its exception
raised there (so the body's `try`/`except`/`finally` see it as they would see a direct call).
`run` drives a body with each step's sync form; `arun` awaits each step's async form. Everything
else — the checks, the decisions, the bookkeeping — is written once, in the body.

A running command is one state machine (`Supervisor`, tools/runner/supervisor.py), stepped by
two loops: `poll_loop` (`poll(2)`) for `run_command` and a handed-over async run; and
`LoopDriver`: the run's descriptors sit in a selector of their own (epoll on Linux), and only
that one is registered with the event loop — one `add_reader` per command, not one per
descriptor. It steps the supervisor when a descriptor is ready or a deadline passes, and stops
as soon as the supervisor says the next step may block (`Supervisor.needs_thread`): a spill file
to write, a process tree to stop. `finish_in_thread` then runs the rest of the run in a thread
of its own (one per handed-over run, so a queue of them can never delay a timeout); live output
produced there goes back to the loop's thread (`live.OutputRelay`).

Cancelled while a thread drives the run, a pipe wakes its `poll` and it kills the process tree
(`Supervisor.abort`) before the cancellation propagates; cancelled on the loop, the kill runs in
a thread too (`abort_in_thread`): it scans /proc and waits for the processes to go.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import select
import selectors
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

from bashgraph.tools.results import CommandResult
from bashgraph.tools.runner.live import OutputRelay
from bashgraph.tools.runner.supervisor import Supervisor

_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass(frozen=True, slots=True)
class Step(Generic[_T]):
    """One call, in the form each driver makes it."""

    sync: Callable[[], _T]
    async_: Callable[[], Awaitable[_T]]


#: A shared body: yields `Step`s, is sent each one's value, returns the twins' result.
Steps: TypeAlias = Generator[Step[Any], Any, _R]


def call(sync: Callable[..., _T], async_: Callable[..., Awaitable[_T]], *args: Any, **kwargs: Any) -> Step[_T]:
    """`sync(*args, **kwargs)` in the sync form, `await async_(*args, **kwargs)` in the async one."""
    return Step(functools.partial(sync, *args, **kwargs), functools.partial(async_, *args, **kwargs))


def same(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Step[Any]:
    """A call both forms make alike, on an object of their own kind: a sync connection's method
    gives its value, an async connection's method gives an awaitable, which the async form awaits."""
    bound = functools.partial(method, *args, **kwargs)
    return Step(bound, bound)


def blocking(func: Callable[..., _T], *args: Any, **kwargs: Any) -> Step[_T]:
    """A call that may block: made where it stands in the sync form, in a thread of its own in
    the async form (the event loop's thread never waits for it)."""
    bound = functools.partial(func, *args, **kwargs)
    return Step(bound, functools.partial(_in_a_thread, bound))


async def _in_a_thread(func: Callable[[], _T]) -> _T:
    # Imported here: the store's modules use this one, and need the runner only for a thread.

    return await in_thread(asyncio.get_running_loop(), func)


def run(steps: Steps[_R]) -> _R:
    """Drive `steps` with each step's sync form; its result."""
    body = _Body(steps)
    for step in body:
        body.settle(step.sync)
    return body.result


async def arun(steps: Steps[_R]) -> _R:
    """Drive `steps` awaiting each step's async form; its result."""
    body = _Body(steps)
    for step in body:
        await body.asettle(step.async_)
    return body.result


class _Body(Generic[_R]):
    """A body being driven: its steps in turn, each sent the outcome of the one before."""

    def __init__(self, steps: Steps[_R]) -> None:
        self._steps = steps
        self._value: Any = None
        self._error: BaseException | None = None
        self.result: _R

    def __iter__(self) -> Iterator[Step[Any]]:
        while True:
            try:
                step = self._resume()
            except StopIteration as done:
                self.result = done.value
                return
            yield step

    def _resume(self) -> Step[Any]:
        """The body's next step, after handing it the last one's outcome."""
        value, error = self._value, self._error
        self._value = self._error = None
        if error is None:
            return self._steps.send(value)
        try:
            return self._steps.throw(error)
        finally:
            del error  # no reference cycle through the traceback

    def settle(self, make: Callable[[], Any]) -> None:
        try:
            self._value = make()
        except BaseException as exc:  # raised in the body, at its `yield`
            self._error = exc

    async def asettle(self, make: Callable[[], Awaitable[Any]]) -> None:
        try:
            self._value = await make()
        except BaseException as exc:
            self._error = exc


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
