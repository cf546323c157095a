"""The child-process harness the real-model tests use: a native crash fails one test, clearly."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.errors import ConfigError
from tests.support.child_process import ChildDied, ChildProcess, describe_exit
from tests.support.isolated_model import CrashingIsolatedModel


class Worker:
    """A picklable object for the child: echoes, raises, crashes or exits on request."""

    def echo(self, value: object) -> object:
        return value

    def pid(self) -> int:
        return os.getpid()

    def fail(self, message: str) -> None:
        raise ConfigError(message)

    def crash(self) -> None:
        print("native code is about to crash", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)

    def exit(self, status: int) -> None:
        os._exit(status)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@pytest.fixture
def child() -> Iterator[ChildProcess]:
    with ChildProcess(Worker, name="test worker", timeout=60) as process:
        yield process


def test_results_come_back_from_the_child(child: ChildProcess) -> None:
    """A call returns what the method returned, computed in another process."""
    assert child.call("echo", {"a": [1, 2]}) == {"a": [1, 2]}
    assert child.call("pid") != os.getpid()


def test_an_exception_in_the_child_is_raised_with_its_traceback(child: ChildProcess) -> None:
    """The child's exception arrives as the same type, with the child's traceback as a note."""
    with pytest.raises(ConfigError, match="bad setting") as caught:
        child.call("fail", "bad setting")
    assert "raised in the child process" in "".join(caught.value.__notes__)
    assert child.call("echo", 1) == 1  # the child survived


def test_a_segfault_fails_the_call_with_the_signal_and_stderr(child: ChildProcess) -> None:
    """SIGSEGV in the child becomes ChildDied naming the signal, the call and the stderr tail."""
    with pytest.raises(ChildDied) as caught:
        child.call("crash")
    message = str(caught.value)
    assert "died of SIGSEGV (signal 11) during crash()" in message
    assert "native code is about to crash" in message
    assert "Fatal Python error: Segmentation fault" in message  # faulthandler's stack


def test_the_next_call_after_a_crash_gets_a_fresh_child(child: ChildProcess) -> None:
    """One crash fails one call: the following call starts a new child and succeeds."""
    first = child.call("pid")
    with pytest.raises(ChildDied, match="exit status 3"):
        child.call("exit", 3)
    assert child.call("pid") not in (first, os.getpid())


def test_a_call_past_the_timeout_kills_the_child() -> None:
    """A hung child is killed at the timeout and the call says so."""
    with ChildProcess(Worker, name="slow worker", timeout=60) as process:
        process.call("pid")  # started: the child's imports take longer than the short timeout
        process.timeout = 1
        with pytest.raises(ChildDied, match=r"did not answer within 1 s and was killed during sleep"):
            process.call("sleep", 30)


def test_exit_codes_are_described() -> None:
    """Negative codes are signals (by name), others exit statuses."""
    assert describe_exit(-9) == "SIGKILL (signal 9)"
    assert describe_exit(0) == "exit status 0"
    assert describe_exit(None) == "no exit status (still running)"


def test_a_model_crash_inside_a_graph_run_fails_with_a_clear_message(tmp_path: Path) -> None:
    """The crash of the model's process surfaces from graph.invoke as ChildDied, not a dead run."""
    model = CrashingIsolatedModel(model_path="/unused.gguf")
    agent = build_graph(model=model, config=AgentConfig(workdir=str(tmp_path)))
    try:
        with pytest.raises(ChildDied) as caught:
            agent.invoke({"messages": [HumanMessage("list the files")]})
    finally:
        model.close()
    assert "local model process" in str(caught.value)
    assert "SIGSEGV" in str(caught.value)
    assert "about to crash on purpose" in str(caught.value)

