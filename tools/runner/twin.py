"""A sync function and its async twin, written once: one step generator, driven two ways.

The shared body is a generator. Where the two forms differ — a call that blocks in the sync
form and is awaited, or handed to a thread, in the async one — it yields a `Step` holding both
forms of that call, and gets the call's outcome back at the `yield`: its value, or its exception
raised there (so the body's `try`/`except`/`finally` see it as they would see a direct call).
`run` drives a body with each step's sync form; `arun` awaits each step's async form. Everything
else — the checks, the decisions, the bookkeeping — is written once, in the body.

`Supervisor` (tools/runner/supervisor.py) is the same idea for a running command: one state
machine, stepped by a `poll(2)` loop and by the event loop (tools/runner/drive.py).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

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
    from bashgraph.tools.runner.drive import in_thread

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
