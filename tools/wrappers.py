"""What a simple command really runs, for the approval rules.

`sudo -u x nice -n 5 rm -rf d` runs `rm -rf d` in the end; `find . -exec rm {} +` runs `rm` on what
`find` walks; `xargs rm -rf` runs `rm` on arguments that arrive on stdin. `views` lists each of
these so a rule about `rm` sees every `rm`. Option parsing here is deliberately simple (short
options that take a value are listed per wrapper; `--long value` is read as a flag).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Programs that run program text read from stdin when given no script operand.
INTERPRETERS = re.compile(r"(?:ba|da|z|k|mk|a|fi)?sh|python[0-9.]*|perl|ruby|node|php|lua")
SHELLS = re.compile(r"(?:ba|da|z|k|mk|a|fi)?sh")
#: Commands that run their arguments as shell code.
EVALUATORS = frozenset({"eval", "source", "."})
#: Wrappers that run another command: short options that take a value, operands before it.
_WRAPPERS: dict[str, tuple[str, int]] = {
    "sudo": ("ughpCDRTUrt", 0), "doas": ("uC", 0), "env": ("uCS", 0), "nice": ("n", 0),
    "ionice": ("cnp", 0), "timeout": ("sk", 1), "stdbuf": ("ioe", 0), "setsid": ("", 0),
    "nohup": ("", 0), "exec": ("a", 0), "command": ("", 0), "builtin": ("", 0),
    "time": ("fo", 0), "chrt": ("", 1), "taskset": ("", 1), "unbuffer": ("", 0),
    "xargs": ("InLPdEsa", 0),
}
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^]]*\])?\+?=")


@dataclass(frozen=True, slots=True)
class View:
    """A command as one program sees it; `args_from_stdin` for `xargs`-fed arguments."""

    words: tuple[str, ...]
    args_from_stdin: bool = False


def views(words: tuple[str, ...], args_from_stdin: bool = False) -> list[View]:
    """The command, then what each wrapper in it runs: `sudo nice rm x` -> sudo…, nice…, rm…."""
    if not words:
        return []
    found = [View(words, args_from_stdin)]
    if words[0] == "find":
        for inner in _find_exec_commands(words):
            found.extend(views(inner))
    spec = _WRAPPERS.get(words[0])
    if spec is not None:
        inner = _wrapped_command(words, *spec)
        found.extend(views(inner, args_from_stdin or words[0] == "xargs"))
    return found


def find_start_paths(words: tuple[str, ...]) -> list[str]:
    """The paths `find` walks: the operands before its first expression word (default `.`)."""
    paths: list[str] = []
    for word in words[1:]:
        if word.startswith(("-", "(", "!")) and word not in ("-", "--"):
            if paths or word not in ("-H", "-L", "-P"):
                break
            continue
        paths.append(word)
    return paths or ["."]


def runs_stdin_as_code(words: tuple[str, ...]) -> bool:
    """True for an interpreter reading its program from stdin: `sh`, `bash -s`, `python3 -`."""
    if not words or not INTERPRETERS.fullmatch(words[0]):
        return False
    shell = SHELLS.fullmatch(words[0]) is not None
    for word in words[1:]:
        if word == "-" or (shell and word.startswith("-") and "s" in word[1:]):
            return True
        if not word.startswith("-"):
            return False  # a script file
        if word[1:2] != "-" and set(word[1:]) & (set("c") if shell else set("cmeEp")):
            return False  # -c CODE, -m module, -e CODE
    return True


def program_name(word: str) -> str:
    """The base name of a program word: `/usr/bin/rm` -> `rm`."""
    return word.rsplit("/", 1)[-1] if "/" in word else word


def _wrapped_command(words: tuple[str, ...], valued: str, operands: int) -> tuple[str, ...]:
    index = 1
    while index < len(words):
        word = words[index]
        if word == "--":
            index += 1
            break
        if words[0] == "env" and ASSIGNMENT.match(word):
            index += 1
        elif word.startswith("-") and len(word) > 1:
            takes_value = not word.startswith("--") and word[-1] in valued
            index += 2 if takes_value else 1
        else:
            break
    rest = words[index + operands :]
    return (program_name(rest[0]), *rest[1:]) if rest else ()


def _find_exec_commands(words: tuple[str, ...]) -> list[tuple[str, ...]]:
    """`find P -exec rm {} ;` -> `rm P/*` for each start path (what `{}` can stand for)."""
    commands: list[tuple[str, ...]] = []
    for index, word in enumerate(words):
        if word not in _FIND_EXEC or index + 1 >= len(words):
            continue
        end = next((i for i in range(index + 1, len(words)) if words[i] in (";", "+")),
                   len(words))
        inner = words[index + 1 : end]
        for start in find_start_paths(words):
            found = f"{start.rstrip('/')}/*"
            substituted = tuple(w.replace("{}", found) for w in inner)
            if substituted:
                commands.append((program_name(substituted[0]), *substituted[1:]))
    return commands


def inline_script(words: tuple[str, ...]) -> str | None:
    """The code bash parses again: `bash -c CODE`, `sh -ec CODE`, `eval ARGS…` (else None)."""
    if words[0] == "eval":
        return " ".join(words[1:])
    if not SHELLS.fullmatch(words[0]):
        return None
    for index, word in enumerate(words[1:], start=1):
        if word.startswith("-") and not word.startswith("--") and "c" in word[1:]:
            return words[index + 1] if index + 1 < len(words) else None
        if not word.startswith(("-", "+")):
            return None
    return None


def runs_arguments(words: tuple[str, ...]) -> bool:
    """True when a command's arguments may become code (`bash -c "$(…)"`, `eval`, `. <(…)`)."""
    return any(v.words[0] in EVALUATORS or INTERPRETERS.fullmatch(v.words[0]) is not None
               for v in views(words))


