"""The pause between reads of a spilling stream follows how fast the producer fills the pipe."""

from __future__ import annotations

import time

from bashgraph.tools.runner import process, spawn
from bashgraph.tools.runner.options import RunOptions
from bashgraph.tools.runner.pacing import MAX_PAUSE_S, MIN_PAUSE_S, START_PAUSE_S, ReadPacer
from bashgraph.tools.runner.supervisor import Supervisor

PIPE = 1024 * 1024


def test_a_read_that_finds_the_pipe_half_full_or_more_is_not_followed_by_a_pause() -> None:
    pacer = ReadPacer(PIPE)
    assert pacer.after_read(PIPE // 2) == 0
    assert pacer.after_read(PIPE) == 0
    assert pacer.after_read(0) == 0  # nothing moved (end of file, or nothing ready)


def test_a_producer_that_keeps_filling_the_pipe_shortens_the_pause_to_the_floor() -> None:
    pacer = ReadPacer(PIPE)
    pauses = []
    for _ in range(8):
        pauses.append(pacer.after_read(64 * 1024))  # a small read: pause...
        assert pacer.after_read(PIPE) == 0  # ...after which the pipe was full: we were late
    assert pauses[0] == START_PAUSE_S
    assert pauses[1] == START_PAUSE_S / 2
    assert pauses[-1] == MIN_PAUSE_S


def test_a_slow_producer_lengthens_the_pause_to_the_ceiling() -> None:
    pacer = ReadPacer(PIPE)
    pauses = [pacer.after_read(16 * 1024) for _ in range(6)]  # each read after a pause: little
    assert pauses[:3] == [START_PAUSE_S, START_PAUSE_S * 2, START_PAUSE_S * 4]
    assert pauses[-1] == MAX_PAUSE_S


def test_a_pause_that_lets_the_pipe_fill_halfway_is_kept() -> None:
    pacer = ReadPacer(PIPE)
    assert pacer.after_read(64 * 1024) == START_PAUSE_S
    assert pacer.after_read(PIPE // 2 - 1) == START_PAUSE_S  # between a quarter and three quarters
    assert pacer.pause_s == START_PAUSE_S


def test_a_read_that_found_nothing_measures_nothing() -> None:
    pacer = ReadPacer(PIPE)
    assert pacer.after_read(64 * 1024) == START_PAUSE_S
    assert pacer.after_read(-1) == 0  # nothing was ready: no pause...
    assert pacer.pause_s == START_PAUSE_S  # ...and no verdict on the producer


class FakeStream:
    """Stands in for a StreamCapture: each pump moves `moved` bytes and asks for `pause`."""

    def __init__(self, moved: int, pause: float) -> None:
        self.moved, self.pause = moved, pause

    def pump(self, fd: int) -> int:
        return self.moved

    def pause_after(self, moved: int) -> float:
        return self.pause


def test_the_runner_waits_the_shorter_pause_of_the_streams_it_read() -> None:
    """A slow, trickling stream beside a fast one must not hold the fast one back."""
    options = RunOptions(timeout=10.0, grace=0.0, max_output_chars=100)
    plan = process.plan_command("sleep 5", None, options)
    assert isinstance(plan, spawn.Plan)
    spawned = spawn.spawn(plan._replace(executable=spawn.resolve("bash", None)))
    assert isinstance(spawned, spawn.Spawned)
    sup = Supervisor(plan, spawned, started=time.monotonic(), forget=lambda fd: None)
    real_streams = sup.output.streams
    try:
        out, err = spawned.pipes
        sup.output.streams = {out: FakeStream(4096, 0.0), err: FakeStream(100, MAX_PAUSE_S)}  # type: ignore[dict-item]
        sup.on_ready(err)
        assert sup.take_pause() == MAX_PAUSE_S  # only the slow stream was read
        sup.on_ready(err)
        sup.on_ready(out)
        assert sup.take_pause() == 0.0  # both: the fast one decides
        assert sup.take_pause() == 0.0  # nothing read since: no pause
    finally:
        sup.output.streams = real_streams
        sup.abort()  # kills the `sleep`
