"""Background jobs: a command that keeps running after its tool call returned.

A job starts like every command (`process.plan_command` plans it from the same `RunOptions`:
scrubbed environment, the marker `BASHGRAPH_RUN_ID`, a new session and process group, the
sandbox when there is one; `spawn` starts it), but its output goes to two spill files of its
own (`stream.JobStream`), written by a pump thread as the job prints, so nothing of it stays in
memory. `Job.read` returns what arrived since the previous read, capped like every result, with
the job's state; `Job.stop` ends its whole tree, escaped processes included (`sweep`).

A `JobTable` holds the jobs of one run, at most `limit` of them running at a time; the graph
stops them all when the run ends (graph/jobs.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bashgraph.tools.jobs.stream import JobStream
from bashgraph.tools.jobs.sweep import stop_tree, sweep_marker
from bashgraph.tools.results import CommandResult, Outcome, args_error, exit_hint, signal_name
from bashgraph.tools.runner import spawn
from bashgraph.tools.runner.capture import default_spill_dir
from bashgraph.tools.runner.classify import start_dir_error
from bashgraph.tools.runner.launch import CD_FAILED
from bashgraph.tools.runner.options import DEFAULT_OPTIONS, RunOptions
from bashgraph.tools.runner.process import plan_command
from bashgraph.tools.runner.reaper import open_pidfd

CHUNK_BYTES = 1 << 20
_STREAMS = ("stdout", "stderr")


@dataclass(frozen=True)
class JobRequest:
    """How to start one job: the command and its directory, with the options every command of
    the run shares. Their `timeout`, `grace` and `max_output_chars` do not apply: a job has no
    time limit, its reads are capped by the caller, and `JobTable.grace` is its stop's grace."""

    command: str
    cwd: str
    options: RunOptions = DEFAULT_OPTIONS


class Job:
    """One running (or finished) job: its shell, its two streams, and the pump between them."""

    def __init__(self, job_id: str, plan: spawn.Plan, spawned: spawn.Spawned,
                 streams: dict[str, JobStream]) -> None:
        self.job_id = job_id
        self.plan = plan
        self.command = plan.target.command
        self.pid = spawned.proc.pid
        self._spawned = spawned
        self.streams = streams
        self.started = time.monotonic()
        self.stopped_by: str | None = None  # why we stopped it ("bash_kill", "the run ended")
        self._reap_lock = threading.Lock()
        self._wake_read, self._wake_write = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._halt = False
        self._pump = threading.Thread(target=self._pump_output, name=f"bashgraph-{job_id}",
                                      daemon=True)
        self._pump.start()

    # -- state ------------------------------------------------------------------------------
    @property
    def returncode(self) -> int | None:
        """None while the shell runs; its exit code, or minus the signal that killed it."""
        with self._reap_lock:
            return self._spawned.proc.poll()

    @property
    def running(self) -> bool:
        return self.returncode is None

    def state(self) -> str:
        """running, exited N, killed by SIGNAL, or stopped (by us, and why)."""
        code = self.returncode
        if code is None:
            return "running"
        if self.stopped_by:
            return f"stopped ({self.stopped_by})"
        if code < 0:
            return f"killed by {signal_name(-code)}"
        return f"exited {code}"

    # -- reading ------------------------------------------------------------------------------
    def read(self, max_chars: int) -> CommandResult:
        """What the job wrote since the last read, and its state, as a CommandResult.

        Running, exited 0 or stopped by us: `ok`. Exited non-zero: `exit_error`. Killed by a
        signal we did not send: `exit_error` with the code a shell would report (128+n) and a
        hint naming the signal, as for a command killed inside the sandbox. A job that could
        not enter its directory: the same `spawn_error` a command gets.
        """
        code = self.returncode
        if code is not None and self._pump.is_alive() and not self.stopped_by:
            self._pump.join(0.2)  # let the last output of a finished job reach the files
        pieces = {name: stream.read_new(max_chars) for name, stream in self.streams.items()}
        state = self.state()
        out, err = pieces["stdout"], pieces["stderr"]
        base = CommandResult(
            outcome=Outcome.OK, command=self.command, cwd=self.plan.target.start_dir,
            exit_code=code if code is None or code >= 0 else None,
            signal=-code if code is not None and code < 0 else None,
            stdout=f"[job {self.job_id}: {state}]\n{out.text}", stderr=err.text,
            stdout_bytes=out.new_bytes, stderr_bytes=err.new_bytes,
            truncated=out.truncated or err.truncated, duration_s=time.monotonic() - self.started,
            detail=f"job {self.job_id} {state}", stdout_file=str(self.streams["stdout"].path),
            stderr_file=str(self.streams["stderr"].path),
        )
        if code is None or code == 0 or self.stopped_by:
            return base
        if self._spawned.channel.take() == CD_FAILED:  # the start directory was not entered
            return start_dir_error(self.plan.target)
        if code < 0:
            return dataclasses.replace(base, outcome=Outcome.EXIT_ERROR, exit_code=128 - code,
                                       hint=f"the job was killed by {signal_name(-code)}")
        return dataclasses.replace(base, outcome=Outcome.EXIT_ERROR, hint=exit_hint(code))

    # -- stopping -----------------------------------------------------------------------------
    def stop(self, grace: float, why: str) -> int:
        """Stop the job's whole tree (blocks up to `grace` + 0.5 s); the processes signalled."""
        if self.stopped_by is None and self.running:
            self.stopped_by = why
        with self._reap_lock:
            # While the shell is unreaped its pid cannot be reused, so its group and session are
            # safe to signal (nobody reaps it while this lock is held). Once reaped, only the
            # marker is trusted: the pid may belong to someone else by now.
            if self._spawned.proc.poll() is None:
                count = stop_tree(self.pid, self.plan.run_id, grace)
                self._spawned.proc.wait(0.5)
            else:
                count = sweep_marker(self.plan.run_id, grace)
        self._pump.join(0.5)  # the pipes close when the last holder died
        self._halt_pump()
        return count

    def close(self) -> None:
        """Release the descriptors once the job is stopped (the spill files stay).

        The pump is stopped and joined first: it writes to the streams and polls the wake pipe,
        whose descriptor numbers must not be reused while it may still touch them.
        """
        self._halt_pump()
        self._pump.join()
        for stream in self.streams.values():
            stream.close()
        self._spawned.channel.close()
        self._spawned.close_status()
        os.close(self._wake_read)
        os.close(self._wake_write)

    def _halt_pump(self) -> None:
        """Ask the pump to end now (it leaves pipes still held by escaped processes)."""
        if self._pump.is_alive():
            self._halt = True
            with contextlib.suppress(OSError):  # the wake pipe is full: one byte is enough
                os.write(self._wake_write, b"x")
            self._pump.join(1.0)

    # -- the pump thread ----------------------------------------------------------------------
    def _pump_output(self) -> None:
        """Move output from the pipes to the spill files until the job and its pipes are done."""
        poller = select.poll()
        pipes = dict(zip(self._spawned.pipes, _STREAMS, strict=True))
        for fd in (*pipes, self._wake_read):
            poller.register(fd, select.POLLIN)
        pidfd = open_pidfd(self.pid)
        if pidfd >= 0:
            poller.register(pidfd, select.POLLIN)
        try:
            while (pipes or self.running) and not self._halt:
                for fd, _ in poller.poll(500):
                    if fd in pipes and not self._move(fd, pipes[fd]):
                        poller.unregister(fd)
                        os.close(fd)
                        del pipes[fd]
                    elif fd == pidfd:
                        poller.unregister(pidfd)
                        self.returncode  # noqa: B018  # reap it now: the state is read later
        finally:
            for fd in pipes:
                os.close(fd)
            if pidfd >= 0:
                os.close(pidfd)

    def _move(self, fd: int, name: str) -> bool:
        """One read from a pipe into its stream; False at end of file."""
        try:
            data = os.read(fd, CHUNK_BYTES)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if data:
            self.streams[name].append(data)
        return bool(data)


