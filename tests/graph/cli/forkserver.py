"""Starts `bashgraph` commands as forks of one process that has already imported everything.

Starting Python and importing LangChain, LangGraph and openai costs 2-4 s of CPU on the test
machines, several times what a CLI test itself costs. This server pays for it once; each
command is then a fork: a process of its own, with its own pid, standard streams, signals
and exit status, running `bashgraph.graph.cli.main(argv)` exactly as the console script does.
(tests/graph/cli/test_entry_points.py starts the real console script and `python -m` form.)

Protocol, one JSON line each way, one command at a time:
  request  {"argv": [...], "env": {...}, "cwd": DIR, "stdout": FILE, "stderr": FILE, "tty": PATH|null}
  replies  {"pid": PID}  when the command has started, then  {"code": EXIT_STATUS}  when it ended
           (a negative code: killed by that signal).
With "tty", stdin, stdout and stderr are that terminal; otherwise stdin is /dev/null.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

# Imported ahead: the point of this process. Nothing runs at import time.
import aiosqlite  # noqa: F401
import langchain_openai  # noqa: F401
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # noqa: F401

from bashgraph.graph import cli
from bashgraph.graph.cli import inspection, run, terminal  # noqa: F401


def serve() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os._exit(run_command(request))
        reply({"pid": pid})
        _, status = os.waitpid(pid, 0)
        reply({"code": os.waitstatus_to_exitcode(status)})


def reply(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def run_command(request: dict[str, Any]) -> int:
    """In the fork: become `bashgraph ARGV` in `cwd` with `env`; returns its exit status."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    attach(request)
    try:
        return cli.main(request["argv"])
    except BaseException:  # what the interpreter would print for an uncaught exception
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def attach(request: dict[str, Any]) -> None:
    """Point descriptors 0-2 at the terminal, or at /dev/null and the two output files."""
    tty = request.get("tty")
    targets: list[tuple[str, int, tuple[int, ...]]]
    if tty:
        targets = [(tty, os.O_RDWR, (0, 1, 2))]
    else:
        written = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        targets = [(os.devnull, os.O_RDONLY, (0,)), (request["stdout"], written, (1,)),
                   (request["stderr"], written, (2,))]
    for path, flags, descriptors in targets:
        fd = os.open(path, flags, 0o644)
        for target in descriptors:
            os.dup2(fd, target)
        os.close(fd)
    # New objects, so that buffering and isatty() follow the new descriptors.
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False, buffering=1 if tty else -1)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)  # noqa: SIM115


if __name__ == "__main__":
    serve()
