"""Output capture: bounded memory, head + tail + spill file, and text that is safe to show."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest

from bashgraph.tools import run_command
from bashgraph.tools.runner import capture
from bashgraph.tools.runner.capture import safe_text

MIB = 1024 * 1024


def test_hundreds_of_megabytes_stay_bounded(tmp_path: Path) -> None:
    """200 MB of output: the text stays under the cap, the spill file holds every byte."""
    size = 200_000_000
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = run_command(f"head -c {size} /dev/zero; echo tail-end", spill_dir=tmp_path)
    peak_growth_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
    assert result.stdout_file is not None
    spill = Path(result.stdout_file)
    spilled = spill.stat().st_size
    spill.unlink()  # do not leave 200 MB in pytest's kept temporary directories
    total = size + len("tail-end\n")
    assert (result.stdout_bytes, result.truncated, spilled) == (total, True, total)
    assert len(result.stdout) <= 10_000
    assert result.stdout.endswith("tail-end\n")
    assert spill.parent == tmp_path
    assert peak_growth_kib * 1024 <= 16 * MIB


def test_head_tail_and_marker_are_exact(tmp_path: Path) -> None:
    """The kept text is the start, a marker counting the omitted bytes, and the end."""
    result = run_command("seq 1 20000", max_output_chars=1000, spill_dir=tmp_path)
    full = "".join(f"{n}\n" for n in range(1, 20001))
    text = result.stdout
    marker_start = text.index("[... ")
    marker_end = text.index("] ...\n") + len("] ...\n")
    head, marker, tail = text[:marker_start], text[marker_start:marker_end], text[marker_end:]
    assert full.startswith(head)
    assert full.endswith(tail)
    assert head.endswith("\n")  # both cuts fall on line boundaries
    assert full[-len(tail) - 1] == "\n"
    omitted = len(full) - len(head) - len(tail)
    assert marker == f"[... {omitted:,} bytes omitted; full output: {result.stdout_file}] ...\n"
    assert len(text) <= 1000
    assert Path(str(result.stdout_file)).read_text() == full


def test_output_at_the_cap_is_kept_whole() -> None:
    """A stream exactly as long as the cap is not truncated and has no spill file."""
    result = run_command("head -c 500 /dev/zero | tr '\\0' a", max_output_chars=500)
    assert (result.stdout, result.truncated, result.stdout_file) == ("a" * 500, False, None)


def test_the_cap_is_checked_on_bytes_and_keeps_at_most_that_many_characters(tmp_path: Path) -> None:
    """As `max_output_chars` documents: 400 three-byte characters (1,200 bytes) pass a cap of
    1,000, so the stream is spilled whole, and fewer than 1,000 characters are kept."""
    result = run_command("printf '\\xe4\\xb8\\xad%.0s' $(seq 400)", max_output_chars=1000, spill_dir=tmp_path)
    assert result.truncated
    assert len(result.stdout) <= 1000
    assert result.stdout_file is not None
    assert Path(result.stdout_file).read_bytes() == "中".encode() * 400


def test_streams_are_capped_and_spilled_separately(tmp_path: Path) -> None:
    """stderr over the cap spills to its own file; a short stdout stays whole."""
    result = run_command("echo short; seq 1 5000 >&2", max_output_chars=200, spill_dir=tmp_path)
    assert (result.stdout, result.stdout_file) == ("short\n", None)
    assert result.stderr_file is not None
    assert result.output_file == result.stderr_file
    assert os.path.getsize(result.stderr_file) == result.stderr_bytes
    assert result.stderr.startswith("1\n2\n")
    assert result.stderr.endswith("4999\n5000\n")


def test_multibyte_characters_are_not_split_at_the_cut(tmp_path: Path) -> None:
    """Cutting head and tail never leaves half a UTF-8 character (no U+FFFD appears)."""
    result = run_command("for i in $(seq 3000); do printf 'é€😀'; done", max_output_chars=301,
                         spill_dir=tmp_path)
    assert result.truncated
    assert "\ufffd" not in result.stdout


def test_spill_limit_keeps_the_tail_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the spill limit the file stops growing; the real tail is still shown."""
    monkeypatch.setattr(capture, "MAX_SPILL_BYTES", MIB)
    result = run_command("seq 1 1000000", max_output_chars=400, spill_dir=tmp_path)
    assert result.stdout_file is not None
    assert os.path.getsize(result.stdout_file) == MIB
    assert result.stdout_bytes == len("".join(f"{n}\n" for n in range(1, 1000001)))
    assert "the spill file holds the first 1,048,576 bytes" in result.stdout
    assert result.stdout.endswith("999999\n1000000\n")