class JobTable:
    """The jobs of one run: start, look up, stop them all. Thread-safe."""

    def __init__(self, limit: int, grace: float = 2.0) -> None:
        self.limit = limit
        self.grace = grace
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._jobs)

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def ids(self) -> list[str]:
        return list(self._jobs)

    def running(self) -> list[Job]:
        return [job for job in list(self._jobs.values()) if job.running]

    def start(self, request: JobRequest, job_id: str,
              before_spawn: Callable[[str], None] | None = None) -> Job | CommandResult:
        """Start a job; a CommandResult when it cannot start (limit reached, spawn failure).

        `before_spawn(marker)` runs after every check and before the spawn: the journal records
        the job there, so a job is never running unrecorded.
        """
        with self._lock:
            if len(self.running()) >= self.limit:
                return limit_reached(request.command, self.limit, [j.job_id for j in self.running()])
            plan = _plan(request)
            if isinstance(plan, CommandResult):
                return plan
            streams = _open_streams(plan.spill_dir or default_spill_dir(), job_id)
            if before_spawn is not None:
                try:
                    before_spawn(plan.run_id)
                except BaseException:
                    _discard(streams)
                    raise
            spawned = spawn.spawn(plan)
            if isinstance(spawned, CommandResult):
                _discard(streams)
                return spawned
            job = self._jobs[job_id] = Job(job_id, plan, spawned, streams)
            return job

    def stop_all(self, why: str) -> list[Job]:
        """Stop every job that still has processes; every job, for the caller to report on."""
        jobs = list(self._jobs.values())
        for job in jobs:
            job.stop(self.grace, why)
            job.close()
        return jobs


def limit_reached(command: str, limit: int, running: list[str]) -> CommandResult:
    """The answer when a run already holds `limit` running jobs (nothing was started)."""
    return args_error(
        f"this run already has {limit} background jobs running ({', '.join(running)}); stop one "
        "with bash_kill (or let it finish) before starting another", command)


def started_result(job: Job) -> CommandResult:
    """What the model reads when a job started."""
    text = (f"[job {job.job_id} started in the background (pid {job.pid}); read its output with "
            f"bash_output, stop it with bash_kill]")
    return CommandResult(outcome=Outcome.OK, command=job.command, cwd=job.plan.target.start_dir,
                         stdout=text, detail=f"job {job.job_id} running")


def _plan(request: JobRequest) -> spawn.Plan | CommandResult:
    plan = plan_command(request.command, request.cwd, request.options)
    if isinstance(plan, CommandResult):
        return plan
    # A job's directory changes nothing for the next command: no EXIT trap. Nor does it end
    # by itself: no time limit.
    plan = plan._replace(track_cwd=False, timeout=math.inf)
    if not plan.executable:
        plan = plan._replace(executable=spawn.resolve(plan.target.shell, plan.env.get("PATH")))
    return plan


def _open_streams(spill_dir: Path, job_id: str) -> dict[str, JobStream]:
    spill_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    stamp = f"{os.getpid()}-{time.time_ns()}"
    return {name: JobStream(spill_dir / f"{job_id}-{stamp}.{name}") for name in _STREAMS}


def _discard(streams: dict[str, JobStream]) -> None:
    for stream in streams.values():
        stream.close()
        with contextlib.suppress(OSError):
            stream.path.unlink()
