"""Fail closed: what the reader cannot follow is asked with a reason; everyday shell stays allowed.

The shapes of issue 29's review each hid a whole command (`rm -rf ~` ran unasked). Each is now
asked, either because the reader follows it or because it refuses it as too complex to check.
"""

from __future__ import annotations

import pytest

from bashgraph.tools.safety.policy import DEFAULT_ASK, Policy, Rule

WORKDIR, HOME = "/work/proj", "/home/u"


def defaults() -> Policy:
    return Policy(DEFAULT_ASK, workdir=WORKDIR, home=HOME)


#: (line, words of the reason): the review's high-severity shapes and their relatives.
HIDDEN_BEFORE = {
    "quotes-in-braces": ("echo ${x:-'}'} ; rm -rf ~ ; echo '}' #'", "quotes inside ${…}"),
    "double-quotes-in-braces": ('echo ${x:-"}"} ; rm -rf ~ ; echo "}" #"', "quotes inside ${…}"),
    "bare-brace-in-braces": ("echo ${x:-{} ; rm -rf ~ ; echo }", "delete outside"),
    "leading-line-continuation": ("\\\nrm -rf ~", "delete outside"),
    "leading-continuation-wrapper": ("\\\n nice rm -rf ~", "delete outside"),
    "subscript-across-words": ("x[a rm -rf ~ ]", "an array subscript that spans words"),
    "case-in-substitution": ('echo "$(case x in x) echo "a" ;; esac ; rm -rf ~ ; echo "b" )"',
                             "case inside a command substitution"),
    "case-in-heredoc-substitution": ("cat <<E\n$(case x in x) echo a;; esac; rm -rf ~; echo b)\nE",
                                     "case inside a command substitution"),
    "case-in-process-substitution": ("cat <(case x in x) echo;; esac; rm -rf ~)",
                                     "case inside a command substitution"),
    "heredoc-ended-at-paren": ("echo $(cat <<EOF\nEOF)\nrm -rf ~\nEOF\n)",
                               "here-document inside a command substitution"),
    "heredoc-unended-in-substitution": ("echo $(cat <<EOF\nrm -rf ~)", "here-document inside"),
    "heredoc-same-line-paren": ("echo $(cat <<EOF)\nrm -rf ~\nEOF", "here-document inside"),
    "arithmetic-for-do": ("for ((i=0;i<1;i++)) do rm -rf ~; done", "delete outside"),
    "arithmetic-for-brace": ("for ((i=0;i<1;i++)) { rm -rf ~; }", "delete outside"),
    "word-after-test-command": ("if [[ x ]] then rm -rf ~; fi", "a word after the ]]"),
    "coproc-runs-the-time-program": ("coproc time -f x rm -rf ~", "delete outside"),
    "for-without-in-do": ("for x do rm -rf ~; done", "delete outside"),
    "select-without-in-do": ("select x do rm -rf ~; done", "delete outside"),
    "prompt-code": ("PS4='$(rm -rf ~)'; set -x; true", "PS4"),
    "exported-prompt-code": ("export PS4='$(rm -rf ~)'; set -x; true", "PS4"),
    "bash-env-code": ("BASH_ENV=<(echo rm -rf ~) bash -c :", "BASH_ENV"),
    # Review 29: a child bash defines `ls` from its environment; an interactive bash runs its rcfile.
    "exported-function-in-env": ("env 'BASH_FUNC_ls%%=() { rm -rf ~; }' bash -c ls", "BASH_FUNC_ls"),
    "rcfile-substitution": ("bash --rcfile <(echo 'rm -rf ~') -i <<< ''", "delete outside"),
    "prompt-expansion": ("x='$(rm -rf ~)'; echo ${x@P}", "@P"),
    "aliases-on": ("shopt -s expand_aliases\nalias ls='rm -rf ~'\nls", "expand_aliases"),
    "extglob-on": ("shopt -s extglob\necho $(echo @(a|b)); rm -rf ~)", "extglob"),
    "trap-code": ("trap 'rm -rf ~' EXIT", "delete outside"),
    "variable-program": ("c=rm; $c -rf ~", "the program's name comes from a variable"),
    "braced-variable-program": ("c=r; ${c}m -rf ~", "the program's name comes from a variable"),
    "wrapped-variable-program": ("nice $CMD -rf ~", "the program's name comes from a variable"),
    "array-program": ("a=(rm); \"${a[@]}\" -rf ~", "the program's name comes from a variable"),
    "subscript-in-arithmetic": ("x='a[$(rm -rf ~)]'; echo $((x))", "quoted text that reads like code"),
    "subscript-in-declare": ("x='a[$(rm -rf ~)]'; declare -i y=x", "quoted text that reads like code"),
    "subscript-in-test": ("x='a[$(rm -rf ~)]'; [[ -v $x ]]", "quoted text that reads like code"),
    "subscript-in-printf": ("printf -v 'a[$(rm -rf ~)]' %s 1", "quoted text that reads like code"),
    "escaped-subscript": ('x="a[\\$(rm -rf ~)]"; let x', "quoted text that reads like code"),
    "heredoc-subscript": ("read x <<'E'\na[$(rm -rf ~)]\nE\necho $((x))", "quoted text"),
    "glob-program": ("/???/r? -rf ~", "a pattern bash expands"),
    "wrapped-glob-program": ("nice /usr/bin/r[m] -rf ~", "a pattern bash expands"),
    "process-substitution-program": ("<(echo) -rf ~", "the program's name comes from"),
    "named-descriptor": ("{fd}>/dev/null rm -rf ~", "delete outside"),
    "heredoc-delimiter-continued": ("cat <<EOF\nE\\\nOF\nrm -rf ~\nEOF", "line continuation"),
    "heredoc-delimiter-joined-away": ("cat <<EOF\nx \\\nEOF\n'\nEOF\nrm -rf ~\n'", "line continuation"),
    "mapfile-callback": ("mapfile -C 'rm -rf ~' -c 1 <<<x", "delete outside"),
    "mapfile-callback-lines": ("mapfile -C $'bash <<E\\nrm -rf ~\\nE' -c 1 <<<x", "several lines"),
    "dash-background-redirect": ("sh -c 'id &>/dev/null rm -rf ~'", "bash syntax (&>) in a script for sh"),
    "dash-nested-subshells": ("sh -c '((rm -rf ~))'", "bash syntax ((()"),
    "dash-heredoc": ("sh <<'E'\nid &>/dev/null rm -rf ~\nE", "in a script for sh"),
    "zsh-script": ("zsh -c 'echo ${x:-a}; rm -rf ~'", "a script for zsh"),
    "hash-path": ("hash -p /usr/bin/rm ls; ls -rf ~", "hash -p"),
    "bash-options-variable": ("BASHOPTS=expand_aliases bash -c 'alias x=rm\nx -rf ~'", "BASHOPTS"),
    "shopt-through-builtin": ("builtin shopt -s expand_aliases", "expand_aliases"),
    "escaped-dollar-in-printf": ("x=$(printf 'a[\\x24(rm -rf ~)]'); echo $((x))", "quoted text"),
    "subscript-in-inner-shell": ("export x='a[$(rm -rf ~)]'; bash -c 'echo $((x))'", "quoted text"),
}


