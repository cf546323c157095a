"""What the shell splitter produces, and the records it keeps while it reads a line.

`Redirect`, `HereDoc`, `SimpleCommand` and `Line` are the results (see `shellsplit`); `Stage`,
`Sub` and `FileInput` are the parser's working records, shared with `shellcode`, which decides
what program text a command hands to a shell.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bashgraph.tools.safety.wrappers import View


@dataclass(frozen=True, slots=True)
class Redirect:
    """One redirection: its operator without the fd number (`>`, `>>`, `<`, `&>`...) and target."""

    op: str
    target: str


@dataclass(slots=True, eq=False)
class HereDoc:
    """A here-document; its body is filled in when the parser reaches the lines after it."""

    delimiter: str
    quoted: bool
    strip_tabs: bool
    text: str = ""


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One command bash would run, as words without quotes.

    `words` has leading assignments and keywords removed and the program reduced to its base name
    (`/usr/bin/rm` reads `rm`). `executed_by` names the commands that may run this command's
    output as code: a later pipeline stage that reads its program from stdin (`curl … | sh`), or
    an enclosing `bash -c "$(…)"`, `eval "$(…)"`, `source <(…)`. `pipes_to` is the program of
    the next pipeline stage. `code` is program text a shell among the views will parse (a
    here-document, a here-string, `echo …|`); `hidden_code` says why this command runs code the
    rules cannot read (empty when it does not).
    """

    words: tuple[str, ...]
    text: str
    redirects: tuple[Redirect, ...] = ()
    executed_by: tuple[str, ...] = ()
    pipes_to: str = ""
    hidden_code: str = ""
    code: tuple[str | HereDoc, ...] = field(default=(), compare=False)
    views: tuple[View, ...] = field(default=(), compare=False, repr=False)  # `wrappers.views`


@dataclass(frozen=True, slots=True)
class Line:
    """Every simple command of a line, and the names of the shell functions it defines."""

    parts: tuple[SimpleCommand, ...]
    functions: frozenset[str]


class FileInput:
    """stdin from a file: like a script operand, the rules do not read it."""


FILE = FileInput()


@dataclass(slots=True, eq=False)
class Sub:
    """A command or process substitution: its text as written and the commands inside."""

    raw: str
    parts: list[SimpleCommand]


@dataclass
class Stage:
    """A simple command being read, with the commands found inside its words."""

    start: int
    end: int
    words: list[str] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    subs: list[Sub] = field(default_factory=list)
    chars: list[str] = field(default_factory=list)
    in_word: bool = False
    quoted: bool = False
    pending_op: str | None = None
    pending_fd: str = ""
    # What stdin is: here-string text, a here-document, a file, or `< <(…)`.
    stdin: str | HereDoc | Sub | FileInput | None = None
    last_sub: Sub | None = None
    # True while every word so far is a keyword (`!`, `if`, `for`…): a `((` here is arithmetic.
    leading_keywords: bool = True
    case_at: int = -1  # where `case` is among the words, when it starts this command
    test_open: bool = False  # a `[[ … ]]` starts this command (`if [[` too)
    test_closed: bool = False  # and has ended at its `]]`
    # How many leading words may be keywords: those before the first quoted word (`'if'` is a
    # program) or redirection (`>x !` runs `!`); -1 while there is neither.
    keyword_words: int = -1
    piped_in: bool = False  # a pipe comes before: no pipeline starts here (`| time ls`)
