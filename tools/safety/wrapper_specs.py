"""How each wrapper reads its options before the command it runs (used by `wrappers.views`).

Taken from each program's own `--help` and getopt string (util-linux, coreutils, findutils,
sudo, strace, procps, systemd). A short option is a flag, takes a value (the rest of its word
or the next word), or takes an *optional* value (only the rest of its word: `xargs -en rm`
runs `rm` with the end-of-file string `n`). A long option takes `=value` or the next word, or
is a flag (which includes long options whose value is optional: `--replace[=R]`). An option
not listed here is not guessed: `wrappers` then looks at every later word as a possible
command.

Given no command, `unshare`, `nsenter`, `chroot`, `setarch` and `script` run a shell that reads
its program from stdin (`SHELL_WHEN_BARE`).
"""

from __future__ import annotations

from dataclasses import dataclass

_HELP = ("--help", "--version")


@dataclass(frozen=True, slots=True)
class Spec:
    """One wrapper's options."""

    short_valued: str = ""  # short options that take a value (`-n 5`, `-n5`)
    long_valued: tuple[str, ...] = ()  # long options that take a value (`--x v` or `--x=v`)
    long_flags: tuple[str, ...] = _HELP  # long options that take none (`--x=v` still allowed)
    short_flags: str = ""  # short options that take no value
    short_optional: str = ""  # short options whose value can only be glued (`-e[eof]`)
    operands: int = 0  # operands between the options and the command (timeout's duration)
    no_command: str = ""  # short options after which nothing is run (`command -v`, `chrt -p`)
    no_command_long: tuple[str, ...] = ()

    def knows_short(self, letter: str) -> bool:
        return letter in self.short_valued + self.short_flags + self.short_optional + self.no_command


_NAMESPACES = ("--mount", "--uts", "--ipc", "--net", "--pid", "--user", "--cgroup", "--time")
_PRLIMIT_RESOURCES = ("--core", "--data", "--nice", "--fsize", "--sigpending", "--memlock", "--rss",
                      "--nofile", "--msgqueue", "--rtprio", "--stack", "--cpu", "--nproc", "--as",
                      "--locks", "--rttime")

