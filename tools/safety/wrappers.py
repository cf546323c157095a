"""What a simple command really runs, for the approval rules.

`sudo -u x nice -n 5 rm -rf d` runs `rm -rf d` in the end; `find . -exec rm {} +` runs `rm` on what
`find` walks; `xargs rm -rf` runs `rm` on arguments that arrive on stdin. `views` lists each of
these so a rule about `rm` sees every `rm`.

Options are read the way each program's own parser reads them: short options bundle (`-un5`),
a short option that takes a value takes the rest of its word or the next word, a long option
takes its value after `=` or as the next word, and GNU long options may be abbreviated to any
unambiguous prefix (`timeout --sig KILL 5 rm`). Options end at `--` or the first operand.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from bashgraph.tools.safety.find_command import find_exec_commands
from bashgraph.tools.safety.shellerrors import TooComplexError
from bashgraph.tools.safety.wrapper_specs import SHELL_WHEN_BARE, WRAPPERS, Spec

#: Programs that run program text read from stdin when given no script operand.
INTERPRETERS = re.compile(r"(?:ba|da|z|k|mk|a|fi|bu|lk|r?yash)?sh|python[0-9.]*|pypy[0-9.]*|perl[0-9.]*"
                          r"|ruby[0-9.]*|node|nodejs|php[0-9.]*|lua[0-9.]*|tclsh[0-9.]*")
SHELLS = re.compile(r"(?:ba|da|z|k|mk|a|fi|bu|lk|r?yash)?sh")
#: Commands that run their arguments as shell code.
EVALUATORS = frozenset({"eval", "source", "."})
#: Names of one of the process's own file descriptors (`fd_path`): `/dev/stdin`, `/dev/fd/N`,
#: `/proc/self/fd/N`, `/proc/thread-self/fd/N`, `/proc/$$/fd/N`, `/proc/PID/fd/N` (any PID: the
#: rules cannot tell it from the shell's), however many slashes separate the parts.
_FD_PATH = re.compile(r"/+dev/+(?:(stdin)|(stdout)|(stderr)|fd/+(\d+))"
                      r"|/+proc/+(?:self|thread-self|\$\$|\$BASHPID|\d+)/+(?:task/+\d+/+)?fd/+(\d+)")
#: More wrappers than this in one command is refused as too complex (the views would grow as
#: the square of the command's length).
MAX_VIEWS = 16
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^]]*\])?\+?=")


#: bash's own options that take a value: `-o pipefail`, `-O extglob`, `--rcfile FILE`.
_SHELL_VALUED_SHORT = "oO"
_SHELL_VALUED_LONG = ("--rcfile", "--init-file")


@dataclass(frozen=True, slots=True)
class View:
    """A command as one program sees it; `args_from_stdin` for `xargs`-fed arguments.

    `text` is the words joined by single spaces, what patterns are matched against (joined once
    here: every rule reads it).
    """

    words: tuple[str, ...]
    args_from_stdin: bool = False
    text: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", " ".join(self.words))


@dataclass(frozen=True, slots=True)
class ShellCall:
    """How a shell was asked to find its program: a `-c` script, a script operand, or stdin."""

    script: str | None  # the `-c` operand
    operand: str | None  # a script file (or `<(…)`)
    reads_stdin: bool
    script_at: int = -1  # the index of the `-c` operand among the words


def views(words: tuple[str, ...], args_from_stdin: bool = False) -> list[View]:
    """The command, then what each wrapper in it runs: `sudo nice rm x` -> sudo…, nice…, rm….

    Raises `TooComplexError` past `MAX_VIEWS` views: each view copies the rest of the words.
    """
    if not words:
        return []
    if (words[0] not in WRAPPERS and words[0] not in SHELL_WHEN_BARE and words[0] != "find"
            and not _runs_positional(words)):
        return [View(words, args_from_stdin)]  # the usual case, quickly
    found: list[View] = []
    pending = [View(words, args_from_stdin)]
    while pending:
        view = pending.pop()
        found.append(view)
        if len(found) > MAX_VIEWS:
            raise TooComplexError(f"more than {MAX_VIEWS} wrapped commands in one command")
        inner = [View((program_name(w[0]), *w[1:])) for w in reversed(find_exec_commands(view.words))]
        from_stdin = view.args_from_stdin or view.words[0] == "xargs"
        inner[:0] = [View(wrapped, from_stdin) for wrapped in reversed(_wrapped_commands(view.words))]
        pending.extend(inner)
    return found


def has_braces(word: str) -> bool:
    """True when bash may brace-expand `word` into several words (`{a,b}`, `{1..3}`)."""
    opening = word.find("{")
    rest = word[opening:] if opening >= 0 else ""
    return "}" in rest and ("," in rest or ".." in rest)


def shell_call(words: tuple[str, ...]) -> ShellCall:
    """Read a shell's options (`bash -eo pipefail -c CODE`, `sh -s`, `bash --rcfile f x.sh`)."""
    index, has_c, has_s = 1, False, False
    while index < len(words):
        word = words[index]
        if word in ("--", "-"):
            index += 1
            break
        if word.startswith("--"):
            name = word.partition("=")[0]
            valued = "=" not in word and long_option(name, _SHELL_VALUED_LONG) is not None
            index += 2 if valued else 1
        elif word[:1] in "-+" and len(word) > 1:
            letters = word[1:]
            has_c = has_c or "c" in letters
            has_s = has_s or "s" in letters
            index += 1 + sum(letter in _SHELL_VALUED_SHORT for letter in letters)
        else:
            break
    operands = words[index:]
    if has_c:
        return ShellCall(operands[0] if operands else None, None, False, index)
    if operands and not has_s and fd_path(operands[0]) != 0:
        return ShellCall(None, operands[0], False)
    return ShellCall(None, None, True)


