"""The pause between reads of a spilling stream follows how fast the producer fills the pipe."""

from __future__ import annotations

from bashgraph.tools.pacing import MAX_PAUSE_S, MIN_PAUSE_S, START_PAUSE_S, ReadPacer

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
