"""Stopping a background job's whole tree, escaped processes included, the way timeouts do.

`stop_tree` is for a job this process started: its shell leads a session and process group, and
everything it starts carries the job's marker (`BASHGRAPH_RUN_ID`), so `reaper.Reaper` finds the
group, the session and whatever left both (SIGTERM and SIGCONT, `grace` seconds, SIGKILL).

`sweep_marker` is for a job whose worker died (a crash, `kill -9`): its shell's pid may have been
reused since, so only the marker is trusted — every live process whose environment holds it is
signalled the same way. What neither can find is described in docs/execution.md (a process that
left the session and dropped the marker); with the sandbox, bubblewrap's `--die-with-parent`
ends a job's PID namespace when the worker's thread that started it dies.
"""

from __future__ import annotations

import os
import signal
import time

from bashgraph.tools.runner.reaper import Reaper, open_pidfd

#: After SIGKILL, how long to wait for the processes to be gone.
KILL_WAIT_S = 0.5
_POLL_S = 0.02


def stop_tree(leader: int, marker: str, grace: float) -> int:
    """Stop the job led by `leader` (our child); the number of processes signalled."""
    reaper = Reaper(leader, marker)
    try:
        return _terminate(reaper, grace)
    finally:
        reaper.close()


def sweep_marker(marker: str, grace: float) -> int:
    """Stop every process carrying `marker`; the number found. Never signals anything else."""
    found = _marked(marker.encode())
    if not found:
        return 0
    try:
        _send_all(found, signal.SIGTERM, signal.SIGCONT)
        _wait_gone(found, grace)
        _send_all(found, signal.SIGKILL)
        _wait_gone(found, KILL_WAIT_S)
        return len(found)
    finally:
        for pidfd in found.values():
            os.close(pidfd)


def _terminate(reaper: Reaper, grace: float) -> int:
    reaper.signal_all(signal.SIGTERM, signal.SIGCONT)
    count = reaper.found
    until = time.monotonic() + grace
    while not reaper.settled(signal.SIGTERM, signal.SIGCONT):
        if time.monotonic() >= until:
            reaper.signal_all(signal.SIGKILL)
            until = time.monotonic() + KILL_WAIT_S
            while not reaper.settled(signal.SIGKILL) and time.monotonic() < until:
                time.sleep(_POLL_S)
            break
        time.sleep(_POLL_S)
    return max(count, reaper.found)


def _marked(token: bytes) -> dict[int, int]:
    """pid -> pidfd of every live process whose environment holds `token` (not this one)."""
    found: dict[int, int] = {}
    me = os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit() or int(name) == me or not _carries(int(name), token):
            continue
        pidfd = open_pidfd(int(name))
        if pidfd < 0:
            continue  # without a pidfd a reused pid could be hit: leave it
        if _carries(int(name), token):  # still the same process after opening its pidfd
            found[int(name)] = pidfd
        else:
            os.close(pidfd)
    return found


def _carries(pid: int, token: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return token in environ.read()
    except OSError:
        return False


def _send_all(found: dict[int, int], *signals: int) -> None:
    for pidfd in found.values():
        for sig in signals:
            try:
                signal.pidfd_send_signal(pidfd, sig)
            except OSError:
                break


def _wait_gone(found: dict[int, int], seconds: float) -> None:
    until = time.monotonic() + seconds
    while any(_alive(pid) for pid in found) and time.monotonic() < until:
        time.sleep(_POLL_S)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except OSError:
        return False
    return text[text.rfind(b")") + 2 : text.rfind(b")") + 3] not in (b"Z", b"X")
