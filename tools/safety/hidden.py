"""Program text the rules cannot read, found from what a command does rather than its name.

`shellsplit` marks a shell reading code from a pipe or a substitution (`part.hidden_code`). This
adds the rest of `@hidden-code`, judged on each view of a command (so `sudo`, `xargs` and the
other wrappers are seen through):

* an interpreter given its program on the command line: `python3 -c`, `perl -e`, `node -e`,
  `ruby -e`, `php -r`, … — as hidden as `| python3`;
* `awk` whose program runs commands (`system(…)`, a pipe `|`, `@load`, `-l`) and `sed` whose
  script does (`e`, `s///e`, or a script `sedscript` cannot read), or whose program file is
  text the line feeds it (`awk -f /dev/stdin <<<…`, `sed -f - f`, `awk -f <(…)`);
* `python3 -m timeit CODE`;
* a program name bash expands as a pattern (`/???/r?`, `/bin/r*`);
* `at`/`batch` scheduling the commands they read from stdin (`at now <<< reboot`);
* a shell or `source` reading its program from a file descriptor other than stdin
  (`bash /dev/fd/3 3<<<'…'`);
* a shell under `xargs` whose code comes from the text xargs reads (`xargs -0 sh -c`,
  `xargs -I{} sh -c {}`, `xargs sh -c '"$@"' _`);
* code a shell parses again whose program name is a variable (`eval "$X"`, `sh <<< "$X"`,
  `bash -c "$X"`): unknown like `echo "$X" | sh`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bashgraph.tools.safety.sedscript import runs_commands
from bashgraph.tools.safety.shellerrors import TooComplexError
from bashgraph.tools.safety.shellparts import SimpleCommand
from bashgraph.tools.safety.shellsplit import ShellSyntaxError, own_parts, split_command
from bashgraph.tools.safety.wrappers import SHELLS, View, fd_path, inline_script, shell_call


@dataclass(frozen=True, slots=True)
class _Inline:
    """How an interpreter takes program text on its command line."""

    code_letters: str  # short options whose value (or the rest of the word) is code
    code_long: tuple[str, ...] = ()
    valued: str = ""  # other short options that take the next word as a value
    anywhere: bool = False  # options are read after operands too (gdb, vim permute them)


_INTERPRETERS: tuple[tuple[re.Pattern[str], _Inline], ...] = tuple(
    (re.compile(pattern), spec) for pattern, spec in (
        (r"python[0-9.]*|pypy[0-9.]*", _Inline("c", valued="WXQ")),
        # perl's -M/-m are `use MODULE…;`: code too (`-M'strict;system…'`)
        (r"perl[0-9.]*", _Inline("eEMm", valued="I")),
        (r"ruby[0-9.]*|jruby", _Inline("e", valued="ICEFr")),
        (r"node|nodejs|bun|deno", _Inline("ep", ("--eval", "--print"), valued="rC")),
        (r"php[0-9.]*", _Inline("rBRE", valued="cdzf")),
        (r"lua[0-9.]*|luajit", _Inline("e", valued="l")),
        (r"R|Rscript", _Inline("e")),
        (r"julia", _Inline("eE", ("--eval", "--print"))),
        (r"pwsh|powershell", _Inline("cC", ("-command", "-c", "-Command"))),
        (r"osascript", _Inline("e")),
        (r"expect|tclsh[0-9.]*|wish", _Inline("c")),
        (r"gdb", _Inline("", ("-ex", "--ex", "-eval-command", "--eval-command", "-iex"), anywhere=True)),
        (r"vim?|nvim|ex|view", _Inline("c", ("--cmd",), anywhere=True)),
    ))
_AWK = re.compile(r"[gmn]?awk|busybox-awk")
_AWK_VALUED = "FvfeiElWoD"  # take a value: -F fs, -v v=x, -f file, -e text, -i file, -l lib…
_AWK_RUNS = re.compile(r"system|(?<!\|)\|(?!\|)|@load|\$\(|`")
_SED = re.compile(r"g?sed")
_GLOB = re.compile(r"[*?]|\[.*\]")


def hidden_reason(part: SimpleCommand, view: View) -> str:
    """Why this view of `part` runs program text the rules cannot read ("" when it does not)."""
    words = view.words
    if not words:
        return ""
    name = words[0]
    if name not in ("[", "[[") and _GLOB.search(name):
        return "the program's name is a pattern bash expands"
    for pattern, spec in _INTERPRETERS:
        if pattern.fullmatch(name) and _has_inline_code(words, spec):
            return f"{name} runs program text given on its command line"
    if _PYTHON.fullmatch(name) and _runs_code_module(words):
        return f"{name} runs program text given on its command line (to a module that runs it)"
    if _AWK.fullmatch(name) and _awk_runs_commands(words):
        return f"{name} runs commands from its program"
    if _SED.fullmatch(name) and _sed_runs_commands(words):
        return f"{name} runs commands from its script"
    if name in ("at", "batch") and not any(w[:1] == "-" and set(w[1:]) & set("lrdcVf") for w in words[1:]):
        return f"{name} runs, later, the commands it reads from stdin"
    return _shell_reason(part, view)


def _has_inline_code(words: tuple[str, ...], spec: _Inline) -> bool:
    """A code option among the interpreter's options (before its script or `--`)."""
    index = 1
    while index < len(words):
        word = words[index]
        index += 1
        if word in ("--", "-") or not word.startswith("-"):
            if spec.anywhere and word != "--":
                continue
            return False
        name = word.partition("=")[0]
        if name in spec.code_long or (word.startswith("--") and any(
                long.startswith(name) and len(name) > 3 for long in spec.code_long)):
            return True
        if word.startswith("--"):
            continue
        for offset, letter in enumerate(word[1:], start=1):
            if letter in spec.code_letters:
                return True
            if letter in spec.valued:
                index += 0 if word[offset + 1 :] else 1
                break
    return False


