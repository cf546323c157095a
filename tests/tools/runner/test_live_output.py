"""Live output: `on_output` gets the recent text while a command runs, rate-limited and safe."""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import threading
import time
from pathlib import Path

import pytest

from bashgraph.tools import Outcome, arun_command, run_command
from bashgraph.tools.runner.capture import StreamCapture
from bashgraph.tools.runner.live import FLUSH_INTERVAL_S, MAX_CALL_BYTES, LiveOutput

#: Prints ten lines over ~0.5 s, on both streams.
TICKING = "for i in 1 2 3 4 5 6 7 8 9 10; do echo out$i; echo err$i >&2; sleep 0.05; done"


class Recorder:
    """Collects (stream, text, when) calls, and on which thread they came."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float]] = []
        self.threads: set[int] = set()

    def __call__(self, stream: str, text: str) -> None:
        self.calls.append((stream, text, time.monotonic()))
        self.threads.add(threading.get_ident())

    def text(self, stream: str) -> str:
        return "".join(text for name, text, _ in self.calls if name == stream)


def expected(prefix: str) -> str:
    return "".join(f"{prefix}{i}\n" for i in range(1, 11))


def test_output_arrives_while_the_command_runs_and_adds_up_to_the_whole() -> None:
    """Several calls before the end; concatenated per stream they are exactly the output."""
    seen = Recorder()
    started = time.monotonic()
    result = run_command(TICKING, on_output=seen)
    ended = time.monotonic()
    assert result.outcome is Outcome.OK
    assert seen.text("stdout") == result.stdout == expected("out")
    assert seen.text("stderr") == result.stderr == expected("err")
    early = [when for _, _, when in seen.calls if when < ended - 0.1]
    assert len(early) >= 3
    assert seen.calls[0][2] - started < 0.3  # the first line is shown at once


def test_calls_are_rate_limited(tmp_path: Path) -> None:
    """A command printing 20,000 lines in bursts gets a few flushes per second, not one per read."""
    seen = Recorder()
    run_command("for i in $(seq 1 40); do seq 1 500; sleep 0.01; done", on_output=seen,
                spill_dir=tmp_path)
    flushes = sorted({when for _, _, when in seen.calls})
    gaps = [b - a for a, b in itertools.pairwise(flushes)]
    assert len(flushes) <= (flushes[-1] - flushes[0]) / FLUSH_INTERVAL_S + 2
    assert all(gap >= FLUSH_INTERVAL_S * 0.9 for gap in gaps[:-1])  # the last is the final flush


def test_a_burst_bigger_than_one_call_shows_only_its_end(tmp_path: Path) -> None:
    """Each call carries at most ~2 KB: the newest text, cut at a character boundary."""
    seen = Recorder()
    result = run_command("printf 'é%.0s' $(seq 1 5000); echo; echo last", on_output=seen,
                         spill_dir=tmp_path)
    assert result.stdout_bytes > MAX_CALL_BYTES
    assert all(len(text.encode()) <= MAX_CALL_BYTES for _, text, _ in seen.calls)
    assert "\ufffd" not in seen.text("stdout")
    assert seen.text("stdout").endswith("é\nlast\n")


def test_text_is_made_safe_like_the_stored_text() -> None:
    """ANSI escapes removed, NUL shown as a symbol, invalid UTF-8 replaced."""
    seen = Recorder()
    result = run_command(r"printf '\033[31mred\033[0m \000 \377\n'", on_output=seen)
    assert seen.text("stdout") == result.stdout == "red \u2400 \ufffd\n"


def test_a_split_escape_sequence_or_character_is_held_until_complete() -> None:
    """Bytes that the next bytes complete are not shown half: no stray `[31m`, no U+FFFD."""
    stream = StreamCapture("stdout", 10_000, None, "t")
    seen = Recorder()
    live = LiveOutput([stream], seen)
    for part in (b"a\x1b[3", b"1mb\xc3", b"\xa9c\r", b"\nd"):
        stream.feed(part)
        live.flush(time.monotonic())
    live.flush(time.monotonic(), final=True)
    assert seen.text("stdout") == "ab\u00e9c\nd"


def test_spilled_output_is_still_shown_live(tmp_path: Path) -> None:
    """Past the cap the bytes go to the spill file, and the live text comes from there."""
    seen = Recorder()
    result = run_command("seq 1 300000; sleep 0.2; echo tail-line", max_output_chars=100,
                         spill_dir=tmp_path, on_output=seen)
    assert result.truncated
    assert seen.text("stdout").endswith("300000\ntail-line\n")


def test_a_failing_callback_is_logged_and_the_command_runs_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first exception is logged once; no more calls; the result is unaffected."""
    calls = []

    def broken(stream: str, text: str) -> None:
        calls.append(text)
        raise RuntimeError("display gone")

    with caplog.at_level(logging.WARNING, logger="bashgraph.tools.runner.live"):
        result = run_command(TICKING, on_output=broken)
    assert (result.outcome, result.stdout) == (Outcome.OK, expected("out"))
    assert len(calls) == 1
    assert len([r for r in caplog.records if "live output callback failed" in r.message]) == 1


@pytest.mark.parametrize("spill", [False, True], ids=["on-the-loop", "handed-over"])
def test_async_calls_come_on_the_loops_thread(tmp_path: Path, spill: bool) -> None:
    """arun_command calls on_output on the event loop's thread, also for a handed-over run."""
    seen = Recorder()
    command = ("seq 1 100000; " if spill else "") + TICKING

    async def run() -> int:
        await arun_command(command, on_output=seen, spill_dir=tmp_path,
                           max_output_chars=100 if spill else 10_000)
        return threading.get_ident()

    loop_thread = asyncio.run(run())
    assert seen.threads == {loop_thread}
    assert seen.text("stderr") == expected("err")
    assert len(seen.calls) >= 4


CALLER = contextvars.ContextVar[str]("CALLER")


@pytest.mark.parametrize(
    ("command", "timeout"),
    [("seq 1 4000; sleep 0.5; echo tail", None),
     ("trap 'echo tail; exit 1' TERM; echo start; sleep 5 & wait", 0.5)],
    ids=["past-the-cap", "timeout"],
)
def test_async_calls_run_in_the_callers_context(tmp_path: Path, command: str, timeout: float | None) -> None:
    """Also after the run moved to a thread (output past the cap, a timeout's kill), on_output
    runs in the context variables of the coroutine that awaited arun_command: a LangGraph
    stream writer reads its run's config from them."""
    seen: list[tuple[str, str]] = []

    def callback(stream: str, text: str) -> None:
        seen.append((CALLER.get("no context"), text))

    async def run() -> None:
        CALLER.set("the caller")
        await arun_command(command, on_output=callback, spill_dir=tmp_path, timeout=timeout)

    asyncio.run(run())
    assert {caller for caller, _ in seen} == {"the caller"}
    assert "".join(text for _, text in seen).endswith("tail\n")
