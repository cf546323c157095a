"""The one sanitiser of printed text: nothing a terminal acts on, nothing that hides text."""

from __future__ import annotations

import re
import subprocess
import unicodedata
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bashgraph.tools import invisible_gen
from bashgraph.tools.invisible_ranges import BLANK_RANGES, HIDDEN_RANGES
from bashgraph.tools.runner.capture import safe_text
from bashgraph.tools.text import BLANK, HIDDEN, NEWLINE, one_line, visible

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
        assert all(a == b for a, b in zip(shown, text, strict=True) if not marked(b) and b != "\n")
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


def in_ranges(code: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(first <= code <= last for first, last in ranges)


def marked(char: str) -> bool:
    """A character `visible` may replace: a control, one in the generated tables, a joiner or a
    presentation selector (those two depend on their neighbours)."""
    code = ord(char)
    return (unicodedata.category(char) == "Cc" or in_ranges(code, HIDDEN_RANGES)
            or in_ranges(code, BLANK_RANGES) or char in "\u200c\u200d\ufe0e\ufe0f")


#: Every code point but the four whose treatment depends on their neighbours, each after `a`.
EVERY = [chr(code) for code in range(0x110000) if chr(code) not in "\u200c\u200d\ufe0e\ufe0f"]


def test_the_table_is_what_the_unicode_properties_give() -> None:
    """`invisible_ranges` is the generator's output: Default_Ignorable_Code_Point, Cf, Zl, Zp and
    Cs hidden, Zs (but the space) and the fillers blank, over the whole range of code points."""
    pytest.importorskip("regex")
    _version, hidden, blank = invisible_gen.derive()
    assert (tuple(hidden), tuple(blank)) == (HIDDEN_RANGES, BLANK_RANGES), (
        "regenerate: python -m bashgraph.tools.invisible_gen > tools/invisible_ranges.py")


def test_every_code_point_that_draws_nothing_is_marked_and_nothing_else() -> None:
    """Checked against Python's own `unicodedata` over 0..0x10FFFF: every control, format
    character, separator, surrogate and blank other than the space is replaced; every character
    replaced is one of those, or default-ignorable, or a format character or blank in the newer
    Unicode of the `regex` package, or a filler."""
    regex = pytest.importorskip("regex")
    ignorable = regex.compile(r"[\p{Default_Ignorable_Code_Point}\p{Cf}\p{Zs}]")
    shown = visible("".join(EVERY))
    assert len(shown) == len(EVERY)
    for char, out in zip(EVERY, shown, strict=True):
        category = unicodedata.category(char)
        must = category in ("Cf", "Cs", "Zl", "Zp") or (category == "Cc" and char not in "\t\n") or (
            category == "Zs" and char != " ")
        may = must or (char != " " and ignorable.match(char) is not None) or ord(char) in invisible_gen.DRAWN_BLANK
        assert (out != char) == may, (hex(ord(char)), category, out)
        assert out == char or out in (HIDDEN, BLANK) or 0x2400 <= ord(out) <= 0x2421


@pytest.mark.parametrize("mark", ["\u034f", "\ufe00", "\ufe0f", "\U000e0100", "\U000e01ef", "\u180b",
                                  "\u180f", "\u200d", "\u200c", "\u17b4", "\U0001d173", "\ufff0"])
def test_a_character_that_draws_nothing_does_not_make_a_comment(mark: str) -> None:
    """`git status <CGJ># ; git push --force` runs the push (the mark keeps `#` from starting a
    word) while the terminal would draw a comment: the mark is shown, on one line and in text."""
    command = f"git status {mark}# ; git push --force"
    assert one_line(command) == f"git status {HIDDEN}# ; git push --force"
    assert visible(command) == f"git status {HIDDEN}# ; git push --force"


def test_the_mark_really_hides_a_command_from_a_reader() -> None:
    """Why it matters: bash runs what follows `<CGJ>#`, it is not a comment."""
    done = subprocess.run(["bash", "-c", "echo a \u034f# ; echo ran"], capture_output=True, text=True,
                          check=True)
    assert done.stdout.splitlines()[-1] == "ran"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("👨\u200d👩\u200d👧", "👨\u200d👩\u200d👧"),  # an emoji sequence
        ("می\u200cخواهم", "می\u200cخواهم"),  # a Persian word
        ("❤\ufe0f ok", "❤\ufe0f ok"),  # emoji presentation
        ("a\u200db", f"a{HIDDEN}b"), ("👨\u200d#", f"👨{HIDDEN}#"), ("\u200d👩", f"{HIDDEN}👩"),
        ("x\ufe0f", f"x{HIDDEN}"), ("\ufe0f", HIDDEN), ("👨\u200d\u200d👩", f"👨{HIDDEN}{HIDDEN}👩"),
        ("\u202e\u200d👩", f"{HIDDEN}{HIDDEN}👩"),  # beside a marked character
    ],
)
def test_joiners_and_selectors_are_kept_only_where_they_join_drawn_characters(raw: str, shown: str) -> None:
    assert visible(raw) == shown
    assert visible(visible(raw)) == visible(raw)
