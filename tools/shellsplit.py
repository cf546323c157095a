"""Split a shell command line into the simple commands bash would run, for the approval rules.

This is not a bash parser. It knows enough of the grammar to find every command a line can start:
the operators `;` `&&` `||` `|` `|&` `&` and newlines, subshells and groups, `$( )`, backticks,
`<( )`/`>( )`, substitutions inside double quotes, `${ }` and unquoted here-documents, and the
scripts given to `bash -c`/`sh -c` and `eval`. Quotes and escapes are removed from words (`r''m`,
`\\rm` and `$'\\x72m'` all read `rm`); variables stay as written (`$HOME`).

It errs towards finding too much: a case pattern's `)` or an array's `(` split words that bash
would keep together. That can only add parts for the rules to look at, never hide one.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from bashgraph.tools.wrappers import (
    ASSIGNMENT,
    inline_script,
    program_name,
    runs_arguments,
    runs_stdin_as_code,
    views,
)

_KEYWORDS = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while",
                       "until", "esac", "time", "coproc"})
_HEADERS = frozenset({"for", "select", "case"})  # their words are not a command
_REDIRECT_OPS = ("<<<", "<<-", "&>>", "<<", "<>", "<&", ">>", ">|", ">&", "&>", "<", ">")
_ANSI_C = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|.)",
                     re.DOTALL)
_ANSI_C_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b",
                  "E": "\x1b", "f": "\f", "v": "\v"}
_MAX_DEPTH = 8


class ShellSyntaxError(ValueError):
    """The command line cannot be split (an unbalanced quote or substitution)."""


@dataclass(frozen=True, slots=True)
class Redirect:
    """One redirection: its operator without the fd number (`>`, `>>`, `<`, `&>`...) and target."""

    op: str
    target: str


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One command bash would run, as words without quotes.

    `words` has leading assignments and keywords removed and the program reduced to its base name
    (`/usr/bin/rm` reads `rm`). `executed_by` names the commands that may run this command's
    output as code: a later pipeline stage that reads its program from stdin (`curl … | sh`), or
    an enclosing `bash -c "$(…)"`, `eval "$(…)"`, `source <(…)`.
    """

    words: tuple[str, ...]
    text: str
    redirects: tuple[Redirect, ...] = ()
    executed_by: tuple[str, ...] = ()


def split_command(command: str) -> list[SimpleCommand]:
    """Every simple command in `command`, nested ones included, roughly in the order they run.

    Raises `ShellSyntaxError` when a quote, `$(`, `${` or backtick is left open.
    """
    try:
        return _expand_scripts(_Parser(command).parse_list(closing=False), depth=0)
    except RecursionError:
        raise ShellSyntaxError("substitutions nested too deeply") from None


def _expand_scripts(parts: list[SimpleCommand], depth: int) -> list[SimpleCommand]:
    """Add the commands inside `bash -c SCRIPT` and `eval ARGS` (which bash parses again)."""
    out: list[SimpleCommand] = []
    for part in parts:
        out.append(part)
        if depth >= _MAX_DEPTH:
            continue
        for view in views(part.words):
            script = inline_script(view.words)
            if script is None:
                continue
            inner = _Parser(script).parse_list(closing=False)
            inner = [dataclasses.replace(p, executed_by=p.executed_by + part.executed_by)
                     for p in inner]
            out.extend(_expand_scripts(inner, depth + 1))
    return out


@dataclass
class _Stage:
    """A simple command being read, with the commands found inside its words."""

    start: int
    end: int
    words: list[str] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    nested: list[SimpleCommand] = field(default_factory=list)
    chars: list[str] = field(default_factory=list)
    in_word: bool = False
    quoted: bool = False
    pending_op: str | None = None


