"""Reading the words of a shell line: quotes, escapes and every expansion that can run a command
inside a word (`$( )`, backticks, `${ }`, arithmetic `$(( ))`, `$[ ]`).

The structure of a line (operators, pipelines, redirections, here-documents) is `shellsplit`'s
`_Parser`; it reads words through `WordReader`, which calls back into the parser for the
commands inside a substitution. Every step is linear in the text: plain runs are consumed by
regular expressions, nesting is limited (`MAX_NESTING`) and re-scans are paid from a budget.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod

from bashgraph.tools.safety.shellerrors import ShellSyntaxError, TooComplexError
from bashgraph.tools.safety.shellparts import HereDoc, SimpleCommand
from bashgraph.tools.safety.shellparts import Stage as _Stage
from bashgraph.tools.safety.shellparts import Sub as _Sub

#: How deep substitutions may nest inside each other before a line is too complex to read.
MAX_NESTING = 64

_ANSI_C = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|.)",
                     re.DOTALL)
_ANSI_C_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b",
                  "E": "\x1b", "f": "\f", "v": "\v"}
#: Runs of characters with no meaning to the parser, outside and inside double quotes.
_PLAIN = re.compile(r"[^ \t\n()<>;&|'\"\\`$#]+")
_PLAIN_QUOTED = re.compile(r"[^\"\\`$]+")
_ANSI_C_BODY = re.compile(r"[^'\\]*(?:\\.[^'\\]*)*", re.DOTALL)
_BACKTICK_BODY = re.compile(r"[^`\\]*(?:\\.[^`\\]*)*", re.DOTALL)
_BACKTICK_ESCAPE = re.compile(r"\\([`\\$])")
_BRACED_STOP = re.compile(r"[}$`\\'\"]")
_ARITH_STOP = re.compile(r"[\\'\"()]")
_BRACKET_STOP = re.compile(r"[\\'\"\[\]]")
#: Text that bash would run if it evaluated it: a substitution or a parameter expansion.
CODE_TEXT = re.compile(r"\$[({\[]|`|\\(?:x24|x60|0?44|0?140|u0024|u0060)")  # `\x24(` is `$(`
_DOUBLE_QUOTED = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


class WordReader(ABC):
    """The word-level half of the parser: what a word holds, and the commands inside it."""

    text: str
    pos: int
    nesting: int
    functions: set[str]
    scan_budget: int
    heredocs: list[HereDoc]
    in_substitution: bool
    quoted_code: bool

    @abstractmethod
    def parse_list(self, closing: bool) -> list[SimpleCommand]:
        """Commands from `pos` on (up to the `)` that closes a substitution when `closing`)."""

    @abstractmethod
    def _subparser(self, text: str, nesting: int) -> WordReader:
        """A parser for other text (a backtick body with its escapes removed)."""

    def _note_code_text(self, literal: str) -> None:
        """Quoted or escaped text that reads like a substitution (`'a[$(cmd)]'`): data, unless
        bash evaluates it later (an array subscript in arithmetic, `declare`, `printf -v`…)."""
        if not self.quoted_code and CODE_TEXT.search(literal) is not None:
            self.quoted_code = True

    def _nest(self) -> None:
        if self.nesting >= MAX_NESTING:
            raise TooComplexError(f"substitutions nested more than {MAX_NESTING} deep")

    def _arithmetic_end(self, start: int) -> int | None:
        """Where `$((`/`((` starting at `start` closes with `))`, or None if it is no arithmetic.

        Like bash: the parenthesis that closes the second `(` must be followed by `)`.
        """
        close = self._unmatched_close(start, _ARITH_STOP, "(")
        return close if close is not None and self.text.startswith("))", close) else None

    def _bracket_end(self, start: int) -> int | None:
        """Where `$[` starting at `start` closes with `]`."""
        return self._unmatched_close(start, _BRACKET_STOP, "[")

    def _unmatched_close(self, start: int, stops: re.Pattern[str], opener: str) -> int | None:
        """The first closing bracket from `start` with no opener before it (quoted and escaped
        text skipped), or None; `stops` finds backslashes, quotes and the two brackets. One pass,
        charged to the scan budget."""
        depth, index, text = 0, start, self.text
        while (match := stops.search(text, index)) is not None:
            index = match.start()
            char = text[index]
            if char == "\\":
                index += 2
            elif char == "'":
                close = text.find("'", index + 1)
                index = len(text) if close < 0 else close + 1
            elif char == '"':
                quoted = _DOUBLE_QUOTED.match(text, index)
                index = len(text) if quoted is None else quoted.end()
            elif char == opener:
                depth, index = depth + 1, index + 1
            elif depth:
                depth, index = depth - 1, index + 1
            else:
                self._spend(index - start)
                return index
        self._spend(len(text) - start)
        return None

    def _spend(self, scanned: int) -> None:
        self.scan_budget -= scanned
        if self.scan_budget < 0:
            raise TooComplexError("too many nested arithmetic expressions to read")

    def _read_arithmetic(self, stage: _Stage, start: int, end: int) -> None:
        """The commands inside an arithmetic expression: only its substitutions run anything."""
        self._nest()
        self.nesting += 1
        scratch = _Stage(0, 0)
        self.pos = start
        while self.pos < end:
            char = self.text[self.pos]
            if char in "$`\\":
                self._read_word_piece(scratch, in_double_quotes=True)
            else:
                self.pos += 1
        self.nesting -= 1
        stage.subs.extend(scratch.subs)

    def _read_word_piece(self, stage: _Stage, in_double_quotes: bool) -> None:
        text, char = self.text, self.text[self.pos]
        if text.startswith("\\\n", self.pos):
            self.pos += 2  # a line continuation is no part of a word, nor starts one
            return
        stage.in_word = True
        if char == "'" and not in_double_quotes:
            end = text.find("'", self.pos + 1)
            if end < 0:
                raise ShellSyntaxError("unterminated single quote")
            stage.chars.append(text[self.pos + 1 : end])
            self._note_code_text(stage.chars[-1])
            stage.quoted, self.pos = True, end + 1
        elif char == '"' and not in_double_quotes:
            stage.quoted = True
            self.pos += 1
            self._read_double_quoted(stage)
        elif char == "\\":
            nxt = text[self.pos + 1 : self.pos + 2]
            if not nxt:
                stage.chars.append("\\")  # a backslash at the very end stays itself
            elif nxt != "\n":  # backslash-newline joins lines; any other escape quotes
                keep = not in_double_quotes or nxt in '"\\$`'
                stage.chars.append(nxt if keep else "\\" + nxt)
                stage.quoted = True  # `\while` is no keyword, `<<\EOF` a quoted delimiter
                self._note_code_text(text[self.pos + 1 : self.pos + 3])  # `\$(`, `\``
            self.pos += 2
        elif char == "`":
            self._read_backticks(stage)
        elif char == "$":
            self._read_dollar(stage, in_double_quotes)
        else:
            plain = (_PLAIN_QUOTED if in_double_quotes else _PLAIN).match(text, self.pos)
            end = plain.end() if plain is not None else self.pos + 1
            stage.chars.append(text[self.pos : end])
            self.pos = end

    def _read_double_quoted(self, stage: _Stage, until_end: bool = False) -> None:
        while self.pos < len(self.text):
            if self.text[self.pos] == '"' and not until_end:
                self.pos += 1
                return
            self._read_word_piece(stage, in_double_quotes=True)
        if not until_end:
            raise ShellSyntaxError("unterminated double quote")

    def _read_dollar(self, stage: _Stage, in_double_quotes: bool) -> None:
        nxt = self.text[self.pos + 1 : self.pos + 2]
        if nxt == "(":
            if not self._read_dollar_arithmetic(stage):
                self._read_substitution(stage)
        elif nxt == "[":
            self._read_dollar_bracket(stage)
        elif nxt == "{":
            self._read_braced(stage)
        elif nxt == "'" and not in_double_quotes:
            end = self._find_ansi_c_end(self.pos + 2)
            stage.chars.append(decode_ansi_c(self.text[self.pos + 2 : end]))
            self._note_code_text(stage.chars[-1])
            stage.quoted, self.pos = True, end + 1
        elif nxt == '"' and not in_double_quotes:
            self.pos += 1  # $"…" is a translated double-quoted string
        else:
            stage.chars.append("$")
            self.pos += 1

    def _read_dollar_arithmetic(self, stage: _Stage) -> bool:
        """`$(( … ))`: True when it is arithmetic (its `<<` is a shift), read to its end."""
        start = self.pos
        if not self.text.startswith("$((", start):
            return False
        end = self._arithmetic_end(start + 3)
        if end is None:
            return False  # `$((cd x); ls)`: a command substitution of a subshell
        self._read_arithmetic(stage, start + 3, end)
        self.pos = end + 2
        stage.chars.append(self.text[start : self.pos])
        return True

    def _read_dollar_bracket(self, stage: _Stage) -> None:
        """`$[ … ]`, the old arithmetic form."""
        start = self.pos
        end = self._bracket_end(start + 2)
        if end is None:
            stage.chars.append("$")
            self.pos += 1
            return
        self._read_arithmetic(stage, start + 2, end)
        self.pos = end + 1
        stage.chars.append(self.text[start : self.pos])

    def _find_ansi_c_end(self, index: int) -> int:
        body = _ANSI_C_BODY.match(self.text, index)
        end = body.end() if body is not None else index
        if end >= len(self.text):
            raise ShellSyntaxError("unterminated $'")
        return end

    def _read_substitution(self, stage: _Stage) -> None:
        """`$(…)`, `<(…)`, `>(…)`: parse the inside as commands; the word keeps the raw text."""
        self._nest()
        start = self.pos
        self.pos += 2
        self.nesting += 1
        # Here-documents started inside are read inside; bash may read an outer one's body
        # after a line break in here, which this reader does not follow.
        outer, self.heredocs = self.heredocs, []
        inside, self.in_substitution = self.in_substitution, True
        parts = self.parse_list(closing=True)
        if self.heredocs:
            raise TooComplexError("here-document inside a command substitution with no line break")
        if outer and "\n" in self.text[start : self.pos]:
            raise TooComplexError("line break inside a command substitution before a here-document")
        self.heredocs, self.in_substitution = outer, inside
        self.nesting -= 1
        sub = _Sub(self.text[start : self.pos], parts)
        stage.subs.append(sub)
        stage.last_sub = sub
        stage.chars.append(sub.raw)
        stage.in_word = True

    def _read_braced(self, stage: _Stage) -> None:
        """`${…}`: a parameter expansion, which may itself hold substitutions."""
        self._nest()
        self.nesting += 1
        start = self.pos
        self.pos += 2
        # Like bash, the first `}` not quoted, escaped or inside a nested expansion or
        # substitution closes it: a bare `{` is not counted (`${x:-{} ; cmd ; }` runs cmd).
        while (match := _BRACED_STOP.search(self.text, self.pos)) is not None:
            self.pos = match.start()
            char = self.text[self.pos]
            if char in "'\"":
                # Bash's rules for quotes in `${…}` change with the operator and the context.
                raise TooComplexError("quotes inside ${…}")
            if char == "}":
                self.pos += 1
                if self.text.startswith("@P}", self.pos - 3):
                    raise TooComplexError("${…@P} runs the substitutions in a variable's value")
                stage.chars.append(self.text[start : self.pos])
                self.nesting -= 1
                return
            else:
                mark = len(stage.chars)
                self._read_word_piece(stage, in_double_quotes=True)
                del stage.chars[mark:]
        raise ShellSyntaxError("unterminated ${")

    def _read_backticks(self, stage: _Stage) -> None:
        self._nest()
        text = self.text
        body = _BACKTICK_BODY.match(text, self.pos + 1)
        end = body.end() if body is not None else self.pos + 1
        if end >= len(text):
            raise ShellSyntaxError("unterminated backtick")
        inner = self._subparser(_BACKTICK_ESCAPE.sub(r"\1", text[self.pos + 1 : end]), self.nesting + 1)
        sub = _Sub(text[self.pos : end + 1], inner.parse_list(closing=False))
        self.functions |= inner.functions
        self.quoted_code |= inner.quoted_code
        stage.subs.append(sub)
        stage.chars.append(sub.raw)
        self.pos = end + 1


def decode_ansi_c(body: str) -> str:
    """The text of a `$'…'` body: its backslash escapes decoded as bash decodes them."""
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        try:
            if code[0] in "xuU":
                return chr(int(code[1:], 16))
            if code[0] in "01234567":
                return chr(int(code, 8))
        except ValueError:  # beyond U+10FFFF: bash drops it too
            return ""
        return _ANSI_C_SIMPLE.get(code, code)

    return _ANSI_C.sub(one, body)
