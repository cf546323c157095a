"""Split a shell command line into the simple commands bash would run, for the approval rules.

This is not a bash parser. It knows enough of the grammar to find every command a line can start:
the operators `;` `&&` `||` `|` `|&` `&` and newlines, subshells and groups, `$( )`, backticks,
`<( )`/`>( )`, substitutions inside double quotes, `${ }`, arithmetic `$(( ))`, `$[ ]` and
`(( ))` (whose `<<` is a shift, not a here-document), unquoted here-documents, and code that a
shell parses again: the scripts given to `bash -c`/`sh -c` and `eval`, and a program a shell reads
from a here-document, a here-string, `echo …|` or `<(echo …)`. Quotes and escapes are removed from
words (`r''m`, `\\rm` and `$'\\x72m'` all read `rm`); variables stay as written (`$HOME`).

It errs towards finding too much: a case pattern's `)` or an array's `(` split words that bash
would keep together. That can only add parts for the rules to look at, never hide one. Code the
rules cannot read (a shell reading a program from another command's output, `python3 -` reading
a here-document) is marked on its reader as `hidden_code`.

Every step is linear in the length of the line: text without special characters is consumed
by regular expressions, nesting is limited (`MAX_NESTING`, `MAX_SCRIPT_DEPTH`), and a line
that would need more is a `TooComplexError` (a `ShellSyntaxError`).
"""

from __future__ import annotations

import dataclasses
import re

from bashgraph.tools.safety.shellcode import code_read_by, run_by, runs_arguments
from bashgraph.tools.safety.shellerrors import ShellSyntaxError, TooComplexError
from bashgraph.tools.safety.shellparts import FILE as _FILE
from bashgraph.tools.safety.shellparts import HereDoc, Line, Redirect, SimpleCommand
from bashgraph.tools.safety.shellparts import Stage as _Stage
from bashgraph.tools.safety.shellparts import Sub as _Sub
from bashgraph.tools.safety.wrappers import ASSIGNMENT, inline_script, program_name, runs_stdin_as_code, views

__all__ = ["HereDoc", "Line", "Redirect", "ShellSyntaxError", "SimpleCommand", "TooComplexError",
           "parse_line", "split_command"]

_KEYWORDS = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while",
                       "until", "esac", "time", "coproc"})
_HEADERS = frozenset({"for", "select", "case"})  # their words are not a command
_REDIRECT_OPS = ("<<<", "<<-", "&>>", "<<", "<>", "<&", ">>", ">|", ">&", "&>", "<", ">")
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
_BRACED_STOP = re.compile(r"[{}$`\\]")
_ARITH_STOP = re.compile(r"[\\'\"()]")
_BRACKET_STOP = re.compile(r"[\\'\"\[\]]")
_DOUBLE_QUOTED = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_EMPTY_PARENS = re.compile(r"\([ \t]*\)")
#: Substitutions inside substitutions, and scripts inside scripts, beyond which a line is
#: refused as too complex: real commands stay far below; deeper nesting only multiplies work.
MAX_NESTING = 64
MAX_SCRIPT_DEPTH = 8


def split_command(command: str) -> list[SimpleCommand]:
    """Every simple command in `command`, nested ones included, roughly in the order they run.

    Raises `ShellSyntaxError` when a quote, `$(`, `${` or backtick is left open, and
    `TooComplexError` when the line nests deeper than the limits.
    """
    return list(parse_line(command).parts)


def parse_line(command: str) -> Line:
    """`split_command`, plus the functions the line defines (`f() { … }`, `function f`)."""
    functions: set[str] = set()
    try:
        parts = _parse_script(command, 0, (), functions)
    except RecursionError:
        raise TooComplexError("substitutions nested too deeply") from None
    return Line(tuple(parts), frozenset(functions))


