"""The approval rules judge what a command does, not what its program is called: wrappers are read
through, other names for the same effect are asked, and program text the rules cannot read is
hidden code."""

from __future__ import annotations

import pytest

from bashgraph.tools.safety.policy import DEFAULT_ASK, Policy, Rule
from bashgraph.tools.safety.wrappers import views

WORKDIR, HOME = "/work/proj", "/home/u"
OUTSIDE = "rm -rf ../outside"


def defaults() -> Policy:
    return Policy(DEFAULT_ASK, workdir=WORKDIR, home=HOME)


def deny_rm() -> Policy:
    return Policy([Rule("rm *", "deny", "no deleting"), *DEFAULT_ASK], workdir=WORKDIR, home=HOME)


#: Each ran `rm -rf ../outside` unseen: the wrapper's options hid the command it runs.
WRAPPED = {
    "xargs-glued-optional-eof": f"xargs -en {OUTSIDE}",
    "xargs-glued-optional-replace": f"xargs -iI {OUTSIDE}",
    "xargs-glued-optional-lines": f"xargs -l5 {OUTSIDE}",
    "chrt-deadline-period": f"chrt -d -P 1000 -D 2000 -T 500 0 {OUTSIDE}",
    "sudo-optional-host": f"sudo -h {OUTSIDE}",
    "unshare": f"unshare -r {OUTSIDE}",
    "unshare-glued-namespace-file": f"unshare -m/proc/1/ns/mnt --fork {OUTSIDE}",
    "unshare-valued": f"unshare --setuid 0 -w /tmp {OUTSIDE}",
    "nsenter": f"nsenter -t 1 -m -u -n {OUTSIDE}",
    "flock": f"flock -w 5 /tmp/lock {OUTSIDE}",
    "flock-command": f"flock /tmp/lock -c '{OUTSIDE}'",
    "setsid": f"setsid -f {OUTSIDE}",
    "chroot": f"chroot --userspec 0:0 / {OUTSIDE}",
    "setpriv": f"setpriv --reuid 0 --init-groups {OUTSIDE}",
    "prlimit": f"prlimit --nofile=64 -n5 {OUTSIDE}",
    "strace": f"strace -f -o /dev/null -e trace=all {OUTSIDE}",
    "systemd-run": f"systemd-run --uid=0 -p User=root {OUTSIDE}",
    "fakeroot": f"fakeroot -- {OUTSIDE}",
    "watch": f"watch -n 1 '{OUTSIDE}'",
    "watch-exec": f"watch -x {OUTSIDE}",
    "runuser": f"runuser -u bob -- {OUTSIDE}",
    "su-command": f"su -c '{OUTSIDE}' bob",
    "su-bundled-command": f"su -lc '{OUTSIDE}' bob",
    "script-command": f"script -q -c '{OUTSIDE}' /dev/null",
    "sg-command": f"sg wheel '{OUTSIDE}'",
    "sh-c-positional": f"sh -c '\"$@\"' _ {OUTSIDE}",
    "bash-c-exec-positional": f"bash -c 'exec \"$@\"' bash {OUTSIDE}",
    "unknown-option-of-a-wrapper": f"strace --not-an-option value {OUTSIDE}",
}


@pytest.mark.parametrize("command", WRAPPED.values(), ids=WRAPPED.keys())
def test_wrappers_are_read_through(command: str) -> None:
    """The command a wrapper runs is seen by every rule: a user's `deny:rm *`, and the default
    `@rm-outside-workdir`."""
    assert deny_rm().decide(command).action == "deny", deny_rm().decide(command)
    assert defaults().decide(command).action == "ask", defaults().decide(command)


@pytest.mark.parametrize(("command", "inner"), [
    (("xargs", "-en", "rm", "x"), ("rm", "x")),
    (("xargs", "-iI", "rm", "I"), ("rm", "I")),
    (("xargs", "-E", "END", "rm", "x"), ("rm", "x")),
    (("xargs", "--replace", "rm", "x"), ("rm", "x")),
    (("chrt", "-P", "5", "-D", "6", "0", "rm", "x"), ("rm", "x")),
    (("unshare", "-mfoo", "rm", "x"), ("rm", "x")),
    (("prlimit", "-n", "rm", "x"), ("rm", "x")),  # `-n[limits]`: the value only glued
    (("sh", "-c", '"$@"', "_", "rm", "x"), ("rm", "x")),
])
def test_options_are_read_as_each_program_reads_them(command: tuple[str, ...], inner: tuple[str, ...]) -> None:
    """Glued optional values (`-e[eof]`, `-i[R]`, `-l[N]`, `-m[file]`) never take the next word;
    valued options (`chrt -P/-D`, `xargs -E`) do."""
    assert views(command)[-1].words == inner


def test_an_unknown_option_makes_every_later_word_a_possible_command() -> None:
    """An option the rules do not know may or may not take the next word: both are looked at."""
    seen = [v.words for v in views(("strace", "--new-option", "v", "rm", "x"))]
    assert ("v", "rm", "x") in seen
    assert ("rm", "x") in seen


def test_options_that_run_nothing_still_run_nothing() -> None:
    for command in (("setpriv", "-d", "rm"), ("prlimit", "-p", "1", "rm"), ("command", "-v", "rm"),
                    ("flock", "/tmp/l", "-c", "rm x")):
        assert [v.words for v in views(command)] == [command]


#: Everyday uses of the same wrappers: no question asked.
WRAPPED_ALLOWED = ["xargs -0 -n 1 echo", "xargs -I{} cp {} build/", "flock /tmp/build.lock make",
                   "timeout -v 60 make test", "strace -f -o trace.txt ./a.out", "watch -n 5 ls",
                   "sh -c 'echo \"$@\"' _ a b", "nice -10 make", "unshare -r id", "setsid -f make"]


@pytest.mark.parametrize("command", WRAPPED_ALLOWED)
def test_everyday_wrapped_commands_stay_allowed(command: str) -> None:
    decision = defaults().decide(command)
    assert (decision.action, decision.rule) == ("allow", None), decision
