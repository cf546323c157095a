"""Built-in checks for approval rules: the `@name` patterns that need more than text.

They resolve paths against the working directory (following literal `cd`s between the parts
of a line, see `policy._contexts`), so `rm -rf build` inside the project is fine while
`rm -rf ../other` or `rm -rf ~` is not. Unknown paths (`$X`, globs, xargs input) count as
outside: when in doubt, ask.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from bashgraph.tools.safety.find_command import find_start_paths
from bashgraph.tools.safety.git_options import cleans_forced, force_pushes, resets_hard
from bashgraph.tools.safety.hidden import hidden_reason
from bashgraph.tools.safety.machine import device_operands, is_storage_device, stops_machine
from bashgraph.tools.safety.shellsplit import SimpleCommand
from bashgraph.tools.safety.wrappers import View, fd_path, has_braces, long_option


@dataclass(frozen=True, slots=True)
class Context:
    """What the built-in checks know about where a part runs. `cwd` is None once unknown.

    `start` is the directory the line started in, once a `cd` moved `cwd` away from it: the
    `cd` may not have moved the shell that runs the part (it ran in a subshell, after `&`, or
    failed), so a relative path is judged from both (`alternatives`).
    """

    workdir: str
    cwd: str | None
    home: str | None  # None once the line may have set HOME: `~` is then unknown
    command: str
    functions: frozenset[str] = frozenset()  # the shell functions the line defines
    start: str | None = None

    def alternatives(self) -> tuple[Context, ...]:
        """This context, and the one at the line's start when a `cd` moved away from it."""
        if self.start is None or self.start == self.cwd:
            return (self,)
        return (self, replace(self, cwd=self.start, start=None))


Check = Callable[[SimpleCommand, View, Context], bool]
_SYSTEM_DIRS = ("/etc", "/boot", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                "/sys")
#: Linux's limit on a path given to a system call; longer ones are treated as unknown.
PATH_MAX = 4096
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
_CHMOD_OPTION = re.compile(r"-[RcfvhHLP]+|--[a-z][\w-]*(?:=.*)?")
#: Long options, for resolving GNU abbreviations (`rm --rec --for`, `chmod --recur`).
_RM_LONG = ("--recursive", "--force", "--dir", "--interactive", "--one-file-system",
            "--no-preserve-root", "--preserve-root", "--verbose", "--help", "--version")
_CHMOD_LONG = ("--recursive", "--reference", "--changes", "--silent", "--quiet", "--verbose",
               "--no-preserve-root", "--preserve-root", "--dereference", "--no-dereference",
               "--from", "--help", "--version")


def resolve_path(path: str, context: Context) -> str | None:
    """`path` made absolute and normalised, or None when it depends on run-time values."""
    if "$" in path or "`" in path:
        return None
    if path == "~" or path.startswith("~/"):
        if context.home is None:
            return None
        path = context.home + path[1:]
    elif path.startswith("~"):
        return None  # ~user
    if not path.startswith("/"):
        if context.cwd is None:
            return None
        path = posixpath.join(context.cwd, path)
    if len(path) > PATH_MAX:
        return None  # `cd a; cd a; …` thousands of times: unknown, rather than ever longer
    if has_braces(path):
        return None  # `{..,.}/x` is two paths, known only once bash expands it
    normal = posixpath.normpath(path)
    # POSIX lets `//` mean something else and normpath keeps it; Linux reads `//etc` as `/etc`.
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def inside_workdir(path: str, context: Context) -> bool:
    """True when `path` (or, for a glob, everything it can match) is below the workdir, from
    every directory the part may run in."""
    return all(_inside_from(path, each) for each in context.alternatives())