def runs_stdin_as_code(words: tuple[str, ...]) -> bool:
    """True for an interpreter reading its program from stdin: `sh`, `bash -s`, `python3 -`,
    `bash /dev/stdin`, `source /dev/stdin`."""
    if words[:1] in ((".",), ("source",)):
        return len(words) > 1 and fd_path(words[1]) == 0
    if not words or not INTERPRETERS.fullmatch(words[0]):
        return False
    if SHELLS.fullmatch(words[0]):
        return shell_call(words).reads_stdin
    for word in words[1:]:
        if word == "-":
            return True
        if not word.startswith("-"):
            return fd_path(word) == 0  # else a script file
        if word[1:2] != "-" and set(word[1:]) & set("cmeEprW"):
            return False  # -c CODE, -m module, -e CODE, -r CODE (php)
        if word in ("--eval", "--print", "--version", "--help"):
            return False
    return True


def fd_path(word: str) -> int | None:
    """The file descriptor `word` names (`/dev/stdin` is 0, `/dev//fd/3` is 3), or None."""
    match = _FD_PATH.fullmatch(word)
    if match is None:
        return None
    stdin, stdout, stderr, dev_fd, proc_fd = match.groups()
    return 0 if stdin else 1 if stdout else 2 if stderr else int(dev_fd or proc_fd)


def program_name(word: str) -> str:
    """The base name of a program word: `/usr/bin/rm` -> `rm` (a substitution, or a word bash
    brace-expands into several, stays whole)."""
    if "/" not in word or word.startswith(("$(", "`")) or has_braces(word):
        return word
    return word.rsplit("/", 1)[-1]


def long_option(name: str, known: tuple[str, ...]) -> str | None:
    """The long option `name` stands for: itself, or the one option it is a prefix of.

    GNU getopt and git accept any unambiguous prefix (`--rec` is `--recursive`). An ambiguous
    prefix is an error for the program; here it resolves to the first candidate, since the
    program refuses to run either way.
    """
    if name in known:
        return name
    if len(name) < 3:
        return None
    return next((option for option in known if option.startswith(name)), None)


def _wrapped_commands(words: tuple[str, ...]) -> list[tuple[str, ...]]:
    """What a wrapper runs (one command), or, past an option its spec does not know, every
    later word that could start the command: an unknown option may take the next word."""
    return [(program_name(rest[0]), *rest[1:]) for rest in _wrapped_words(words) if rest]


def _wrapped_words(words: tuple[str, ...]) -> list[tuple[str, ...]]:
    """`_wrapped_commands`, the program word as written."""
    if _runs_positional(words):
        return [words[_positional_start(words) :]]
    if words[0] == "script":  # not a wrapper: `-c CODE` is `inline_script`, else a shell
        return [] if _command_option(words, _COMMAND_OPTION["script"]) is not None else [_BARE_SHELL]
    spec = WRAPPERS.get(words[0])
    if spec is None:
        return []
    if words[0] == "setarch" and len(words) > 1 and not words[1].startswith("-"):
        words = (words[0], *words[2:])  # the architecture
    index = 1
    split: tuple[str, ...] = ()
    while index < len(words):
        word = words[index]
        if word == "--":
            index += 1
            break
        if words[0] == "env" and (ASSIGNMENT.match(word) or word == "-"):
            index += 1
            continue
        if not word.startswith("-") or len(word) == 1:
            break
        read = _read_option(words, index, spec)
        if read is None:  # the unknown option may take the last word, leaving no command
            bare = [_BARE_SHELL] if words[0] in SHELL_WHEN_BARE else []
            return [*_every_later_command(words, index + 1), *bare]
        if read.no_command:
            return []
        split = read.split or split
        index += read.consumed
    rest = (*split, *words[index + spec.operands :])
    if not rest and words[0] in SHELL_WHEN_BARE and not set(words[1:]) & set(_HELP_WORDS):
        return [_BARE_SHELL]  # `unshare -r`, `chroot /`: $SHELL reads its program from stdin
    if words[0] == "flock" and rest[:1] in (("-c",), ("--command",)):
        return []  # `flock FILE -c CODE`: shell code (`inline_script`)
    return [rest]


#: The shell a wrapper given no command starts (read as one that reads stdin).
_BARE_SHELL = ("sh",)
_HELP_WORDS = ("--help", "--version", "-h", "-V")


