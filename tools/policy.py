"""Approval rules: which commands run unasked, which need a person, which never run.

A rule's pattern is matched against each simple command of a line (see `shellsplit`), as its
words joined by single spaces, and again against what each wrapper runs (`sudo nohup rm -rf x`
is also seen as `nohup rm -rf x` and `rm -rf x`). Three kinds of pattern:

* a shell-style glob over the whole words text: `git status *` (`*` crosses spaces; a pattern
  ending in ` *` also matches the bare command, so `git status *` matches `git status`);
* `re:` then a Python regular expression, searched (anchor it with `^` yourself);
* `@` then the name of a built-in check that needs more than text (`BUILTIN_CHECKS`), such as
  `@rm-outside-workdir`, which resolves paths against the working directory.

Across all parts deny beats ask beats allow; within an action the first rule in the list wins.
The rules are a convenience for a person who watches, not a security boundary: shell code can
always be written so no pattern recognises it. The sandbox (`sandbox.py`) is the boundary.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import os
import posixpath
import re
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast, get_args

from bashgraph.tools.shellsplit import ShellSyntaxError, SimpleCommand, split_command
from bashgraph.tools.wrappers import View, find_start_paths, views

Action = Literal["allow", "ask", "deny"]
Mode = Literal["never", "rules", "always"]
ACTIONS: tuple[Action, ...] = get_args(Action)
MODES: tuple[Mode, ...] = get_args(Mode)
_PRECEDENCE: tuple[Action, ...] = ("deny", "ask", "allow")


class PolicyError(ValueError):
    """A rule or a policy file is invalid; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One pattern and what to do with a command that matches it."""

    pattern: str
    action: Action
    reason: str = ""

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise PolicyError(f"rule {self.pattern!r}: action must be one of {ACTIONS}")
        _matcher(self.pattern)  # fail now, not at the first command


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a command, the rule that decided it (if any), why, and which part."""

    action: Action
    rule: Rule | None
    reason: str
    part: str


@dataclass(frozen=True, slots=True)
class Context:
    """What the built-in checks know about where a part runs. `cwd` is None once unknown."""

    workdir: str
    cwd: str | None
    home: str
    command: str


Check = Callable[[SimpleCommand, View, Context], bool]
_GIT = r"^git(?: -[Cc] \S+| -\S+)*"
_SYSTEM_DIRS = ("/etc", "/boot", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                "/sys", "/proc/sys")
_DISKS = re.compile(r"/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|loop|dm-|md|sr|mapper/|disk/|mem$|kmem$)")
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
_FORK_BOMB = re.compile(
    r"(?:function\s+(?P<a>[^\s(){}|&;<>]+)\s*(?:\(\s*\))?|(?P<b>[^\s(){}|&;<>]+)\s*\(\s*\))"
    r"\s*\{[^}]*?(?:(?P=a)|(?P=b))\s*\|&?\s*(?:(?P=a)|(?P=b))")
_CHMOD_OPTION = re.compile(r"-[Rcfvh]+|--[a-z][\w-]*(?:=.*)?")


def _unparsed_view(command: str) -> View:
    """A best-effort view of a line that could not be split: its whitespace-separated words."""
    return View(tuple(command.split()))


