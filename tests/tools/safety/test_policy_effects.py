"""The approval rules judge what a command does, not what its program is called: wrappers are read
through, other names for the same effect are asked, and program text the rules cannot read is
hidden code."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bashgraph.tools.safety.policy import DEFAULT_ASK, Policy, Rule, Verdict
from bashgraph.tools.safety.wrappers import views

WORKDIR, HOME = "/work/proj", "/home/u"
OUTSIDE = "rm -rf ../outside"


def defaults() -> Policy:
    return Policy(DEFAULT_ASK, workdir=WORKDIR, home=HOME)


def deny_rm() -> Policy:
    return Policy([Rule("rm *", "deny", "no deleting"), *DEFAULT_ASK], workdir=WORKDIR, home=HOME)


def refused(decision: Verdict, *patterns: str) -> bool:
    """Denied, or asked by one of `patterns`, or asked because the reader refuses a construct in
    the line (fail closed: `too complex to check: …`, decided before any rule)."""
    if decision.action == "deny":
        return True
    if decision.action != "ask":
        return False
    by_rule = decision.rule is not None and decision.rule.pattern in patterns
    return by_rule or (decision.rule is None and decision.reason.startswith("too complex to check"))


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
    assert refused(deny_rm().decide(command), "rm *"), deny_rm().decide(command)
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


#: Program text the rules cannot read, each allowed before while the same effect through `| python3`
#: or `echo "$X" | sh` was asked.
HIDDEN = {
    "python-c": "python3 -c 'import shutil; shutil.rmtree(\"/x\")'",
    "python-bundled-c": "python -Bc 'import os'",
    "python-c-after-valued-option": "python3 -W ignore -c 'import os'",
    "python-c-through-sudo": "sudo -u bob python3 -c 'import os'",
    "python-c-through-xargs": "ls | xargs python3 -c 'import sys'",
    "perl-e": "perl -e 'unlink glob q(*)'",
    "perl-ne": "perl -ne 'print' f",
    "perl-module-code": "perl '-Mstrict;system q(id)' x.pl",
    "node-e": "node -e 'require(\"fs\").rmSync(\"/x\")'",
    "node-eval-long": "node --eval='1'",
    "node-print": "node -p 'process.env'",
    "ruby-e": "ruby -e 'File.delete(\"x\")'",
    "php-r": "php -r 'unlink(\"x\");'",
    "lua-e": "lua -e 'os.execute(\"id\")'",
    "awk-system": "awk 'BEGIN { system(\"rm -rf /\") }'",
    "awk-pipe-to-command": "awk '{ print | \"sh\" }' f",
    "awk-getline-from-command": "awk 'BEGIN { \"id\" | getline x }'",
    "gawk-source-option": "gawk -e 'BEGIN { system(\"id\") }'",
    "gawk-load-library": "gawk -l filefuncs 'BEGIN { }'",
    "sed-e-command": "sed '1e id' f",
    "sed-s-e-flag": "sed 's/.*/id/e' f",
    "sed-e-among-expressions": "sed -e 's/a/b/' -e '$e id' f",
    "sed-unreadable-script": "sed 'k' f",
    "glob-program-name": "/???/r? -rf ../outside",
    "glob-program-star": "/bin/r* -rf ../outside",
    "shell-reads-fd-3": "bash /dev/fd/3 3<<<'rm -rf ../outside'",
    "source-reads-fd-3": "source /proc/self/fd/3 3<<<'rm -rf ../outside'",
    "here-string-variable": 'sh <<< "$X"',
    "eval-variable": 'eval "$X"',
    "bash-c-variable": 'bash -c "$X"',
    "unquoted-heredoc-variable": 'bash <<EOF\n$X\nEOF',
    "positional-program": "sh -c '$1 -rf $2' _ rm ../outside",
    "gdb-command-after-the-program": "gdb ./a.out -batch -ex 'shell id'",
    "vim-command-after-the-file": "vim notes.txt -c ':!id'",
    "awk-program-from-stdin": "awk -f /dev/stdin <<< 'BEGIN { system(\"id\") }'",
    "awk-program-from-a-substitution": "awk -f <(echo 'BEGIN { system(\"id\") }')",
    "sed-script-from-stdin-dash": "sed -f - f <<< '1e id'",
    "sed-script-from-stdin-long": "sed --file=/dev/stdin f <<< '1e id'",
    "python-timeit-module-code": "python3 -m timeit \"__import__('os').system('id')\"",
    "xargs-input-as-the-script": "printf 'id\\0' | xargs -0 sh -c",
    "xargs-replace-string-as-the-script": "echo id | xargs -I{} sh -c {}",
    "xargs-other-replace-string": "echo id | xargs -I % bash -c %",
    "xargs-input-as-positional-command": "echo id | xargs sh -c '\"$@\"' _",
    "xargs-input-spliced-into-code": "ls | xargs -I{} sh -c 'wc -l {}'",
}


@pytest.mark.parametrize("command", HIDDEN.values(), ids=HIDDEN.keys())
def test_program_text_the_rules_cannot_read_is_hidden_code(command: str) -> None:
    decision = defaults().decide(command)
    assert refused(decision, "@hidden-code", "@rm-outside-workdir"), decision
    assert decision.action == "ask", decision


#: Other names for stdin: the shell reads the here-string, and the rules read it too.
STDIN_NAMES = ["/dev//stdin", "/dev/stdin", "//dev/fd/0", "/proc/thread-self/fd/0", "/proc/$$/fd/0",
               "/proc/self/task/1/fd/0"]


@pytest.mark.parametrize("name", STDIN_NAMES)
def test_every_name_of_stdin_is_read_as_stdin(name: str) -> None:
    for command in (f"bash {name} <<< '{OUTSIDE}'", f"source {name} <<< '{OUTSIDE}'",
                    f"echo '{OUTSIDE}' | sh {name}"):
        assert deny_rm().decide(command).action == "deny", command


#: Interpreters, awk and sed as they are used every day: no question asked.
READABLE = ["python3 script.py -c config.ini", "python3 -m pytest -q -x", "node app.js -e prod",
            "awk '{print $1}' data.txt", "awk -F'|' '$1 || $2 {print $2}' f", "awk -f prog.awk f",
            "sed -n '1,5p' f", "sed -i 's/old/new/g' f", "sed -e 's/e/E/g' -e '/^#/d' f",
            "sed ':a;N;$!ba;s/\\n/ /g' f", "sed --sandbox 's/a/b/' f", "sed -f script.sed f",
            "[ -f x ] && echo yes", "bash -c 'echo $HOME'", "eval 'ls -la'",
            "bash -c 'for f in *.txt; do wc -l \"$f\"; done'", "perl script.pl", "ruby app.rb",
            "ls | xargs sh -c 'for f; do wc -l \"$f\"; done' _", "ls | xargs -n1 sh -c 'echo $0'"]


@pytest.mark.parametrize("command", READABLE)
def test_readable_programs_stay_allowed(command: str) -> None:
    decision = defaults().decide(command)
    assert (decision.action, decision.rule) == ("allow", None), decision


#: The same effect as `dd of=/dev/sda` or `reboot`, by another program or another route: each was
#: allowed before.
MACHINE = {
    "mkswap-disk": ("mkswap /dev/sda", "@write-system-path"),
    "redirect-to-block-device-number": ("echo x > /dev/block/8:0", "@write-system-path"),
    "sgdisk-nvme": ("sgdisk --zap-all /dev/nvme0n1", "@write-system-path"),
    "shred-disk-by-id": ("shred -n 1 /dev/disk/by-id/ata-X", "@write-system-path"),
    "blkdiscard": ("blkdiscard /dev/sda", "@write-system-path"),
    "lvm-volume": ("cryptsetup luksFormat /dev/vg0/data", "@write-system-path"),
    "option-value-device": ("mke2fs -F --device=/dev/sdb", "@write-system-path"),
    "pv-to-zvol": ("pv disk.img > /dev/zd0", "@write-system-path"),
    "device-glob": ("cp img /dev/s[d]a", "@write-system-path"),
    "device-from-dev": ("cd /dev && mkswap sda", "@write-system-path"),
    "device-through-sudo": ("sudo -n hdparm --security-erase x /dev/sda", "@write-system-path"),
    "sysrq-reboot": ("echo b > /proc/sysrq-trigger", "@write-system-path"),
    "sysrq-through-tee": ("echo o | tee /proc/sysrq-trigger", "@write-system-path"),
    "systemctl-reboot-target": ("systemctl start reboot.target", "@stops-machine"),
    "systemctl-isolate-rescue": ("systemctl isolate rescue.target", "@stops-machine"),
    "systemctl-soft-reboot": ("systemctl soft-reboot", "@stops-machine"),
    "systemctl-suspend": ("systemctl suspend", "@stops-machine"),
    "systemctl-unknown-unit": ('systemctl start "$UNIT"', "@stops-machine"),
    "systemctl-ctrl-alt-del": ("systemctl --no-block start ctrl-alt-del.target", "@stops-machine"),
    "telinit": ("telinit 1", "@stops-machine"),
    "init-single": ("init s", "@stops-machine"),
    "kill-init": ("kill -9 1", "@stops-machine"),
    "kill-init-default-signal": ("kill 1", "@stops-machine"),
    "kill-init-named-signal": ("kill -s KILL 1", "@stops-machine"),
    "killall5": ("killall5 -9", "@stops-machine"),
    "pkill-systemd": ("pkill -9 -x systemd", "@stops-machine"),
    "kill-init-leading-zero": ("kill -15 01", "@stops-machine"),
    "kill-everything-leading-zero": ("kill -9 -01", "@stops-machine"),
    "kill-everything-after-dashes": ("kill -9 -- -01", "@stops-machine"),
    "pkill-any-name": ("pkill .", "@stops-machine"),
    "pkill-full-regex": ("pkill -9 -f 'sys.*'", "@stops-machine"),
    "pkill-substring-of-systemd": ("pkill -9 stemd", "@stops-machine"),
    "pkill-by-user-only": ("pkill -9 -u root", "@stops-machine"),
    "killall-regex": ("killall -r .", "@stops-machine"),
    "systemctl-reboot-service": ("systemctl start systemd-reboot.service", "@stops-machine"),
    "kexec": ("kexec -e", "@stops-machine"),
    "rtcwake-off": ("rtcwake -m off -s 60", "@stops-machine"),
    "pm-suspend": ("pm-suspend", "@stops-machine"),
    "dbus-reboot": ("busctl call org.freedesktop.login1 /org/freedesktop/login1 "
                    "org.freedesktop.login1.Manager Reboot b false", "@stops-machine"),
    "loginctl-poweroff": ("loginctl poweroff", "@stops-machine"),
    "reboot-through-nsenter": ("nsenter -t 1 -a reboot", "reboot *"),
    "reboot-through-setarch": ("setarch x86_64 reboot", "reboot *"),
    "reboot-through-linux64": ("linux64 --addr-no-randomize reboot", "reboot *"),
    "reboot-through-toybox": ("toybox reboot", "reboot *"),
    "reboot-through-eatmydata": ("eatmydata reboot", "reboot *"),
}


@pytest.mark.parametrize(("command", "pattern"), MACHINE.values(), ids=MACHINE.keys())
def test_effects_on_the_machine_are_asked_whatever_the_program(command: str, pattern: str) -> None:
    decision = defaults().decide(command)
    assert decision.action == "ask", decision
    assert decision.rule is not None
    assert decision.rule.pattern == pattern, decision


def test_a_pid_with_leading_zeros_is_that_pid() -> None:
    """Why `kill -9 -01` is asked: bash's kill reads `0N` as the pid N (so `-01` is -1)."""
    done = subprocess.run(["bash", "-c", "sleep 30 & kill -9 0$!; wait $!; echo $?"],
                          check=True, capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "137", done


#: Reading devices, harmless devices, and ordinary signals and services: no question asked.
MACHINE_ALLOWED = ["lsblk /dev/sda", "cat /dev/sda | head -c 512 | xxd", "dd if=/dev/sda of=mbr.img count=1",
                   "blkid /dev/nvme0n1p1", "echo x > /dev/null", "ls 2>/dev/null", "echo hi > /dev/tty",
                   "echo x > /dev/stderr", "head -c 16 /dev/urandom", "cat /proc/cpuinfo",
                   "echo done > /proc/self/fd/2", "kill 1234", "kill -1 1234", "kill -TERM %1",
                   "systemctl restart nginx", "systemctl status", "pkill -f 'python3 server.py'",
                   "pkill -u bob node", "killall python3", "kill -9 01234", "linux32 make",
                   "unshare -rn make test", "unshare --help", "script -qc make log.txt",
                   "echo /dev/sda", "mkswap ./swapfile"]


@pytest.mark.parametrize("command", MACHINE_ALLOWED)
def test_reading_devices_and_ordinary_signals_stay_allowed(command: str) -> None:
    decision = defaults().decide(command)
    assert (decision.action, decision.rule) == ("allow", None), decision


#: Paths whose directory or `~` the rules took for known while bash did not: each was allowed.
PATHS = {
    "find-start-paths-from-a-file": "find -files0-from list.txt -delete",
    "find-files0-exec-rm": "find . -files0-from list.txt -exec rm {} +",
    "builtin-cd": "builtin cd / && rm -rf tmp",
    "command-cd": "command cd /etc && echo x > passwd",
    "home-assigned": "HOME=/etc; echo x >> ~/passwd",
    "home-exported": "export HOME=/etc; echo x >> ~/passwd",
    "home-loop-variable": "for HOME in /etc; do echo x > ~/passwd; done",
    "home-quoted-name": 'declare "HO""ME=/etc"; echo x > ~/passwd',
    "home-computed-name": 'n=HOME; printf -v "$n" /etc; echo x > ~/passwd',
    "home-set-after-a-function-is-defined": "f() { echo x > ~/passwd; }; HOME=/etc; f",
    "home-then-bare-cd": "HOME=/etc; cd; echo x > passwd",
    "home-from-a-sourced-file": "source env.sh; echo x > ~/.bashrc",
    "at-reads-commands": "at now <<< 'reboot'",
}


@pytest.mark.parametrize("command", PATHS.values(), ids=PATHS.keys())
def test_unknown_directories_and_homes_are_asked(command: str) -> None:
    assert defaults().decide(command).action == "ask", defaults().decide(command)


def test_home_really_moves_the_tilde(tmp_path: Path) -> None:
    """Why: bash expands `~` from HOME as the line runs."""
    subprocess.run(["bash", "-c", f"HOME={tmp_path}; echo x >> ~/passwd"], check=True)
    assert (tmp_path / "passwd").read_text() == "x\n"


#: `~`, `$HOME` and `cd` as they are used every day: no question asked.
PATHS_ALLOWED = ["echo x > ~/notes.txt", "echo $HOME ${HOME}", "cd ~ && ls", "export PATH=$PATH:~/bin; ls",
                 "command cd sub && rm -rf x", "builtin cd sub && rm -rf build", "find . -files0-from l -print",
                 "MY_HOME=/etc; echo x > out.txt", "at -l", "printf '%s\\n' \"$X\" > ~/out.txt",
                 "export PATH=$PATH:~/bin; echo x > ~/notes.txt", "read -r line; echo \"$line\" > ~/log.txt"]


@pytest.mark.parametrize("command", PATHS_ALLOWED)
def test_everyday_paths_stay_allowed(command: str) -> None:
    decision = defaults().decide(command)
    assert (decision.action, decision.rule) == ("allow", None), decision


#: Why these shapes matter: real programs run `touch marker` through each of them.
REALLY_RUNS = ["echo | xargs -en touch marker", "echo x | xargs -iI touch marker", "flock lock touch marker",
               "sh -c '\"$@\"' _ touch marker", "echo x | sed 's/.*/touch marker/e'",
               "awk 'BEGIN { system(\"touch marker\") }'", "/usr/bin/t?uch marker",
               "bash /dev//stdin <<< 'touch marker'", "bash /dev/fd/3 3<<< 'touch marker'",
               "awk -f /dev/stdin <<< 'BEGIN { system(\"touch marker\") }'",
               "echo x | sed -f - <(echo x) <<< '1e touch marker'",
               "python3 -m timeit -n 1 -r 1 \"__import__('os').system('touch marker')\"",
               "unshare <<< 'touch marker'", "i386 touch marker",
               "echo 'touch marker' | xargs -I{} sh -c {}", "printf 'touch marker\\0' | xargs -0 sh -c"]


@pytest.mark.parametrize("command", REALLY_RUNS)
def test_each_shape_really_runs_the_hidden_command(tmp_path: Path, command: str) -> None:
    subprocess.run(["bash", "-c", command], cwd=tmp_path, check=True, capture_output=True, timeout=30)
    assert (tmp_path / "marker").exists()
    deny_touch = Policy([Rule("touch *", "deny", "no"), *DEFAULT_ASK], workdir=str(tmp_path), home=HOME)
    assert deny_touch.decide(command).action in ("deny", "ask")