def test_unwritable_spill_dir_still_returns_head_and_tail(tmp_path: Path) -> None:
    """When no spill file can be made the result says so and keeps head and tail."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    result = run_command("seq 1 5000", max_output_chars=300, spill_dir=blocker)
    assert (result.truncated, result.stdout_file) == (True, None)
    assert "spill file not written" in result.stdout
    assert result.stdout.startswith("1\n2\n")
    assert result.stdout.endswith("5000\n")


def test_invalid_utf8_and_nul_bytes_are_made_visible() -> None:
    """Invalid UTF-8 becomes U+FFFD and NUL becomes U+2400; byte counts stay real."""
    result = run_command(r"printf 'a\377b\000c\n'")
    assert result.stdout == "a\ufffdb\u2400c\n"
    assert result.stdout_bytes == 6


def test_ansi_escape_sequences_are_stripped() -> None:
    """Colours, cursor moves and window-title sequences are removed; the text remains."""
    result = run_command(r"printf '\033[1;31mred\033[0m \033]0;title\007\033[2Kdone\n'")
    assert result.stdout == "red done\n"


def test_only_a_spilling_stream_on_a_big_pipe_is_batched(tmp_path: Path) -> None:
    """Pausing between reads is for large spilled streams only, never for ordinary output."""
    stream = capture.StreamCapture("stdout", 10, tmp_path, "t")
    stream.feed(b"short")
    assert stream.pause_after(5) == 0  # in memory: every read is handed on at once
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        stream.feed(b"x" * 100, read_end)  # over the cap: the next read spills
        assert stream.on_disk
        assert not stream.big_pipe
        assert stream.pump(read_end) == -1  # nothing to read, but the spill has started
        assert stream.big_pipe
        assert stream.pause_after(4096) > 0
        assert stream.pause_after(capture.BIG_PIPE_BYTES) == 0  # a full pipe: read on
    finally:
        os.close(read_end)
        os.close(write_end)
        stream.discard()


def test_a_spilling_read_moves_up_to_a_pipes_worth_and_is_not_followed_by_a_pause(tmp_path: Path) -> None:
    """Reads of 64 KiB would each count as "less than half full" and be followed by a pause."""
    stream = capture.StreamCapture("stdout", 10, tmp_path, "t")
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        stream.feed(b"x" * 100, read_end)
        assert stream.pump(read_end) == -1  # starts the spill and enlarges the pipe
        waiting = 768 * 1024
        assert os.write(write_end, b"y" * waiting) == waiting
        moved = stream.pump(read_end)
        assert moved == waiting
        assert stream.pause_after(moved) == 0
        assert stream.finish().total_bytes == 100 + waiting
    finally:
        os.close(read_end)
        os.close(write_end)
        stream.discard()


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"line\r\n", "line\n"),
        (b"10%\r20%\r", "10%\n20%\n"),
        (b"bell\x07 back\x08", "bell\u2407 back\u2408"),
        (b"\x1b(Bascii", "ascii"),
        (b"lone \x1b", "lone \u241b"),
        (b"c1 \xc2\x9b31m", "c1 "),
        (b"del\x7f", "del\u2421"),
    ],
)
def test_safe_text_neutralises_control_characters(raw: bytes, text: str) -> None:
    """Every control character that could drive a terminal is removed or shown as a symbol."""
    assert safe_text(raw) == text