class Policy:
    """Rules plus a mode, for one working directory. `decide` is pure and fast."""

    def __init__(self, rules: Sequence[Rule] = (), mode: Mode = "rules", workdir: str = ".",
                 home: str | None = None) -> None:
        if mode not in MODES:
            raise PolicyError(f"mode must be one of {MODES}, not {mode!r}")
        self.rules = tuple(rules)
        self.mode: Mode = mode
        self.workdir = posixpath.normpath(os.path.abspath(workdir))
        self.home = posixpath.normpath(home or os.path.expanduser("~"))

    def decide(self, command: str, cwd: str | None = None) -> Decision:
        """Allow, ask or deny `command`, checking every part of it (see the module docstring)."""
        try:
            parts = split_command(command)
        except ShellSyntaxError as error:
            return self._apply_mode(self._decide_unparsed(command, error))
        start = self._context(command, cwd)
        checked = [(part, context, _part_views(part)) for part, context in _contexts(parts, start)]
        whole = (SimpleCommand((), command), start, [View(())])
        for action in _PRECEDENCE:
            for rule in (r for r in self.rules if r.action == action):
                match = _matcher(rule.pattern)
                targets = [whole] if rule.pattern in _COMMAND_CHECKS else checked
                for part, context, part_views in targets:
                    if any(match(part, view, context) for view in part_views):
                        return self._apply_mode(_decision(rule, part.text))
        return self._apply_mode(Decision("allow", None, "no rule matched", command))

    def _context(self, command: str, cwd: str | None) -> Context:
        start = posixpath.normpath(os.path.join(self.workdir, cwd)) if cwd else self.workdir
        return Context(self.workdir, start, self.home, command)

    def _decide_unparsed(self, command: str, error: ShellSyntaxError) -> Decision:
        view, context = _unparsed_view(command), self._context(command, None)
        part = SimpleCommand(view.words, command)
        for rule in self.rules:
            if rule.action == "deny" and _matcher(rule.pattern)(part, view, context):
                return _decision(rule, command)
        return Decision("ask", None, f"could not parse: {error}", command)

    def _apply_mode(self, decision: Decision) -> Decision:
        if decision.action == "deny" or self.mode == "rules":
            return decision
        if self.mode == "never" and decision.action == "ask":
            reason = f"{decision.reason} (not asked: approval mode is 'never')"
            return Decision("allow", decision.rule, reason, decision.part)
        if self.mode == "always" and decision.action == "allow":
            return Decision("ask", None, "approval mode is 'always'", decision.part)
        return decision


def parse_rule(spec: str) -> Rule:
    """A rule from its command-line form `ACTION:PATTERN`, e.g. `allow:git status *`."""
    action, sep, pattern = spec.partition(":")
    action = action.strip()
    if not sep or not pattern.strip() or action not in ACTIONS:
        raise PolicyError(f"rule {spec!r}: expected ACTION:PATTERN with ACTION in {ACTIONS}")
    return Rule(pattern.strip(), action, f"matches the {action} rule {pattern!r}")


def load_policy(path: str | Path | None, *, workdir: str, extra: Iterable[str] = (),
                mode: Mode | None = None, home: str | None = None) -> Policy:
    """A policy from a TOML or JSON file (format in docs/safety.md) and command-line rules.

    `extra` rules (`ACTION:PATTERN`) come before the file's, the defaults after both unless the
    file says `defaults = false`; `mode` overrides the file's mode.
    """
    data = _read_config(Path(path)) if path is not None else {}
    rules = [parse_rule(spec) for spec in extra]
    rules.extend(_file_rules(data, str(path)))
    if data.get("defaults", True):
        rules.extend((*DEFAULT_DENY, *DEFAULT_ASK))
    chosen = mode or data.get("mode", "rules")
    if chosen not in MODES:
        raise PolicyError(f"{path}: mode must be one of {MODES}, not {chosen!r}")
    return Policy(rules, cast(Mode, chosen), workdir, home)


