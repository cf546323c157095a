"""One step generator, driven two ways (tools/runner/twin.py): each driver makes each step in its own
form, sends back the value, raises the exception at the `yield`, and returns the body's result."""

from __future__ import annotations

import asyncio
import threading

import pytest

from bashgraph.tools.runner import twin


async def _tripled(value: int) -> int:
    return value * 3


def _body(value: int, log: list[str]) -> twin.Steps[tuple[int, str]]:
    try:
        doubled = yield twin.call(lambda v: v * 2, _tripled, value)
        thread = yield twin.blocking(lambda: threading.current_thread().name)
        yield twin.blocking(lambda: 1 / 0)
    except ZeroDivisionError:
        log.append("caught at the yield")
        return doubled, thread
    finally:
        log.append("finally")
    raise AssertionError("not reached")


def test_run_makes_each_step_inline() -> None:
    log: list[str] = []
    assert twin.run(_body(5, log)) == (10, threading.current_thread().name)
    assert log == ["caught at the yield", "finally"]


def test_arun_awaits_each_step_and_blocks_in_a_thread() -> None:
    log: list[str] = []
    assert asyncio.run(twin.arun(_body(5, log))) == (15, "bashgraph-run")
    assert log == ["caught at the yield", "finally"]


def _missing() -> None:
    raise KeyError("missing")


def _uncaught() -> twin.Steps[None]:
    yield twin.blocking(_missing)


def test_an_exception_the_body_does_not_catch_reaches_the_caller() -> None:
    with pytest.raises(KeyError, match="missing"):
        twin.run(_uncaught())
    with pytest.raises(KeyError, match="missing"):
        asyncio.run(twin.arun(_uncaught()))


def test_a_body_without_steps_returns_at_once() -> None:
    def plain() -> twin.Steps[str]:
        return "done"
        yield  # a generator all the same

    assert twin.run(plain()) == "done"
    assert asyncio.run(twin.arun(plain())) == "done"


class _Sync:
    def value(self, n: int) -> int:
        return n + 1


class _Async:
    async def value(self, n: int) -> int:
        return n + 2


def _same_body(obj: _Sync | _Async) -> twin.Steps[int]:
    value: int = yield twin.same(obj.value, 1)
    return value


def test_same_calls_the_method_and_the_async_form_awaits_it() -> None:
    assert twin.run(_same_body(_Sync())) == 2
    assert asyncio.run(twin.arun(_same_body(_Async()))) == 3
