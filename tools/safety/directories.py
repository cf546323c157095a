"""Where a line's commands run and what `~` means there, for the path checks.

`policy._contexts` follows literal `cd`s along a line; this module says which parts are a `cd`
(also through `command cd` and `builtin cd`) and whether the line may change `HOME`, after which
`~` is unknown: `HOME=/etc; echo x >> ~/passwd` writes `/etc/passwd`.
"""

from __future__ import annotations

import re

from bashgraph.tools.safety.shellparts import SimpleCommand

_CD = frozenset({"cd", "pushd", "popd"})
#: `$HOME` and `${HOME}` only read it; any other `HOME` word may set it (`HOME=x`, `export HOME`,
#: `read HOME`, `for HOME in …`, `${HOME:=x}`, `declare -n h=HOME`).
_READS_HOME = re.compile(r"\$HOME\b|\$\{HOME\}")
_NAMES_HOME = re.compile(r"\bHOME\b")
#: Builtins that set variables named by their words (`declare "$n=x"`, `read "$n"`).
_SETTERS = frozenset({"declare", "typeset", "export", "local", "readonly", "read", "mapfile",
                      "readarray", "let"})
_SOURCES = frozenset({"source", "."})


def cd_words(part: SimpleCommand) -> tuple[str, ...] | None:
    """The words of the `cd`/`pushd`/`popd` this part runs (`builtin cd /x` too), or None."""
    for view in part.views or ():
        if view.words and view.words[0] in _CD:
            return view.words
    if part.words[:1] and part.words[0] in _CD:
        return part.words
    return None


def may_change_home(command: str, parts: list[SimpleCommand]) -> bool:
    """True when the line may set `HOME`: it names `HOME` other than as `$HOME`, in its text or
    in the unquoted words of any part (`declare "HO""ME=/etc"`), sets a variable whose name is
    computed, or sources a file."""
    texts = [command, *(" ".join(view.words) for part in parts for view in part.views or ())]
    if any(_NAMES_HOME.search(_READS_HOME.sub("", text)) for text in texts):
        return True
    for part in parts:
        for view in part.views or ():
            name = view.words[0] if view.words else ""
            if name in _SOURCES or _computed_names(view.words):
                return True
    return False


def _computed_names(words: tuple[str, ...]) -> bool:
    """A builtin setting a variable whose name is not on the line: `printf -v "$n"`,
    `declare "$n=x"`, `read "$n"` (the value, after `=`, may hold anything)."""
    if words[:1] == ("printf",):
        names = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "-v"]
        names += [w[2:] for w in words if w.startswith("-v") and len(w) > 2]
    elif words[:1] and words[0] in _SETTERS:
        names = [w.partition("=")[0] for w in words[1:] if not w.startswith("-")]
    else:
        return False
    return any("$" in name or "`" in name for name in names)
