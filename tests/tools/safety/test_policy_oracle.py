"""The differential oracle: whenever the rules allow a line, they saw every program bash ran.

Each line runs in real bash inside bubblewrap (tests/support/bash_oracle.py). Lines come from a
Hypothesis grammar of shell text (tests/support/shell_grammar.py) and from a corpus: every bypass
any review found, and the everyday lines that must stay allowed. A program bash ran that the
reader did not see, on a line the rules allow, fails the test. The budget here is bounded
(`BASHGRAPH_ORACLE_EXAMPLES`, default 60); benchmarks/bench_oracle.py runs a longer one.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from bashgraph.tools.safety.policy import DEFAULT_ASK, Policy
from tests.support.bash_oracle import WORKDIR, bash_ran, bwrap_unavailable, unseen
from tests.support.shell_grammar import shell_lines, token_soup
from tests.tools.safety.test_policy_bypasses import ASKED
from tests.tools.safety.test_policy_fail_closed import EVERYDAY, HIDDEN_BEFORE

UNAVAILABLE = bwrap_unavailable()
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"no oracle: {UNAVAILABLE}")
EXAMPLES = int(os.environ.get("BASHGRAPH_ORACLE_EXAMPLES", "60"))


def policy() -> Policy:
    return Policy(DEFAULT_ASK, workdir=WORKDIR, home="/root")


#: What the reviews found, as lines that bash would run harmlessly in the sandbox (the rm
#: targets are made up), plus allowed look-alikes of each.
REVIEW_SHAPES = [
    "echo ${x:-'}'} ; rm -rf ~ ; echo '}' #'",
    'echo "$(case x in x) echo "a" ;; esac ; rm -rf ~ ; echo "b" )"',
    "cat <<E\n$(case x in x) echo a;; esac; id; echo b)\nE",
    "echo $(cat <<EOF\nEOF)\nid\nEOF\n)",
    "for ((i=0;i<1;i++)) do id; done",
    "for ((;;)) { id; break; }",
    "if [[ x ]] then id; fi",
    "coproc time -f x id; wait",
    "for x do id; done",
    "! ((0)) && id",
    "echo ${x:-}; id",
    "case a in a) id;; esac",
    "case a in (a|b) id ;; esac; uname",
    "x=$(case a in a) echo;; esac); id",
    "trap 'id' EXIT",
    "git commit -m \"$(cat <<'EOF'\nmsg\nEOF\n)\"; id",
    # Found by the oracle on generated and random lines: bash ran what the reader did not see.
    "/usr/bin/i? 2>/dev/null; {fd}>/dev/null id",
    "cat <<EOF\nE\\\nOF\nid\nEOF",
    "mapfile -C $'bash <<E\\nid\\nE' -c 1 <<<x",
    "=<(bash -c E) ",
    "2>&1lstrap !",
    "x= time  ",
    "$''if <<E\n }",
    "\\while }",
    "{ function g { env id ${x:-{} ${x:-{}; }; g; }",
    "lsls\\\\ls\\",
    "(( 1 )) && time ls |& time ls",
    "echo x | { time cat; }",
    "\\\n exec  ]]E\n",
    "date[if !for id ]]\\(>|while \nE\n",
    "!>idselect then 2>&1trueE\nsh -c #<<<\nE\n&& ]]",
]
CORPUS = [*REVIEW_SHAPES, *(line for line, _ in HIDDEN_BEFORE.values()), *ASKED.values(), *EVERYDAY]


def test_the_oracle_sees_what_bash_runs() -> None:
    ran = bash_ran("x=$(id -u); for v do uname; done; bash -c 'hostname'; sh -c nproc; eval date")
    assert {"id", "uname", "bash", "hostname", "sh", "nproc", "eval", "date"} <= ran.programs


def test_the_oracle_catches_a_reader_that_misses_a_command() -> None:
    # The reader of an earlier version missed `rm` here; the oracle must see bash run it.
    assert "rm" in bash_ran("for ((i=0;i<1;i++)) do rm -f /tmp/w/none; done").programs


@pytest.mark.parametrize("line", CORPUS)
def test_the_corpus_agrees_with_bash(line: str) -> None:
    action, missed = unseen(policy(), line)
    assert not missed, f"{action} but bash ran {sorted(missed)} unseen: {line!r}"


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(shell_lines())
def test_generated_lines_agree_with_bash(line: str) -> None:
    action, missed = unseen(policy(), line)
    assert not missed, f"{action} but bash ran {sorted(missed)} unseen: {line!r}"


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(token_soup())
def test_lines_of_random_tokens_agree_with_bash(line: str) -> None:
    action, missed = unseen(policy(), line)
    assert not missed, f"{action} but bash ran {sorted(missed)} unseen: {line!r}"