def _read_config(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (OSError, ValueError) as error:
        raise PolicyError(f"{path}: {error}") from error
    if not isinstance(data, dict):
        raise PolicyError(f"{path}: expected a table/object at the top level")
    unknown = set(data) - {"mode", "defaults", "rules", *ACTIONS}
    if unknown:
        raise PolicyError(f"{path}: unknown keys {sorted(unknown)}")
    return data


def _file_rules(data: dict[str, Any], where: str) -> list[Rule]:
    rules: list[Rule] = []
    for entry in data.get("rules", []):
        if not isinstance(entry, dict) or not {"pattern", "action"} <= set(entry) or (
                set(entry) - {"pattern", "action", "reason"}):
            raise PolicyError(f"{where}: each rule needs 'pattern' and 'action' (and an "
                              f"optional 'reason'), got {entry!r}")
        reason = entry.get("reason") or f"matches the {entry['action']} rule {entry['pattern']!r}"
        rules.append(Rule(str(entry["pattern"]), entry["action"], str(reason)))
    for action in _PRECEDENCE:
        patterns = data.get(action, [])
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise PolicyError(f"{where}: '{action}' must be a list of patterns")
        rules.extend(parse_rule(f"{action}:{pattern}") for pattern in patterns)
    return rules


def _decision(rule: Rule, part: str) -> Decision:
    return Decision(rule.action, rule, rule.reason or f"matches {rule.pattern!r}", part)


def _part_views(part: SimpleCommand) -> list[View]:
    return views(part.words) or [View(())]  # a bare redirection still has targets to check


def _contexts(parts: list[SimpleCommand], start: Context) -> list[tuple[SimpleCommand, Context]]:
    """Pair each part with the directory it runs in, following literal `cd`s along the line.

    A `cd` inside a subshell is followed too; that can only make paths look less safe.
    """
    paired: list[tuple[SimpleCommand, Context]] = []
    context = start
    for part in parts:
        paired.append((part, context))
        if part.words and part.words[0] in ("cd", "pushd", "popd"):
            context = Context(context.workdir, _cd_target(part.words, context), context.home,
                              context.command)
    return paired


def _cd_target(words: tuple[str, ...], context: Context) -> str | None:
    operands = [w for w in words[1:] if not w.startswith("-") or w == "-"]
    if words[0] != "cd" or len(operands) > 1 or operands[:1] == ["-"]:
        return None
    return resolve_path(operands[0], context) if operands else context.home


@functools.lru_cache(maxsize=1024)
def _matcher(pattern: str) -> Check:
    """The compiled test for one pattern (cached: the same rules are checked on every command)."""
    if pattern.startswith("@"):
        check = BUILTIN_CHECKS.get(pattern) or _COMMAND_CHECKS.get(pattern)
        if check is None:
            known = sorted({*BUILTIN_CHECKS, *_COMMAND_CHECKS})
            raise PolicyError(f"unknown built-in check {pattern!r}; known: {known}")
        return check
    if pattern.startswith("re:"):
        try:
            regex = re.compile(pattern[3:])
        except re.error as error:
            raise PolicyError(f"rule {pattern!r}: bad regular expression: {error}") from error
        return lambda _part, view, _context: regex.search(" ".join(view.words)) is not None
    if not pattern.strip():
        raise PolicyError("a rule pattern cannot be empty")
    glob = re.compile(fnmatch.translate(pattern), re.DOTALL)
    bare = pattern[:-2] if pattern.endswith(" *") else None
    return lambda _part, view, _context: bool(view.words) and (
        glob.match(text := " ".join(view.words)) is not None or text == bare)


def resolve_path(path: str, context: Context) -> str | None:
    """`path` made absolute and normalised, or None when it depends on run-time values."""
    if "$" in path or "`" in path:
        return None
    if path == "~" or path.startswith("~/"):
        path = context.home + path[1:]
    elif path.startswith("~"):
        return None  # ~user
    if not path.startswith("/"):
        if context.cwd is None:
            return None
        path = posixpath.join(context.cwd, path)
    return posixpath.normpath(path)


def inside_workdir(path: str, context: Context) -> bool:
    """True when `path` (or, for a glob, everything it can match) is below the workdir.

    The workdir itself is not "inside": `rm -rf .` deletes it. A component such as `.*` can match
    `..` in older bash, so it counts as unknown.
    """
    first_glob = min((i for i, c in enumerate(path) if c in "*?["), default=-1)
    if first_glob < 0:
        resolved = resolve_path(path, context)
        return resolved is not None and _below(resolved, context.workdir, strict=True)
    head, _, rest = path[:first_glob].rpartition("/")
    if (rest + path[first_glob:]).startswith("."):
        return False
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
        forced = any(f in ("--recursive", "--force") or (f[1] != "-" and set(f[1:]) & set("rRf"))
                     for f in flags)
        if not forced:
            return False
    elif words[:1] == ("find",) and "-delete" in words:
        targets = [f"{start.rstrip('/')}/*" for start in find_start_paths(words)]
    else:
        return False
    if not targets:
        return view.args_from_stdin  # `… | xargs rm -rf`: the paths are not known
    return not all(inside_workdir(target, context) for target in targets)


def _chmod_outside_workdir(_part: SimpleCommand, view: View, context: Context) -> bool:
    words = view.words
    if not words or words[0] not in ("chmod", "chown", "chgrp"):
        return False
    flags = [w for w in words[1:] if _CHMOD_OPTION.fullmatch(w)]
    operands = [w for w in words[1:] if not _CHMOD_OPTION.fullmatch(w)]  # `-w` is a mode
    if not any(f == "--recursive" or (f[1] != "-" and "R" in f) for f in flags):
        return False
    targets = operands if any(f.startswith("--reference") for f in flags) else operands[1:]
    return not all(inside_workdir(target, context) for target in targets)


def _write_system_path(part: SimpleCommand, view: View, context: Context) -> bool:
    targets = [r.target for r in part.redirects
               if r.op in _WRITE_OPS and not r.target.isdigit() and r.target != "-"]
    words = view.words
    flags, operands = _split_options(words[1:])
    name = words[0] if words else ""
    if name in ("tee", "truncate"):
        targets += operands
    elif name in ("cp", "mv", "install", "ln", "rsync") and len(operands) >= 2:
        targets.append(operands[-1])
    elif name == "dd":
        targets += [w[3:] for w in words[1:] if w.startswith("of=")]
    if name in ("cp", "mv", "install", "ln"):
        targets += [w.split("=", 1)[1] for w in flags if w.startswith("--target-directory=")]
        targets += [words[i + 1] for i, w in enumerate(words[:-1]) if w == "-t"]
    return any(_is_system_path(target, context) for target in targets)


def _is_system_path(target: str, context: Context) -> bool:
    resolved = resolve_path(target, context)
    if resolved is None:
        return False
    return _DISKS.match(resolved) is not None or any(
        _below(resolved, root, strict=False) for root in _SYSTEM_DIRS)


def _download_to_shell(part: SimpleCommand, view: View, _context: Context) -> bool:
    return view.words[:1] in (("curl",), ("wget",), ("fetch",)) and bool(part.executed_by)


def _fork_bomb(_part: SimpleCommand, _view: View, context: Context) -> bool:
    return _FORK_BOMB.search(context.command) is not None


#: Checks that need more than text, usable in any rule as `@name`.
BUILTIN_CHECKS: dict[str, Check] = {
    "@rm-outside-workdir": _rm_outside_workdir,
    "@chmod-outside-workdir": _chmod_outside_workdir,
    "@write-system-path": _write_system_path,
    "@download-to-shell": _download_to_shell,
}
#: Checks on the whole line rather than one part.
_COMMAND_CHECKS: dict[str, Check] = {"@fork-bomb": _fork_bomb}


def _ask(pattern: str, reason: str) -> Rule:
    return Rule(pattern, "ask", reason)


#: Asked by default: each is destructive, hard to undo, or reaches beyond the project.
DEFAULT_ASK: tuple[Rule, ...] = (
    _ask("@rm-outside-workdir", "recursive or forced delete outside the working directory"),
    _ask("@chmod-outside-workdir", "recursive permission change outside the working directory"),
    _ask("@write-system-path", "writes to a system directory or a disk device"),
    _ask("@download-to-shell", "runs code downloaded from the network"),
    _ask("@fork-bomb", "a fork bomb"),
    *(_ask(f"{tool} *", "runs as another user") for tool in ("sudo", "su", "doas", "pkexec")),
    _ask(rf"re:{_GIT} push(?: .*)? (?:-f|--force|--force-with-lease(?:=\S*)?|--mirror|\+\S+)"
         r"(?: |$)", "force-push rewrites the remote's history"),
    _ask(rf"re:{_GIT} reset(?: .*)? --hard(?: |$)", "discards uncommitted changes"),
    _ask(rf"re:{_GIT} clean(?: .*)? (?:-[a-zA-Z]*f[a-zA-Z]*|--force)(?: |$)",
         "deletes untracked files"),
    _ask("mkfs*", "formats a file system"),
    _ask("wipefs *", "erases file system signatures"),
    _ask(r"re:^dd(?: .*)? of=/dev/(?!(?:null|zero|stdout|stderr|tty)(?: |$))",
         "writes to a device"),
    *(_ask(f"{tool} *", "stops or restarts the machine")
      for tool in ("shutdown", "reboot", "halt", "poweroff")),
    _ask(r"re:^systemctl(?: \S+)* (?:reboot|poweroff|halt|kexec)(?: |$)",
         "stops or restarts the machine"),
    _ask(r"re:^(?:tel)?init [06](?: |$)", "stops or restarts the machine"),
    _ask(r"re:^crontab(?: \S+)* -[a-z]*r", "deletes the crontab"),
    _ask(r"re:^kill(?: \S+)+ -1(?: |$)", "signals every process"),
)
#: Denied by default: nothing; denying is the user's call (`deny:` rules).
DEFAULT_DENY: tuple[Rule, ...] = ()
