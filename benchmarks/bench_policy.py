"""Approval rules under hostile input: time per decision as the command grows.

    python benchmarks/bench_policy.py            # 10 KB, 100 KB and the limit (figures in docs/benchmarks.md)
    python benchmarks/bench_policy.py --quick    # 4 KB and 40 KB, a CI check well under 20 s

Each shape is a command a model could send, repeated up to the size: one long word, base64,
thousands of pipeline stages, `find` with many start paths or many `-exec`s, nested quotes and
substitutions, many here-documents, deep parentheses, arithmetic, wrappers, `cd` chains, `{}`
repeated over a long `find` start path, and shells that read one here-document nested 8 deep. Each
round decides every shape at every size once (interleaved, so all see the same machine); the
fastest of the rounds is kept, in CPU time (work done, not the waits of a shared machine). The
anchor of each shape is its own smallest size: the growth
ratio t(10x the size) / t(size) is about 10 when the time is linear and about 100 when it is
quadratic. The run FAILS (exit status 1) when a ratio for a tenfold size is above
`MAX_GROWTH` — a generous margin for a shared, noisy machine, far below what quadratic gives.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from bashgraph.tools.safety.policy import DEFAULT_ASK, Policy
from bashgraph.tools.text import MAX_COMMAND_BYTES

MAX_GROWTH = 25.0


def fill(unit: str, size: int, head: str = "", tail: str = "") -> str:
    """`head`, then `unit` repeated, then `tail`: at most `size` characters."""
    return head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail


def nested_exec_heredocs(size: int) -> str:
    """`find . -exec sh \\; …` (15 shells reading one stdin) fed a here-document holding the same
    shape, 8 deep, around an `echo` that fills the size: each shell reads the one document."""
    body = fill("x", size - 8 * 200, "echo ")
    for depth in range(8):
        body = "find . " + "-exec sh \\; " * 15 + f"<<'E{depth}'\n{body}\nE{depth}"
    return body


SHAPES: dict[str, Callable[[int], str]] = {
    "long word": lambda n: fill("a", n, "echo "),
    "base64 blob": lambda n: fill("QUJD+/9=", n, "echo "),
    "true| stages": lambda n: fill("true|", n, "", "true"),
    "find a a a -exec": lambda n: fill("a ", n, "find ", "-exec rm {} +"),
    "find -exec x many": lambda n: fill("-exec rm {} + ", n, "find a b c d "),
    "quotes": lambda n: fill("\"'x'\"$'y'", n, "echo "),
    "nested quotes+subst": lambda n: fill('"$(echo "$(id \'a\')")"', n, "echo "),
    "backticks": lambda n: fill("`id`", n, "echo "),
    "here-documents": lambda n: fill("cat <<E\nx\nE\n", n),
    "here-docs to bash": lambda n: fill("bash <<E\nls\nE\n", n),
    "deep parentheses": lambda n: "(" * (n // 2) + ")" * (n // 2),
    "arithmetic <<": lambda n: fill("$((1<<2))", n, "echo "),
    "unclosed $(( )": lambda n: fill("$((cat<<E\n(\nE\n) )\n", n),
    "nested $( x60": lambda n: "echo " + "$(" * 60 + "a" * (n - 200) + ")" * 60,
    "${ } expansions": lambda n: fill("${a:-${b}}", n, "echo "),
    "wrappers": lambda n: fill("nice ", n, "", "rm -rf x"),
    "sed script": lambda n: fill("s/a[/]b/c/g;", n, "sed -e '", "' f"),
    "awk program": lambda n: fill("$1 || $2 ", n, "awk '", "' f"),
    "unknown wrapper option": lambda n: fill("--x v ", n, "strace ", "rm x"),
    "eval $X chain": lambda n: fill('eval "$X"; ', n),
    "HOME and ~ words": lambda n: fill("HOME=x; ", n, "", "echo > ~/a"),
    "device operands": lambda n: fill("/dev/sda ", n, "mkswap "),
    "rm many targets": lambda n: fill("ab ", n, "rm -rf "),
    "cd chain": lambda n: fill("cd a;", n),
    "eval chain": lambda n: fill("eval ", n, "", "ls"),
    "bash -c nested": lambda n: fill("x", n, "bash -c \"bash -c 'bash -c \\\"echo ", "\\\"'\""),
    "functions+pipes": lambda n: fill("f() { f|g; }; ", n),
    "find {}{}… long path": lambda n: "find " + "a" * (n // 2) + " -exec echo " + "{}" * (n // 4 - 10) + " +",
    "here-docs 15 sh x8": nested_exec_heredocs,
    "! ((0)) keywords": lambda n: fill("! ((0)) ", n),
    "for x do keywords": lambda n: fill("for x do ", n, "", "true; done"),
    "case patterns": lambda n: fill("a|", n, "case x in ", "b) ls;; esac"),
    "case clauses": lambda n: fill("a) ls;; ", n, "case x in ", "esac"),
    "here-docs in $( )": lambda n: fill("$(cat <<E\nx\nE\n)", n, "echo "),
    "${ } unclosed quotes": lambda n: fill("${x:-'}", n, "echo "),
    "trap nested": lambda n: fill("trap '", n, "", "ls' EXIT"),
}



def decide_seconds(policy: Policy, command: str) -> float:
    """CPU seconds of one decision: the other work on a shared machine does not count."""
    start = time.process_time()
    policy.decide(command)
    return time.process_time() - start


def measure(sizes: tuple[int, ...], rounds: int) -> dict[str, list[float]]:
    """The fastest time of each shape at each size, over interleaved rounds."""
    policy = Policy(DEFAULT_ASK, workdir="/work/proj", home="/home/u")
    best = {name: [float("inf")] * len(sizes) for name in SHAPES}
    commands = {name: [make(size) for size in sizes] for name, make in SHAPES.items()}
    for _ in range(rounds):
        for name in SHAPES:
            for index, command in enumerate(commands[name]):
                best[name][index] = min(best[name][index], decide_seconds(policy, command))
    return best


def report(sizes: tuple[int, ...], best: dict[str, list[float]]) -> list[str]:
    """Print the table; the shapes whose tenfold growth ratio is above MAX_GROWTH."""
    heads = [f"{size / 1024:.0f} KiB" for size in sizes]
    print(f"{'shape':22}" + "".join(f"{h:>11}" for h in heads) + "   growth x10" +
          ("   growth to limit" if len(sizes) > 2 else ""))
    failed = []
    for name, times in best.items():
        growth = times[1] / max(times[0], 1e-6)
        cells = "".join(f"{t * 1000:9.1f}ms" for t in times)
        tail = f"   {times[2] / max(times[1], 1e-6):6.2f} (size x{sizes[2] / sizes[1]:.2f})" \
            if len(sizes) > 2 else ""
        flag = "  <-- superlinear" if growth > MAX_GROWTH else ""
        print(f"{name:22}{cells}   {growth:8.1f}{tail}{flag}")
        if growth > MAX_GROWTH:
            failed.append(name)
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 KB and 40 KB, 3 rounds")
    args = parser.parse_args()
    sizes = (4_000, 40_000) if args.quick else (10_000, 100_000, MAX_COMMAND_BYTES)
    rounds = 3 if args.quick else 5
    print(f"limit: {MAX_COMMAND_BYTES} bytes; {len(SHAPES)} shapes; {rounds} rounds, fastest kept")
    started = time.perf_counter()
    failed = report(sizes, measure(sizes, rounds))
    policy = Policy(DEFAULT_ASK, workdir="/work/proj")
    over = "echo " + "a" * MAX_COMMAND_BYTES
    print(f"over the limit: {policy.decide(over).action} in {decide_seconds(policy, over) * 1000:.2f}ms")
    print(f"total {time.perf_counter() - started:.1f}s")
    if failed:
        print(f"FAIL: growth above {MAX_GROWTH} for a tenfold size: {', '.join(failed)}")
        return 1
    print(f"ok: every shape grows by at most {MAX_GROWTH}x for a tenfold size")
    return 0


if __name__ == "__main__":
    sys.exit(main())
