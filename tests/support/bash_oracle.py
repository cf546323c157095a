"""The differential oracle: what bash really runs, against what the approval rules saw.

`bash_ran(line)` runs `line` the way bashgraph does (`bash -c LINE`) inside bubblewrap — a
read-only root, a tmpfs home and /tmp, no network, its own PID namespace, `--cap-drop ALL` — and
records every simple command bash starts, with xtrace written to a file descriptor of our own
(`BASH_XTRACEFD`). `SHELLOPTS=xtrace` in the environment makes every bash the line starts trace
too (`bash -c`, `eval`, `find -exec bash`), and `/usr/bin/dash` is bash inside the sandbox, so
`sh -c` is traced as well.

`unseen(policy, line)` is the check: when the policy allows the line, every program bash ran
must be among the programs the policy's reader found (each part's words and every wrapper view);
the names bash ran that the reader never saw are returned. A line the policy asks about or denies
is never a disagreement: the person sees it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass

from bashgraph.tools.safety.policy import Policy
from bashgraph.tools.safety.shellsplit import ShellSyntaxError, parse_line
from bashgraph.tools.safety.wrappers import program_name

BASH = "/usr/bin/bash"
#: Where the line runs inside the sandbox: an empty tmpfs directory with one subdirectory.
WORKDIR = "/tmp/w"
#: Compound commands and keywords xtrace prints that start no program.
_NOT_PROGRAMS = frozenset({"for", "case", "select", "((", "[[", "function"})


def bwrap_unavailable() -> str | None:
    """Why the oracle cannot run here, or None."""
    if shutil.which("bwrap") is None:
        return "bwrap is not installed (Debian package bubblewrap)"
    try:
        probe = subprocess.run(_sandbox_argv(), check=False, input=b"", capture_output=True, timeout=20,
                               env={"PATH": "/usr/bin:/bin"})
    except subprocess.TimeoutExpired:
        return "bwrap did not start in 20 s"
    if probe.returncode != 0:
        return f"bwrap cannot start here: {probe.stderr.decode(errors='replace').strip()}"
    return None


def _sandbox_argv() -> list[str]:
    argv = ["bwrap", "--ro-bind", "/", "/", "--tmpfs", "/root", "--tmpfs", "/home",
            "--tmpfs", "/tmp", "--dir", f"{WORKDIR}/sub", "--dev", "/dev", "--proc", "/proc",
            "--unshare-all", "--die-with-parent", "--new-session", "--chdir", WORKDIR,
            # Not root inside: bash takes PS4 from the environment only then.
            "--unshare-user", "--uid", "1000", "--gid", "1000"]
    if os.path.exists("/usr/bin/dash"):
        argv += ["--ro-bind", BASH, "/usr/bin/dash"]  # `sh` is traced like bash
    if os.geteuid() == 0:
        argv.append("--cap-drop")
        argv.append("ALL")
    return [*argv, BASH, "-c", "true"]


#: Programs that start the line's shells (`find -exec sh -c`, `nice bash -c`): the shells any
#: other program starts are its own workings (`tar -z` runs gzip through sh), not the line's.
_LINE_SHELL_PARENTS = frozenset({"bwrap", "bash", "dash", "sh", "env", "nice", "timeout", "find",
                                 "xargs", "nohup", "setsid", "stdbuf", "ionice", "chrt", "taskset",
                                 "sudo", "doas", "unbuffer", "busybox", "flock", "unshare", "chroot"})


@dataclass(frozen=True)
class Traced:
    """One command bash traced: the script file it was in (`BASH_SOURCE`, empty for the line's
    own code), the program that started that shell, and the command's words."""

    source: str
    parent: str
    words: tuple[str, ...]

    @property
    def from_the_line(self) -> bool:
        """False inside a script file (`which` is one; the rules never read files) or a shell
        that a program started for its own work."""
        in_file = self.source.startswith("/") and not self.source.startswith(("/dev/", "/proc/"))
        return not in_file and self.parent in _LINE_SHELL_PARENTS


@dataclass(frozen=True)
class Ran:
    """What bash did with a line: each traced simple command as words, and how it ended."""

    commands: tuple[Traced, ...]
    timed_out: bool

    @property
    def programs(self) -> frozenset[str]:
        """The base names of the programs (and builtins, functions) bash ran."""
        found = set()
        for traced in self.commands:
            if not traced.from_the_line:
                continue
            rest = [w for w in traced.words if not _is_assignment(w)]
            if rest and rest[0] not in _NOT_PROGRAMS:
                found.add(program_name(rest[0]))  # the base name, as the reader names it
        return frozenset(found)