class _Parser:
    """One pass over the text; `$( )` and `<( )` recurse on the same text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.heredocs: list[tuple[str, bool, bool]] = []  # delimiter, quoted, strip tabs

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
                    out.extend(self._skip_heredocs())
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
                depth = max(depth + (1 if char == "(" else -1), 0)
                self._end_word(stage)
                self.pos += 1
                stage = self._end_stage(stage, pipeline, out, piped=False)
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

    def _read_operator(self) -> bool:
        """Consume an operator; True when it is a pipe (the next command reads this one)."""
        op = next(op for op in (";;&", ";;", ";&", "&&", "||", "|&", "|", ";", "&")
                  if self.text.startswith(op, self.pos))
        self.pos += len(op)
        return op in ("|", "|&")

    def _read_redirect(self, stage: _Stage) -> None:
        if stage.in_word and not stage.quoted and "".join(stage.chars).isdigit():
            stage.chars.clear()  # `2>file`: the digits are the fd, not a word
            stage.in_word = False
        self._end_word(stage)
        op = next(op for op in _REDIRECT_OPS if self.text.startswith(op, self.pos))
        self.pos += len(op)
        stage.pending_op = op

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
            stage.chars.append(char)
            self.pos += 1

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
            self._read_substitution(stage)
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

    def _find_ansi_c_end(self, index: int) -> int:
        while index < len(self.text):
            if self.text[index] == "'":
                return index
            index += 2 if self.text[index] == "\\" else 1
        raise ShellSyntaxError("unterminated $'")

    def _read_substitution(self, stage: _Stage) -> None:
        """`$(…)`, `<(…)`, `>(…)`: parse the inside as commands; the word keeps the raw text."""
        start = self.pos
        self.pos += 2
        stage.nested.extend(self.parse_list(closing=True))
        stage.chars.append(self.text[start : self.pos])
        stage.in_word = True

    def _read_braced(self, stage: _Stage) -> None:
        """`${…}`: a parameter expansion, which may itself hold substitutions."""
        start, depth = self.pos, 0
        self.pos += 1
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char in "{}":
                depth += 1 if char == "{" else -1
                self.pos += 1
                if depth == 0:
                    stage.chars.append(self.text[start : self.pos])
                    return
            elif char in "$`\\":
                mark = len(stage.chars)
                self._read_word_piece(stage, in_double_quotes=True)
                del stage.chars[mark:]
            else:
                self.pos += 1
        raise ShellSyntaxError("unterminated ${")

    def _read_backticks(self, stage: _Stage) -> None:
        text, index = self.text, self.pos + 1
        body: list[str] = []
        while index < len(text) and text[index] != "`":
            if text[index] == "\\" and text[index + 1 : index + 2] in ("`", "\\", "$"):
                index += 1
            body.append(text[index])
            index += 1
        if index >= len(text):
            raise ShellSyntaxError("unterminated backtick")
        stage.nested.extend(_Parser("".join(body)).parse_list(closing=False))
        stage.chars.append(text[self.pos : index + 1])
        self.pos = index + 1

    def _skip_heredocs(self) -> list[SimpleCommand]:
        """Skip here-document bodies; an unquoted one still runs its `$( )` and backticks."""
        found: list[SimpleCommand] = []
        for delimiter, quoted, strip_tabs in self.heredocs:
            start = self.pos
            while self.pos < len(self.text):
                end = self.text.find("\n", self.pos)
                end = len(self.text) if end < 0 else end
                line = self.text[self.pos : end]
                self.pos = min(end + 1, len(self.text))
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
            if not quoted:
                body, scratch = _Parser(self.text[start : self.pos]), _Stage(0, 0)
                body._read_double_quoted(scratch, until_end=True)
                found.extend(scratch.nested)
        self.heredocs.clear()
        return found

    def _end_word(self, stage: _Stage) -> None:
        if not stage.in_word:
            return
        word = "".join(stage.chars)
        op, stage.pending_op = stage.pending_op, None
        if op in ("<<", "<<-"):
            self.heredocs.append((word, stage.quoted, op == "<<-"))
        elif op is not None:
            stage.redirects.append(Redirect(op, word))
        else:
            stage.words.append(word)
        stage.chars.clear()
        stage.in_word = stage.quoted = False
        stage.end = self.pos

    def _end_stage(
        self, stage: _Stage, pipeline: list[_Stage], out: list[SimpleCommand], piped: bool
    ) -> _Stage:
        """Close the current command; close the pipeline too unless a pipe follows."""
        stage.words = _command_words(stage.words)
        if stage.words or stage.redirects or stage.nested:
            pipeline.append(stage)
        if not piped:
            out.extend(_close_pipeline(pipeline, self.text))
            pipeline.clear()
        return _Stage(self.pos, self.pos)


def _close_pipeline(stages: list[_Stage], text: str) -> list[SimpleCommand]:
    out: list[SimpleCommand] = []
    for index, stage in enumerate(stages):
        words = tuple(stage.words)
        later = tuple(s.words[0] for s in stages[index + 1 :]
                      if any(runs_stdin_as_code(v.words) for v in views(tuple(s.words))))
        # `$(curl …)` as the program word runs the output too, as does `bash -c "$(curl …)"`.
        runs_output = words and (runs_arguments(words) or "$" in words[0] or "`" in words[0])
        enclosing = (words[0],) if runs_output else ()
        out.extend(dataclasses.replace(part, executed_by=part.executed_by + enclosing + later)
                   for part in stage.nested)
        if words or stage.redirects:
            source = text[stage.start : stage.end].strip()
            out.append(SimpleCommand(words, source, tuple(stage.redirects), later))
    return out


def _command_words(words: list[str]) -> list[str]:
    """Drop leading keywords and assignments; reduce the program to its base name."""
    index = 0
    while index < len(words):
        word = words[index]
        if word in _HEADERS:
            return []
        if word == "function":
            index += 2
        elif word in _KEYWORDS or ASSIGNMENT.match(word) or (word == "-p" and index and
                                                               words[index - 1] == "time"):
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
