"""Text a terminal shows as it is: every character that would act on the terminal, or hide or
reorder text, replaced by a visible symbol.

The one sanitiser for everything bashgraph prints that it did not write itself: the model's
commands, words and final answer, the questions a person answers, thread names, error messages,
and command output (`capture.safe_text` removes colour codes first, then calls `visible`).

* C0 controls become their control pictures: ESC is `␛`, NUL `␀`, BEL `␇`, CR `␍`, ... (U+2400 +
  the code); DEL is `␡`. Tab and line feed stay, unless `one_line` (then LF is `⏎`).
* C1 controls (U+0080–U+009F, e.g. U+009B, the one-character CSI) have no symbol: `�`.
* Every character that draws nothing or hides or reorders text is `�`, derived from Unicode
  properties (`invisible_gen`, which generates `invisible_ranges`): each default-ignorable code
  point (zero-width space, word joiner, bidi embeddings, overrides, isolates and marks, "Trojan
  Source", the combining grapheme joiner U+034F, variation selectors U+FE00–FE0F and
  U+E0100–E01EF, the Mongolian selectors U+180B–F, tag characters), every other format
  character (`Cf`), the line and paragraph separators and the lone surrogates (U+D800–U+DFFF:
  what Python makes of bytes that were not UTF-8; no terminal can be sent them). So
  `git status \u034f# ; git push --force` does not read as a comment.
* Blanks that are not a space (every `Zs` separator but the space, the Hangul fillers and the
  blank braille pattern) are `␣`: bash splits words on space, tab and line feed only, so
  `ls\u00a0# || rm -rf ~` runs `rm` while it reads as a comment.
* The zero-width joiners U+200C/U+200D are kept between two drawn characters that are not
  ASCII (an emoji sequence, a Persian word), and the presentation selectors U+FE0E/U+FE0F after
  one (`❤️`); anywhere else they are `�`: beside ASCII (`\u200d#`) they would hide what bash
  reads.

Every replacement is one character for one character (so never longer than the UTF-8 bytes it
came from), and the result has no control character but tab and line feed. The work is linear
in the length of the text: a scan for a character class, and, when it finds one, a
`str.translate` pass (and a scan for joiners out of place when the text has any).
"""

from __future__ import annotations

import re

from bashgraph.tools.invisible_ranges import BLANK_RANGES, HIDDEN_RANGES

#: Shown instead of a character that has no symbol of its own.
HIDDEN = "\ufffd"
#: Shown instead of a line feed in text that must stay on one line.
NEWLINE = "\u23ce"

#: Shown instead of a blank that is not a space.
BLANK = "\u2423"
_JOINERS = "\u200c\u200d"
#: Text (U+FE0E) and emoji (U+FE0F) presentation selectors: kept after a drawn non-ASCII
#: character, whose glyph they choose (`❤️`).
_PRESENTATION = "\ufe0e\ufe0f"
#: Not a drawn non-ASCII character: ASCII, a mark (after `translate` every marked character is
#: a control picture, `�`, `␣` or `⏎`), a joiner or a selector.
_UNDRAWN = rf"\x00-\x7f\u2400-\u2423\u23ce\ufffd{_JOINERS}{_PRESENTATION}"
#: A joiner not between two drawn non-ASCII characters, a selector not after one.
_OUT_OF_PLACE = re.compile(
    rf"(?<![^{_UNDRAWN}])[{_JOINERS}{_PRESENTATION}]|[{_JOINERS}](?![^{_UNDRAWN}])"
)


def _table(one_line: bool) -> dict[int, str]:
    table = {code: chr(0x2400 + code) for code in range(0x20) if code not in (0x09, 0x0A)}
    table[0x7F] = "\u2421"  # ␡
    table |= dict.fromkeys(range(0x80, 0xA0), HIDDEN)
    for first, last in HIDDEN_RANGES:
        table |= dict.fromkeys(range(first, last + 1), HIDDEN)
    for first, last in BLANK_RANGES:
        table |= dict.fromkeys(range(first, last + 1), BLANK)
    if one_line:
        table[0x0A] = NEWLINE
    # Kept by `translate`, judged by their neighbours afterwards (in the scan's class too).
    return table | {ord(char): char for char in _JOINERS + _PRESENTATION}


def _class(table: dict[int, str]) -> re.Pattern[str]:
    """A character class of the table's keys, as ranges (a class of 200 single characters
    makes every step of the scan slower)."""
    ranges: list[list[int]] = []
    for code in sorted(table):  # the joiners too: a text holding one needs the second scan
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return re.compile("[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges) + "]")


_KEEP_LINES_TABLE, _ONE_LINE_TABLE = _table(False), _table(True)
_KEEP_LINES, _ONE_LINE = _class(_KEEP_LINES_TABLE), _class(_ONE_LINE_TABLE)


def visible(text: str, *, one_line: bool = False) -> str:
    """`text` with nothing a terminal would act on or hide (see the module docstring);
    `one_line`: line feeds shown as `⏎` too, so the text prints as one line."""
    pattern, table = (_ONE_LINE, _ONE_LINE_TABLE) if one_line else (_KEEP_LINES, _KEEP_LINES_TABLE)
    if pattern.search(text) is None:  # the common case: one scan, no copy
        return text
    shown = text.translate(table)  # one more pass, in C: a dictionary lookup per character
    if any(char in shown for char in _JOINERS + _PRESENTATION):
        shown = _OUT_OF_PLACE.sub(HIDDEN, shown)
    return shown


def one_line(text: str) -> str:
    """`visible(text, one_line=True)`."""
    return visible(text, one_line=True)


#: Linux's `MAX_ARG_STRLEN` (include/uapi/linux/binfmts.h): 32 pages of 4 KiB.
MAX_ARG_STRLEN = 32 * 4096
#: What is left for the command once the preamble (well under 1 KiB) and the NUL are counted.
MAX_COMMAND_BYTES = MAX_ARG_STRLEN - 1024


def command_size_problem(command: str, limit: int = MAX_COMMAND_BYTES) -> str | None:
    """Why `command` is too long to run (one line), or None. Counts UTF-8 bytes, as Linux does."""
    if len(command) <= limit // 4:
        return None  # at most 4 bytes a character: no need to encode
    size = len(command.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return None
    return (f"'command' is {size} bytes in UTF-8, the limit is {limit} "
            f"(Linux refuses a longer argument to bash -c)")


#: What a command gets with `inherit_env=False` (when the parent has them), before `pass_env`.