#: Python modules that run code from their arguments or stdin (`python3 -m timeit 'CODE'`).
_CODE_MODULES = frozenset({"timeit", "code"})
_PYTHON = re.compile(r"python[0-9.]*|pypy[0-9.]*")


def _runs_code_module(words: tuple[str, ...]) -> bool:
    """`python3 -m timeit CODE` (also `-mtimeit`, after other options)."""
    for index, word in enumerate(words[1:], start=1):
        if not word.startswith("-") or word in ("-", "--"):
            return False
        if word.startswith("-m"):
            module = word[2:] or (words[index + 1] if index + 1 < len(words) else "")
            return module in _CODE_MODULES
    return False


def _awk_runs_commands(words: tuple[str, ...]) -> bool:
    """awk's program (`-e`/`--source` texts, else the first operand) runs a command."""
    programs: list[str] = []
    has_file, index = False, 1
    while index < len(words):
        word, following = words[index], words[index + 1 : index + 2]
        index += 1
        if word == "--":
            break
        if not word.startswith("-") or word == "-":
            index -= 1
            break
        name, eq, value = word.partition("=")
        if word.startswith("--"):
            if name in ("--load", "--lo", "--loa"):
                return True
            if name in ("--source", "--file", "--include", "--exec", "--assign", "--field-separator"):
                value = value if eq else (following[0] if following else "")
                index += 0 if eq else 1
                programs += [value] if name == "--source" else []
                has_file = has_file or name in ("--file", "--exec")
                if name in ("--file", "--include", "--exec") and _text_file(value):
                    return True
            continue
        letter, glued = word[1:2], word[2:]
        if letter == "l":
            return True  # loads a shared library
        if letter in _AWK_VALUED:
            value = glued or (following[0] if following else "")
            index += 0 if glued else 1
            programs += [value] if letter == "e" else []
            has_file = has_file or letter in "fE"
            if letter in "fEi" and _text_file(value):
                return True
    if not programs and not has_file and index < len(words):
        programs.append(words[index])
    return any(_AWK_RUNS.search(program) for program in programs)


