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
#: Builtins that set a variable whose name may be computed (`printf -v "$n"`), and commands that
#: run code the rules do not read (`source env.sh`).
_SETTERS = frozenset({"declare", "typeset", "export", "local", "readonly", "read", "printf",
                      "mapfile", "readarray", "let", "unset"})
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
            if name in _SOURCES or (name in _SETTERS and any(
                    "$" in word or "`" in word for word in view.words[1:])):
                return True
    return False
