"""Program text that a command hands to a shell, and code the rules cannot read.

A shell reading stdin reads a here-document, a here-string, or what the previous pipeline stage
prints; `. <(…)`, `bash <(…)`, `eval "$(…)"` and `bash -c "$(…)"` read a substitution's output.
When that text is on the line (`echo`/`printf` words without variables, `cat <<EOF`) it is
handed back to the splitter to be read as a script; otherwise the reader is marked as running
hidden code, as is any program text fed to an interpreter other than a shell.
"""

from __future__ import annotations

import dataclasses
import itertools
import re

from bashgraph.tools.safety.shellparts import FileInput, HereDoc, SimpleCommand, Stage, Sub
from bashgraph.tools.safety.wrappers import (
    EVALUATORS,
    INTERPRETERS,
    SHELLS,
    View,
    has_braces,
    inline_script,
    runs_stdin_as_code,
    shell_call,
)

_ECHO_OPTION = re.compile(r"-[neE]+")


def run_by(part: SimpleCommand, extra: tuple[str, ...]) -> SimpleCommand:
    """`part`, noting that `extra` run its output as code."""
    if not extra:
        return part
    return dataclasses.replace(part, executed_by=part.executed_by + extra)


def runs_arguments(stage_views: list[View]) -> bool:
    return any(v.words[0] in EVALUATORS or INTERPRETERS.fullmatch(v.words[0]) is not None
               for v in stage_views)


def code_read_by(stage: Stage, stage_views: list[View], previous: Stage | None
                  ) -> tuple[str, list[str | HereDoc]]:
    """The program text the stage's shells will parse, and why some is hidden (if it is).

    A shell reading stdin reads a here-document, a here-string, or the previous pipeline stage's
    output (known for `echo`/`printf` and `cat <<EOF`); `. <(…)`, `bash <(…)`, `eval "$(…)"` and
    `bash -c "$(…)"` read a substitution's output (known for `echo`/`printf`). Anything else is
    hidden, as is any program text fed to a non-shell interpreter.
    """
    hidden, code = "", []
    if stage.words and stage.words[0].startswith(("$(", "`")):
        hidden = "the program's name is the output of a command"  # `$(printf '\x72m') -rf /`
    elif stage.words and has_braces(stage.words[0]):
        hidden = "the program's name is a brace expansion"  # `{rm,-rf,/}`, `{sudo,} reboot`
    for view in stage_views:
        name = view.words[0]
        if name not in EVALUATORS and INTERPRETERS.fullmatch(name) is None:
            continue  # reads no program text
        shellish = is_shell(name)
        sources: list[str | HereDoc | Sub | FileInput | None] = []
        if runs_stdin_as_code(view.words):
            sources.append(stage.stdin if stage.stdin is not None else output_of(previous))
        texts = code_words(view.words)
        sources.extend(sub for sub in stage.subs if sub.raw in texts)
        for source in sources:
            if isinstance(source, FileInput):
                continue
            text = literal_output(source.parts) if isinstance(source, Sub) else source
            if text is None or not shellish:
                hidden = f"{name} runs a program the rules cannot read"
            else:
                code.append(text)
    return hidden, code


def is_shell(name: str) -> bool:
    return SHELLS.fullmatch(name) is not None or name in EVALUATORS


def code_words(words: tuple[str, ...]) -> frozenset[str]:
    """The words whose text (when it is one substitution) becomes program text."""
    name = words[0]
    if name == "eval":
        return frozenset({inline_script(words) or ""})
    if name in ("source", "."):
        return frozenset(words[1:2])
    if SHELLS.fullmatch(name):
        call = shell_call(words)
        return frozenset(w for w in (call.script, call.operand, *_startup_files(words)) if w is not None)
    if INTERPRETERS.fullmatch(name):
        return frozenset(w for w in words[1:] if w.startswith("<("))
    return frozenset()


def _startup_files(words: tuple[str, ...]) -> list[str]:
    """The files an interactive bash runs first: `bash --rcfile <(echo …) -i`, `--init-file`."""
    return [following for word, following in itertools.pairwise(words)
            if word in ("--rcfile", "--init-file")]


def output_of(stage: Stage | None) -> str | HereDoc | None:
    """What a pipeline stage writes, when the line shows it: `echo`/`printf` words, `cat <<EOF`."""
    if stage is None or any(r.op in (">", ">>", ">|", "&>") for r in stage.redirects):
        return None
    words = tuple(stage.words)
    if words[:1] == ("cat",) and len(words) == 1 and isinstance(stage.stdin, str | HereDoc):
        return stage.stdin
    return echoed(words)


def literal_output(parts: list[SimpleCommand]) -> str | None:
    if len(parts) != 1 or parts[0].redirects:
        return None
    return echoed(parts[0].words)


def echoed(words: tuple[str, ...]) -> str | None:
    """The text `echo`/`printf` prints, roughly (`printf`'s format is kept as written)."""
    if words[:1] not in (("echo",), ("printf",)):
        return None
    args = list(words[1:])
    if any("$" in arg or "`" in arg for arg in args):
        return None  # a variable or substitution: what it prints is not on the line
    while words[0] == "echo" and args and _ECHO_OPTION.fullmatch(args[0]):
        args.pop(0)
    # printf's arguments each on a line, `\n` escapes as line breaks: this can only split the
    # text into more commands than the shell will see, never join two into one.
    return ("\n" if words[0] == "printf" else " ").join(args).replace("\\n", "\n")
