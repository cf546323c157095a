"""One thread, one worker: a lock held for as long as a run or resume of a thread lasts.

SQLite: `flock` on a file in `<database>.locks/`, where `<database>` is the file's resolved path
(symlinks, `..` and relative spellings all lead to the same lock; a hard link is another name
and is not recognised); the kernel drops the lock when the holder dies, even by SIGKILL.
PostgreSQL: a session advisory lock on a dedicated connection; advisory locks belong to one
database of one server, whatever host name or URL reached it, and the server drops the lock
when that connection ends, which a dead process's connection does at once. Either way a second
worker gets `ThreadBusyError` before it executes anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import hashlib
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bashgraph.graph.errors import StoreError, ThreadBusyError
from bashgraph.graph.store.checkpoints import Location, connect_postgres, first_line, locate, postgres_errors
from bashgraph.graph.store.held_locks import holding
from bashgraph.tools.runner import in_thread, to_its_end

if TYPE_CHECKING:
    import psycopg


def _holder() -> str:
    return f"pid {os.getpid()} on host {socket.gethostname()}"


def _busy(thread_id: str, holder: str | None) -> ThreadBusyError:
    who = f" ({holder})" if holder else ""
    return ThreadBusyError(f"thread {thread_id} is busy: another worker is running it{who}")


def lock_key(thread_id: str) -> int:
    """A signed 64-bit key for `pg_advisory_lock`, stable across processes and hosts."""
    digest = hashlib.sha256(b"bashgraph-thread:" + thread_id.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextmanager
def thread_lock(url: str | None, thread_id: str) -> Iterator[None]:
    """Hold `thread_id` of the database `url` for the block, or raise ThreadBusyError."""
    location = locate(url)
    lock = _file_lock if location.kind == "sqlite" else _advisory_lock
    with lock(location, thread_id):
        yield


# -- SQLite: a lock file per thread ---------------------------------------------------------
def lock_path(database: str, thread_id: str) -> Path:
    """The lock file of a thread: named by a hash, so any thread id makes a valid file name.

    Next to the database's resolved path: two spellings of one file share their locks.
    """
    name = hashlib.sha256(thread_id.encode()).hexdigest()[:32]
    return Path(f"{os.path.realpath(database)}.locks") / f"{name}.lock"


@contextmanager
def _file_lock(location: Location, thread_id: str) -> Iterator[None]:
    path = lock_path(location.target, thread_id)
    fd = _acquire_file(path, thread_id)
    try:
        os.write(fd, _holder().encode())
        with holding(thread_id, functools.partial(_file_problem, fd, path)):
            yield
    finally:
        # Unlink while still holding the lock: a waiter that opened this inode sees it gone
        # (`_acquire_file` checks) and starts over on a fresh file.
        path.unlink(missing_ok=True)
        os.close(fd)


def _acquire_file(path: Path, thread_id: str) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"thread lock {path.parent}: cannot create it ({exc.strerror})") from None
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"thread lock {path}: cannot open it ({exc.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
            os.close(fd)
            raise _busy(thread_id, holder or None) from None
        if _still_linked(fd, path):
            os.ftruncate(fd, 0)
            return fd
        os.close(fd)  # the previous holder removed this file as we opened it: try again


def _file_problem(fd: int, path: Path) -> str | None:
    """None while `fd` is still the lock file at `path`: a new holder makes a new file there."""
    return None if _still_linked(fd, path) else f"its lock file {path} was removed"


def _still_linked(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


#: How long a lock with no live holder may take to be released (its backend is exiting).
RELEASE_WAIT_S = 1.0
#: How long releasing a lock may wait for the server's answer. On a network gone silent the
#: answer would never come and the run would wait for the kernel's TCP timeout (about 15
#: minutes) before returning; past this wait the connection is cut instead (see `_unlock`).
UNLOCK_WAIT_S = 5.0

# -- PostgreSQL: a session advisory lock ----------------------------------------------------
_HOLDER_SQL = """
SELECT a.pid, a.application_name, a.client_addr::text AS client_addr
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s
  AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


@contextmanager
def _advisory_lock(location: Location, thread_id: str) -> Iterator[None]:
    key = lock_key(thread_id)
    # The name shows up in pg_stat_activity, so a busy error can say who holds the thread.
    with connect_postgres(location.target, application_name=f"bashgraph {_holder()}") as conn:
        with postgres_errors(location.label):
            if not _try_advisory(conn, key):
                holder = _advisory_holder(conn, key)
                # No backend holds it any more: its holder was ending (a killed worker's backend
                # releases its locks as it exits, a moment after the kill). Take it once it is free.
                if holder is not None or not _take_when_released(conn, key):
                    raise _busy(thread_id, holder)
        try:
            with holding(thread_id, functools.partial(_connection_problem, conn)):
                yield
        finally:
            _unlock(conn, key)


