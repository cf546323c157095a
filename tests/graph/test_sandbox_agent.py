"""`AgentConfig(sandbox=True)` through the real graph: a hostile command list is contained.

Each command is refused by the OS inside bubblewrap, and the refusal reaches the model with the
right outcome: an `exit_error` carrying the evidence, or `spawn_error/sandbox` when the sandbox
itself could not start. Nothing the commands started is left running afterwards.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.errors import ConfigError
from bashgraph.graph.execution import Executor, collect_executors
from bashgraph.graph.run_setup import _sandbox_problem
from bashgraph.graph.testing import ScriptedChatModel, answer, call
from bashgraph.tools import CommandResult, Outcome, SpawnErrorKind
from bashgraph.tools.safety.sandbox import find_pids_cgroup_parent, sandbox_available

UNAVAILABLE = sandbox_available()
if UNAVAILABLE and os.environ.get("CI"):
    raise RuntimeError(f"CI must run the sandbox tests: {UNAVAILABLE}")
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"no sandbox: {UNAVAILABLE}")

SECRET = "SSH-SECRET-MATERIAL-0451"


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME with a planted key under ~/.ssh and a password in ~/.netrc."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(SECRET)
    (home / ".netrc").write_text(f"machine example.com password {SECRET}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return home


@pytest.fixture
def listener() -> Iterator[int]:
    """A port listening on the host's 127.0.0.1."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield int(server.getsockname()[1])


def sandboxed_agent(steps: list[Any], workdir: Path) -> tuple[Any, ScriptedChatModel, Executor]:
    model = ScriptedChatModel(steps)
    config = AgentConfig(workdir=str(workdir), sandbox=True, approval="never", grace_s=0.3,
                         spill_dir=f"{workdir}-spill",
                         replan_after=10, on_environment_error="model", max_spawn_retries=0)
    with collect_executors() as built:
        agent = build_graph(model=model, config=config)
    return agent, model, built[0]


def one_by_one(*commands: tuple[str, float | None]) -> list[Any]:
    """One model reply per command (they share the sandbox's task limit), then an answer."""
    replies: list[Any] = [AIMessage(content="", tool_calls=[call(c, timeout=t)])
                          for c, t in commands]
    return [*replies, answer("contained")]


def tool_results(state: dict[str, Any]) -> list[tuple[ToolMessage, CommandResult]]:
    return [(m, CommandResult.from_dict(m.artifact)) for m in state["messages"]
            if isinstance(m, ToolMessage)]


