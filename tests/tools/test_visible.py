"""The one sanitiser of printed text: nothing a terminal acts on, nothing that hides text."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bashgraph.tools.runner.capture import safe_text
from bashgraph.tools.safety.visible import HIDDEN, NEWLINE, one_line, visible

#: Everything a terminal could act on, or that could hide or reorder text (tab and LF apart).
FORBIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b\u200e\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f\ud800-\udfff"
    "\u00a0\u115f\u1160\u1680\u2000-\u200a\u202f\u205f\u2800\u3000\u3164\uffa0]"
)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("rm -rf important \x1b[2K\x1b[1Gls -la", "rm -rf important ␛[2K␛[1Gls -la"),
        ("\x1b]0;pwned\x07", "␛]0;pwned␇"),  # OSC 0: window title
        ("\x1b]52;c;cm0gLXJmIH4=\x07", "␛]52;c;cm0gLXJmIH4=␇"),  # OSC 52: clipboard write
        ("\x1b[2J\x1b[?1049h", "␛[2J␛[?1049h"),  # clear screen, alternate screen
        ("echo safe\rrm -rf ~", "echo safe␍rm -rf ~"),
        ("nul\x00 del\x7f bs\x08", "nul␀ del␡ bs␈"),
        ("c1 csi \x9b2J", f"c1 csi {HIDDEN}2J"),
        ("ls \u202egnp.exe", f"ls {HIDDEN}gnp.exe"),  # right-to-left override
        ("r\u200bm \ufeffx \u2066y\u2069", f"r{HIDDEN}m {HIDDEN}x {HIDDEN}y{HIDDEN}"),
        ("tag\U000e0041\U000e0042", f"tag{HIDDEN}{HIDDEN}"),  # invisible ASCII
        ("a\tb\nc", "a\tb\nc"),
        ("family 👨\u200d👩\u200d👧, می\u200cخواهم", "family 👨\u200d👩\u200d👧, می\u200cخواهم"),
        ("[bold]not markup[/bold] [link=https://x]y[/link]", "[bold]not markup[/bold] [link=https://x]y[/link]"),
    ],
)
def test_controls_and_hiding_characters_are_shown_as_symbols(raw: str, shown: str) -> None:
    """An escape sequence is shown as `␛…`, so a person sees the command that will run."""
    assert visible(raw) == shown


def test_one_line_shows_line_feeds_as_a_symbol() -> None:
    """A multi-line command printed where one line is expected stays one line."""
    assert one_line("echo a\necho b\r\n") == f"echo a{NEWLINE}echo b␍{NEWLINE}"
    assert one_line("tab\tstays") == "tab\tstays"


def test_command_output_uses_the_same_sanitiser() -> None:
    """Colour codes are removed from output; what is left goes through `visible`."""
    assert safe_text(b"\x1b[31mred\x1b[0m \xe2\x80\xae \x00") == f"red {HIDDEN} ␀"


def test_plain_text_is_returned_as_it_is() -> None:
    text = "nothing to replace: ünïcödé, 漢字, emoji 🙂\n"
    assert visible(text) is text



@pytest.mark.parametrize("blank", ["\u00a0", "\u2003", "\u202f", "\u3000", "\u3164", "\u2800"])
def test_a_blank_that_is_not_a_space_is_shown(blank: str) -> None:
    """bash splits words on space, tab and line feed only: `ls<NBSP># || rm -rf ~` runs rm
    while it would read as a comment. Such a blank is shown as a visible mark."""
    command = f"ls{blank}# || rm -rf ~"
    assert one_line(command) == "ls\u2423# || rm -rf ~"
    assert visible(command) == "ls\u2423# || rm -rf ~"


@settings(max_examples=300, deadline=timedelta(seconds=1))
@given(st.text(st.characters(codec=None), max_size=2000), st.integers(1, 50))
def test_any_text_comes_out_without_controls_and_one_for_one(text: str, repeat: int) -> None:
    """For any text (up to ~100,000 characters): no control character but tab and LF (none
    but tab with `one_line`), the same length, every other character unchanged, and a second
    pass changes nothing. The deadline bounds the time per example."""
    text *= repeat
    for shown in (visible(text), one_line(text)):
        assert not FORBIDDEN.search(shown)
        assert len(shown) == len(text)
        assert all(a == b for a, b in zip(shown, text, strict=True) if not FORBIDDEN.match(b) and b != "\n")
        assert visible(shown) == shown
    assert "\n" not in one_line(text)


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"\x1b]0;no end\nthe rest of the output\n", "0;no end\nthe rest of the output\n"),
        (b"\x1bPno end\nthe rest\n", "no end\nthe rest\n"),
        (b"\x1b]0;title\x07shown \x1b]8;;https://x\x1b\\link\x1b]8;;\x1b\\", "shown link"),
    ],
)
def test_an_unterminated_string_sequence_in_output_hides_nothing(raw: bytes, text: str) -> None:
    """OSC and DCS strings are removed with their terminator on the same line; without one,
    only the introducer goes and the rest of the output stays for the model and the person."""
    assert safe_text(raw) == text