def bash_ran(line: str, timeout: float = 5.0) -> Ran:
    """Run `line` in the sandbox and read back every simple command bash started."""
    argv = _sandbox_argv()[:-3]
    with tempfile.TemporaryFile() as trace:
        fd = trace.fileno()
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root", "SHELLOPTS": "xtrace",
               "PS4": "+${BASH_SOURCE-}\x1f$(</proc/$PPID/comm)\x1e ",
               "BASH_XTRACEFD": str(fd), "LC_ALL": "C.UTF-8"}
        argv += ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), BASH, "-c", line, "bashgraph", "a", "b"]
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, pass_fds=(fd,), start_new_session=True)
        timed_out = False
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        trace.seek(0)
        text = trace.read().decode("utf-8", "surrogateescape")
    return Ran(tuple(read_xtrace(text)), timed_out)


def policy_programs(line: str) -> frozenset[str]:
    """Every program name the policy's reader found in `line` (parts and wrapper views)."""
    parsed = parse_line(line)
    names = {part.words[0] for part in parsed.parts if part.words}
    names |= {view.words[0] for part in parsed.parts for view in part.views if view.words}
    return frozenset(names)


def unseen(policy: Policy, line: str, timeout: float = 5.0) -> tuple[str, frozenset[str]]:
    """(the policy's action, the programs bash ran that the reader did not see when allowed)."""
    action = policy.decide(line).action
    if action != "allow":
        return action, frozenset()
    try:
        seen = policy_programs(line)
    except ShellSyntaxError:  # allowed in mode `never` only; not the case the oracle checks
        return action, frozenset()
    return action, bash_ran(line, timeout).programs - seen


def _is_assignment(word: str) -> bool:
    name, eq, _ = word.partition("=")
    name = name.removesuffix("+")
    if "[" in name:
        name = name[: name.index("[")]
    return bool(eq) and name.isidentifier() and name.isascii()


def read_xtrace(text: str) -> list[Traced]:
    """The commands of an xtrace log: lines starting with `+` (one per level), the script's
    name (`BASH_SOURCE`) up to a \\x1e, then words quoted as bash quotes them (`'…'` with
    `'\\''` inside, `$'…'` for control characters); a quoted word may span lines."""
    commands: list[Traced] = []
    index = 0
    while index < len(text):
        if text[index] != "+":
            index = _next_line(text, index)
            continue
        while index < len(text) and text[index] == "+":
            index += 1
        mark = text.find("\x1e ", index)
        if mark < 0:
            break
        source, _, parent = text[index:mark].partition("\x1f")
        words, index = _xtrace_words(text, mark + 2)
        commands.append(Traced(source, parent, tuple(words)))
    return commands


def _next_line(text: str, index: int) -> int:
    end = text.find("\n", index)
    return len(text) if end < 0 else end + 1


def _xtrace_words(text: str, index: int) -> tuple[list[str], int]:
    words: list[str] = []
    word: list[str] = []
    in_word = False
    while index < len(text) and text[index] != "\n":
        char = text[index]
        if char == " ":
            if in_word:
                words.append("".join(word))
            word, in_word, index = [], False, index + 1
        elif char == "'":
            end = text.find("'", index + 1)
            end = len(text) if end < 0 else end
            word.append(text[index + 1 : end])
            in_word, index = True, end + 1
        elif text.startswith("$'", index):
            end, decoded = _ansi_c(text, index + 2)
            word.append(decoded)
            in_word, index = True, end + 1
        elif char == "\\" and index + 1 < len(text):
            word.append(text[index + 1])
            in_word, index = True, index + 2
        else:
            word.append(char)
            in_word, index = True, index + 1
    if in_word:
        words.append("".join(word))
    return words, index + 1


def _ansi_c(text: str, index: int) -> tuple[int, str]:
    from bashgraph.tools.safety.shellwords import decode_ansi_c

    start = index
    while index < len(text) and text[index] != "'":
        index += 2 if text[index] == "\\" else 1
    return index, decode_ansi_c(text[start:index])
