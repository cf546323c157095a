"""The model's view of a long thread, driven through the real graph, real bash and a scripted model
that measures every request it is sent (graph/context.py, graph/compaction.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
from httpx2 import Request, Response  # the HTTP client the openai package is built on
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.models.window import overflow_of
from bashgraph.graph.store.threads import history as thread_history
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply

THREAD: RunnableConfig = {"configurable": {"thread_id": "t"}, "recursion_limit": 10_000}
TASK = "run the checks one by one and report"


def prompt_tokens(messages: list[BaseMessage]) -> int:
    """What a server counts: 4 characters of the request's JSON per token (as tests/support)."""
    parts = [{"role": m.type, "content": m.content,
              "calls": [c["args"] for c in m.tool_calls] if isinstance(m, AIMessage) else None} for m in messages]
    return len(json.dumps(parts)) // 4 + 400  # and the tool schemas


class Driver:
    """Answers every request: a summary for a compaction's, else the next command, then done.

    It fails a request larger than `window` the way a server would (a refusal for length)."""

    def __init__(self, commands: list[str], window: int) -> None:
        self.commands, self.window = list(commands), window
        self.sizes: list[int] = []
        self.last: list[BaseMessage] = []
        self.stubs: set[str] = set()

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        size = prompt_tokens(messages)
        if size > self.window:
            raise refusal(self.window, size)
        if isinstance(messages[0], SystemMessage) and str(messages[0].content).startswith("You are compacting"):
            return answer("Ran checks; the failures are listed below.")
        self.sizes.append(size)
        self.last = messages
        self.stubs |= {str(m.content) for m in messages if str(m.content).startswith("[output cleared")}
        return calls_reply(self.commands.pop(0)) if self.commands else answer("done")


def refusal(window: int, tokens: int) -> openai.BadRequestError:
    body = {"error": {"message": f"This model's maximum context length is {window} tokens. However, your "
                                 f"messages resulted in {tokens} tokens.", "code": "context_length_exceeded"}}
    response = Response(400, json=body, request=Request("POST", "http://127.0.0.1/v1/chat/completions"))
    return openai.BadRequestError(f"Error code: 400 - {body}", response=response, body=body["error"])


def run(tmp_path: Path, commands: list[str], window: int, **settings: Any) -> tuple[dict[str, Any], Driver, Any]:
    driver = Driver(commands, window)
    model = ScriptedChatModel([driver] * (len(commands) * 3 + 20))
    config = AgentConfig(workdir=str(tmp_path), max_steps=len(commands) + 5, **settings)
    agent = build_graph(model=model, config=config, checkpointer=InMemorySaver())
    state = agent.invoke({"messages": [HumanMessage(TASK)]}, THREAD)
    return state, driver, agent


def test_a_300_step_task_finishes_in_an_8k_window(tmp_path: Path) -> None:
    """Many small outputs, some failures and a few large ones: no request passes the window."""
    commands = []
    for i in range(300):
        if i % 50 == 7:
            commands.append("seq 1 3000")  # ~14 KB, capped and spilled
        elif i % 10 == 3:
            commands.append(f"ls /nonexistent-{i}")  # exit 2
        else:
            commands.append(f"echo step {i}")
    state, driver, agent = run(tmp_path, commands, 8_192, context_window=8_192)
    assert state["status"] == "done"
    assert max(driver.sizes) <= 8_192
    texts = "\n".join(str(m.content) for m in driver.last)
    assert str(driver.last[1].content) == TASK  # the task, verbatim
    summary = next(str(m.content) for m in driver.last if str(m.content).startswith("[Context compacted"))
    assert "exit 2 · `ls /nonexistent-253` · ls: cannot access" in summary  # in the ledger, with why
    assert "cannot access '/nonexistent-293'" in texts
    assert agent.get_state(THREAD).values["context"]["compactions"] >= 3
    assert len(state["messages"]) == 1 + 300 * 2 + 1  # nothing lost: every message is kept