@pytest.mark.parametrize(("line", "why"), HIDDEN_BEFORE.values(), ids=HIDDEN_BEFORE.keys())
def test_a_shape_that_hid_a_command_is_asked(line: str, why: str) -> None:
    verdict = defaults().decide(line)
    assert verdict.action == "ask", verdict
    assert why in verdict.reason


def test_a_deny_rule_still_refuses_a_line_too_complex_to_check() -> None:
    policy = Policy([Rule("rm *", "deny", "no deleting"), *DEFAULT_ASK], workdir=WORKDIR, home=HOME)
    assert policy.decide("echo ${x:-'}'} ; rm -rf ~ ; echo '}' #'").action == "deny"


#: Everyday lines a model writes: each stays allowed under the default rules.
EVERYDAY = [
    "ls -la",
    "cd src && ls",
    "git status",
    "git diff --stat HEAD~1",
    "git log --oneline -n 20",
    'git commit -m "Fix the parser"',
    "git commit -m \"$(cat <<'EOF'\nFix the parser\n\nBody line.\nEOF\n)\"",
    "git add -A && git commit -m wip",
    "python -m pytest tests -q -x",
    "pip install -e .",
    "make -j4 2>&1 | tail -20",
    "grep -rn 'def main' --include='*.py' .",
    "find . -name '*.pyc' -delete",
    "rm -rf build dist",
    "mkdir -p out/logs && cp a.txt out/",
    "cat README.md | head -50",
    "wc -l src/*.py",
    "for f in *.txt; do echo \"$f\"; done",
    "for ((i=0; i<3; i++)); do echo $i; done",
    "while read -r line; do echo \"$line\"; done < input.txt",
    "if [ -f setup.py ]; then python setup.py build; else echo none; fi",
    'case "$1" in start) echo start;; stop|halt) echo stop;; *) echo usage;; esac',
    'echo "${HOME:-/tmp}" "${name%.txt}" "${#items}"',
    'out="${OUT_DIR:-build}/log"; mkdir -p "$(dirname "$out")"',
    "echo $((1 + 2 * 3))",
    "x=$(git rev-parse HEAD); echo $x",
    "export PATH=$PWD/bin:$PATH; which tool",
    "ls | sort | uniq -c | sort -rn | head",
    "sed -n '1,20p' file.txt",
    "awk '{print $1}' data.csv | sort -u",
    "tar -czf archive.tar.gz src/",
    "curl -s https://example.com/api | jq .",
    "echo done > result.txt 2>&1",
    "command -v python3 || echo missing",
    "test -d venv || python3 -m venv venv",
    "(cd docs && make html)",
    "{ echo a; echo b; } > both.txt",
    "diff <(sort a.txt) <(sort b.txt)",
    "cat > notes.txt <<'EOF'\nsome $notes here\nEOF",
    "python3 script.py --input data.json --verbose",
    "npm test -- --watch=false",
    "docker ps --format '{{.Names}}'",
    "timeout 10 ./run.sh",
    "head -c 100 /dev/urandom | base64",
    "du -sh * | sort -h",
    "[[ -n $VAR ]] && echo set",
    "f() { echo \"hi $1\"; }; f there",
]


def test_there_are_at_least_forty_everyday_lines() -> None:
    assert len(EVERYDAY) >= 40


@pytest.mark.parametrize("line", EVERYDAY)
def test_everyday_shell_stays_allowed(line: str) -> None:
    verdict = defaults().decide(line)
    assert verdict.action == "allow", verdict
