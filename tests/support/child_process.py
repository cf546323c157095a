"""Run code that may crash the interpreter (native code such as llama.cpp) in a child process.

A segfault inside the pytest process ends the whole test run with no report. `ChildProcess`
keeps one object alive in a spawned child and calls its methods over a pipe: a result or an
exception comes back as if the call were local, and a child that dies (a signal, `os._exit`)
raises `ChildDied` in the caller, naming the signal and quoting the tail of the child's stderr.
The next call starts a fresh child, so one crash fails one test.

    with ChildProcess(functools.partial(LocalChatModel, model_path=path), name="model") as child:
        result = child.call("_generate", messages)
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing
import os
import pickle
import signal
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

STDERR_TAIL_CHARS = 3000


class ChildDied(AssertionError):
    """The child process ended while a call was running (a crash, a signal, an exit)."""


def describe_exit(code: int | None) -> str:
    """`exitcode` of a multiprocessing child in words: "SIGSEGV (signal 11)" or "exit status 3"."""
    if code is None:
        return "no exit status (still running)"
    if code < 0:
        try:
            return f"{signal.Signals(-code).name} (signal {-code})"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


class ChildProcess:
    """One object built by `factory` in a spawned child; `call` runs its methods there.

    Calls take turns (one lock). `timeout` bounds one call: past it, the child is killed and the
    call raises ChildDied. `factory` and every argument and result must be picklable.
    """

    def __init__(self, factory: Callable[[], Any], *, name: str = "child process",
                 timeout: float = 300.0) -> None:
        self.factory = factory
        self.name = name
        self.timeout = timeout
        self._lock = threading.Lock()
        self._process: Any = None
        self._conn: Connection | None = None
        self._stderr: Path | None = None

    def __enter__(self) -> ChildProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return None if self._process is None else int(self._process.pid)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """`getattr(obj, method)(*args, **kwargs)` in the child; its exception is re-raised here."""
        with self._lock:
            conn = self._start()
            conn.send((method, args, kwargs))
            status, value = self._receive(conn, method)
        if status == "ok":
            return value
        raise value

    def close(self) -> None:
        """Ask the child to exit, kill it if it does not, remove its stderr file (idempotent)."""
        with self._lock:
            self._stop(polite=True)

    # -- internals ----------------------------------------------------------------------------
    def _start(self) -> Connection:
        if self._process is not None and self._conn is not None and self._process.is_alive():
            return self._conn
        self._stop(polite=False)
        context = multiprocessing.get_context("spawn")  # no fork: the parent runs threads
        ours, theirs = context.Pipe()
        fd, path = tempfile.mkstemp(prefix="bashgraph-child-", suffix=".stderr")
        os.close(fd)
        self._stderr = Path(path)
        self._process = context.Process(target=_serve, args=(theirs, self.factory, path),
                                        name=self.name, daemon=True)
        self._process.start()
        theirs.close()
        self._conn = ours
        return ours

    def _receive(self, conn: Connection, method: str) -> tuple[str, Any]:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if conn.poll(0.1):
                try:
                    reply: tuple[str, Any] = conn.recv()
                except (EOFError, OSError):
                    break
                return reply
            if not self._process.is_alive():
                break
        else:
            self._process.kill()
            raise ChildDied(self._death_report(method, f"did not answer within {self.timeout:g} s"
                                                       " and was killed"))
        raise ChildDied(self._death_report(method))

    def _death_report(self, method: str, why: str | None = None) -> str:
        self._process.join(5)
        how = why or f"died of {describe_exit(self._process.exitcode)}"
        tail = self._stderr_tail() or "(empty)"
        report = (f"{self.name} (pid {self._process.pid}) {how} during {method}(); "
                  f"the tail of its stderr:\n{tail}")
        self._stop(polite=False)
        return report

    def _stderr_tail(self) -> str:
        if self._stderr is None or not self._stderr.exists():
            return ""
        return self._stderr.read_text(errors="replace")[-STDERR_TAIL_CHARS:].strip()

    def _stop(self, *, polite: bool) -> None:
        process, conn, stderr = self._process, self._conn, self._stderr
        self._process = self._conn = self._stderr = None
        if conn is not None:
            if polite and process is not None and process.is_alive():
                with contextlib.suppress(OSError):
                    conn.send(None)
            conn.close()
        if process is not None:
            process.join(10 if polite else 0.1)
            if process.is_alive():
                process.kill()
                process.join(5)
        if stderr is not None:
            stderr.unlink(missing_ok=True)


def _serve(conn: Connection, factory: Callable[[], Any], stderr_path: str) -> None:
    """The child's loop: build the object on the first call, then answer calls until None."""
    fd = os.open(stderr_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 2)  # native code writes to fd 2 directly; the parent quotes this file on a crash
    os.close(fd)
    faulthandler.enable()  # a fatal signal writes the Python stack to that file first
    target: Any = None
    while (request := conn.recv()) is not None:
        method, args, kwargs = request
        try:
            target = factory() if target is None else target
            conn.send(("ok", getattr(target, method)(*args, **kwargs)))
        except Exception as exc:
            conn.send(("error", _transportable(exc)))


def _transportable(exc: Exception) -> Exception:
    """`exc` with the child's traceback as a note, or a RuntimeError saying it if not picklable."""
    where = "".join(traceback.format_exception(exc))
    try:
        exc.add_note(f"raised in the child process (pid {os.getpid()}):\n{where}")
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"unpicklable {type(exc).__name__} in the child process:\n{where}")
    return exc