def test_stubs_keep_the_outcome_the_command_the_size_and_the_spill_file(tmp_path: Path) -> None:
    """Old outputs become stubs first: clearing alone brings this view under its target."""
    commands = [f"yes abcdefgh | head -c 6000; echo {i}" if i % 3 == 0 else f"echo {i}" for i in range(30)]
    _, driver, agent = run(tmp_path, commands, 32_768, context_window=32_768)
    assert driver.stubs
    prefix = "[output cleared from the context: ok · `yes abcdefgh | head -c 6000; echo "
    assert all(stub.startswith(prefix) for stub in driver.stubs)
    assert all("bytes of output · output not kept on disk]" in stub for stub in driver.stubs)
    assert "summary" not in agent.get_state(THREAD).values["context"]  # clearing was enough


def test_summarised_turns_leave_a_ledger_of_outcomes(tmp_path: Path) -> None:
    """When stubs are not enough the older turns are summarised; their commands' outcomes stay."""
    commands = ["seq 1 3000; ls /nonexistent", *[f"seq 1 300; echo {i}" for i in range(30)]]
    _, driver, _ = run(tmp_path, commands, 4_096, context_window=4_096)
    summary = next(str(m.content) for m in driver.last if str(m.content).startswith("[Context compacted"))
    assert "- exit 2 · `seq 1 3000; ls /nonexistent` · ls: cannot access '/nonexistent'" in summary
    assert "Working directory: " in summary
    assert "Background jobs still running: none" in summary


def test_stub_text_names_the_spill_file() -> None:
    from bashgraph.graph.context import stub

    artifact = {"outcome": "exit_error", "exit_code": 2, "command": "make", "stdout_bytes": 50_000,
                "stderr_bytes": 12, "stderr": "make: *** [all] Error 2\n", "stdout_file": "/tmp/s/x-stdout-1.log"}
    message = stub(ToolMessage(content="x" * 5_000, tool_call_id="c", artifact=artifact))
    assert message.content == ("[output cleared from the context: exit 2 · `make` · 50,012 bytes of output · "
                               "make: *** [all] Error 2 · full output: /tmp/s/x-stdout-1.log]")
    assert stub(ToolMessage(content="short", tool_call_id="c", artifact=artifact)).content == "short"


def test_a_refusal_for_length_compacts_and_the_call_is_made_again(tmp_path: Path) -> None:
    """No window set: the first refusal teaches it; the run goes on without a model error."""
    commands = ["yes abcdefgh | head -c 9000" for _ in range(12)]
    state, _, agent = run(tmp_path, commands, 8_000)
    assert state["status"] == "done"
    assert agent.get_state(THREAD).values["context"]["window"] == 8_000
    history = list(agent.get_state_history(THREAD))
    assert any(snapshot.next == ("compact",) for snapshot in history)  # time travel sees it
    rows = [row for row in thread_history(agent, "t") if row.node == "compact"]  # LangGraph's reader
    assert rows[-1].outcomes.startswith("compacted ")
    assert "(overflow, window 8,000)" in rows[-1].outcomes  # the oldest row: the refusal


def test_requests_that_never_fit_end_the_run_as_failed(tmp_path: Path) -> None:
    """A task alone larger than the window: three refusals with nothing to compact, then failed."""
    driver = Driver([], 2_100)
    model = ScriptedChatModel([driver] * 10)
    agent = build_graph(model=model, config=AgentConfig(workdir=str(tmp_path)), checkpointer=InMemorySaver())
    state = agent.invoke({"messages": [HumanMessage("x" * 40_000)]}, THREAD)
    assert state["status"] == "failed"
    assert "does not fit the model's context window" in state["reason"]


@pytest.mark.parametrize(("body", "window"), [
    ({"error": {"message": "This model's maximum context length is 16385 tokens. However, your messages "
                           "resulted in 17105 tokens.", "code": "context_length_exceeded"}}, 16_385),
    ({"object": "error", "message": "This model's maximum context length is 8192 tokens. However, you requested "
      "9000 tokens (8000 in the messages, 1000 in the completion).", "type": "BadRequestError", "code": 400}, 8_192),
    ({"error": {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": 4476, "n_ctx": 4096,
                "message": "request (4476 tokens) exceeds the available context size (4096 tokens)"}}, 4_096),
    ({"error": {"code": 400, "type": "exceed_context_size_error",
                "message": "the request exceeds the available context size, try increasing it"}}, None),
])
def test_each_servers_refusal_for_length_is_read(body: dict[str, Any], window: int | None) -> None:
    response = Response(400, json=body, request=Request("POST", "http://127.0.0.1/v1/chat/completions"))
    error = openai.BadRequestError(f"Error code: 400 - {body}", response=response, body=body.get("error", body))
    overflow = overflow_of(error)
    assert overflow is not None
    assert overflow.window == window


