"""How freely an event loop ran while something else was awaited on it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

_T = TypeVar("_T")


async def ticking(work: Awaitable[_T], every: float = 0.01) -> tuple[_T, int]:
    """`work`'s result, and how many times a task that wakes every `every` s ran meanwhile (a
    loop blocked by `work` lets it run hardly at all)."""
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(every)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        return await work, ticks
    finally:
        ticker.cancel()
