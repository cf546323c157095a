"""What the runs of one Executor share, looked up once: the working directory, the sandbox and
the options every command runs with (graph/execution.py)."""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
from dataclasses import dataclass

from bashgraph.graph.config import AgentConfig
from bashgraph.graph.errors import ConfigError
from bashgraph.tools import RunOptions
from bashgraph.tools.runner import default_spill_dir
from bashgraph.tools.safety import BwrapSandbox, sandbox_available


@dataclass(frozen=True)
class Setup:
    """What every run of one Executor shares, looked up once."""

    workdir: str
    sandbox: BwrapSandbox | None
    options: RunOptions
    """How commands run, from the config: the shell's path (absolute when found on PATH; else as
    configured, and the spawn says why), the spill directory, the sandbox, the limits. Runs off
    the event loop use them as they are: the runner asks `os.getcwd()` at each run, so a later
    `os.chdir` is always seen."""
    loop_options: RunOptions
    """`options` with this process's directory (`process_cwd`), for runs on the event loop: they
    must not ask, and run there with no `cd` needed."""


def look_up(config: AgentConfig) -> Setup:
    """What every run of one Executor shares (blocking: it may start bwrap once); ConfigError
    when the sandbox is on and cannot work."""
    workdir = os.path.abspath(config.execution.workdir)
    sandbox = None
    if config.safety.sandbox:
        problem = _sandbox_problem()
        if problem:
            raise ConfigError(f"the sandbox is on, but {problem}")
        sandbox = BwrapSandbox(workdir, allow_network=config.safety.allow_network,
                               bwrap=shutil.which("bwrap") or "bwrap")
    try:
        here: str | None = os.getcwd()
    except OSError:
        here = None
    configured = config.execution.options
    options = dataclasses.replace(
        configured, shell=shutil.which(configured.shell) or configured.shell,
        spill_dir=configured.spill_dir or str(default_spill_dir()), sandbox=sandbox,
    )
    return Setup(workdir=workdir, sandbox=sandbox, options=options,
                 loop_options=dataclasses.replace(options, process_cwd=here))


@functools.cache
def _sandbox_problem() -> str | None:
    """Why bubblewrap cannot sandbox here (asked once per process: it starts bwrap)."""
    return sandbox_available()