def test_other_bad_requests_are_not_refusals_for_length() -> None:
    body = {"error": {"message": "Invalid value for 'tool_choice'", "code": None}}
    response = Response(400, json=body, request=Request("POST", "http://127.0.0.1/v1/chat/completions"))
    assert overflow_of(openai.BadRequestError("Error code: 400", response=response, body=body["error"])) is None


def test_history_and_fork_see_every_compaction(tmp_path: Path) -> None:
    """The checkpoints keep every message; `history` names each compaction, and a fork made
    where `compact` was next compacts and finishes like its source."""
    from bashgraph.graph import open_session

    commands = ["yes abcdefgh | head -c 9000" for _ in range(12)]
    driver = Driver(commands, 8_000)
    config = AgentConfig(workdir=str(tmp_path), max_steps=30)
    db = str(tmp_path / "c.sqlite")
    with open_session(db, model=ScriptedChatModel([driver] * 60), config=config) as session:
        list(session.run({"messages": [HumanMessage(TASK)]}, "t"))
        assert session.state("t").values["status"] == "done"
        rows = session.history("t")
        compacted = [row for row in rows if row.node == "compact"]
        assert compacted
        assert all(row.outcomes.startswith("compacted ") for row in compacted)
        assert len(session.state("t").values["messages"]) == 1 + 12 * 2 + 1
        before = next(row for row in rows if row.next == ("compact",))
        driver.commands = ["echo forked"]
        fork = session.fork("t", before.checkpoint_id, "t-fork")
        list(session.run(None, fork))
        assert session.state(fork).values["status"] == "done"
        assert session.state(fork).values["context"]["compactions"] >= 1


def test_one_replys_outputs_are_clipped_to_the_turn_cap_naming_the_spill_file() -> None:
    """Two huge answers to one reply share the cap; each marker still says where the output is."""
    from bashgraph.graph.context import model_messages
    from bashgraph.graph.tokens import estimate

    reply = calls_reply("cat a", "cat b")
    answers = [ToolMessage(content="x" * 30_000, tool_call_id=call["id"] or "",
                           artifact={"outcome": "ok", "command": call["args"]["command"],
                                     "stdout_file": f"/tmp/spill-{index}.log"})
               for index, call in enumerate(reply.tool_calls)]
    view = model_messages([HumanMessage(TASK), reply, *answers], None, "system", turn_cap_tokens=2_000)
    clipped = [m for m in view if isinstance(m, ToolMessage)]
    assert estimate(clipped) <= 2_000
    assert "characters omitted; full output: /tmp/spill-0.log]" in str(clipped[0].content)
    assert "characters omitted; full output: /tmp/spill-1.log]" in str(clipped[1].content)
    assert answers[0].content == "x" * 30_000  # the stored message is untouched


def test_the_servers_usage_counts_the_prefix_it_saw() -> None:
    """The newest reply's usage (its prompt and reply) plus an estimate of what came after it;
    a reply made before the last compaction (before `since`) saw another view: estimated whole."""
    from bashgraph.graph.tokens import estimate, request_tokens

    reply = calls_reply("ls")
    reply.usage_metadata = {"input_tokens": 1_000, "output_tokens": 50, "total_tokens": 1_050}
    answer_ = ToolMessage(content="x" * 300, tool_call_id="c")
    view: list[AnyMessage] = [SystemMessage("system"), HumanMessage(TASK), reply, answer_]
    assert request_tokens(view, 400, since=0) == 1_050 + estimate([answer_])
    assert request_tokens(view, 400, since=3) == 400 + estimate(view)


