"""Effects on the machine itself, whatever the program is called: writing a storage device, and
stopping or restarting the machine.

* A storage device is any path under `/dev` that is not one of the harmless character devices
  (`/dev/null`, `/dev/tty`, `/dev/stdout`, …): `/dev/sda`, `/dev/nvme0n1`, `/dev/block/8:0`,
  `/dev/disk/by-id/…`, `/dev/mapper/…`, an LVM volume `/dev/vg/lv`. Any program given such a
  path is taken to write it (`mkswap /dev/sda`, `sgdisk --zap-all /dev/sda`, `cp x /dev/sda`),
  unless it only reads or lists (`lsblk`, `blkid`, `cat`, `dd if=`).
* Stopping or restarting: `shutdown`/`reboot`/`halt`/`poweroff`, `systemctl` with a power verb
  or a power target (`systemctl start reboot.target`), `init`/`telinit` with a runlevel,
  `kexec`, signals to PID 1 or to every process (`kill -9 1`, `kill -- -1`), killing init or
  systemd by name, power calls over D-Bus, and a write to `/proc/sysrq-trigger`.
"""

from __future__ import annotations

import posixpath
import re

#: /dev entries that hold no storage: writing or naming them loses nothing.
_HARMLESS_DEVICE = re.compile(
    r"/dev/(?:null|zero|full|u?random|tty[\w]*|pts(?:/.*)?|ptmx|console|std(?:in|out|err)|fd(?:/.*)?"
    r"|shm(?:/.*)?|mqueue(?:/.*)?|tcp/.*|udp/.*|log|kmsg)")
#: Programs that only read or list what they are given.
_READERS = frozenset({
    "ls", "stat", "file", "lsblk", "blkid", "udevadm", "readlink", "realpath", "test", "[", "[[",
    "cat", "head", "tail", "od", "xxd", "hexdump", "cmp", "md5sum", "sha1sum", "sha256sum",
    "sha512sum", "b2sum", "cksum", "strings", "less", "more", "wc", "grep", "findmnt", "df", "du",
    "echo", "printf", "true", "false", "type", "which", "command", "dirname", "basename", "lsof",
})
_POWER_PROGRAMS = frozenset({"shutdown", "reboot", "halt", "poweroff", "openrc-shutdown", "kexec",
                             "killall5", "rtcwake", "pm-suspend", "pm-hibernate", "pm-suspend-hybrid"})
_POWER_WORDS = ("reboot", "poweroff", "halt", "kexec", "soft-reboot", "emergency", "rescue",
                "suspend", "hibernate", "hybrid-sleep", "suspend-then-hibernate", "sleep",
                "ctrl-alt-del", "shutdown", "exit", "final", "switch-root", "isolate", "default",
                "system-update", "initrd-switch-root")
#: A systemctl/loginctl verb or unit that stops, restarts, suspends or isolates the machine.
_POWER_UNIT = re.compile(rf"(?:systemd-)?(?:{'|'.join(map(re.escape, _POWER_WORDS))}|init)"
                         r"(?:\.target|\.scope|\.service)?", re.IGNORECASE)
_UNIT_VERBS = frozenset({"start", "restart", "try-restart", "reload-or-restart", "enqueue",
                         "try-reload-or-restart", "enable", "kill", "stop"})
_DBUS_POWER = re.compile(r"reboot|poweroff|halt|kexec|suspend|hibernate", re.IGNORECASE)
_INIT_NAMES = re.compile(r"\^?(?:init|systemd|/sbin/init|/lib/systemd/systemd)\$?")
SYSRQ = "/proc/sysrq-trigger"


def is_storage_device(path: str) -> bool:
    """True for an absolute, normalised path under /dev that may be storage."""
    return path.startswith("/dev/") and _HARMLESS_DEVICE.fullmatch(path) is None


def device_operands(words: tuple[str, ...]) -> list[str]:
    """The words of a command that name a path it may write (all of them, for a program that is
    not known to only read): each operand, and the value of each `--opt=VALUE` / `of=VALUE`."""
    if not words or words[0] in _READERS:
        return []
    found: list[str] = []
    for word in words[1:]:
        if words[0] == "dd" and word.startswith("if="):
            continue
        found.append(word)
        _, eq, value = word.partition("=")
        if eq:
            found.append(value)
    return found