def _inside_from(path: str, context: Context) -> bool:
    """True when `path` (or, for a glob, everything it can match) is below the workdir.

    The workdir itself is not "inside": `rm -rf .` deletes it. A component such as `.*` can match
    `..` in older bash, so it counts as unknown.
    """
    if has_braces(path):
        return False  # several paths, some may be outside
    globs = [path.find(c) for c in "*?["]
    first_glob = min((i for i in globs if i >= 0), default=-1)
    if first_glob < 0:
        resolved = resolve_path(path, context)
        return resolved is not None and _below(resolved, context.workdir, strict=True)
    head, _, rest = path[:first_glob].rpartition("/")
    if (rest + path[first_glob:]).startswith(".") or ".." in path[first_glob:].split("/"):
        return False  # `.*` may match `..`; `*/../..` climbs out whatever `*` matches
    base = resolve_path(head or ("/" if path.startswith("/") else "."), context)
    return base is not None and _below(base, context.workdir, strict=False)


def _below(path: str, root: str, strict: bool) -> bool:
    if path == root:
        return not strict
    return path.startswith(root.rstrip("/") + "/")


def _split_options(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """GNU-style: options anywhere before `--`, operands everything else."""
    if "--" in args:
        cut = list(args).index("--")
        flags, operands = _split_options(args[:cut])
        return flags, operands + list(args[cut + 1 :])
    flags = [a for a in args if a.startswith("-") and len(a) > 1]
    return flags, [a for a in args if not (a.startswith("-") and len(a) > 1)]


def _rm_outside_workdir(_part: SimpleCommand, view: View, context: Context) -> bool:
    words = view.words
    if words[:1] == ("rm",):
        flags, targets = _split_options(words[1:])
        # `find … -exec rm {}` deletes everything it finds without -r or -f.
        from_find = view.words != _part.words and "find" in _part.words
        if not from_find and not any(_rm_forces(flag) for flag in flags):
            return False
    elif words[:1] == ("find",) and "-delete" in words:
        targets = [f"{start.rstrip('/')}/*" for start in find_start_paths(words)]
    else:
        return False
    if view.args_from_stdin:
        return True  # `… | xargs rm -rf [build]`: xargs adds paths that are not known
    return not all(inside_workdir(target, context) for target in targets)


def _rm_forces(flag: str) -> bool:
    if flag.startswith("--"):
        return long_option(flag.partition("=")[0], _RM_LONG) in ("--recursive", "--force")
    return bool(set(flag[1:]) & set("rRf"))


def _chmod_outside_workdir(_part: SimpleCommand, view: View, context: Context) -> bool:
    words = view.words
    if not words or words[0] not in ("chmod", "chown", "chgrp"):
        return False
    flags = [w for w in words[1:] if _CHMOD_OPTION.fullmatch(w)]
    operands = [w for w in words[1:] if not _CHMOD_OPTION.fullmatch(w)]  # `-w` is a mode
    longs = [long_option(f.partition("=")[0], _CHMOD_LONG) for f in flags if f.startswith("--")]
    if "--recursive" not in longs and not any(f[1] != "-" and "R" in f for f in flags):
        return False
    targets = operands if "--reference" in longs else operands[1:]
    return not all(inside_workdir(target, context) for target in targets)


def _write_system_path(part: SimpleCommand, view: View, context: Context) -> bool:
    if any(_is_system_path(target, context) for target in _write_targets(part, view)):
        return True
    return any(_is_device(word, context) for word in device_operands(view.words))


def _write_targets(part: SimpleCommand, view: View) -> list[str]:
    """What the command writes: redirections, `tee`/`truncate` files, a copy's destination
    (`-t DIR` in every spelling), `dd of=`."""
    targets = [r.target for r in part.redirects
               if r.op in _WRITE_OPS and not r.target.isdigit() and r.target != "-"]
    words = view.words
    _flags, operands = _split_options(words[1:])
    name = words[0] if words else ""
    if name in ("tee", "truncate"):
        targets += operands
    elif name in ("cp", "mv", "install", "ln", "rsync") and len(operands) >= 2:
        targets.append(operands[-1])
    elif name == "dd":
        targets += [w[3:] for w in words[1:] if w.startswith("of=")]
    if name in ("cp", "mv", "install", "ln"):
        targets += _target_directories(words)
    return targets


def _is_device(word: str, context: Context) -> bool:
    """`word` names a storage device (`/dev/sda`, `/dev/block/8:0`, `/dev/sd?`)."""
    if not word.startswith(("/", "~", ".")) and context.cwd != "/dev":
        return False  # a relative name is a device only from /dev
    return any((resolved := resolve_path(word, each)) is not None and is_storage_device(resolved)
               for each in context.alternatives())


def _stops_machine(part: SimpleCommand, view: View, _context: Context) -> bool:
    return stops_machine(view.words, _write_targets(part, view))


def _target_directories(words: tuple[str, ...]) -> list[str]:
    """The `-t DIR` of cp/mv/install/ln in every spelling: `-t DIR`, `-tDIR`, bundled (`-vt DIR`,
    `-vtDIR`), `--target-directory[=]DIR` and its abbreviations (`--target=DIR`, `--tar DIR`)."""
    found: list[str] = []
    for index, word in enumerate(words[1:], start=1):
        following = words[index + 1] if index + 1 < len(words) else ""
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            if len(name) > 4 and "--target-directory".startswith(name):
                found.append(value if eq else following)
        elif word.startswith("-") and "t" in word[1:]:
            value = word[word.index("t", 1) + 1 :]
            found.append(value or following)
    return [target for target in found if target]


def _is_system_path(target: str, context: Context) -> bool:
    if has_braces(target):
        return True  # `{/,}etc/passwd` may be /etc/passwd
    return any(_is_system_path_from(target, each) for each in context.alternatives())


def _is_system_path_from(target: str, context: Context) -> bool:
    resolved = resolve_path(target, context)
    if resolved is None:
        # A relative path from an unknown directory (`pushd /etc && echo x > passwd`) may be
        # anywhere, as may `~` once HOME may have changed; a variable (`> $LOG`) is the user's own.
        if target == "~" or target.startswith("~/"):
            return context.home is None
        return context.cwd is None and not target.startswith(("/", "~", "$"))
    if resolved.startswith("/proc/") and fd_path(resolved) is None:
        return True  # /proc/sysrq-trigger, /proc/PID/…: the kernel's, except a process's fds
    return is_storage_device(resolved) or any(
        _below(resolved, root, strict=False) for root in _SYSTEM_DIRS)


def _download_to_shell(part: SimpleCommand, view: View, _context: Context) -> bool:
    return view.words[:1] in (("curl",), ("wget",), ("fetch",)) and bool(part.executed_by)


def _fork_bomb(part: SimpleCommand, _view: View, context: Context) -> bool:
    """A function the line defines, piped into itself: `:(){ :|:& };:`."""
    return bool(part.pipes_to) and part.words[:1] == (part.pipes_to,) and (
        part.pipes_to in context.functions)


def _hidden_code(part: SimpleCommand, view: View, _context: Context) -> bool:
    return bool(part.hidden_code) or bool(hidden_reason(part, view))


#: Checks that need more than text, usable in any rule as `@name`.
BUILTIN_CHECKS: dict[str, Check] = {
    "@rm-outside-workdir": _rm_outside_workdir,
    "@chmod-outside-workdir": _chmod_outside_workdir,
    "@write-system-path": _write_system_path,
    "@stops-machine": _stops_machine,
    "@download-to-shell": _download_to_shell,
    "@fork-bomb": _fork_bomb,
    "@hidden-code": _hidden_code,
    "@git-force-push": lambda _part, view, _context: force_pushes(view.words),
    "@git-reset-hard": lambda _part, view, _context: resets_hard(view.words),
    "@git-clean-force": lambda _part, view, _context: cleans_forced(view.words),
}