@dataclass(frozen=True, slots=True)
class _Option:
    consumed: int  # words
    no_command: bool = False
    split: tuple[str, ...] = ()  # `env -S '…'`: the words it splits into


def _read_option(words: tuple[str, ...], index: int, spec: Spec) -> _Option | None:
    """The option at `index`, or None when the spec does not know it."""
    word, following = words[index], words[index + 1 : index + 2]
    if word.startswith("--"):
        name, eq, value = word.partition("=")
        full = long_option(name, spec.long_valued + spec.long_flags + spec.no_command_long)
        if full is None:
            return None
        takes_next = not eq and full in spec.long_valued
        if takes_next:
            value = following[0] if following else ""
        split = _split_string(value) if full == "--split-string" else ()
        return _Option(2 if takes_next else 1, full in spec.no_command_long, split)
    for offset, letter in enumerate(word[1:], start=1):
        if not spec.knows_short(letter):
            return None
        if letter in spec.no_command:
            return _Option(1, no_command=True)
        glued = word[offset + 1 :]
        if letter in spec.short_optional:
            return _Option(1)  # its value, if any, is the rest of the word
        if letter in spec.short_valued:
            value = glued or (following[0] if following else "")
            split = _split_string(value) if (words[0], letter) == ("env", "S") else ()
            return _Option(1 if glued else 2, split=split)
    return _Option(1)


def _every_later_command(words: tuple[str, ...], start: int) -> list[tuple[str, ...]]:
    starts = [index for index in range(start, len(words)) if not words[index].startswith("-")]
    if len(starts) > MAX_VIEWS:  # counted first: each view copies the rest of the words
        raise TooComplexError(f"{words[0]} has an option not known to the rules and too many "
                              "words after it")
    return [words[index:] for index in starts]


#: A `-c` script that runs its positional parameters: `sh -c '"$@"' _ rm -rf x` runs `rm`.
_POSITIONAL = re.compile(r"\$(?:[@*1-9]|\{[@*1-9])")


def _runs_positional(words: tuple[str, ...]) -> bool:
    if not SHELLS.fullmatch(words[0]):
        return False
    call = shell_call(words)
    return call.script is not None and _POSITIONAL.search(call.script) is not None and (
        call.script_at + 2 < len(words))


def _positional_start(words: tuple[str, ...]) -> int:
    """Where `$1` is among the words of `sh -c SCRIPT NAME ARGS…` (after SCRIPT and `$0`)."""
    return shell_call(words).script_at + 2


def _split_string(value: str) -> tuple[str, ...]:
    """`env -S 'rm -rf x'`: the string is split into words like a shell would (roughly)."""
    try:
        return tuple(shlex.split(value))
    except ValueError:
        return tuple(value.split())


#: Programs whose `-c`/`--command` value a shell runs, and their other short options that take
#: a value (`su -s /bin/sh -c CODE`, `flock FILE -c CODE`, `script -q -c CODE log`).
_COMMAND_OPTION = {"su": "wgGs", "runuser": "ugGsw", "script": "IOBTmEo", "flock": "wE"}


def inline_script(words: tuple[str, ...]) -> str | None:
    """The code bash parses again: `bash -c CODE`, `sh -ec CODE`, `eval ARGS…`, `su -c CODE`,
    `flock F -c CODE`, `script -c CODE`, `sg GROUP CODE`, `watch CODE…` (else None)."""
    name = words[0]
    if name == "eval":
        args = words[2:] if words[1:2] == ("--",) else words[1:]
        return " ".join(args)
    if name in _COMMAND_OPTION:
        return _command_option(words, _COMMAND_OPTION[name])
    if name == "sg":  # `sg [-] GROUP [-c] CODE`: the rest goes to `sh -c`
        rest = [w for w in words[1:] if w != "-"][1:]
        return " ".join(rest[1:] if rest[:1] == ["-c"] else rest) or None
    if name == "watch":  # read as code even with `-x`: that can only add parts
        wrapped = _wrapped_words(words)
        return (" ".join(wrapped[0]) or None) if len(wrapped) == 1 else None
    if not SHELLS.fullmatch(name):
        return None
    return shell_call(words).script


def _command_option(words: tuple[str, ...], valued: str) -> str | None:
    """The value of `-c`/`--command`/`--session-command`, wherever it is among the options."""
    index = 1
    while index < len(words):
        word, following = words[index], words[index + 1 : index + 2]
        index += 1
        if word == "--":
            return None
        name, eq, value = word.partition("=")
        if word.startswith("--") and long_option(name, ("--command", "--session-command")):
            return value if eq else (following[0] if following else None)
        if not word.startswith("-") or word.startswith("--"):
            continue
        for offset, letter in enumerate(word[1:], start=1):
            if letter == "c":
                return word[offset + 1 :] or (following[0] if following else None)
            if letter in valued:
                index += 0 if word[offset + 1 :] else 1
                break
    return None


def runs_arguments(words: tuple[str, ...]) -> bool:
    """True when a command's arguments may become code (`bash -c "$(…)"`, `eval`, `. <(…)`)."""
    return any(v.words[0] in EVALUATORS or INTERPRETERS.fullmatch(v.words[0]) is not None
               for v in views(words))