def stops_machine(words: tuple[str, ...], write_targets: list[str]) -> bool:
    """True when the command (one view of it) stops, restarts or suspends the machine."""
    if any(posixpath.normpath("/" + t.lstrip("/")) == SYSRQ for t in write_targets if t.startswith("/")):
        return True
    if not words:
        return False
    name, args = words[0], words[1:]
    operands = [w for w in args if not w.startswith("-")]
    if name in _POWER_PROGRAMS:
        return True
    if name in ("init", "telinit"):
        return any(not w.startswith("--") for w in args)
    if name in ("systemctl", "loginctl"):
        return _systemctl_stops(operands)
    if name in ("busctl", "dbus-send", "gdbus", "qdbus"):
        return any(_DBUS_POWER.search(w) for w in args)
    if name == "kill":
        return any(_PID.fullmatch(w) and int(w) in (1, -1) for w in _kill_targets(args))
    if name == "pkill":
        return _pkill_may_match_init(args)
    if name == "killall":
        if any(w in ("-r", "--regexp") or re.fullmatch(r"-[a-zA-Z]*r[a-zA-Z]*", w) for w in args):
            return _pkill_may_match_init(args)  # `-r`: searched, like pkill
        return any(_INIT_NAMES.fullmatch(w) for w in operands) or not operands
    return False


def _pkill_may_match_init(args: tuple[str, ...]) -> bool:
    """pkill's pattern is a regular expression searched in each process's name (with `-f`, its
    command line): `pkill .` and `pkill stemd` kill systemd too, and so does `pkill -u root`,
    which selects by user alone. A pattern with more than literal text and `.` is not tried."""
    patterns: list[str] = []
    full, exact, index = False, False, 0
    while index < len(args):
        word = args[index]
        index += 1
        if word == "--":
            patterns += args[index:]
            break
        if not word.startswith("-") or word == "-":
            patterns.append(word)
        elif not word.startswith("--") and word[1:2] in _PKILL_VALUED and not word[2:]:
            index += 1  # `-u root`: the next word is the option's value
        else:
            full = full or word in ("--full",) or (word[1:2] != "-" and "f" in word[1:] and
                                                   word[1:2] not in _PKILL_VALUED)
            exact = exact or word in ("--exact",) or (word[1:2] != "-" and "x" in word[1:])
    if not patterns:
        return True
    targets = _INIT_COMMAND_LINES if full else ("init", "systemd")
    for pattern in patterns:
        if _LITERAL_PATTERN.fullmatch(pattern) is None:
            return True
        compiled = re.compile(pattern, re.IGNORECASE)  # only literals and `.`: linear to try
        if any((compiled.fullmatch if exact else compiled.search)(t) for t in targets):
            return True
    return False


_PID = re.compile(r"[+-]?[0-9]+")
#: pkill options that take the next word: -g -G -P -s -t -u -U -F, --signal.
_PKILL_VALUED = "gGPstuUF"
_INIT_COMMAND_LINES = ("/sbin/init", "/lib/systemd/systemd --system --deserialize 20",
                       "/usr/lib/systemd/systemd --switched-root --system", "/init")
_LITERAL_PATTERN = re.compile(r"[\w./ :=,@%+-]*")


def _systemctl_stops(operands: list[str]) -> bool:
    if not operands:
        return False
    if _POWER_UNIT.fullmatch(operands[0]) or any(_POWER_UNIT.fullmatch(w) for w in operands[1:]):
        return True
    # `systemctl start "$T"`: a unit that is not on the line may be reboot.target.
    return operands[0] in _UNIT_VERBS and any(c in w for w in operands[1:] for c in "$`*?[")


def _kill_targets(args: tuple[str, ...]) -> list[str]:
    """The pids `kill` signals: after its signal option (`-9`, `-s KILL`, `-n 9`) and `--`.
    A first `-N` is a signal (`kill -1 1234` hangs up one process); after it, `-1` is a pid."""
    if args[:1] in (("-l",), ("-L",)) or not args:
        return []
    first, index = args[0], 0
    if first == "--":
        index = 1
    elif first in ("-s", "-n"):
        index = 2
    elif first.startswith("-") and first != "-":
        index = 1
    if index > 0 and args[index : index + 1] == ("--",) and first != "--":
        index += 1
    return list(args[index:])
