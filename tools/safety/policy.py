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

import dataclasses
import fnmatch
import functools
import json
import os
import posixpath
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast, get_args

from bashgraph.tools.safety.directories import cd_words, may_change_home
from bashgraph.tools.safety.policy_checks import BUILTIN_CHECKS, Check, Context, resolve_path
from bashgraph.tools.safety.shellsplit import ShellSyntaxError, SimpleCommand, TooComplexError, parse_line
from bashgraph.tools.safety.wrappers import View
from bashgraph.tools.text import command_size_problem

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
class Verdict:
    """What to do with a command, the rule that decided it (if any), why, and which part."""

    action: Action
    rule: Rule | None
    reason: str
    part: str


_ROUGH_SEPARATORS = re.compile(r"[;&|()`\n]+")


def _unparsed_views(command: str) -> list[View]:
    """Best-effort views of a line that could not be split: the whole line's words, and the
    words of each piece between operator characters (`x ; rm -rf ~` is also seen as `rm -rf ~`)."""
    pieces = [tuple(piece.split()) for piece in _ROUGH_SEPARATORS.split(command)]
    return [View(tuple(command.split())), *(View(words) for words in pieces if words)]


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

    def decide(self, command: str, cwd: str | None = None) -> Verdict:
        """Allow, ask or deny `command`, checking every part of it (see the module docstring).

        Time grows linearly with the command's length; a command longer than
        `MAX_COMMAND_BYTES` (which could not run) is denied unread.
        """
        too_long = command_size_problem(command)
        if too_long is not None:
            return Verdict("deny", None, too_long, command[:200])
        try:
            line = parse_line(command)
        except ShellSyntaxError as error:
            return self._apply_mode(self._decide_unparsed(command, error))
        start = self._context(command, cwd, line.functions)
        checked = [(part, context, _part_views(part))
                   for part, context in _contexts(list(line.parts), start)]
        targets = [(part, context, view) for part, context, part_views in checked
                   for view in part_views]
        for action in _PRECEDENCE:
            for rule in (r for r in self.rules if r.action == action):
                match = _matcher(rule.pattern)
                hit = next((part for part, context, view in targets if match(part, view, context)),
                           None)
                if hit is not None:
                    return self._apply_mode(_decision(rule, hit.text, hit.hidden_code
                                                      if rule.pattern == "@hidden-code" else ""))
        return self._apply_mode(Verdict("allow", None, "no rule matched", command))

    def _context(self, command: str, cwd: str | None,
                 functions: frozenset[str] = frozenset()) -> Context:
        start = posixpath.normpath(os.path.join(self.workdir, cwd)) if cwd else self.workdir
        return Context(self.workdir, start, self.home, command, functions)

    def _decide_unparsed(self, command: str, error: ShellSyntaxError) -> Verdict:
        context = self._context(command, None)
        rough = _unparsed_views(command)
        for rule in self.rules:
            match = _matcher(rule.pattern)
            if rule.action == "deny" and any(
                    match(SimpleCommand(view.words, command), view, context) for view in rough):
                return _decision(rule, command)
        why = "too complex to check" if isinstance(error, TooComplexError) else "could not parse"
        return Verdict("ask", None, f"{why}: {error}", command)

    def _apply_mode(self, decision: Verdict) -> Verdict:
        if decision.action == "deny" or self.mode == "rules":
            return decision
        if self.mode == "never" and decision.action == "ask":
            reason = f"{decision.reason} (not asked: approval mode is 'never')"
            return Verdict("allow", decision.rule, reason, decision.part)
        if self.mode == "always" and decision.action == "allow":
            return Verdict("ask", None, "approval mode is 'always'", decision.part)
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


def _decision(rule: Rule, part: str, detail: str = "") -> Verdict:
    """The verdict of `rule` on `part`; `detail` says more (why a part's code is hidden)."""
    reason = rule.reason or f"matches {rule.pattern!r}"
    return Verdict(rule.action, rule, f"{reason}: {detail}" if detail else reason, part)