def test_an_empty_reply_note_is_not_kept_as_a_task_after_a_summary(tmp_path: Path) -> None:
    """The note asking again after an empty reply is the graph's, not a person's request: once
    summarised it must not stand before the summary as a standing order to 'reply again'."""
    commands = ["seq 1 3000; ls /nonexistent", *[f"seq 1 300; echo {i}" for i in range(30)]]
    driver = Driver(commands, 4_096)
    model = ScriptedChatModel([answer(""), *[driver] * (len(commands) * 3 + 20)])
    config = AgentConfig(workdir=str(tmp_path), max_steps=len(commands) + 8, context_window=4_096)
    agent = build_graph(model=model, config=config, checkpointer=InMemorySaver())
    state = agent.invoke({"messages": [HumanMessage(TASK)]}, THREAD)
    assert state["status"] == "done"
    assert any(str(m.content).startswith("Your last reply was empty") for m in state["messages"])  # kept
    summary_at = next(i for i, m in enumerate(driver.last) if str(m.content).startswith("[Context compacted"))
    before = [str(m.content) for m in driver.last[:summary_at]]
    assert TASK in before
    assert not any(text.startswith("Your last reply was empty") for text in before)


def test_every_note_the_graph_writes_starts_with_a_graph_prefix() -> None:
    from bashgraph.graph.models import prompts
    from bashgraph.graph.models.cutoff import empty_reply_note

    assert str(empty_reply_note(AIMessage(content="")).content).startswith(prompts.GRAPH_MESSAGE_PREFIXES)


def test_a_thread_of_many_tasks_keeps_fitting_its_window(tmp_path: Path) -> None:
    """A long-lived thread given one request after another: the tasks kept verbatim before the
    summary are bounded too, or they alone outgrow the window and every later request fails."""
    driver = Driver([], 4_096)
    model = ScriptedChatModel([driver] * 400)
    config = AgentConfig(workdir=str(tmp_path), max_steps=1_000, context_window=4_096)
    agent = build_graph(model=model, config=config, checkpointer=InMemorySaver())
    statuses = []
    for index in range(60):
        task = f"request {index}: " + "look at the build log and tell me what went wrong there. " * 6
        statuses.append(agent.invoke({"messages": [HumanMessage(task)]}, THREAD)["status"])
    assert statuses == ["done"] * 60
    assert max(driver.sizes) < 4_096
    assert "request 59:" in str(driver.last[-1].content)  # the active request, whole
    assert sum(str(m.content).startswith("request ") for m in driver.last) < 20


def test_a_small_window_is_not_compacted_at_nearly_every_step(tmp_path: Path) -> None:
    """The system prompt and the tool schemas are in every request whatever compaction does: the
    marks share out only the rest, so in a 4k window a compaction is still several steps away
    from the last one (it was 1-2 steps: a new prefix, and often a summary call, at each)."""
    commands = [f"seq 1 60; echo {i}" for i in range(60)]
    state, driver, agent = run(tmp_path, commands, 4_096, context_window=4_096)
    assert state["status"] == "done"
    assert max(driver.sizes) < 4_096
    assert agent.get_state(THREAD).values["context"]["compactions"] <= 25  # was 58


def test_a_summary_written_after_a_think_block_keeps_only_the_summary(tmp_path: Path) -> None:
    """A model that thinks in its text writes `<think>…</think>` before the summary: the thinking
    is not the summary, and clipped with it, it pushed the summary itself out."""
    summary = "Ran the checks; the listing of /nonexistent failed; next: report."

    class Thinking(Driver):
        def __call__(self, messages: list[BaseMessage]) -> AIMessage:
            if str(messages[0].content).startswith("You are compacting"):
                return answer("<think>" + "Let me weigh what matters here. " * 400 + "</think>\n" + summary)
            return super().__call__(messages)

    commands = ["seq 1 3000; ls /nonexistent", *[f"seq 1 300; echo {i}" for i in range(30)]]
    driver = Thinking(commands, 4_096)
    model = ScriptedChatModel([driver] * (len(commands) * 3 + 20))
    agent = build_graph(model=model, config=AgentConfig(workdir=str(tmp_path), max_steps=40, context_window=4_096),
                        checkpointer=InMemorySaver())
    assert agent.invoke({"messages": [HumanMessage(TASK)]}, THREAD)["status"] == "done"
    text = next(str(m.content) for m in driver.last if str(m.content).startswith("[Context compacted"))
    assert summary in text
    assert "<think>" not in text
    assert "Let me weigh" not in text
