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

from bashgraph.tools.safety.shellerrors import TooComplexError

#: Programs that run program text read from stdin when given no script operand.
INTERPRETERS = re.compile(r"(?:ba|da|z|k|mk|a|fi|bu|lk|r?yash)?sh|python[0-9.]*|pypy[0-9.]*|perl[0-9.]*"
                          r"|ruby[0-9.]*|node|nodejs|php[0-9.]*|lua[0-9.]*|tclsh[0-9.]*")
SHELLS = re.compile(r"(?:ba|da|z|k|mk|a|fi|bu|lk|r?yash)?sh")
#: Commands that run their arguments as shell code.
EVALUATORS = frozenset({"eval", "source", "."})
#: Names of the process's own stdin: a script file named so is the program read from stdin.
STDIN_FILES = frozenset({"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})
#: More wrappers than this in one command is refused as too complex (the views would grow as
#: the square of the command's length).
MAX_VIEWS = 16
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^]]*\])?\+?=")


@dataclass(frozen=True, slots=True)
class _Spec:
    """How one wrapper reads its options before the command it runs."""

    short_valued: str = ""  # short options that take a value
    long_valued: tuple[str, ...] = ()  # long options that take a value (`--x v` or `--x=v`)
    long_flags: tuple[str, ...] = ()  # long options that do not (`--x=v` still allowed)
    operands: int = 0  # operands between the options and the command (timeout's duration)
    no_command: str = ""  # short options after which nothing is run (`command -v`, `chrt -p`)
    no_command_long: tuple[str, ...] = ()


_WRAPPERS: dict[str, _Spec] = {
    "sudo": _Spec("ughpCDRTUrt", ("--user", "--group", "--host", "--prompt", "--close-from",
                                 "--chdir", "--role", "--type", "--other-user", "--command-timeout",
                                 "--chroot"),
                  ("--login", "--shell", "--preserve-env", "--set-home", "--non-interactive",
                   "--background", "--edit", "--stdin", "--bell", "--askpass", "--reset-timestamp",
                   "--remove-timestamp", "--validate", "--list", "--preserve-groups", "--help",
                   "--version"), no_command="lVvKke", no_command_long=("--list", "--validate",
                                                                         "--edit", "--version")),
    "doas": _Spec("uC"),
    "env": _Spec("uCS", ("--unset", "--chdir", "--split-string"),
                 ("--ignore-environment", "--null", "--debug", "--list-signal-handling",
                  "--block-signal", "--default-signal", "--ignore-signal", "--help", "--version")),
    "nice": _Spec("n", ("--adjustment",), ("--help", "--version")),
    "ionice": _Spec("cn", ("--class", "--classdata"), ("--ignore", "--help", "--version"),
                    no_command="pPu", no_command_long=("--pid", "--pgid", "--uid")),
    "timeout": _Spec("sk", ("--signal", "--kill-after"),
                     ("--foreground", "--preserve-status", "--verbose", "--help", "--version"),
                     operands=1),
    "stdbuf": _Spec("ioe", ("--input", "--output", "--error"), ("--help", "--version")),
    "setsid": _Spec("", (), ("--ctty", "--fork", "--wait", "--help", "--version")),
    "nohup": _Spec("", (), ("--help", "--version")),
    "exec": _Spec("a"),
    "command": _Spec(no_command="vV"),
    "builtin": _Spec(),
    "time": _Spec("fo", ("--format", "--output"),
                  ("--append", "--portability", "--verbose", "--quiet", "--help", "--version")),
    "chrt": _Spec("T", ("--sched-runtime", "--sched-period", "--sched-deadline"),
                  ("--all-tasks", "--batch", "--deadline", "--fifo", "--idle", "--other", "--rr",
                   "--reset-on-fork", "--max", "--verbose", "--help", "--version"),
                  operands=1, no_command="pm", no_command_long=("--pid", "--max")),
    "taskset": _Spec("", (), ("--all-tasks", "--cpu-list", "--help", "--version"), operands=1,
                     no_command="p", no_command_long=("--pid",)),
    "unbuffer": _Spec(),
    "chroot": _Spec("", ("--groups", "--userspec"), ("--skip-chdir", "--help", "--version"),
                    operands=1),
    "busybox": _Spec(),
    "xargs": _Spec("aIdLnPsE", ("--arg-file", "--delimiter", "--max-args", "--max-procs",
                                "--max-chars", "--max-lines", "--process-slot-var"),
                   ("--null", "--eof", "--replace", "--interactive", "--no-run-if-empty",
                    "--open-tty", "--exit", "--show-limits", "--verbose", "--help", "--version")),
}
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
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


def views(words: tuple[str, ...], args_from_stdin: bool = False) -> list[View]:
    """The command, then what each wrapper in it runs: `sudo nice rm x` -> sudo…, nice…, rm….

    Raises `TooComplexError` past `MAX_VIEWS` views: each view copies the rest of the words.
    """
    if not words:
        return []
    if words[0] not in _WRAPPERS and words[0] != "find":
        return [View(words, args_from_stdin)]  # the usual case, quickly
    found: list[View] = []
    pending = [View(words, args_from_stdin)]
    while pending:
        view = pending.pop()
        found.append(view)
        if len(found) > MAX_VIEWS:
            raise TooComplexError(f"more than {MAX_VIEWS} wrapped commands in one command")
        inner = [View(w) for w in reversed(_find_exec_commands(view.words))]
        wrapped = _wrapped_command(view.words)
        if wrapped:
            inner.insert(0, View(wrapped, view.args_from_stdin or view.words[0] == "xargs"))
        pending.extend(inner)
    return found


