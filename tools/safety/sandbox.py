"""Run commands inside bubblewrap, so the OS, not string matching, enforces the boundary.

Inside the sandbox (`BwrapSandbox.wrap` builds the argv):

* `/` is mounted read-only; the workdir (and `extra_rw`) writable; `/tmp` is a private tmpfs;
  `/dev` and `/proc` are fresh (no disks, only the sandbox's own processes);
* credential paths (`default_hidden_paths`) are covered: directories by an empty tmpfs, files by
  `/dev/null`;
* private PID, IPC, UTS and cgroup namespaces; no network (not even the host's 127.0.0.1) unless
  `allow_network`; every capability dropped, so even root cannot remount `/` read-write;
* the command runs in a new session (no terminal to inject keystrokes into), and the whole
  sandbox dies with bwrap: killing bwrap's process group (a timeout) or the command's exit ends
  every process in it, including `setsid`/`nohup` escapes;
* at most `max_tasks` processes, through a `pids` cgroup. bwrap has no rlimit option and
  RLIMIT_NPROC does not bind root (nor does it count per sandbox), so a cgroup is the limit that
  holds; where no writable `pids` controller exists the limit is skipped (`limits_tasks`).

bwrap reports on `--json-status-fd`: a `child-pid` document once it has forked and an
`exit-code` document when the command ends. No `exit-code` and a positive exit status means the
sandbox never started the command: `classify_sandbox_exit` turns that into
`spawn_error/sandbox` with bwrap's own message.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bashgraph.tools.results import CommandResult, SpawnErrorKind, spawn_failure

CGROUP_ROOT = "/sys/fs/cgroup"
DEFAULT_MAX_TASKS = 512
_NAMESPACES = ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
               "--die-with-parent", "--new-session", "--cap-drop", "ALL")
# Joins the cgroup, then becomes bwrap (exec keeps the pid, so the caller's process group and
# kill logic see bwrap itself). $1 cgroup dir, $2 limit, then bwrap's argv.
_JOIN_CGROUP = (
    'mkdir -p "$1" && echo "$2" > "$1/pids.max" && echo $$ > "$1/cgroup.procs" || '
    '{ echo "bashgraph-sandbox: cannot apply the task limit in $1" >&2; exit 125; }; '
    'shift 2; exec "$@"'
)
_OWN_MESSAGE_PREFIXES = ("bwrap: ", "bashgraph-sandbox: ")


class Sandbox(Protocol):
    """What `run_command` needs from a sandbox: the argv that runs `argv` inside it."""

    def wrap(self, argv: Sequence[str], cwd: str, status_fd: int) -> list[str]:
        """The argv to spawn instead of `argv`, starting in `cwd`.

        `status_fd` is the descriptor number *in the child* of the write end of a pipe; bwrap
        writes its JSON status there. Keep the read end open until the process has exited: bwrap
        dies of SIGPIPE writing to a closed pipe, and the half-started sandbox it leaves behind
        only goes away with a SIGKILL to the process group.
        """
        ...


def default_hidden_paths(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Credential paths of the user in `environ`, and the bashgraph state dir (checkpoints)."""
    home = environ.get("HOME") or os.path.expanduser("~")
    state = environ.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state")
    names = (".ssh", ".aws", ".config", ".netrc", ".gnupg", ".docker", ".kube", ".azure",
             ".git-credentials", ".pgpass", ".pypirc", ".npmrc")
    paths = [os.path.join(home, name) for name in names]
    if environ.get("XDG_CONFIG_HOME"):
        paths.append(environ["XDG_CONFIG_HOME"])
    # The Docker socket is root on the host for whoever can connect to it.
    paths += [os.path.join(state, "bashgraph"), "/run/docker.sock", "/var/run/docker.sock"]
    return tuple(paths)


def find_pids_cgroup_parent(root: str = CGROUP_ROOT) -> str | None:
    """A writable cgroup directory whose children can get a `pids.max`, or None.

    cgroup v1: the `pids` hierarchy's root. cgroup v2: the root, when `pids` is enabled for its
    children (a non-root v2 cgroup that holds processes cannot enable controllers below it).
    """
    v1 = os.path.join(root, "pids")
    if os.path.isfile(os.path.join(v1, "cgroup.procs")):
        return v1 if os.access(v1, os.W_OK) else None
    try:
        with open(os.path.join(root, "cgroup.subtree_control"), encoding="ascii") as file:
            enabled = file.read().split()
    except OSError:
        return None
    return root if "pids" in enabled and os.access(root, os.W_OK) else None


