"""A thread store that cannot be read gives one line, not a traceback.

A flipped bit in a SQLite page or a damaged PostgreSQL row surfaces deep inside LangGraph's
saver as whatever the decoder raises (`ValueError: invalid UTF-8 string` from msgpack, a
`KeyError` from a checkpoint missing a field, ...). `guard_saver` wraps a saver's reads, and
`read_errors` any block that only reads (listing threads, a history), so that such an error
becomes a `StoreError` naming the database and what to do:

    cannot read the thread store DB: REASON; WHAT TO DO

Only reads are wrapped: an error raised by a node while a run streams stays that node's error.
"""

from __future__ import annotations

import pickle
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import TYPE_CHECKING, Any

from bashgraph.graph.errors import StoreError
from bashgraph.graph.store.checkpoints import Location, first_line, store_errors

if TYPE_CHECKING:  # a type only: `threads` and `history` use read_errors without LangGraph
    from langgraph.checkpoint.base import BaseCheckpointSaver

#: What decoding damaged stored bytes raises (msgpack and JSON errors are ValueErrors).
DECODE_ERRORS: tuple[type[Exception], ...] = (
    ValueError, TypeError, KeyError, IndexError, AttributeError, EOFError, pickle.PickleError,
)
_READS = ("get_tuple", "list")
_ASYNC_READS = ("aget_tuple",)
_ASYNC_LISTS = ("alist",)


def unreadable(location: Location, exc: BaseException) -> StoreError:
    """The one line for a store whose stored data cannot be decoded."""
    reason = f"{type(exc).__name__}: {first_line(exc)}"
    if location.kind == "sqlite":
        advice = ("the file is damaged: restore it from a backup (or try `sqlite3 FILE "
                  "'.recover'`), or move it away and pass another --db")
    else:
        advice = ("a stored checkpoint is damaged: restore the database from a backup, or "
                  "delete the damaged thread's rows, or pass another --db")
    return StoreError(f"cannot read the thread store {location.label}: {reason}; {advice}")


@contextmanager
def read_errors(location: Location) -> Iterator[None]:
    """For a block that only reads the store: database and decoding errors become one line."""
    try:
        with store_errors(location):
            yield
    except DECODE_ERRORS as exc:
        raise unreadable(location, exc) from None


def guard_saver(saver: BaseCheckpointSaver[Any], location: Location) -> BaseCheckpointSaver[Any]:
    """Wrap the reads of `saver` (on the instance, so LangGraph calls the wrapped ones)."""
    for name in _READS:
        setattr(saver, name, _guard_sync(getattr(saver, name), location))
    for name in _ASYNC_READS:
        setattr(saver, name, _guard_async(getattr(saver, name), location))
    for name in _ASYNC_LISTS:
        setattr(saver, name, _guard_async_iter(getattr(saver, name), location))
    return saver


def _guard_sync(read: Callable[..., Any], location: Location) -> Callable[..., Any]:
    @wraps(read)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        with read_errors(location):
            result = read(*args, **kwargs)
            # `list` returns a generator: decoding happens while it is consumed.
            return _guard_iter(result, location) if isinstance(result, Iterator) else result

    return guarded


def _guard_iter(items: Iterator[Any], location: Location) -> Iterator[Any]:
    with read_errors(location):
        yield from items


def _guard_async(read: Callable[..., Any], location: Location) -> Callable[..., Any]:
    @wraps(read)
    async def guarded(*args: Any, **kwargs: Any) -> Any:
        with read_errors(location):
            return await read(*args, **kwargs)

    return guarded


def _guard_async_iter(read: Callable[..., AsyncIterator[Any]],
                      location: Location) -> Callable[..., AsyncIterator[Any]]:
    @wraps(read)
    async def guarded(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        with read_errors(location):
            async for item in read(*args, **kwargs):
                yield item

    return guarded