def has_braces(word: str) -> bool:
    """True when bash may brace-expand `word` into several words (`{a,b}`, `{1..3}`)."""
    opening = word.find("{")
    rest = word[opening:] if opening >= 0 else ""
    return "}" in rest and ("," in rest or ".." in rest)


#: The options `find` takes before its start paths: -H -L -P, -O<level>, -D <debug options>.
_FIND_LEADING = re.compile(r"-[HLP]|-O\d*|-D")


def find_start_paths(words: tuple[str, ...]) -> list[str]:
    """The paths `find` walks: the operands before its first expression word (default `.`)."""
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
        return ShellCall(operands[0] if operands else None, None, False)
    if operands and not has_s and operands[0] not in STDIN_FILES:
        return ShellCall(None, operands[0], False)
    return ShellCall(None, None, True)


def runs_stdin_as_code(words: tuple[str, ...]) -> bool:
    """True for an interpreter reading its program from stdin: `sh`, `bash -s`, `python3 -`,
    `bash /dev/stdin`, `source /dev/stdin`."""
    if words[:1] in ((".",), ("source",)):
        return len(words) > 1 and words[1] in STDIN_FILES
    if not words or not INTERPRETERS.fullmatch(words[0]):
        return False
    if SHELLS.fullmatch(words[0]):
        return shell_call(words).reads_stdin
    for word in words[1:]:
        if word == "-":
            return True
        if not word.startswith("-"):
            return word in STDIN_FILES  # else a script file
        if word[1:2] != "-" and set(word[1:]) & set("cmeEprW"):
            return False  # -c CODE, -m module, -e CODE, -r CODE (php)
        if word in ("--eval", "--print", "--version", "--help"):
            return False
    return True


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


def _wrapped_command(words: tuple[str, ...]) -> tuple[str, ...]:
    spec = _WRAPPERS.get(words[0])
    if spec is None:
        return ()
    index = 1
    split: tuple[str, ...] = ()
    while index < len(words):
        word = words[index]
        if word == "--":
            index += 1
            break
        if words[0] == "env" and (ASSIGNMENT.match(word) or word == "-"):
            index += 1
        elif word.startswith("--"):
            name, eq, value = word.partition("=")
            full = long_option(name, spec.long_valued + spec.long_flags)
            if full in spec.no_command_long:
                return ()
            takes_next = not eq and full in spec.long_valued
            if full == "--split-string":
                split = _split_string(words[index + 1] if takes_next and index + 1 < len(words)
                                      else value)
            index += 2 if takes_next else 1
        elif word.startswith("-") and len(word) > 1:
            letter, value, consumed = _short_options(word, spec, words[index + 1 : index + 2])
            if letter == "!":
                return ()
            if letter == "S" and words[0] == "env":
                split = _split_string(value)
            index += consumed
        else:
            break
    rest = (*split, *words[index + spec.operands :])
    return (program_name(rest[0]), *rest[1:]) if rest else ()


def _short_options(word: str, spec: _Spec, following: tuple[str, ...]) -> tuple[str, str, int]:
    """(the valued letter or "" or "!" for no command, its value, words consumed)."""
    for offset, letter in enumerate(word[1:], start=1):
        if letter in spec.no_command:
            return "!", "", 1
        if letter in spec.short_valued:
            if offset < len(word) - 1:
                return letter, word[offset + 1 :], 1
            return letter, following[0] if following else "", 2
    return "", "", 1


def _split_string(value: str) -> tuple[str, ...]:
    """`env -S 'rm -rf x'`: the string is split into words like a shell would (roughly)."""
    try:
        return tuple(shlex.split(value))
    except ValueError:
        return tuple(value.split())


def _find_exec_commands(words: tuple[str, ...]) -> list[tuple[str, ...]]:
    """`find P Q -exec rm {} ;` -> `rm P/* Q/*`: `{}` stands for anything under a start path.

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
            commands.append((program_name(inner[0]), *inner[1:]))
        index = end
    return commands


def inline_script(words: tuple[str, ...]) -> str | None:
    """The code bash parses again: `bash -c CODE`, `sh -ec CODE`, `eval ARGS…` (else None)."""
    if words[0] == "eval":
        args = words[2:] if words[1:2] == ("--",) else words[1:]
        return " ".join(args)
    if not SHELLS.fullmatch(words[0]):
        return None
    return shell_call(words).script


def runs_arguments(words: tuple[str, ...]) -> bool:
    """True when a command's arguments may become code (`bash -c "$(…)"`, `eval`, `. <(…)`)."""
    return any(v.words[0] in EVALUATORS or INTERPRETERS.fullmatch(v.words[0]) is not None
               for v in views(words))
