"""What `find` walks and what it runs: its start paths and its `-exec` commands."""

from __future__ import annotations

import re

from bashgraph.tools.safety.shellerrors import TooComplexError

_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
#: The options `find` takes before its start paths: -H -L -P, -O<level>, -D <debug options>.
_FIND_LEADING = re.compile(r"-[HLP]|-O\d*|-D")


#: Stands for start paths `find` reads from a file (`-files0-from F`): unknown, like a variable.
FILES0_FROM = "${files0_from}"


def find_start_paths(words: tuple[str, ...]) -> list[str]:
    """The paths `find` walks: the operands before its first expression word (default `.`), or
    unknown paths when it reads them from a file (`-files0-from F`, anywhere among its words)."""
    if "-files0-from" in words:
        return [FILES0_FROM]
    paths: list[str] = []
    rest = iter(words[1:])
    for word in rest:
        if word.startswith(("-", "(", "!")) and word not in ("-", "--"):
            if paths or not _FIND_LEADING.fullmatch(word):
                break
            if word == "-D":
                next(rest, None)  # its debug options (`-D stat`)
            continue
        paths.append(word)
    return paths or ["."]


def find_exec_commands(words: tuple[str, ...]) -> list[tuple[str, ...]]:
    """`find P Q -exec rm {} ;` -> `rm P/* Q/*`: `{}` stands for anything under a start path
    (the program word as written).

    One command per `-exec`, with each `{}` word repeated once per start path. Raises
    `TooComplexError` when that would make the text more than a few times longer: many
    `-exec`s times many start paths, or many `{}` in a word times a long start path, grows as
    the square of the command. The budget is in characters, checked before a word is built.
    """
    if not words or words[0] != "find":
        return []
    starts = list(dict.fromkeys(f"{start.rstrip('/')}/*" for start in find_start_paths(words)))
    commands: list[tuple[str, ...]] = []
    budget = 4 * sum(len(word) + 1 for word in words) + 4096
    index = 0
    while index < len(words):
        if words[index] not in _FIND_EXEC:
            index += 1
            continue
        end = index + 1
        while end < len(words) and words[end] not in (";", "+"):
            end += 1
        inner: list[str] = []
        for word in words[index + 1 : end]:
            braces = word.count("{}")
            for start in starts if braces else ("{}",):
                budget -= len(word) + braces * (len(start) - 2) + 1
                if budget < 0:
                    raise TooComplexError("find runs too many commands on too many start paths")
                inner.append(word.replace("{}", start) if braces else word)
        if inner:
            commands.append(tuple(inner))
        index = end
    return commands
