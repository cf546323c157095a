"""Split a shell command line into the simple commands bash would run, for the approval rules.

This is not a bash parser. It knows enough of the grammar to find every command a line can start:
the operators `;` `&&` `||` `|` `|&` `&` and newlines, subshells and groups, `$( )`, backticks,
`<( )`/`>( )`, substitutions inside double quotes, `${ }`, arithmetic `$(( ))`, `$[ ]` and
`(( ))` (whose `<<` is a shift, not a here-document), unquoted here-documents, and code that a
shell parses again: the scripts given to `bash -c`/`sh -c` and `eval`, and a program a shell reads
from a here-document, a here-string, `echo …|` or `<(echo …)`. Quotes and escapes are removed from
words (`r''m`, `\\rm` and `$'\\x72m'` all read `rm`); variables stay as written (`$HOME`).

It errs towards finding too much: an array's `(` or a `[[ =~ (a|b) ]]` splits words that bash
keeps together, which can only add parts for the rules to look at. What it cannot follow with
certainty it refuses as too complex (`shellgate`; the differential oracle against real bash,
tests/tools/safety/test_policy_oracle.py, is the judge). Code the
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
from bashgraph.tools.safety.shellgate import (
    deferred_script,
    evaluates_text,
    refuse_other_shells,
    refuse_word,
    unknown_program,
)
from bashgraph.tools.safety.shellkeywords import KEYWORDS, command_words
from bashgraph.tools.safety.shellparts import FILE as _FILE
from bashgraph.tools.safety.shellparts import HereDoc, Line, Redirect, SimpleCommand
from bashgraph.tools.safety.shellparts import Stage as _Stage
from bashgraph.tools.safety.shellwords import WordReader
from bashgraph.tools.safety.wrappers import inline_script, runs_stdin_as_code, views

__all__ = ["HereDoc", "Line", "Redirect", "ShellSyntaxError", "SimpleCommand", "TooComplexError",
           "parse_line", "split_command"]

#: `{name}>file`: bash stores the new descriptor's number in `name`; the word is no argument.
_NAMED_FD = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
_ESAC = re.compile(r"esac(?=[ \t\n;&|)]|$)")
_REDIRECT_OPS = ("<<<", "<<-", "&>>", "<<", "<>", "<&", ">>", ">|", ">&", "&>", "<", ">")
_EMPTY_PARENS = re.compile(r"\([ \t]*\)")
#: Scripts inside scripts (`bash -c`, `eval`, fed code) beyond which the innermost code is not
#: read (it counts as hidden code): real commands stay far below; deeper nesting only multiplies
#: work. Substitutions have their own limit, `MAX_NESTING` (shellwords).
MAX_SCRIPT_DEPTH = 8


def split_command(command: str) -> list[SimpleCommand]:
    """Every simple command in `command`, nested ones included, roughly in the order they run.

    Raises `ShellSyntaxError` when a quote, `$(`, `${` or backtick is left open, and
    `TooComplexError` when the line nests deeper than the limits.
    """
    return list(parse_line(command).parts)


@dataclasses.dataclass
class _Found:
    """What the scripts of one line hold, across the scripts they hand to shells."""

    functions: set[str] = dataclasses.field(default_factory=set)
    quoted_code: bool = False  # quoted text that reads like a substitution
    evaluates: bool = False  # a construct that evaluates a variable's text as code


def own_parts(script: str) -> list[SimpleCommand]:
    """The simple commands of `script` itself, not of the scripts it hands to shells (one pass)."""
    return _Parser(script).parse_list(closing=False)


def parse_line(command: str) -> Line:
    """`split_command`, plus the functions the line defines (`f() { … }`, `function f`)."""
    found = _Found()
    try:
        parts = _parse_script(command, 0, (), found)
    except RecursionError:
        raise TooComplexError("substitutions nested too deeply") from None
    if found.quoted_code and found.evaluates:
        raise TooComplexError("quoted text that reads like code ($(…), ${…}, backticks) in a "
                              "line that may evaluate it (arithmetic, [ ], [[ ]], declare, "
                              "let, read, printf -v…)")
    return Line(tuple(parts), frozenset(found.functions))


def _parse_script(text: str, depth: int, executed_by: tuple[str, ...],
                  found: _Found) -> list[SimpleCommand]:
    """The parts of `text`, each followed by the parts of the code it hands to a shell."""
    parser = _Parser(text)
    parts = parser.parse_list(closing=False)
    found.functions |= parser.functions
    found.quoted_code |= parser.quoted_code
    found.evaluates = found.evaluates or evaluates_text(text)
    out: list[SimpleCommand] = []
    for each in parts:
        part = run_by(each, executed_by)
        out.append(part)
        scripts = [s for v in part.views
                   if (s := inline_script(v.words) or deferred_script(v.words)) is not None]
        scripts += [c if isinstance(c, str) else c.text for c in part.code]
        shells = frozenset(v.words[0] for v in part.views)
        for script in dict.fromkeys(scripts):
            refuse_other_shells(shells, script)
        # Each view of a stage can name the same script (15 `-exec sh` read one here-document):
        # parsed once per view, nested scripts would cost views ** depth.
        for script in dict.fromkeys(scripts):
            if depth >= MAX_SCRIPT_DEPTH:
                reason = f"scripts nested more than {MAX_SCRIPT_DEPTH} deep are not read"
                out.append(dataclasses.replace(part, hidden_code=reason, code=()))
                break
            out.extend(_parse_script(script, depth + 1, part.executed_by, found))
    return out


class _Parser(WordReader):
    """One pass over the text; `$( )` and `<( )` recurse on the same text."""

    def __init__(self, text: str, nesting: int = 0, in_substitution: bool = False) -> None:
        self.text = text
        self.pos = 0
        self.nesting = nesting
        self.in_substitution = in_substitution
        self.quoted_code = False
        self.open_cases = 0  # `case … in` not yet closed by `esac`
        self.expect_pattern = False  # a case pattern comes next (after `in` or `;;`)
        self.heredocs: list[HereDoc] = []
        self.functions: set[str] = set()
        # Re-scans (arithmetic and `$[` look-ahead) may not cost more than a few passes.
        self.scan_budget = 8 * len(text) + 4096

    def _subparser(self, text: str, nesting: int) -> _Parser:
        return _Parser(text, nesting, in_substitution=True)

    def parse_list(self, closing: bool) -> list[SimpleCommand]:
        out: list[SimpleCommand] = []
        pipeline: list[_Stage] = []
        stage = _Stage(self.pos, self.pos)
        depth, text = 0, self.text
        while self.pos < len(text):
            char = text[self.pos]
            if self.expect_pattern and char not in " \t\n#":
                self._end_word(stage)
                stage = self._end_stage(stage, pipeline, out, piped=False)
                self._read_case_pattern(stage)
            elif char in " \t\n":
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

    def _arithmetic_command(self, stage: _Stage) -> bool:
        """`(( … ))` where a command may start (`for ((…))` too): read it as arithmetic."""
        if not self.text.startswith("((", self.pos) or stage.in_word:
            return False
        if not stage.leading_keywords:
            return False
        end = self._arithmetic_end(self.pos + 2)
        if end is None:
            return False  # `((cd x); ls)`: two subshells
        self._read_arithmetic(stage, self.pos + 2, end)
        self.pos = end + 2
        return True

    def _read_operator(self) -> bool:
        """Consume an operator; True when it is a pipe (the next command reads this one)."""
        op = next(op for op in (";;&", ";;", ";&", "&&", "||", "|&", "|", ";", "&")
                  if self.text.startswith(op, self.pos))
        self.pos += len(op)
        self.expect_pattern = self.open_cases > 0 and op in (";;&", ";;", ";&")
        return op in ("|", "|&")

    def _read_redirect(self, stage: _Stage) -> None:
        fd = ""
        held = "".join(stage.chars)
        if stage.in_word and not stage.quoted and (held.isdigit() or _NAMED_FD.fullmatch(held)):
            fd = held  # `2>file`, `{fd}>file`: the descriptor, not a word
            stage.chars.clear()
            stage.in_word = False
        self._end_word(stage)
        op = next(op for op in _REDIRECT_OPS if self.text.startswith(op, self.pos))
        self.pos += len(op)
        stage.pending_op, stage.pending_fd = op, fd
        if stage.keyword_words < 0:
            # After a redirection no word is a keyword: `! >f then` runs a program `then`.
            stage.keyword_words, stage.leading_keywords = len(stage.words), False

    def _read_heredocs(self) -> list[SimpleCommand]:
        """Read here-document bodies; an unquoted one still runs its `$( )` and backticks."""
        found: list[SimpleCommand] = []
        for doc in self.heredocs:
            doc.text = self._heredoc_body(doc)
            if doc.quoted:
                self._note_code_text(doc.text)
            else:
                body, scratch = _Parser(doc.text, self.nesting), _Stage(0, 0)
                body._read_double_quoted(scratch, until_end=True)
                self.functions |= body.functions
                self.quoted_code |= body.quoted_code
                found.extend(part for sub in scratch.subs for part in sub.parts)
        self.heredocs.clear()
        return found

    def _heredoc_body(self, doc: HereDoc) -> str:
        """The body of `doc` from `pos` up to its delimiter line (which is consumed), refusing
        the ends bash finds otherwise than this reader."""
        start = body_end = self.pos
        while self.pos < len(self.text):
            end = self.text.find("\n", self.pos)
            end = len(self.text) if end < 0 else end
            line = self.text[self.pos : end]
            line_start, self.pos = self.pos, min(end + 1, len(self.text))
            line = line.lstrip("\t") if doc.strip_tabs else line
            if line == doc.delimiter:
                return self.text[start:line_start]
            if not doc.quoted and (len(line) - len(line.rstrip("\\"))) % 2 == 1:
                # Bash joins the lines first: `E\` then `OF` is the delimiter `EOF`.
                raise TooComplexError("a line continuation inside a here-document")
            if self.in_substitution and line.startswith(doc.delimiter):
                # Bash ends a body at `EOF)` inside `$(…)`; where exactly is not followed.
                raise TooComplexError("here-document inside a command substitution whose "
                                      "end is not a line of its own")
            body_end = self.pos
        if self.in_substitution:
            raise TooComplexError("here-document inside a command substitution with no end")
        return self.text[start:body_end]

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
            self._check_word(stage, word)
            if stage.quoted and stage.keyword_words < 0:
                stage.keyword_words = len(stage.words)
            stage.words.append(word)
        stage.chars.clear()
        stage.in_word = stage.quoted = False
        stage.last_sub = None
        stage.end = self.pos

    def _read_case_pattern(self, stage: _Stage) -> None:
        """`(a|b)` or `a|b)` before a case's commands: words to match, not commands; the
        substitutions in them run. `esac` instead ends the case (read as a keyword)."""
        self.expect_pattern = False
        if _ESAC.match(self.text, self.pos):
            self.open_cases = max(self.open_cases - 1, 0)
            return
        self.pos += self.text.startswith("(", self.pos)
        scratch = _Stage(self.pos, self.pos)
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == ")":
                self.pos += 1
                stage.subs.extend(scratch.subs)
                return
            if char in " \t|":
                self.pos += 1
            elif char in "\n;&<>(":
                raise TooComplexError("a case pattern this reader does not follow")
            else:
                self._read_word_piece(scratch, in_double_quotes=False)
        raise ShellSyntaxError("unterminated case pattern")

    def _check_word(self, stage: _Stage, word: str) -> None:
        """Refuse what this reader does not follow; note whether a command may start next."""
        refuse_word(stage.words, word)
        if stage.test_closed:
            # bash ends a `[[ … ]]` command at its `]]`: `if [[ x ]] then rm …; fi` runs `rm`.
            raise TooComplexError(f"a word after the ]] of [[ … ]] ({word})")
        if not stage.quoted and word == "[[" and stage.leading_keywords:
            stage.test_open = True
        elif not stage.quoted and word == "]]" and stage.test_open:
            stage.test_closed = True
        if stage.leading_keywords and word == "case":
            if self.in_substitution:
                raise TooComplexError("case inside a command substitution")
            stage.case_at = len(stage.words)
        elif word == "in" and stage.case_at >= 0 and len(stage.words) == stage.case_at + 2:
            self.open_cases += 1
            self.expect_pattern = True
        elif word == "esac" and stage.leading_keywords:
            self.open_cases = max(self.open_cases - 1, 0)
        # `for x do …`, `for ((…)) do …` and `for ((…)) { …; }`: a command starts after `do`, and
        # after the `{` of a `for`/`select` header.
        opens_body = word == "{" and stage.words[:1] in (["for"], ["select"])
        stage.leading_keywords = not stage.quoted and (word == "do" or opens_body or (
            stage.leading_keywords and (word in KEYWORDS or word == "for")))

    def _end_stage(
        self, stage: _Stage, pipeline: list[_Stage], out: list[SimpleCommand], piped: bool
    ) -> _Stage:
        """Close the current command; close the pipeline too unless a pipe follows."""
        stage.words = command_words(stage.words, self.functions, stage.keyword_words, stage.piped_in)
        if stage.words or stage.redirects or stage.subs:
            pipeline.append(stage)
        if not piped:
            out.extend(self._close_pipeline(pipeline))
            pipeline.clear()
        return _Stage(self.pos, self.pos, piped_in=piped)

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
                hidden = hidden or unknown_program(stage_views[index])
                following = stages[index + 1].words[:1] if index + 1 < len(stages) else []
                out.append(SimpleCommand(
                    words, self.text[stage.start : stage.end].strip(), tuple(stage.redirects),
                    later, following[0] if following else "", hidden, tuple(code),
                    tuple(stage_views[index])))
        return out