def _part_views(part: SimpleCommand) -> tuple[View, ...]:
    return part.views or (View(()),)  # a bare redirection still has targets to check


def _contexts(parts: list[SimpleCommand], start: Context) -> list[tuple[SimpleCommand, Context]]:
    """Pair each part with the directory it runs in, following literal `cd`s along the line.

    A `cd` may not move the shell that runs a later part (it is in a subshell, after `&`, or
    fails), so the line's start directory stays an alternative: following a `cd` can only make
    a path look less safe. A line that may set `HOME` makes `~` unknown.
    """
    paired: list[tuple[SimpleCommand, Context]] = []
    if may_change_home(start.command, parts):
        start = dataclasses.replace(start, home=None)  # `HOME=/etc; echo x >> ~/passwd`
    context = start
    for part in parts:
        paired.append((part, context))
        words = cd_words(part)
        if words is not None:
            context = Context(context.workdir, _cd_target(words, context), context.home,
                              context.command, context.functions, start=start.cwd)
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
        check = BUILTIN_CHECKS.get(pattern)
        if check is None:
            known = sorted(BUILTIN_CHECKS)
            raise PolicyError(f"unknown built-in check {pattern!r}; known: {known}")
        return check
    if pattern.startswith("re:"):
        try:
            regex = re.compile(pattern[3:])
        except re.error as error:
            raise PolicyError(f"rule {pattern!r}: bad regular expression: {error}") from error
        return lambda _part, view, _context: regex.search(view.text) is not None
    if not pattern.strip():
        raise PolicyError("a rule pattern cannot be empty")
    glob = re.compile(fnmatch.translate(pattern), re.DOTALL)
    bare = pattern[:-2] if pattern.endswith(" *") else None
    return lambda _part, view, _context: bool(view.words) and (
        glob.match(view.text) is not None or view.text == bare)


def _ask(pattern: str, reason: str) -> Rule:
    return Rule(pattern, "ask", reason)


#: Asked by default: each is destructive, hard to undo, or reaches beyond the project.
DEFAULT_ASK: tuple[Rule, ...] = (
    _ask("@rm-outside-workdir", "recursive or forced delete outside the working directory"),
    _ask("@chmod-outside-workdir", "recursive permission change outside the working directory"),
    _ask("@write-system-path", "writes to a system directory or a disk device"),
    _ask("@download-to-shell", "runs code downloaded from the network"),
    _ask("@fork-bomb", "a fork bomb"),
    _ask("@hidden-code", "runs program text the rules cannot read (a shell or interpreter "
                         "reading code from another command's output, a pipe or stdin)"),
    *(_ask(f"{tool} *", "runs as another user") for tool in ("sudo", "su", "doas", "pkexec")),
    _ask("@git-force-push", "force-push rewrites the remote's history"),
    _ask("@git-reset-hard", "discards uncommitted changes"),
    _ask("@git-clean-force", "deletes untracked files"),
    _ask("mkfs*", "formats a file system"),
    _ask("wipefs *", "erases file system signatures"),
    *(_ask(f"{tool} *", "stops or restarts the machine")
      for tool in ("shutdown", "reboot", "halt", "poweroff")),
    _ask(r"re:^systemctl(?: \S+)* (?:reboot|poweroff|halt|kexec)(?: |$)",
         "stops or restarts the machine"),
    _ask(r"re:^(?:tel)?init [06](?: |$)", "stops or restarts the machine"),
    _ask(r"re:^crontab(?: \S+)* -[a-z]*r", "deletes the crontab"),
    _ask(r"re:^kill(?: \S+)+ -1(?: |$)", "signals every process"),
    _ask("@stops-machine", "stops or restarts the machine"),
)
#: Denied by default: nothing; denying is the user's call (`deny:` rules).
DEFAULT_DENY: tuple[Rule, ...] = ()