def _connection_problem(conn: psycopg.Connection[Any]) -> str | None:
    """None while the lock's connection, and with it the session that holds the lock, is alive."""
    import psycopg

    try:
        conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"its connection to the server ended ({first_line(exc)})"
    return None


def _try_advisory(conn: psycopg.Connection[Any], key: int) -> bool:
    row = conn.execute("SELECT pg_try_advisory_lock(%s) AS ok", (key,)).fetchone()
    return bool(row and row["ok"])


def _take_when_released(conn: psycopg.Connection[Any], key: int) -> bool:
    """Take a lock whose holder was not found, for up to `RELEASE_WAIT_S`; False if another
    worker shows up holding it, or it is still held then."""
    deadline = time.monotonic() + RELEASE_WAIT_S
    while time.monotonic() < deadline:
        if _try_advisory(conn, key):
            return True
        if _advisory_holder(conn, key) is not None:
            return False
        time.sleep(0.02)
    return False


def _unlock(conn: psycopg.Connection[Any], key: int) -> None:
    """Release the lock before the connection closes. Closing alone releases it only when the
    server has ended the session, which can be after the next worker asked for it.

    A server that does not answer within `UNLOCK_WAIT_S` gets its connection cut: the call
    returns, and the server drops the lock when it sees the session end: at once if the cut
    reaches it; on a silent network, when its TCP keepalive gives up on the client (the
    server's `tcp_keepalives_*` settings; over two hours with Linux's defaults).
    """
    import psycopg  # deferred like every PostgreSQL import: loaded by now, by the connection

    if conn.broken or conn.closed:  # already gone (a lost lock): nothing is held, no socket left
        conn.close()
        return
    cutoff = _Cutoff(conn.fileno())
    timer = threading.Timer(UNLOCK_WAIT_S, cutoff.fire)
    timer.daemon = True
    timer.start()
    try:
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
    except psycopg.Error:
        # The connection is gone or was cut: its session, and the lock with it, end. Closed
        # here, so leaving its block tries no rollback on it, which would replace the error
        # that ended the run (a lost lock's, say) with "the connection is lost".
        conn.close()
        return
    finally:
        cutoff.disarm()
        timer.cancel()


class _Cutoff:
    """Shuts a connection's socket down from a timer thread, unless disarmed first.

    It holds a duplicate of the socket's descriptor, taken before the call: libpq may close
    its own descriptor inside the call (a dropped connection), and that number may be given to
    an unrelated file at once; the duplicate still names this socket until `disarm` closes it.
    A shutdown acts on the connection itself and wakes the call waiting on it.
    """

    def __init__(self, fd: int) -> None:
        self._sock: socket.socket | None = socket.socket(fileno=os.dup(fd))
        self._lock = threading.Lock()

    def fire(self) -> None:
        with self._lock:
            if self._sock is not None:
                with contextlib.suppress(OSError):  # already closed by the other side
                    self._sock.shutdown(socket.SHUT_RDWR)

    def disarm(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close()  # the duplicate only: the connection's own is libpq's
                self._sock = None


def _advisory_holder(conn: psycopg.Connection[Any], key: int) -> str | None:
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    row = conn.execute(_HOLDER_SQL, (unsigned >> 32, unsigned & 0xFFFF_FFFF)).fetchone()
    if row is None:
        return None
    name = str(row["application_name"] or "")
    if name.startswith("bashgraph "):
        return name.removeprefix("bashgraph ")
    return f"server backend pid {row['pid']}, client {row['client_addr'] or 'local'}"


# -- asyncio: a lock taken and released off the event loop ---------------------------------
@asynccontextmanager
async def held_off_loop(hold: AbstractContextManager[Any]) -> AsyncIterator[None]:
    """`hold` (a thread's lock) entered and left in a thread of its own.

    On PostgreSQL taking a lock connects to the server (up to its connect timeout) and may wait
    for an ending holder (`RELEASE_WAIT_S`); releasing it may wait `UNLOCK_WAIT_S`. Off the
    loop, the other runs on it go on meanwhile. A task cancelled while the lock is being taken
    never leaves it held: whatever the taking gets is released as soon as it ends. Cancelled
    while it is being released, the release still completes before the cancellation goes on.
    """
    loop = asyncio.get_running_loop()
    taking = in_thread(loop, hold.__enter__)
    try:
        await asyncio.shield(taking)  # a cancelled wait must not drop what the thread takes
    except BaseException:
        taking.add_done_callback(functools.partial(_release_once_taken, hold))
        raise
    try:
        yield
    finally:
        await to_its_end(in_thread(loop, functools.partial(hold.__exit__, None, None, None)))


def _release_once_taken(hold: AbstractContextManager[Any], taking: asyncio.Future[Any]) -> None:
    if not taking.cancelled() and taking.exception() is None:
        threading.Thread(target=hold.__exit__, args=(None, None, None), daemon=True).start()
