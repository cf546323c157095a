"""A command a person rejected is not put to them again unchanged in the same run."""

from __future__ import annotations

from tests.graph.cli.conftest import Cli
from tests.support.openai_server import FakeOpenAIServer, text, tool_call

ASK = ("--rule", "ask:echo *")


def test_the_same_command_is_answered_from_the_rejection(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """Rejected once, asked for again twice (after a re-plan too): nobody is asked, the run
    finishes, and the model reads that a person already rejected it."""
    openai_server.add(tool_call("bash", {"command": "echo hi > mark"}))
    assert cli("run", "mark", "--thread", "m1", *ASK).code == 3
    openai_server.add(tool_call("bash", {"command": "echo hi > mark"}),
                      tool_call("bash", {"command": "echo hi > mark"}), text("gave up"))
    answer = '{"action": "reject", "message": "not in this folder"}'
    resumed = cli("resume", "m1", *ASK, "--answer", answer, "--json")
    assert resumed.code == 0, resumed.out
    assert [e["spawn_error"] for e in resumed.of("command_end")] == ["denied"] * 3
    told = [m["content"] for m in openai_server.chat_requests[-1].messages if m["role"] == "tool"]
    assert "rejected by a person: not in this folder" in told[0]
    assert len(told) == 3
    assert all("rejected by a person earlier in this run: not in this folder; the same command is not "
               "asked again" in content for content in told[1:])
    assert not (cli.workdir / "mark").exists()


def test_another_command_and_a_new_run_are_asked(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    openai_server.add(tool_call("bash", {"command": "echo hi > mark"}))
    assert cli("run", "mark", "--thread", "m2", *ASK).code == 3
    openai_server.add(tool_call("bash", {"command": "echo ho > mark"}))
    changed = cli("resume", "m2", *ASK, "--answer", "reject", "--json")
    assert changed.code == 3, changed.out
    assert changed.of("paused")[0]["questions"][0]["requests"][0]["command"] == "echo ho > mark"
    openai_server.add(text("left it"))
    assert cli("resume", "m2", *ASK, "--answer", "reject").code == 0
    openai_server.add(tool_call("bash", {"command": "echo hi > mark"}))
    again = cli("run", "mark it now", "--thread", "m2", *ASK, "--json")
    assert again.code == 3, again.out  # a new task: the person decides again
