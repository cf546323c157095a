"""Reading git command lines the way git does, for the approval rules' git checks.

git's global options come before the subcommand (`git -C repo -c k=v push`); a subcommand's
options follow git's parse-options: short flags bundle (`-fu` is `-f -u`), a short option that
takes a value takes the rest of its word or the next word, long options take `=value` or the
next word, and any unambiguous prefix of a long option stands for it (`--force-w` is
`--force-with-lease`, `--har` is `--hard`). `--` ends the options.
"""

from __future__ import annotations

from dataclasses import dataclass

from bashgraph.tools.safety.wrappers import long_option

#: Global options that take the next word as their value (git accepts no abbreviations here).
_GLOBAL_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                            "--super-prefix", "--attr-source", "--exec-path", "--list-cmds"})


@dataclass(frozen=True, slots=True)
class _Sub:
    """A subcommand's options: long ones (dangerous first: an ambiguous prefix reads as those)."""

    long: tuple[str, ...]
    long_valued: frozenset[str]
    short_valued: str


_PUSH = _Sub(("--force", "--force-with-lease", "--mirror", "--force-if-includes", "--all",
              "--branches", "--delete", "--tags", "--dry-run", "--porcelain", "--repo",
              "--set-upstream", "--thin", "--quiet", "--verbose", "--progress", "--prune",
              "--no-verify", "--verify", "--follow-tags", "--signed", "--atomic", "--push-option",
              "--ipv4", "--ipv6", "--receive-pack", "--exec", "--recurse-submodules"),
             frozenset({"--repo", "--push-option", "--receive-pack", "--exec"}), "o")
_RESET = _Sub(("--hard", "--soft", "--mixed", "--merge", "--keep", "--quiet", "--patch",
               "--pathspec-from-file", "--pathspec-file-nul", "--recurse-submodules",
               "--intent-to-add", "--refresh"), frozenset({"--pathspec-from-file"}), "")
_CLEAN = _Sub(("--force", "--dry-run", "--quiet", "--exclude", "--interactive"),
              frozenset({"--exclude"}), "e")


@dataclass(frozen=True, slots=True)
class _Parsed:
    shorts: frozenset[str]
    longs: frozenset[str]
    operands: tuple[str, ...]


def git_subcommand(words: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
    """(`push`, its arguments) for `git -C x push -f`; None when `words` is not a git command."""
    if words[:1] != ("git",):
        return None
    index = 1
    while index < len(words):
        word = words[index]
        if word in _GLOBAL_VALUED:
            index += 2
        elif word.startswith("-"):
            index += 1
        else:
            return word, words[index + 1 :]
    return None


def _parse(args: tuple[str, ...], sub: _Sub) -> _Parsed:
    shorts: set[str] = set()
    longs: set[str] = set()
    operands: list[str] = []
    index = 0
    while index < len(args):
        word = args[index]
        index += 1
        if word == "--":
            operands.extend(args[index:])
            break
        if word.startswith("--"):
            name, eq, _ = word.partition("=")
            full = long_option(name, sub.long)
            if full is not None:
                longs.add(full)
                index += 1 if full in sub.long_valued and not eq else 0
        elif word.startswith("-") and len(word) > 1:
            for offset, letter in enumerate(word[1:], start=1):
                shorts.add(letter)
                if letter in sub.short_valued:
                    index += 1 if offset == len(word) - 1 else 0
                    break
        else:
            operands.append(word)
    return _Parsed(frozenset(shorts), frozenset(longs), tuple(operands))


def force_pushes(words: tuple[str, ...]) -> bool:
    """`git push` with `-f`, `--force`, `--force-with-lease`, `--mirror` or a `+refspec`."""
    found = git_subcommand(words)
    if found is None or found[0] != "push":
        return False
    parsed = _parse(found[1], _PUSH)
    return ("f" in parsed.shorts or bool(parsed.longs & {"--force", "--force-with-lease", "--mirror"})
            or any(operand.startswith("+") for operand in parsed.operands))


def resets_hard(words: tuple[str, ...]) -> bool:
    """`git reset --hard` (or an abbreviation of it)."""
    found = git_subcommand(words)
    return found is not None and found[0] == "reset" and "--hard" in _parse(found[1], _RESET).longs


def cleans_forced(words: tuple[str, ...]) -> bool:
    """`git clean -f`/`--force` (bundled or abbreviated)."""
    found = git_subcommand(words)
    if found is None or found[0] != "clean":
        return False
    parsed = _parse(found[1], _CLEAN)
    return "f" in parsed.shorts or "--force" in parsed.longs