WRAPPERS: dict[str, Spec] = {
    "sudo": Spec("aCcDgpRrTtUu", ("--user", "--group", "--host", "--prompt", "--close-from",
                                  "--chdir", "--role", "--type", "--other-user", "--command-timeout",
                                  "--chroot", "--auth-type", "--login-class"),
                 ("--login", "--shell", "--preserve-env", "--set-home", "--non-interactive",
                  "--background", "--edit", "--stdin", "--bell", "--askpass", "--reset-timestamp",
                  "--remove-timestamp", "--validate", "--list", "--preserve-groups", "--no-update",
                  *_HELP),
                 short_flags="ABbEeHiKklNnPSsVv", short_optional="h", no_command="lVvKke",
                 no_command_long=("--list", "--validate", "--edit", "--version")),
    "doas": Spec("uC", short_flags="ns", no_command="L"),
    "env": Spec("uCS", ("--unset", "--chdir", "--split-string"),
                ("--ignore-environment", "--null", "--debug", "--list-signal-handling",
                 "--block-signal", "--default-signal", "--ignore-signal", *_HELP),
                short_flags="i0v"),
    "nice": Spec("n", ("--adjustment",), short_flags="0123456789"),  # `nice -5 make`
    "ionice": Spec("cn", ("--class", "--classdata"), ("--ignore", *_HELP), short_flags="t",
                   no_command="pPu", no_command_long=("--pid", "--pgid", "--uid")),
    "timeout": Spec("sk", ("--signal", "--kill-after"),
                    ("--foreground", "--preserve-status", "--verbose", *_HELP), short_flags="fpv",
                    operands=1),
    "stdbuf": Spec("ioe", ("--input", "--output", "--error")),
    "setsid": Spec("", (), ("--ctty", "--fork", "--wait", *_HELP), short_flags="cfw"),
    "nohup": Spec(),
    "exec": Spec("a", short_flags="cl"),
    "command": Spec(short_flags="p", no_command="vV"),
    "builtin": Spec(),
    "time": Spec("fo", ("--format", "--output"),
                 ("--append", "--portability", "--verbose", "--quiet", *_HELP), short_flags="apqv"),
    "chrt": Spec("TPD", ("--sched-runtime", "--sched-period", "--sched-deadline"),
                 ("--all-tasks", "--batch", "--deadline", "--fifo", "--idle", "--other", "--rr",
                  "--reset-on-fork", "--max", "--verbose", *_HELP),
                 short_flags="abdfiorRv", operands=1, no_command="pm",
                 no_command_long=("--pid", "--max")),
    "taskset": Spec("", (), ("--all-tasks", "--cpu-list", *_HELP), short_flags="ac", operands=1,
                    no_command="p", no_command_long=("--pid",)),
    "unbuffer": Spec(short_flags="p"),
    "chroot": Spec("", ("--groups", "--userspec"), ("--skip-chdir", *_HELP), operands=1),
    "busybox": Spec(),
    "xargs": Spec("aIdLnPsE", ("--arg-file", "--delimiter", "--max-args", "--max-procs",
                               "--max-chars", "--max-lines", "--process-slot-var"),
                  ("--null", "--eof", "--replace", "--interactive", "--no-run-if-empty",
                   "--open-tty", "--exit", "--show-limits", "--verbose", *_HELP),
                  short_flags="0prtxo", short_optional="eil"),
    "unshare": Spec("RwSG", ("--map-user", "--map-group", "--map-users", "--map-groups",
                             "--propagation", "--setgroups", "--root", "--wd", "--setuid",
                             "--setgid", "--monotonic", "--boottime"),
                    (*_NAMESPACES, "--fork", "--map-root-user", "--map-current-user", "--map-auto",
                     "--kill-child", "--mount-proc", "--keep-caps", *_HELP),
                    short_flags="frc", short_optional="muinpUCT"),
    "nsenter": Spec("tSGW", ("--target", "--setuid", "--setgid", "--wdns"),
                    (*_NAMESPACES, "--all", "--preserve-credentials", "--root", "--wd", "--no-fork",
                     "--follow-context", *_HELP),
                    short_flags="aFZ", short_optional="muinpCUTrw"),
    "flock": Spec("wE", ("--timeout", "--conflict-exit-code"),
                  ("--shared", "--exclusive", "--unlock", "--nonblock", "--close", "--no-fork",
                   "--verbose", *_HELP), short_flags="sxunoF", operands=1),
    "setpriv": Spec("", ("--ambient-caps", "--inh-caps", "--bounding-set", "--ruid", "--euid",
                         "--rgid", "--egid", "--reuid", "--regid", "--groups", "--securebits",
                         "--pdeathsig", "--selinux-label", "--apparmor-profile"),
                    ("--nnp", "--no-new-privs", "--clear-groups", "--keep-groups", "--init-groups",
                     "--reset-env", "--dump", *_HELP), no_command="d", no_command_long=("--dump",)),
    "prlimit": Spec("o", ("--output",), (*_PRLIMIT_RESOURCES, "--noheadings", "--raw", "--verbose",
                                         *_HELP),
                    short_optional="cdefilmnqrstuvxy", no_command="p", no_command_long=("--pid",)),
    "strace": Spec("abeEIoOpPsSuUX",
                   ("--env", "--attach", "--user", "--detach-on", "--interruptible", "--trace",
                    "--signal", "--status", "--trace-path", "--columns", "--abbrev", "--raw",
                    "--read", "--write", "--output", "--string-limit", "--const-print-style",
                    "--summary-syscall-overhead", "--summary-sort-by", "--summary-columns",
                    "--inject", "--fault", "--kvm"),
                   ("--follow-forks", "--output-separately", "--daemonize", "--successful-only",
                    "--failed-only", "--instruction-pointer", "--stack-traces", "--syscall-number",
                    "--output-append-mode", "--quiet", "--relative-timestamps",
                    "--absolute-timestamps", "--syscall-times", "--no-abbrev", "--strings-in-hex",
                    "--decode-fds", "--decode-pids", "--summary-only", "--summary",
                    "--summary-wall-clock", "--debug", "--seccomp-bpf", *_HELP),
                   short_flags="ACcdDfFhiknqrtTvVwxyYzZ"),
    "systemd-run": Spec("HMupE", ("--host", "--machine", "--unit", "--property", "--description",
                                  "--slice", "--service-type", "--uid", "--gid", "--nice",
                                  "--working-directory", "--setenv", "--path-property",
                                  "--socket-property", "--on-active", "--on-boot", "--on-startup",
                                  "--on-unit-active", "--on-unit-inactive", "--on-calendar",
                                  "--timer-property"),
                        ("--no-ask-password", "--user", "--scope", "--slice-inherit", "--no-block",
                         "--remain-after-exit", "--wait", "--send-sighup", "--same-dir", "--pty",
                         "--pipe", "--quiet", "--collect", "--shell", "--on-timezone-change",
                         "--on-clock-change", *_HELP),
                        short_flags="rdtPqGS"),
    "runuser": Spec("ugGswc", ("--user", "--group", "--supp-group", "--shell", "--command",
                               "--session-command", "--whitelist-environment"),
                    ("--login", "--preserve-environment", "--fast", "--pty", *_HELP),
                    short_flags="lmpfP"),
    "toybox": Spec(),
    "eatmydata": Spec(),
    "fakeroot": Spec("lisb", ("--lib", "--faked"), ("--unknown-is-real", *_HELP), short_flags="uv"),
    # `setarch [ARCH] [options] [program…]` (`wrappers` drops ARCH); `linux64` & co. are setarch.
    **dict.fromkeys(("setarch", "linux32", "linux64", "i386", "i486", "i586", "i686", "x86_64",
                     "uname26", "aarch64", "armv7l", "armv8l", "ppc", "ppc32", "ppc64", "s390",
                     "s390x"),
                    Spec("", (), ("--32bit", "--fdpic-funcptrs", "--short-inode",
                                  "--addr-compat-layout", "--addr-no-randomize", "--whole-seconds",
                                  "--sticky-timeouts", "--read-implies-exec", "--mmap-page-zero",
                                  "--3gb", "--4gb", "--uname-2.6", "--verbose", *_HELP),
                         short_flags="BFILRSTXZ3vh", no_command="V", no_command_long=("--list",))),
    # Without -x, watch joins its words and hands them to `sh -c` (`wrappers.inline_script`).
    "watch": Spec("nq", ("--interval", "--equexit"),
                  ("--beep", "--color", "--differences", "--errexit", "--chgexit", "--precise",
                   "--no-title", "--no-wrap", "--exec", *_HELP),
                  short_flags="bcegptwx", short_optional="d"),
}

#: Wrappers that, given no command, start a shell (`$SHELL`, else `/bin/sh`) reading stdin:
#: `unshare <<< 'rm -rf ~'` runs the here-string. `script` without `-c` does too.
SHELL_WHEN_BARE = frozenset({"unshare", "nsenter", "chroot", "script", "setarch", "linux32",
                             "linux64", "i386", "i486", "i586", "i686", "x86_64", "uname26",
                             "aarch64", "armv7l", "armv8l", "ppc", "ppc32", "ppc64", "s390", "s390x"})