def settled(condition: Callable[[], bool], timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def marked_processes(marker: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{name}/environ").read_bytes():
                    found.append(int(name))
            except OSError:
                continue
    return found


def test_a_hostile_command_list_is_contained_and_each_refusal_reaches_the_model(
    tmp_path: Path, fake_home: Path, listener: int
) -> None:
    """Write outside, network, secrets, a setsid escape: each contained, each told."""
    work = tmp_path / "work"
    work.mkdir()
    outside = Path(f"/var/tmp/bashgraph-probe-{uuid.uuid4().hex}")
    steps = one_by_one(
        (f"echo pwned > {outside}", None),
        (f"exec 3<>/dev/tcp/127.0.0.1/{listener} && echo connected", None),
        (f"cat {fake_home}/.ssh/id_ed25519 {fake_home}/.netrc", None),
        ("setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $BASHGRAPH_RUN_ID", None),
    )
    agent, model, executor = sandboxed_agent(steps, work)
    try:
        state = agent.invoke({"messages": [HumanMessage("try to escape")]})
    finally:
        outside.unlink(missing_ok=True)
    model.assert_done()
    (write, w), (net, n), (secret, s), (_, e) = tool_results(state)

    assert (w.outcome, w.exit_code, outside.exists()) == (Outcome.EXIT_ERROR, 1, False)
    assert "Read-only file system" in write.content
    assert n.outcome is Outcome.EXIT_ERROR
    assert "connected" not in n.stdout
    assert "Connection refused" in net.content or "unreachable" in net.content
    assert s.outcome is Outcome.EXIT_ERROR
    assert "No such file or directory" in secret.content
    assert all(SECRET not in str(m.content) for m in state["messages"])
    assert e.outcome is Outcome.OK
    # Each answer was in front of the model when it asked for the next command.
    seen = [m.tool_call_id for m in model.received[-1] if isinstance(m, ToolMessage)]
    assert seen == [m.tool_call_id for m, _ in tool_results(state)]
    marker = e.stdout.strip().rsplit(":", 1)[-1]
    assert len(marker) == 32
    assert settled(lambda: not marked_processes(marker))  # the setsid escapee died too
    executor.close()


def test_a_fork_bomb_is_bounded_and_leaves_nothing(tmp_path: Path) -> None:
    """`:(){ :|:& };:` hits the task limit (refused forks, told in stderr) and is gone after."""
    if find_pids_cgroup_parent() is None:  # never run unbounded: it would take the machine down
        problem = "no writable pids cgroup: a fork bomb would not be bounded here"
        if os.environ.get("CI"):  # CI machines delegate a pids cgroup: its absence is a failure
            pytest.fail(f"CI must run the fork-bomb test: {problem}")
        pytest.skip(problem)
    steps = one_by_one((":(){ :|:& };: ; sleep 1; echo after-the-bomb", 3))
    agent, model, executor = sandboxed_agent(steps, tmp_path)
    state = agent.invoke({"messages": [HumanMessage("fork")]})
    model.assert_done()
    [(bomb, b)] = tool_results(state)
    # Whether the shell ends on its own after its retries or by the timeout, the whole sandbox
    # (and every process of the bomb) goes with it.
    assert "fork: retry: Resource temporarily unavailable" in b.stderr, bomb.content
    sandbox = executor.setup().sandbox
    assert sandbox is not None
    assert sandbox.cgroup is not None
    cgroup = Path(sandbox.cgroup)
    assert settled(lambda: int((cgroup / "pids.current").read_text()) == 0)
    executor.close()
    assert not cgroup.exists()


def test_a_sandbox_that_cannot_start_reaches_the_model_as_a_sandbox_spawn_error(
    tmp_path: Path,
) -> None:
    """The workdir vanished: bwrap cannot bind it; the model is told, nothing ran."""
    work = tmp_path / "work"
    work.mkdir()
    agent, model, executor = sandboxed_agent(one_by_one(("echo ran", None)), work)
    work.rmdir()
    state = agent.invoke({"messages": [HumanMessage("go")]})
    model.assert_done()
    [(message, result)] = tool_results(state)
    assert (result.outcome, result.spawn_error) == (Outcome.SPAWN_ERROR, SpawnErrorKind.SANDBOX)
    assert result.detail is not None
    assert result.detail.startswith("bwrap: Can't find source path")
    assert message.status == "error"
    assert "ran" not in result.stdout
    told = [str(m.content) for m in model.received[-1] if isinstance(m, HumanMessage)]
    assert any("bwrap: Can't find source path" in text for text in told)
    executor.close()


def test_the_async_graph_built_on_the_loop_sets_up_the_sandbox_off_the_loop(
    tmp_path: Path,
) -> None:
    """Built on a running loop (a server's factory), the first command creates the sandbox."""
    outside = Path(f"/var/tmp/bashgraph-probe-{uuid.uuid4().hex}")

    async def run() -> tuple[dict[str, Any], Executor]:
        agent, _, executor = sandboxed_agent(one_by_one((f"touch {outside}", None)), tmp_path)
        return await agent.ainvoke({"messages": [HumanMessage("go")]}), executor

    try:
        state, executor = asyncio.run(run())
    finally:
        outside.unlink(missing_ok=True)
    [(_message, result)] = tool_results(state)
    assert result.outcome is Outcome.EXIT_ERROR
    assert "Read-only file system" in result.stderr
    executor.close()


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    """Forget the cached answer to "does bubblewrap work here" before and after the test."""
    _sandbox_problem.cache_clear()
    yield
    _sandbox_problem.cache_clear()


def test_an_unusable_bubblewrap_is_a_config_error_at_construction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_probe: None
) -> None:
    """No bwrap on PATH: building the agent fails at once with the reason, nothing runs."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="bwrap not found on PATH"):
        build_graph(model=ScriptedChatModel([]),
                    config=AgentConfig(workdir=str(tmp_path), sandbox=True))