@dataclass(frozen=True)
class BwrapSandbox:
    """A bubblewrap sandbox for commands run in `workdir` (see the module docstring).

    Use as a context manager, or call `close`, to remove the task-limit cgroup afterwards.

    The mounts are decided when the sandbox is made (symlinks resolved, hidden paths that exist
    looked up), so `wrap` reads no file and may run on an event loop. A credential path created
    after that is not hidden until a new sandbox is made.
    """

    workdir: str
    allow_network: bool = False
    hidden_paths: tuple[str, ...] = field(default_factory=lambda: default_hidden_paths(os.environ))
    extra_rw: tuple[str, ...] = ()
    max_tasks: int | None = DEFAULT_MAX_TASKS
    cgroup_parent: str | None = field(default_factory=find_pids_cgroup_parent)
    bwrap: str = "bwrap"
    name: str = field(default_factory=lambda: f"bashgraph-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    _mount_args: tuple[str, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "_mount_args", tuple(self._mounts()))  # frozen: set once here

    @property
    def cgroup(self) -> str | None:
        """The cgroup every sandboxed process of this sandbox joins, when tasks are limited."""
        if self.max_tasks is None or self.cgroup_parent is None:
            return None
        return os.path.join(self.cgroup_parent, self.name)

    @property
    def limits_tasks(self) -> bool:
        return self.cgroup is not None

    def wrap(self, argv: Sequence[str], cwd: str, status_fd: int) -> list[str]:
        """The argv that runs `argv` in `cwd` inside the sandbox, reporting to `status_fd`."""
        command = [self.bwrap, *self._mount_args, *_NAMESPACES]
        if not self.allow_network:
            command.append("--unshare-net")
        command += ["--chdir", cwd, "--json-status-fd", str(status_fd), "--", *argv]
        if self.cgroup is None:
            return command
        return ["/bin/sh", "-c", _JOIN_CGROUP, "bashgraph-sandbox", self.cgroup,
                str(self.max_tasks), *command]

    def close(self, wait_s: float = 1.0) -> None:
        """Remove the task-limit cgroup; left in place if processes still use it after `wait_s`.

        The wait covers the last sandbox processes of a finished command, which leave the
        cgroup a moment after bwrap has exited.
        """
        if self.cgroup is None:
            return
        deadline = time.monotonic() + wait_s
        while True:
            try:
                os.rmdir(self.cgroup)
                return
            except OSError as error:
                if error.errno != errno.EBUSY:
                    if error.errno == errno.ENOENT:
                        return
                    raise
                if time.monotonic() >= deadline:
                    return  # still in use: removing it would fail; the kernel keeps it cheap
                time.sleep(0.01)

    def __enter__(self) -> BwrapSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _mounts(self) -> list[str]:
        writable = [os.path.realpath(p) for p in (self.workdir, *self.extra_rw)]
        hidden = [os.path.realpath(p) for p in self.hidden_paths if os.path.lexists(p)]
        # A hidden directory that contains a writable one goes first, or it would cover it;
        # the others go after, so a credential path inside the workdir stays hidden.
        covering = [h for h in hidden if any(_below(w, h) for w in writable)]
        args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        args += _hide(covering)
        for path in writable:
            args += ["--bind", path, path]
        return args + _hide([h for h in hidden if h not in covering])


def sandbox_available(bwrap: str = "bwrap") -> str | None:
    """None when a sandbox can be created here, else why not (one line, for the user)."""
    path = shutil.which(bwrap)
    if path is None:
        return f"{bwrap} not found on PATH (Debian/Ubuntu: apt-get install bubblewrap)"
    probe = [path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *_NAMESPACES,
             "--unshare-net", "--", "true"]
    try:
        done = subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not be run: {error}"
    if done.returncode != 0:
        message = done.stderr.strip() or f"exit status {done.returncode}"
        return f"bubblewrap cannot create a sandbox here: {message}"
    return None


def classify_sandbox_exit(
    status_json_text: str, exit_code: int, stderr: str, *, command: str = "",
    cwd: str | None = None,
) -> CommandResult | None:
    """A `spawn_error` result when the sandbox never started the command, else None.

    None means the command ran (bwrap's exit status is the command's; a command killed by a
    signal shows as 128+n, as in a shell) or bwrap itself was killed (`exit_code` < 0: a timeout
    or a signal, which the caller classifies as usual).
    """
    if exit_code <= 0 or any("exit-code" in doc for doc in _status_documents(status_json_text)):
        return None
    message = sandbox_message(stderr, exit_code)
    return spawn_failure(_start_failure_kind(message), command, message, cwd=cwd)


def _start_failure_kind(message: str) -> SpawnErrorKind:
    """The sandbox was fine when only the shell or the working directory is missing or locked.

    Those keep the kinds they have without a sandbox (`not_found`: the shell binary or the
    working directory is missing). The text is stable across locales: bwrap never calls
    `setlocale`, so its `strerror` text is always the C locale's (checked with `nm -D`).
    """
    if message.startswith(("bwrap: execvp ", "bwrap: Can't chdir to ")):
        if message.endswith("No such file or directory"):
            return SpawnErrorKind.NOT_FOUND
        if message.endswith("Permission denied"):
            return SpawnErrorKind.PERMISSION_DENIED
    return SpawnErrorKind.SANDBOX


def sandbox_message(stderr: str, exit_code: int) -> str:
    """bwrap's (or the cgroup step's) own error line from `stderr`."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    own = [line for line in lines if line.startswith(_OWN_MESSAGE_PREFIXES)]
    if own:
        return own[-1]
    if lines:
        return lines[-1]
    return f"the sandbox exited with status {exit_code} before the command started"


def read_status_fd(fd: int) -> str:
    """Everything bwrap wrote to the read end `fd` of the status pipe, without blocking; closes it.

    Call after the process has exited (bwrap is the only writer and has closed its end).
    """
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


def _status_documents(text: str) -> list[dict[str, Any]]:
    """bwrap writes several JSON objects back to back; unreadable tails are ignored."""
    decoder, index = json.JSONDecoder(), 0
    documents: list[dict[str, Any]] = []
    while (index := _skip_space(text, index)) < len(text):
        try:
            document, index = decoder.raw_decode(text, index)
        except ValueError:
            break
        if isinstance(document, dict):
            documents.append(document)
    return documents


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index].isspace():
        index += 1
    return index


def _hide(paths: list[str]) -> list[str]:
    args: list[str] = []
    for path in paths:
        args += ["--tmpfs", path] if os.path.isdir(path) else ["--ro-bind", "/dev/null", path]
    return args


def _below(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
