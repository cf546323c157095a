"""The differential oracle with a long budget: generated shell lines run in real bash (bubblewrap),
and every line the approval rules allow must show every program bash ran.

Lines come from the shell grammar and from random shell tokens (tests/support/shell_grammar.py),
drawn by Hypothesis from both at once.

    python benchmarks/bench_oracle.py                  # 2,000 generated lines
    python benchmarks/bench_oracle.py --quick          # 100 lines, the CI smoke run
    python benchmarks/bench_oracle.py --tree-sitter    # also judge a tree-sitter-bash reader

Prints how many lines were allowed and asked, and every disagreement (a program bash ran on an
allowed line that the reader never saw). With `--tree-sitter` (needs `pip install tree-sitter
tree-sitter-bash`), the same lines are also read the way a tree-sitter reader would, refusing
any line with a syntax error as Codex does, and judged by the same oracle: the figures behind
the parser choice in docs/safety.md. Exits 1 on any disagreement of the project's reader.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bashgraph.tools.safety.policy import DEFAULT_ASK, Policy
from tests.support.bash_oracle import WORKDIR, bash_ran, bwrap_unavailable, policy_programs
from tests.support.shell_grammar import shell_lines, token_soup

#: Lines that hand program text to a shell (`trap`, `| bash`, `bash <<`, `mapfile -C`, `source`)
#: or name a program by a variable or a pattern: the tree-sitter reader here reads only `bash -c`
#: and `eval` again and has no such refusals, so its misses are also counted without these.
HANDS_OFF_CODE = re.compile(r"\btrap\b|\|\s*(?:ba)?sh\b|(?:ba)?sh\s*<<|\bmapfile\b|\bsource\b|"
                            r"\$c\b|\$\{c\}|\$\{a\[@\]\}|/usr/bin/\w\?")
Reader = Callable[[str], "frozenset[str] | None"]  # the programs seen, or None when refused


def project_reader(policy: Policy) -> Reader:
    def read(line: str) -> frozenset[str] | None:
        return policy_programs(line) if policy.decide(line).action == "allow" else None
    return read


def tree_sitter_reader() -> Reader:
    """Command names from tree-sitter-bash's tree; a line with an error node is refused. Scripts
    of `bash -c`/`sh -c`/`eval` and here-documents read by a shell are read again."""
    import tree_sitter_bash
    from tree_sitter import Language, Node, Parser

    parser = Parser(Language(tree_sitter_bash.language()))

    def unquote(text: str) -> str:
        return text.replace("\\", "").replace("'", "").replace('"', "")

    def names(source: str, depth: int) -> set[str] | None:
        tree = parser.parse(source.encode())
        if tree.root_node.has_error or depth > 8:
            return None
        found: set[str] = set()
        stack: list[Node] = [tree.root_node]
        while stack:
            node = stack.pop()
            stack.extend(node.children)
            if node.type != "command":
                continue
            name = node.child_by_field_name("name")
            if name is None or name.text is None:
                continue
            program = unquote(name.text.decode()).rsplit("/", 1)[-1]
            found.add(program)
            args = [unquote(c.text.decode()) for c in node.children_by_field_name("argument")
                    if c.text is not None]
            script = args[1] if program in ("bash", "sh") and args[:1] == ["-c"] and len(args) > 1 \
                else " ".join(args) if program == "eval" else None
            if script is not None:
                inner = names(script, depth + 1)
                if inner is None:
                    return None
                found |= inner
        return found

    def read(line: str) -> frozenset[str] | None:
        found = names(line, 0)
        return None if found is None else frozenset(found)
    return read


@dataclass
class Tally:
    """One reader's record: lines it allowed and refused, and the allowed lines it misread."""

    allowed: int = 0
    refused: int = 0
    missed: list[tuple[list[str], str]] = field(default_factory=list)  # (programs, line)


def judge(lines: list[str], readers: dict[str, Reader]) -> dict[str, Tally]:
    """Run each line once in bash (unless every reader refuses it) and tally each reader."""
    tallies = {name: Tally() for name in readers}
    for line in lines:
        seen = {name: read(line) for name, read in readers.items()}
        ran = bash_ran(line).programs if any(s is not None for s in seen.values()) else frozenset()
        for name, programs in seen.items():
            tally = tallies[name]
            if programs is None:
                tally.refused += 1
                continue
            tally.allowed += 1
            if ran - programs:
                tally.missed.append((sorted(ran - programs), line))
    return tallies


def generate(count: int) -> list[str]:
    lines: list[str] = []

    @settings(max_examples=count, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(shell_lines(), token_soup()))
    def collect(line: str) -> None:
        lines.append(line)

    collect()
    return list(dict.fromkeys(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2000, help="generated lines (default 2000)")
    parser.add_argument("--quick", action="store_true", help="100 lines (CI)")
    parser.add_argument("--tree-sitter", action="store_true", help="also judge a tree-sitter reader")
    args = parser.parse_args()
    if args.quick:
        args.lines = 100
    problem = bwrap_unavailable()
    if problem is not None:
        print(f"cannot run the oracle: {problem}")
        return 2
    readers = {"project": project_reader(Policy(DEFAULT_ASK, workdir=WORKDIR, home="/root"))}
    if args.tree_sitter:
        readers["tree-sitter"] = tree_sitter_reader()
    started = time.perf_counter()
    lines = generate(args.lines)
    stats = judge(lines, readers)
    print(f"{len(lines)} distinct generated lines in {time.perf_counter() - started:.0f}s")
    for name, tally in stats.items():
        grammar = [m for m in tally.missed if not HANDS_OFF_CODE.search(m[1])]
        print(f"{name:12} allowed {tally.allowed:5}  refused {tally.refused:5}  "
              f"allowed but missed a program bash ran: {len(tally.missed)} "
              f"({len(grammar)} with no code handed to a shell)")
        for programs, line in (grammar or tally.missed)[:10]:
            print(f"    {programs} in {line!r}")
    return 1 if stats["project"].missed else 0


if __name__ == "__main__":
    sys.exit(main())