def _parse_script(text: str, depth: int, executed_by: tuple[str, ...],
                  functions: set[str]) -> list[SimpleCommand]:
    """The parts of `text`, each followed by the parts of the code it hands to a shell."""
    parser = _Parser(text)
    parts = parser.parse_list(closing=False)
    functions |= parser.functions
    out: list[SimpleCommand] = []
    for found in parts:
        part = run_by(found, executed_by)
        out.append(part)
        scripts = [s for v in part.views if (s := inline_script(v.words)) is not None]
        scripts += [c if isinstance(c, str) else c.text for c in part.code]
        for script in scripts:
            if depth >= MAX_SCRIPT_DEPTH:
                reason = f"scripts nested more than {MAX_SCRIPT_DEPTH} deep are not read"
                out.append(dataclasses.replace(part, hidden_code=reason, code=()))
                break
            out.extend(_parse_script(script, depth + 1, part.executed_by, functions))
    return out


class _Parser:
    """One pass over the text; `$( )` and `<( )` recurse on the same text."""

    def __init__(self, text: str, nesting: int = 0) -> None:
        self.text = text
        self.pos = 0
        self.nesting = nesting
        self.heredocs: list[HereDoc] = []
        self.functions: set[str] = set()
        # Re-scans (arithmetic and `$[` look-ahead) may not cost more than a few passes.
        self.scan_budget = 8 * len(text) + 4096

    def parse_list(self, closing: bool) -> list[SimpleCommand]:
        out: list[SimpleCommand] = []
        pipeline: list[_Stage] = []
        stage = _Stage(self.pos, self.pos)
        depth, text = 0, self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t\n":
                self._end_word(stage)
                self.pos += 1
                if char == "\n":
                    stage = self._end_stage(stage, pipeline, out, piped=False)
                    out.extend(self._read_heredocs())
                    stage.start = self.pos
            elif char == "#" and not stage.in_word:
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif char == ")" and closing and depth == 0:
                self._end_word(stage)
                self._end_stage(stage, pipeline, out, piped=False)
                self.pos += 1
                return out
            elif char in "()":
                stage, depth = self._read_paren(stage, pipeline, out, depth)
            elif text.startswith(("<(", ">("), self.pos):
                self._read_substitution(stage)
            elif char in "<>" or text.startswith("&>", self.pos):
                self._read_redirect(stage)
            elif char in ";&|":
                self._end_word(stage)
                piped = self._read_operator()
                stage = self._end_stage(stage, pipeline, out, piped=piped)
            else:
                self._read_word_piece(stage, in_double_quotes=False)
        if closing:
            raise ShellSyntaxError("unterminated $( or <(")
        self._end_word(stage)
        self._end_stage(stage, pipeline, out, piped=False)
        return out

    def _read_paren(self, stage: _Stage, pipeline: list[_Stage], out: list[SimpleCommand],
                    depth: int) -> tuple[_Stage, int]:
        """A subshell's `(` or `)`, a function's `()`, or an arithmetic command `(( … ))`."""
        char = self.text[self.pos]
        if char == "(" and self._arithmetic_command(stage):
            return stage, depth
        self._end_word(stage)
        if char == "(" and stage.words and _EMPTY_PARENS.match(self.text, self.pos):
            self.functions.add(stage.words[-1])  # `name () { … }`
        self.pos += 1
        depth = max(depth + (1 if char == "(" else -1), 0)
        return self._end_stage(stage, pipeline, out, piped=False), depth

    def _nest(self) -> None:
        if self.nesting >= MAX_NESTING:
            raise TooComplexError(f"substitutions nested more than {MAX_NESTING} deep")

    def _arithmetic_command(self, stage: _Stage) -> bool:
        """`(( … ))` where a command may start (`for ((…))` too): read it as arithmetic."""
        if not self.text.startswith("((", self.pos) or stage.in_word:
            return False
        if not all(w in _KEYWORDS or w == "for" for w in stage.words):
            return False
        end = self._arithmetic_end(self.pos + 2)
        if end is None:
            return False  # `((cd x); ls)`: two subshells
        self._read_arithmetic(stage, self.pos + 2, end)
        self.pos = end + 2
        return True

    def _arithmetic_end(self, start: int) -> int | None:
        """Where `$((`/`((` starting at `start` closes with `))`, or None if it is no arithmetic.

        Like bash: the parenthesis that closes the second `(` must be followed by `)`.
        """
        depth, index, text = 0, start, self.text
        while (match := _ARITH_STOP.search(text, index)) is not None:
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
            elif char == "(":
                depth, index = depth + 1, index + 1
            elif depth:
                depth, index = depth - 1, index + 1
            else:
                self._spend(index - start)
                return index if text.startswith("))", index) else None
        self._spend(len(text) - start)
        return None

    def _bracket_end(self, start: int) -> int | None:
        """Where `$[` starting at `start` closes with `]`."""
        depth, index, text = 0, start, self.text
        while (match := _BRACKET_STOP.search(text, index)) is not None:
            index = match.start()
            char = text[index]
            if char == "\\":
                index += 2
            elif char in "'\"":
                close = text.find(char, index + 1)
                index = len(text) if close < 0 else close + 1
            elif char == "[":
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

    def _read_operator(self) -> bool:
        """Consume an operator; True when it is a pipe (the next command reads this one)."""
        op = next(op for op in (";;&", ";;", ";&", "&&", "||", "|&", "|", ";", "&")
                  if self.text.startswith(op, self.pos))
        self.pos += len(op)
        return op in ("|", "|&")

    def _read_redirect(self, stage: _Stage) -> None:
        fd = ""
        if stage.in_word and not stage.quoted and "".join(stage.chars).isdigit():
            fd = "".join(stage.chars)  # `2>file`: the digits are the fd, not a word
            stage.chars.clear()
            stage.in_word = False
        self._end_word(stage)
        op = next(op for op in _REDIRECT_OPS if self.text.startswith(op, self.pos))
        self.pos += len(op)
        stage.pending_op, stage.pending_fd = op, fd

    def _read_word_piece(self, stage: _Stage, in_double_quotes: bool) -> None:
        text, char = self.text, self.text[self.pos]
        stage.in_word = True
        if char == "'" and not in_double_quotes:
            end = text.find("'", self.pos + 1)
            if end < 0:
                raise ShellSyntaxError("unterminated single quote")
            stage.chars.append(text[self.pos + 1 : end])
            stage.quoted, self.pos = True, end + 1
        elif char == '"' and not in_double_quotes:
            stage.quoted = True
            self.pos += 1
            self._read_double_quoted(stage)
        elif char == "\\":
            nxt = text[self.pos + 1 : self.pos + 2]
            if nxt != "\n":  # backslash-newline joins lines
                keep = not in_double_quotes or nxt in '"\\$`'
                stage.chars.append(nxt if keep else "\\" + nxt)
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
            stage.chars.append(_decode_ansi_c(self.text[self.pos + 2 : end]))
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
        parts = self.parse_list(closing=True)
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
        start, depth = self.pos, 0
        self.pos += 1
        while (match := _BRACED_STOP.search(self.text, self.pos)) is not None:
            self.pos = match.start()
            char = self.text[self.pos]
            if char in "{}":
                depth += 1 if char == "{" else -1
                self.pos += 1
                if depth == 0:
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
        inner = _Parser(_BACKTICK_ESCAPE.sub(r"\1", text[self.pos + 1 : end]), self.nesting + 1)
        sub = _Sub(text[self.pos : end + 1], inner.parse_list(closing=False))
        self.functions |= inner.functions
        stage.subs.append(sub)
        stage.chars.append(sub.raw)
        self.pos = end + 1

    def _read_heredocs(self) -> list[SimpleCommand]:
        """Read here-document bodies; an unquoted one still runs its `$( )` and backticks."""
        found: list[SimpleCommand] = []
        for doc in self.heredocs:
            start = body_end = self.pos
            while self.pos < len(self.text):
                end = self.text.find("\n", self.pos)
                end = len(self.text) if end < 0 else end
                line = self.text[self.pos : end]
                line_start, self.pos = self.pos, min(end + 1, len(self.text))
                if (line.lstrip("\t") if doc.strip_tabs else line) == doc.delimiter:
                    body_end = line_start
                    break
                body_end = self.pos
            doc.text = self.text[start:body_end]
            if not doc.quoted:
                body, scratch = _Parser(doc.text, self.nesting), _Stage(0, 0)
                body._read_double_quoted(scratch, until_end=True)
                self.functions |= body.functions
                found.extend(part for sub in scratch.subs for part in sub.parts)
        self.heredocs.clear()
        return found

    def _end_word(self, stage: _Stage) -> None:
        if not stage.in_word:
            return
        word = "".join(stage.chars)
        op, stage.pending_op = stage.pending_op, None
        reads_stdin = stage.pending_fd in ("", "0")
        if op in ("<<", "<<-"):
            doc = HereDoc(word, stage.quoted, op == "<<-")
            self.heredocs.append(doc)
            if reads_stdin:
                stage.stdin = doc
        elif op is not None:
            stage.redirects.append(Redirect(op, word))
            if reads_stdin and op == "<<<":
                stage.stdin = word
            elif reads_stdin and op in ("<", "<>"):
                sub = stage.last_sub
                stage.stdin = sub if sub is not None and sub.raw == word else _FILE
        else:
            stage.words.append(word)
        stage.chars.clear()
        stage.in_word = stage.quoted = False
        stage.last_sub = None
        stage.end = self.pos

    def _end_stage(
        self, stage: _Stage, pipeline: list[_Stage], out: list[SimpleCommand], piped: bool
    ) -> _Stage:
        """Close the current command; close the pipeline too unless a pipe follows."""
        stage.words = _command_words(stage.words, self.functions)
        if stage.words or stage.redirects or stage.subs:
            pipeline.append(stage)
        if not piped:
            out.extend(self._close_pipeline(pipeline))
            pipeline.clear()
        return _Stage(self.pos, self.pos)

    def _close_pipeline(self, stages: list[_Stage]) -> list[SimpleCommand]:
        out: list[SimpleCommand] = []
        stage_views = [views(tuple(stage.words)) for stage in stages]
        # The nearest later stage that runs its stdin as code, found from the end (one pass).
        runner, later_runner = "", [""] * len(stages)
        for index in range(len(stages) - 1, -1, -1):
            later_runner[index] = runner
            if any(runs_stdin_as_code(v.words) for v in stage_views[index]):
                runner = stages[index].words[0]
        for index, stage in enumerate(stages):
            words = tuple(stage.words)
            later = (later_runner[index],) if later_runner[index] else ()
            # `$(curl …)` as the program word runs the output too, as does `bash -c "$(curl …)"`.
            runs_output = words and (runs_arguments(stage_views[index]) or "$" in words[0]
                                     or "`" in words[0])
            enclosing = (words[0],) if runs_output else ()
            extra = enclosing + later
            out.extend(run_by(part, extra) for sub in stage.subs for part in sub.parts)
            if words or stage.redirects:
                previous = stages[index - 1] if index else None
                hidden, code = code_read_by(stage, stage_views[index], previous)
                following = stages[index + 1].words[:1] if index + 1 < len(stages) else []
                out.append(SimpleCommand(
                    words, self.text[stage.start : stage.end].strip(), tuple(stage.redirects),
                    later, following[0] if following else "", hidden, tuple(code),
                    tuple(stage_views[index])))
        return out


def _command_words(words: list[str], functions: set[str]) -> list[str]:
    """Drop leading keywords and assignments; reduce the program to its base name."""
    index, after_time = 0, False
    while index < len(words):
        word = words[index]
        if word in _HEADERS:
            return []
        if word == "function":
            functions.update(words[index + 1 : index + 2])
            index += 2
        elif word == "coproc" and words[index + 2 : index + 3] == ["{"]:
            index += 3  # `coproc NAME { …; }`
        elif word in _KEYWORDS or ASSIGNMENT.match(word) or (after_time and word in ("-p", "--")):
            after_time = word == "time" or (after_time and word in ("-p", "--"))
            index += 1
        else:
            break
    rest = words[index:]
    return [program_name(rest[0]), *rest[1:]] if rest else []


def _decode_ansi_c(body: str) -> str:
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
