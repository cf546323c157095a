"""How long to wait before reading a large, spilling stream again.

A command printing hundreds of MB in small writes would wake the runner once per write: tens of
thousands of wake-ups that cost more than moving the bytes. Waiting a moment between reads lets
the pipe (enlarged to 1 MiB once the stream spills) fill up first. But a fast producer fills it
in a fraction of a millisecond and then waits for us: with a fixed 1 ms pause,
`head -c 500M /dev/zero` spent 0.44 s of its 0.85 s asleep. So the pause adapts, from what the
read right after a pause found in the pipe:

* three quarters of it or more: the producer was kept waiting: the pause is halved;
* less than a quarter: the producer is slow: the pause is doubled (up to `MAX_PAUSE_S`);

and a read that found the pipe at least half full is followed by no pause at all. With two
spilling streams the runner waits the shorter of their pauses (`Supervisor.take_pause`).
"""

from __future__ import annotations

START_PAUSE_S = 0.001
MIN_PAUSE_S = 0.0001
MAX_PAUSE_S = 0.004


class ReadPacer:
    """The pause after each read of one stream, tuned by the reads that follow pauses."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity  # the pipe's size in bytes
        self.pause_s = START_PAUSE_S
        self._paused = False  # the last answer was a pause: the next read measures it

    def after_read(self, moved: int) -> float:
        """Seconds to wait before the next read, given the bytes this read moved (0: read on).

        A read that found nothing ready (`moved` < 0) measured nothing: no pause, no change.
        """
        if moved < 0:
            return 0.0
        if self._paused:
            if moved >= self.capacity * 3 // 4:
                self.pause_s = max(self.pause_s / 2, MIN_PAUSE_S)
            elif moved < self.capacity // 4:
                self.pause_s = min(self.pause_s * 2, MAX_PAUSE_S)
        self._paused = 0 < moved < self.capacity // 2
        return self.pause_s if self._paused else 0.0