def _sed_runs_commands(words: tuple[str, ...]) -> bool:
    """sed's script (`-e`/`--expression` texts, else the first operand) runs a command."""
    scripts: list[str] = []
    has_file, sandbox, unread, operands = False, False, False, []
    index = 1
    while index < len(words):
        word, following = words[index], words[index + 1 : index + 2]
        index += 1
        if not word.startswith("-") or word == "-":
            operands.append(word)
            continue
        name, eq, value = word.partition("=")
        if word.startswith("--"):
            sandbox = sandbox or name == "--sandbox"
            if name in ("--expression", "--file", "--line-length"):
                value = value if eq else (following[0] if following else "")
                index += 0 if eq else 1
                scripts += [value] if name == "--expression" else []
                has_file = has_file or name == "--file"
                unread = unread or (name == "--file" and _text_file(value))
            continue
        for offset, letter in enumerate(word[1:], start=1):
            if letter in "efl":
                value = word[offset + 1 :] or (following[0] if following else "")
                index += 0 if word[offset + 1 :] else 1
                scripts += [value] if letter == "e" else []
                has_file = has_file or letter == "f"
                unread = unread or (letter == "f" and _text_file(value))
                break
            if letter == "i":
                break  # `-i[SUFFIX]`
    if not scripts and not has_file and operands:
        scripts.append(operands[0])
    return not sandbox and (unread or runs_commands("\n".join(scripts)))


def _text_file(path: str) -> bool:
    """True when a program file is text the line feeds it: stdin (`-`, `/dev/stdin`), another
    descriptor (`/dev/fd/3`) or a substitution (`<(echo …)`), as `python3 -` reads it."""
    return path == "-" or path.startswith("<(") or fd_path(path) is not None


def _shell_reason(part: SimpleCommand, view: View) -> str:
    """A shell reading a file descriptor other than stdin, or code whose program is a variable."""
    words = view.words
    name = words[0]
    if SHELLS.fullmatch(name) or name in ("source", "."):
        operand = words[1] if name in ("source", ".") and len(words) > 1 else None
        if SHELLS.fullmatch(name):
            operand = shell_call(words).operand
        fd = fd_path(operand) if operand else None
        if fd is not None and fd != 0:
            return f"{name} reads its program from file descriptor {fd}"
    if view.args_from_stdin and SHELLS.fullmatch(name) and _runs_xargs_input(words):
        return f"{name} runs code from the text xargs reads"
    scripts = [inline_script(words), *(c if isinstance(c, str) else c.text for c in part.code)]
    for script in scripts:
        if script and ("$" in script or "`" in script) and _runs_a_variable(script):
            return f"{name} runs code whose program is a variable or a substitution's output"
    return ""


def _runs_xargs_input(words: tuple[str, ...]) -> bool:
    """`xargs -0 sh -c` (the input is the script), `xargs -I{} sh -c {}` (it is in the script),
    `xargs sh -c '"$@"' _` (it is the command): code the line does not hold."""
    call = shell_call(words)
    if call.script is None:
        return call.script_at >= 0 or call.operand is None  # `sh -c` with no script, or bare `sh`
    if "{}" in call.script:
        return True
    try:
        parts = own_parts(call.script)  # the line's reading parses the scripts it hands on
    except (ShellSyntaxError, TooComplexError):
        return True
    # A program word that is no name may be xargs's replace string (`-I % sh -c %`) or `$@`.
    return any(part.words and not _PLAIN_NAME.fullmatch(part.words[0]) for part in parts)


_PLAIN_NAME = re.compile(r"[\w./+-]*[A-Za-z][\w./+-]*")


def _runs_a_variable(script: str) -> bool:
    """True when a command of `script` has a program name that is not on the line."""
    try:
        parts = split_command(script)
    except ShellSyntaxError:
        return True
    return any(part.words and part.words[0][:1] in ("$", "`") and part.words[0] not in ("$@", "$*")
               for part in parts)
