"""Every decision is linear in the line's length, counted in steps rather than seconds.

The steps are the Python function calls (and calls into C) a decision makes, counted with
`sys.setprofile`: deterministic on any machine, and a rescan of what was already read (the
`! ((0))` repeated shape re-checked every earlier word: 6-7.5 s at 128 KB) shows up as calls
that grow with the square of the length. Four times the text may cost about four times the
steps, never sixteen. Wall-clock figures live in benchmarks/bench_policy.py.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bashgraph.tools.safety.policy import DEFAULT_ASK, Policy

POLICY = Policy(DEFAULT_ASK, workdir="/work/proj", home="/home/u")

#: Pieces of the grammar whose repetition once cost more than linear time, and their neighbours.
PIECES = st.sampled_from([
    "! ", "((0))", "(( ", "))", "for ", "x ", "do ", "done", "case ", " in ", "a) ", ";; ", "esac ",
    "$(", ")", "(", "${x:-", "}", "'", '"', "`", "<<E\n", "\nE\n", "E)", "|", "; ", "&& ", "\n",
    "$((", "1<<2", "$[", "]", "if ", "then ", "fi ", "{ ", "nice ", "eval ", "bash -c ", "trap ",
    "x=1 ", "cd a;", "rm -rf x ", "find . -exec ", "{} ", "\\;", "# ", "\\", "f() ", "esac)",
])


def steps(command: str) -> int:
    """The function calls one decision makes."""
    count = 0

    def profile(_frame: FrameType, event: str, _arg: Any) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        POLICY.decide(command)
    finally:
        sys.setprofile(None)
    return count


@settings(max_examples=120, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PIECES, min_size=1, max_size=8))
def test_four_times_the_text_costs_about_four_times_the_steps(pieces: list[str]) -> None:
    unit = "".join(pieces)
    small, large = steps(unit * 100), steps(unit * 400)
    assert large <= 5 * small + 5_000, (unit, small, large)


def test_the_repeated_negated_arithmetic_shape_is_linear() -> None:
    small, large = steps("! ((0)) " * 500), steps("! ((0)) " * 2000)
    assert large <= 5 * small, (small, large)
