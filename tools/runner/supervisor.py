"""One running command as a state machine that the sync and the async loop both drive.

A loop only waits — for one of `watched()` to become readable, or for `wait_time()` to pass — and
reports back through `on_ready(fd)` and `step(now)`. Reading, the decisions (drain, terminate,
kill) and the result are made here, once. A supervisor holds its inputs whole — the `Plan`, the
`Spawned` shell with its descriptors — and what the pipes produced in one `live.Output`; its
own state is the phase, its deadline, the descriptors still open, and the facts of how the run
ended.

Phases:

* RUNNING — until the shell exits or the timeout passes.
* DRAINING — the shell exited but something it started still holds the pipes (`sleep 30 &`).
  They get `DRAIN_S` to finish writing; then the processes holding the pipes — and only those —
  are terminated as below. Background processes that redirected their output elsewhere
  (daemons, `nohup cmd >log 2>&1 &`) do not hold the pipes: they are never waited for and are
  left running, whether or not something else had to be killed.
* TERMINATING — SIGTERM (then SIGCONT) went to the group and every process found (see
  `reaper`), or after DRAINING to the pipe holders; `grace` seconds for them to exit.
* KILLING — SIGKILL to the group and to every process found; `KILL_WAIT_S` for them to vanish.
* DONE — whatever is still buffered in the pipes has been read; `result()` can be built.

What may block (and what does not): reading the pipes never blocks (they are non-blocking), and
neither does reaping the shell (`WNOHANG`). Writing a spill file, the `/proc` scans that stop
processes, and waiting for killed processes do. `needs_thread(now)` says, before the step that
would start any of them, that the rest of the run should be driven from a thread of its own (the
async runner does so); `result_needs_thread()` says the same of building the result.

Live output (`on_output`): see `live.py`; flushes are due at most every
`live.FLUSH_INTERVAL_S`, so `wait_time` includes the next one and `step` makes it.
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from enum import Enum

from bashgraph.tools.results import CommandResult
from bashgraph.tools.runner.classify import RunFacts, classify, start_dir_error
from bashgraph.tools.runner.launch import CD_FAILED
from bashgraph.tools.runner.live import Output, OutputCallback
from bashgraph.tools.runner.reaper import Reaper, open_pidfd, pipe_names
from bashgraph.tools.runner.spawn import Plan, Spawned
from bashgraph.tools.safety.sandbox import classify_sandbox_exit

DRAIN_S = 0.5
KILL_WAIT_S = 0.25
#: How often killed processes are checked while they are given time to exit.
KILL_POLL_S = 0.01
#: Without a pidfd the shell's exit is noticed by polling this often.
EXIT_POLL_S = 0.02
#: The last read of what the pipes still hold is bounded, in case an unkillable writer remains.
FINAL_DRAIN_S = 0.05


class Phase(Enum):
    RUNNING = "running"
    DRAINING = "draining"
    TERMINATING = "terminating"
    KILLING = "killing"
    DONE = "done"


class Supervisor:
    """Runs one spawned command to its end; see the module docstring for the phases."""

    def __init__(
        self,
        plan: Plan,
        spawned: Spawned,
        *,
        started: float,
        forget: Callable[[int], object],
        on_output: OutputCallback | None = None,
    ) -> None:
        """`forget(fd)`: the loop stops watching `fd` (about to be closed)."""
        self.plan = plan
        self.spawned = spawned
        self.proc = spawned.proc
        self.started = started
        self.forget = forget
        self.output = Output(plan, spawned.pipes, on_output)
        self._open = list(spawned.pipes)  # the pipes not at their end yet
        self.pidfd = open_pidfd(self.proc.pid)
        self.phase = Phase.RUNNING
        self._deadline = started + plan.timeout  # of the current phase
        # How the run ended, as `result` reports it.
        self._timed_out = self._escalated = False
        # After the shell exited, something still held the output: how many such processes
        # were found (and killed), once the rule has run; None while it has not.
        self._leftovers: int | None = None
        self._reaper: Reaper | None = None  # the processes found and signalled, once any were
        self._ended_at = started
        self._delivered = False

    @property
    def done(self) -> bool:
        return self.phase is Phase.DONE

    def watched(self) -> list[int]:
        """The descriptors worth waiting on: open pipes, and the shell's pidfd until it exits."""
        return [*self._open, self.pidfd] if self.pidfd >= 0 else list(self._open)

    def wait_time(self, now: float) -> float | None:
        """Seconds the loop may wait before calling `step` (None: until a descriptor is ready)."""
        left = self._deadline - now
        if self.phase in (Phase.TERMINATING, Phase.KILLING):
            left = min(left, KILL_POLL_S)
        elif self.proc.returncode is None and self.pidfd < 0:
            left = min(left, EXIT_POLL_S)
        if self.output.live_armed:
            left = min(left, self.output.live_wait(now))
        return None if math.isinf(left) else max(left, 0.0)

    def needs_thread(self, now: float) -> bool:
        """True when the next read or step may block (see the module docstring)."""
        if self.phase in (Phase.TERMINATING, Phase.KILLING):
            return True
        if self.output.on_disk:
            return True
        if now < self._deadline:
            return False
        if self.phase is Phase.RUNNING:
            return self.proc.returncode is None  # the timeout: the process tree is stopped
        return self.phase is Phase.DRAINING and bool(self._open)  # the pipe holders are

    def result_needs_thread(self) -> bool:
        """True when building the result reads the disk: a spilled stream's tail, or the
        working directory the preamble could not enter (to say why)."""
        if self.output.on_disk:
            return True
        return self.spawned.channel.take() == CD_FAILED and not self._timed_out

    def on_ready(self, fd: int) -> bool:
        """Handle a readable descriptor; True when a pipe closed, the shell exited, or output
        now waits for a live flush (the loop's next wake-up may have to come sooner)."""
        if fd == self.pidfd:
            self._reap()
            return True
        moved = self.output.read(fd)
        if moved == 0:
            self._close_pipe(fd)
            return True
        return moved > 0 and self.output.arm_live()

    def take_pause(self) -> float:
        """Seconds the loop should stop reading, to batch a large stream (then reset).

        A command printing hundreds of MB in small writes would otherwise wake us once per
        write: tens of thousands of wake-ups that cost more than moving the bytes (`pacing`).
        """
        return self.output.take_pause()

    def step(self, now: float) -> None:
        """Advance the phase when its condition or its deadline has been reached."""
        if self.pidfd < 0:
            self._reap()
        if self.output.live_armed:
            self.output.flush_live_if_due(now)
        if self.phase is Phase.RUNNING:
            self._while_running(now)
        elif self.phase is Phase.DRAINING:
            self._while_draining(now)
        elif self.phase is Phase.TERMINATING:
            self._while_terminating(now)
        elif self.phase is Phase.KILLING:
            self._while_killing(now)

    def result(self) -> CommandResult:
        """The CommandResult of a finished run (call once, when `done`)."""
        self._delivered = True
        last_line = self.spawned.channel.take()
        if last_line == CD_FAILED and not self._timed_out:
            self.output.discard()
            self.spawned.close_status()
            return start_dir_error(self.plan.target)
        stdout, stderr = self.output.finish()
        facts = RunFacts(
            target=self.plan.target,
            returncode=self.proc.returncode,
            stdout=stdout,
            stderr=stderr,
            duration_s=self._ended_at - self.started,
            timeout=self.plan.timeout,
            timed_out=self._timed_out,
            escalated=self._escalated,
            grace=self.plan.grace,
            outsiders=self._reaper.outsiders if self._reaper else 0,
            leftovers=self._leftovers,
            final_cwd=self._final_cwd(last_line),
        )
        return self._sandbox_failure(facts) or classify(facts)

    def _sandbox_failure(self, facts: RunFacts) -> CommandResult | None:
        """`spawn_error` when the sandbox never started the command (see `sandbox`)."""
        if self.spawned.status_fd < 0:  # not sandboxed
            return None
        status = self.spawned.take_status()
        if status is None or facts.timed_out or facts.returncode is None:
            return None
        failed = classify_sandbox_exit(status, facts.returncode, facts.stderr.text,
                                       command=facts.target.command, cwd=facts.target.start_dir)
        return None if failed is None else replace(failed, duration_s=round(facts.duration_s, 6))

    def abort(self) -> None:
        """End a run that produced no result (interrupted, cancelled): kill it, remove its files.

        Does nothing once `result()` was built, so it can sit in a `finally`.
        """
        if self._delivered:
            return
        if not self.done:
            reaper = self._reaper or Reaper(self.proc.pid, self.plan.run_id)
            reaper.signal_all(signal.SIGKILL)
            reaper.close()
            self.proc.wait(KILL_WAIT_S)
            self._close_all()
            self.phase = Phase.DONE
        self.output.discard()
        self.spawned.channel.close()
        self.spawned.close_status()

    def _while_running(self, now: float) -> None:
        if self.proc.returncode is not None:
            if self._open:
                # Not past the timeout: a shell that exits just before it must not push the
                # holders' kill, and the call's return, beyond timeout + grace + 0.5 s.
                self.phase, self._deadline = Phase.DRAINING, min(now + DRAIN_S, self._deadline)
            else:
                self._finish(now)
        elif now >= self._deadline:
            self._timed_out = True
            self._terminate(now)

    def _while_draining(self, now: float) -> None:
        if not self._open:
            self._finish(now)
        elif now >= self._deadline:
            self._leftovers = 0  # counted once they are settled, in `_finish`
            self._terminate(now)

    def _while_terminating(self, now: float) -> None:
        if self._settled(signal.SIGTERM, signal.SIGCONT):
            self._finish(now)
        elif now >= self._deadline:
            assert self._reaper is not None
            self._escalated = True
            self._reaper.signal_all(signal.SIGKILL)
            self.phase, self._deadline = Phase.KILLING, now + KILL_WAIT_S

    def _while_killing(self, now: float) -> None:
        if self._settled(signal.SIGKILL) or now >= self._deadline:
            self._finish(now)

    def _terminate(self, now: float) -> None:
        """SIGTERM (and SIGCONT, so stopped processes can act on it) to what must end.

        On a timeout that is the whole command; after the shell exited, only the processes
        still holding the pipes (from the open read ends' inodes).
        """
        holders = None if self._timed_out else pipe_names(*self._open)
        self._reaper = Reaper(self.proc.pid, self.plan.run_id, holding=holders)
        self._reaper.signal_all(signal.SIGTERM, signal.SIGCONT)
        self.phase, self._deadline = Phase.TERMINATING, now + self.plan.grace

    def _settled(self, *signals: int) -> bool:
        self._reap()
        return self._reaper is None or self._reaper.settled(*signals)

    def _finish(self, now: float) -> None:
        self._reap()
        ended = self.output.drain(self._open, until=time.monotonic() + FINAL_DRAIN_S)
        if self._leftovers is not None and self._reaper is not None:
            found = self._reaper.found  # before `_close_all` forgets them
            # None found and the pipes at their end: the holders exited by themselves, just
            # after the drain; nothing was killed and nothing is left.
            self._leftovers = None if not found and ended else found
        self._close_all()
        self.output.final_flush(now)
        self._ended_at = now
        self.phase = Phase.DONE

    def _reap(self) -> None:
        if self.proc.returncode is None and self.proc.poll() is None:
            return
        if self.pidfd >= 0:
            self.forget(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = -1

    def _close_pipe(self, fd: int) -> None:
        self.forget(fd)
        os.close(fd)
        self._open.remove(fd)

    def _close_all(self) -> None:
        for fd in list(self._open):
            self._close_pipe(fd)
        if self.pidfd >= 0:
            self.forget(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = -1
        if self._reaper is not None:
            self._reaper.close()

    def _final_cwd(self, last_line: str | None) -> str | None:
        """The shell's last directory, when it exited on its own (and, if tracked, said one)."""
        if self._timed_out or (self.proc.returncode or 0) < 0:
            return None
        if not self.plan.track_cwd:
            return self.plan.target.start_dir  # the command cannot have moved the shell
        return last_line if last_line and last_line.startswith("/") else None
