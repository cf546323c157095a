"""Helpers for tests that start real processes: is a pid still running, and wait until it is not."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any


def running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (an exited process nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state not in (b"Z", b"X")


def gone_within(pid: int, seconds: float) -> bool:
    """True once `pid` stopped running, False if it still runs after `seconds`."""
    until = time.monotonic() + seconds
    while running(pid):
        if time.monotonic() > until:
            return False
        time.sleep(0.01)
    return True


def read_pids(path: Path) -> list[int]:
    """Pids written one per line to `path` by a command under test (at least one)."""
    pids = [int(line) for line in path.read_text().split()]
    assert pids, f"the command wrote no pid to {path}"
    return pids


def kill_quietly(*pids: int) -> None:
    """Clean-up for processes a test deliberately left running."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def marked_processes(marker: str) -> list[int]:
    """Running processes whose environment contains `marker`."""
    return [pid for pid in _proc_pids() if marker.encode() in _read(pid, "environ") and running(pid)]


def group_running(pgid: int) -> bool:
    """True while a process of group `pgid` still runs. Zombies do not count: they are dead,
    and reaping them is their new parent's job (this machine's init takes ~2 s to do it)."""
    for pid in _proc_pids():
        stat = _read(pid, "stat")
        fields = stat[stat.rfind(b")") + 2 :].split()  # state, ppid, pgrp, ...
        if len(fields) > 2 and int(fields[2]) == pgid and running(pid):
            return True
    return False


def _proc_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _read(pid: int, name: str) -> bytes:
    """/proc/<pid>/<name>, or b"" when the process is gone (or not ours to read)."""
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return b""


async def cancel_once_started(pids: Path, command: str, **options: Any) -> bool:
    """Run `command` (which must write its pids to `pids`) with `arun_command`, cancel it as soon
    as the pids are there, and say whether the cancellation propagated out of `await`."""
    from bashgraph.tools import arun_command

    task = asyncio.create_task(arun_command(command, **options))
    while not pids.exists() or not pids.read_text().strip():
        await asyncio.sleep(0.01)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return True
    return False
