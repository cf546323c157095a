"""What the shell reader refuses to judge: constructs it cannot follow with certainty.

The approval rules fail closed. A line is allowed only when the reader understands every
construct in it; these checks find the rest and raise `TooComplexError` with a reason a person
understands, and the policy asks. Each was a way to run a command the reader did not see (see
tests/tools/safety/test_policy_fail_closed.py, and the differential oracle that found several:
tests/tools/safety/test_policy_oracle.py). The others live where the reader meets them:
quotes inside `${…}` and `${x@P}` (shellwords), `case` and unfinished here-documents inside a
substitution, and line continuations in a here-document (shellsplit).
"""

from __future__ import annotations

import re

from bashgraph.tools.safety.shellerrors import TooComplexError
from bashgraph.tools.safety.shellkeywords import KEYWORDS
from bashgraph.tools.safety.wrappers import ASSIGNMENT, SHELLS, View

#: Variables whose value bash runs as code or reads options from (`PS4='$(…)'` with `set -x`,
#: `BASHOPTS=expand_aliases bash -c …`), and the exported functions a child bash defines from
#: its environment (`env 'BASH_FUNC_ls%%=() { …; }' bash -c ls` runs the body as `ls`).
_CODE_VARIABLES = re.compile(r"(?:PS[0-4]|PROMPT_COMMAND|BASH_ENV|ENV|BASHOPTS|SHELLOPTS"
                             r"|BASH_FUNC_[^=]*)\+?=")
#: Options that change how bash reads the lines after them.
_PARSE_OPTIONS = frozenset({"expand_aliases", "extglob"})
#: Where bash evaluates a variable's text as code: arithmetic and array subscripts, `[ -v`,
#: `[[ ]]`, `${!x}`, and builtins that take a variable name or evaluate their operands.
_EVALUATES = re.compile(r"\[|\(\(|\$\{!|\b(?:let|declare|typeset|local|readonly|read|unset|"
                        r"printf|mapfile|readarray|getopts|wait|complete|bind|test)\b")
_GLOB = re.compile(r"[*?]|\[.*\]")
_OPEN_SUBSCRIPT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\[[^\]]*$")
#: Shells that read a script the way POSIX sh does (Debian's sh is dash).
_POSIX_SHELLS = frozenset({"sh", "dash", "ash"})
#: Where bash and a POSIX sh split a script differently: dash runs `id &>f rm x` as `id &` and
#: `>f rm x`, `((cmd))` as two subshells, and `$'…'` as `$` and a quoted string.
_BASH_ONLY = re.compile(r"&>|\|&|(?<!\$)\(\(|\$'|\$\"|<<<|;;&|;&|\b(?:function|select|coproc)\b")


def refuse_word(words: list[str], word: str) -> None:
    """Refuse `word`, the next word of a command whose words so far are `words`, when it makes
    bash run code the reader cannot see."""
    if _OPEN_SUBSCRIPT.match(word) and all(w in KEYWORDS or ASSIGNMENT.match(w) for w in words):
        # Where an assignment may stand, bash reads `name[…]` to its `]` across blanks: the
        # command `date[a b]` is one word to bash, three to this reader.
        raise TooComplexError(f"an array subscript that spans words ({word} …)")
    if _CODE_VARIABLES.match(word):
        raise TooComplexError(f"sets {word.partition('=')[0]}, a variable bash takes code or options from")
    if word in _PARSE_OPTIONS and "shopt" in words:
        raise TooComplexError(f"shopt {word} changes how bash reads the rest of the line")
    if "hash" in words[:2] and word.startswith("-") and "p" in word:
        raise TooComplexError("hash -p makes a program's name run another program")


def refuse_other_shells(programs: frozenset[str], script: str) -> None:
    """Refuse a script that a shell among `programs` (a part's views) other than bash may read
    differently from this reader. One search of the script per shell name."""
    for name in sorted(programs):
        if name == "bash" or SHELLS.fullmatch(name) is None:
            continue
        if name not in _POSIX_SHELLS:
            raise TooComplexError(f"a script for {name}, which reads it otherwise than bash")
        bash_only = _BASH_ONLY.search(script)
        if bash_only is not None:
            raise TooComplexError(f"bash syntax ({bash_only.group()}) in a script for {name}, "
                                  "which reads it otherwise")


def evaluates_text(script: str) -> bool:
    """True when `script` may evaluate a variable's text as code (then quoted text that reads
    like code, `'a[$(cmd)]'`, may run: see `parse_line`)."""
    return _EVALUATES.search(script) is not None


def deferred_script(words: tuple[str, ...]) -> str | None:
    """The code `trap CODE SIGNAL…` runs later (a lone operand, or `-`, resets a signal), or the
    callback of `mapfile -C CODE` / `readarray -C CODE`."""
    if words[:1] in (("mapfile",), ("readarray",)):
        code = _callback(words)
        if code is not None and "\n" in code:
            # Bash appends the index and the line to the code's last line before it runs it.
            raise TooComplexError("a mapfile callback of several lines")
        return None if code is None else f"{code} 0 line"
    if words[:1] != ("trap",):
        return None
    operands = list(words[2:] if words[1:2] == ("--",) else words[1:])
    if len(operands) < 2 or operands[0] in ("-", "-l", "-p"):
        return None
    return operands[0]


def unknown_program(stage_views: list[View]) -> str:
    """Why a program of the stage could be anything, or "": one named by a variable (`$x`,
    `${c}m`, `sudo $CMD`), a pattern (`/???/r?`) or a process substitution. The stage runs code
    the rules cannot read (`hidden_code`), as when a command's output names it (`$(printf rm)`,
    which `shellcode` reports)."""
    for index, view in enumerate(stage_views):
        name = view.words[0]
        if index == 0 and name.startswith(("$(", "`")):
            continue
        if "$" in name or "`" in name or "<(" in name or ">(" in name:
            return f"the program's name comes from a variable or a command ({name})"
        if name not in ("[", "[[") and _GLOB.search(name) is not None:
            return f"the program's name is a pattern bash expands ({name})"
    return ""


def _callback(words: tuple[str, ...]) -> str | None:
    """The value of `-C` in `mapfile`'s options (`-C CODE`, `-CCODE`, bundled `-tC CODE`)."""
    for index, word in enumerate(words[1:], start=1):
        if word == "--" or not word.startswith("-"):
            return None
        if "C" in word:
            value = word[word.index("C") + 1 :]
            return value or (words[index + 1] if index + 1 < len(words) else None)
    return None
