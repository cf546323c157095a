"""Text a terminal shows as it is: every character that would act on the terminal, or hide or
reorder text, replaced by a visible symbol.

The one sanitiser for everything bashgraph prints that it did not write itself: the model's
commands, words and final answer, the questions a person answers, thread names, error messages,
and command output (`capture.safe_text` removes colour codes first, then calls `visible`).

* C0 controls become their control pictures: ESC is `␛`, NUL `␀`, BEL `␇`, CR `␍`, ... (U+2400 +
  the code); DEL is `␡`. Tab and line feed stay, unless `one_line` (then LF is `⏎`).
* C1 controls (U+0080–U+009F, e.g. U+009B, the one-character CSI) have no symbol: `�`.
* Characters that hide or reorder text are `�` too: bidirectional embeddings, overrides and
  isolates (U+202A–U+202E, U+2066–U+2069, "Trojan Source"), direction marks, zero-width space,
  word joiner and invisible operators, the byte order mark, line and paragraph separators, soft
  hyphen, interlinear annotations and tag characters (U+E0000–U+E007F, invisible ASCII).
* Blanks that are not a space (no-break, en/em and other typographic spaces, the ideographic
  space, Hangul fillers, the blank braille pattern) are `␣`: bash splits words on space, tab and
  line feed only, so `ls\u00a0# || rm -rf ~` runs `rm` while it reads as a comment.
* Lone surrogates (U+D800–U+DFFF: what Python makes of bytes that were not UTF-8, in a command
  line argument or a file name) are `�`: they cannot be written to a UTF-8 terminal at all.
  Zero-width joiners (U+200C, U+200D) stay: emoji and many scripts need them, and they hide
  nothing.

Every replacement is one character for one character (so never longer than the UTF-8 bytes it
came from), and the result has no control character but tab and line feed. The work is linear
in the length of the text: a scan for a character class, and, when it finds one, a
`str.translate` pass.
"""

from __future__ import annotations

import re

#: Shown instead of a character that has no symbol of its own.
HIDDEN = "\ufffd"
#: Shown instead of a line feed in text that must stay on one line.
NEWLINE = "\u23ce"

#: Characters that hide or reorder text, as (first, last) code points.
_HIDING = (
    (0x00AD, 0x00AD), (0x061C, 0x061C), (0x180E, 0x180E), (0x200B, 0x200B), (0x200E, 0x200F),
    (0x2028, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB),
    (0xE0000, 0xE007F),
    (0xD800, 0xDFFF),  # lone surrogates: bytes that were not UTF-8 (no terminal can be sent them)
)
#: Shown instead of a blank that is not a space.
BLANK = "\u2423"
#: Characters a terminal draws as blank space that the shell does not split words on.
_BLANKS = (
    (0x00A0, 0x00A0), (0x115F, 0x1160), (0x1680, 0x1680), (0x2000, 0x200A), (0x202F, 0x202F),
    (0x205F, 0x205F), (0x2800, 0x2800), (0x3000, 0x3000), (0x3164, 0x3164), (0xFFA0, 0xFFA0),
)


def _table(one_line: bool) -> dict[int, str]:
    table = {code: chr(0x2400 + code) for code in range(0x20) if code not in (0x09, 0x0A)}
    table[0x7F] = "\u2421"  # ␡
    table |= dict.fromkeys(range(0x80, 0xA0), HIDDEN)
    for first, last in _HIDING:
        table |= dict.fromkeys(range(first, last + 1), HIDDEN)
    for first, last in _BLANKS:
        table |= dict.fromkeys(range(first, last + 1), BLANK)
    if one_line:
        table[0x0A] = NEWLINE
    return table


def _class(table: dict[int, str]) -> re.Pattern[str]:
    """A character class of the table's keys, as ranges (a class of 200 single characters
    makes every step of the scan slower)."""
    ranges: list[list[int]] = []
    for code in sorted(table):
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
    return text.translate(table)  # one more pass, in C: a dictionary lookup per character


def one_line(text: str) -> str:
    """`visible(text, one_line=True)`."""
    return visible(text, one_line=True)
