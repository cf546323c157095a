"""`bashgraph run` / `resume` end to end: real ChatOpenAI over HTTP, real bash, real SQLite."""

from __future__ import annotations

from tests.graph.cli.conftest import Cli
from tests.support.openai_server import FakeOpenAIServer, ToolCall, text, tool_call, tool_calls


def bash(command: str, **args: object) -> ToolCall:
    return ToolCall("bash", {"command": command, **args})


def test_run_shows_each_command_and_the_answer_then_exits_0(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """A task runs end to end: thread id first, each command with its badge, the answer, exit 0."""
    openai_server.add(tool_call("bash", {"command": "echo hello > greeting; cat greeting"}),
                      text("wrote the greeting"))
    result = cli("run", "write a greeting", "--thread", "t1")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == "thread t1"
    assert "$ echo hello > greeting; cat greeting" in lines
    assert any(line.startswith("  [ok]  ") and line.endswith("s  $ echo hello > greeting; cat greeting")
               for line in lines)
    assert lines[-2:] == ["final answer: wrote the greeting", "status: done"]
    assert (cli.workdir / "greeting").read_text() == "hello\n"
    answer = openai_server.chat_requests[1].messages[-1]
    assert answer["role"] == "tool"
    assert answer["content"].strip() == "hello"
    assert not any(request.stream for request in openai_server.chat_requests)


def test_json_prints_one_parsable_event_per_line(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """--json: start first, end last, every command's start and end, every node, one thread id."""
    openai_server.add(tool_calls(bash("echo a"), bash("exit 3")), text("one of two worked"))
    result = cli("run", "two commands", "--json")
    assert result.code == 0, result.err
    events = result.events
    assert events[0]["event"] == "start"
    assert events[0]["task"] == "two commands"
    assert {event["thread_id"] for event in events} == {events[0]["thread_id"]}
    assert {e["command"] for e in result.of("command_start")} == {"echo a", "exit 3"}
    ended = {e["command"]: e for e in result.of("command_end")}
    assert (ended["echo a"]["outcome"], ended["echo a"]["exit_code"]) == ("ok", 0)
    assert (ended["exit 3"]["outcome"], ended["exit 3"]["exit_code"]) == ("exit_error", 3)
    assert all(isinstance(e["duration_s"], float) for e in ended.values())
    nodes = [e["node"] for e in result.of("node")]
    assert nodes[0] == "agent"
    assert {"tools", "route"} <= set(nodes)
    assert nodes[-1] == "agent"
    assert result.of("model_reply")[-1]["text"] == "one of two worked"
    assert events[-1] == {"event": "end", "thread_id": events[0]["thread_id"], "status": "done",
                          "reason": None, "exit_code": 0, "resume": None}


def test_step_limit_fails_the_run_with_exit_1(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """A run that ends as failed exits 1 and offers no resume (it is finished)."""
    openai_server.add(tool_call("bash", {"command": "true"}))
    result = cli("run", "loop forever", "--max-steps", "1")
    assert result.code == 1, result.err
    assert result.out.splitlines()[-1] == "status: failed: step limit reached (1)"
    assert "continue with" not in result.out


def test_paused_run_exits_3_and_resume_with_a_hint_finishes(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """An escalation without a terminal pauses (exit 3, evidence shown); resume answers it."""
    openai_server.add(tool_call("bash", {"command": "sleep 5", "timeout": 0.2}))
    paused = cli("run", "wait", "--thread", "p1")
    assert paused.code == 3, paused.err
    assert "`sleep 5` could not run to its end: timeout after 0.2s" in paused.out
    assert "Choices:\n  retry  run the command again" in paused.out
    assert "  or type a hint for the model\n" in paused.out
    assert "answer with: bashgraph resume p1 --answer retry|skip|abort|TEXT" in paused.out

    again = cli("resume", "p1", "--json")  # still nobody to answer: nothing runs
    assert again.code == 3
    assert [e["event"] for e in again.events] == ["start", "paused", "end"]
    assert again.of("paused")[0]["questions"][0]["choices"] == ["retry", "skip", "abort"]

    other = cli("run", "another task", "--thread", "p1")
    assert other.code == 2
    assert "thread p1 has not finished; continue it with: bashgraph resume p1" in other.err

    openai_server.add(text("used a shorter wait"))
    done = cli("resume", "p1", "--answer", "use sleep 0.1 instead")
    assert done.code == 0, done.err
    assert "answer given: use sleep 0.1 instead" in done.out
    hint = openai_server.chat_requests[-1].messages[-1]
    assert hint["role"] == "user"
    assert "says: use sleep 0.1 instead" in hint["content"]


def test_environment_fault_exits_4_and_resume_asks_again(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """--on-env-error stop ends with exit 4 and a resume command that re-asks the question."""
    openai_server.add(tool_call("bash", {"command": "sleep 5", "timeout": 0.2}))
    stopped = cli("run", "wait", "--thread", "e1", "--on-env-error", "stop", "--db", str(cli.db))
    assert stopped.code == 4, stopped.err
    assert "status: environment fault: `sleep 5`: timeout" in stopped.out
    assert stopped.out.splitlines()[-1] == f"continue with: bashgraph resume e1 --db {cli.db} --on-env-error stop"
    openai_server.add(text("skipped the wait"))
    resumed = cli("resume", "e1", "--answer", "skip", "--on-env-error", "stop", "--json")
    assert resumed.code == 0, resumed.err
    assert resumed.of("answer")[0]["answer"] == "skip"
    assert "chose to skip this failed command" in openai_server.chat_requests[-1].messages[-1]["content"]


def test_resume_of_a_finished_thread_runs_nothing(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """Resuming a thread that already finished reports its status and calls no model."""
    openai_server.add(text("nothing to do"))
    assert cli("run", "say hi", "--thread", "f1").code == 0
    result = cli("resume", "f1")
    assert result.code == 0
    assert result.out.splitlines()[-1] == "status: done: already finished; nothing to do"
    assert len(openai_server.chat_requests) == 1


def test_approval_pauses_and_an_edit_answer_runs_another_command(
    cli: Cli, openai_server: FakeOpenAIServer
) -> None:
    """A rule that asks pauses before the command runs; a JSON edit answer runs the new one."""
    openai_server.add(tool_call("bash", {"command": "echo first > note"}))
    paused = cli("run", "write a note", "--thread", "a1", "--rule", "ask:echo *")
    assert paused.code == 3, paused.err
    assert "Approval needed to run `echo first > note`" in paused.out
    assert not (cli.workdir / "note").exists()
    answer_with = "answer with: bashgraph resume a1 --rule 'ask:echo *' --answer approve|reject|"
    assert answer_with + "'{\"action\": \"edit\", \"command\": \"...\"}'" in paused.out

    openai_server.add(text("noted"))
    edit = '{"action": "edit", "command": "echo second > note"}'
    edited = cli("resume", "a1", "--rule", "ask:echo *", "--answer", edit, "--json")
    assert edited.code == 0, edited.err
    assert edited.of("answer")[0]["answer"] == {"action": "edit", "command": "echo second > note"}
    assert [e["command"] for e in edited.of("command_end")] == ["echo second > note"]
    assert (cli.workdir / "note").read_text() == "second\n"
