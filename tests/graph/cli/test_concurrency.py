"""Two `bashgraph` processes on one thread at once: the one that does not get the thread's lock
says "busy" (exit 1) and runs nothing, whatever it was asked. It decides nothing from the
thread's state before it holds the lock: the state may change under it until then."""

from __future__ import annotations

from pathlib import Path

from tests.graph.cli.conftest import Cli, ForkServer
from tests.graph.cli.test_interrupt import wait_for
from tests.support.openai_server import FakeOpenAIServer, ToolCall, text, tool_calls

RULE = ("--rule", "ask:echo *")


def test_two_answers_at_once_the_second_is_busy_not_a_usage_error(
    cli: Cli, openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """A thread waits for an approval; two `resume --answer approve` race. The first runs the
    approved command (which takes a while); the second, started meanwhile, is busy — it must
    not read the already-answered state and call the answer a usage error (exit 2)."""
    # Runs until the test has seen the loser's answer (at most 30 s).
    command = "echo ran >> runs; for i in $(seq 600); do [ -e go ] && break; sleep 0.05; done"
    openai_server.add(tool_calls(ToolCall("bash", {"command": command})), text("done"))
    paused = cli("run", "note it", "--thread", "r1", *RULE)
    assert paused.code == 3, paused.err

    second_server = ForkServer()  # one server runs one command at a time
    try:
        home = tmp_path / "home2"
        home.mkdir()
        second = Cli(second_server, home, {**cli.env, "HOME": str(home)}, cli.db, cli.workdir)
        assert second("threads").code == 0  # (its imports done before the race starts)
        first = cli.start("resume", "r1", "--answer", "approve", *RULE)
        wait_for((cli.workdir / "runs").exists, timeout=15)
        loser = second("resume", "r1", "--answer", "approve", *RULE)
        assert loser.code == 1, loser.err
        assert "thread r1 is busy: another worker is running it" in loser.err
        (cli.workdir / "go").touch()
        winner = first.finish()
        assert winner.code == 0, winner.err
    finally:
        second_server.close()
    assert (cli.workdir / "runs").read_text() == "ran\n"
