"""The model wiring, tested with the real ChatOpenAI client over HTTP against FakeOpenAIServer."""

from __future__ import annotations

import functools
import operator
import socket
import threading
import time
from typing import Any

import openai
import pytest
from langchain_core.messages import AIMessage, BaseMessage, BaseMessageChunk, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from bashgraph.graph.errors import ModelError
from bashgraph.graph.models.factory import (
    as_model_error,
    describe_model_error,
)
from tests.support.openai_server import (
    FakeOpenAIServer,
    Step,
    ToolCall,
    drop_connection,
    hang,
    http_error,
    malformed,
    model_not_found,
    openai_server_fixture,  # noqa: F401 (registers the `openai_server` fixture)
    rate_limited,
    server_error,
    text,
    tool_call,
    tool_calls,
    unauthorized,
)


@tool
def bash(command: str, timeout: int = 30) -> str:
    """Run a shell command."""
    return command


def client(server: FakeOpenAIServer, **options: Any) -> ChatOpenAI:
    options = {"max_retries": 0, "timeout": 5.0, **options}
    return ChatOpenAI(model=server.model, base_url=server.base_url,
                      api_key=SecretStr("test-key"), **options)


def streamed(model: Any, prompt: str) -> BaseMessageChunk:
    chunks: list[BaseMessageChunk] = list(model.stream(prompt))
    return functools.reduce(operator.add, chunks)


def call_error(model: ChatOpenAI, *, stream: bool = False) -> BaseException:
    try:
        if stream:
            list(model.stream("hi"))
        else:
            model.invoke("hi")
    except Exception as exc:
        return exc
    raise AssertionError("the model call succeeded")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# ----------------------------------------------------------------------------- the wire format


def test_tool_call_reply_is_parsed_and_request_carries_the_tool_schema(
    openai_server: FakeOpenAIServer,
) -> None:
    """A non-streamed tool call becomes AIMessage.tool_calls; the request has the bound schema."""
    openai_server.add(tool_call("bash", {"command": "ls -l /tmp", "timeout": 5}, id="call_x"))
    reply = client(openai_server).bind_tools([bash]).invoke("list /tmp")
    assert isinstance(reply, AIMessage)
    assert reply.tool_calls == [{"name": "bash", "args": {"command": "ls -l /tmp", "timeout": 5},
                                 "id": "call_x", "type": "tool_call"}]
    (request,) = openai_server.chat_requests
    assert request.model == "test-model"
    assert not request.stream
    (schema,) = request.tools
    assert schema["function"]["name"] == "bash"
    assert set(schema["function"]["parameters"]["properties"]) == {"command", "timeout"}
    assert request.messages == [{"role": "user", "content": "list /tmp"}]


def test_streamed_tool_calls_are_merged_from_deltas(openai_server: FakeOpenAIServer) -> None:
    """Two streamed tool calls, arguments cut in pieces, merge into two complete tool calls."""
    openai_server.add(tool_calls(ToolCall("bash", {"command": "echo one two three"}),
                                 ToolCall("bash", {"command": "pwd"})))
    reply = streamed(client(openai_server).bind_tools([bash]), "go")
    assert isinstance(reply, AIMessage)
    assert [(c["id"], c["args"]) for c in reply.tool_calls] == [
        ("call_0_0", {"command": "echo one two three"}), ("call_0_1", {"command": "pwd"})]
    assert openai_server.chat_requests[0].stream


def test_streamed_text_carries_usage_when_asked(openai_server: FakeOpenAIServer) -> None:
    """Streamed text is reassembled, and usage arrives when stream_options.include_usage is set."""
    openai_server.add(text("hello from a streamed reply"))
    reply = streamed(client(openai_server, stream_usage=True), "hi")
    assert isinstance(reply, AIMessage)
    assert reply.content == "hello from a streamed reply"
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["total_tokens"] > 0
    body = openai_server.chat_requests[0].body
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_malformed_tool_arguments_become_invalid_tool_calls(
    openai_server: FakeOpenAIServer, stream: bool
) -> None:
    """Arguments that are not JSON reach the graph as invalid_tool_calls, not as an exception."""
    openai_server.add(tool_call("bash", "{command: ls}"))
    model = client(openai_server).bind_tools([bash])
    reply = streamed(model, "go") if stream else model.invoke("go")
    assert isinstance(reply, AIMessage)
    assert reply.tool_calls == []
    assert [(c["name"], c["args"]) for c in reply.invalid_tool_calls] == [
        ("bash", "{command: ls}")]


def test_truncated_arguments_are_invalid_only_without_streaming(
    openai_server: FakeOpenAIServer,
) -> None:
    """Cut-off JSON arguments are invalid in a JSON reply but completed when streamed.

    langchain-core merges streamed arguments with a partial-JSON parser that closes open strings
    and objects, so `{"command": "ls` arrives as a valid call to `ls`.
    """
    openai_server.add(tool_call("bash", '{"command": "ls'), tool_call("bash", '{"command": "ls'))
    model = client(openai_server).bind_tools([bash])
    whole = model.invoke("go")
    assert isinstance(whole, AIMessage)
    assert [c["args"] for c in whole.invalid_tool_calls] == ['{"command": "ls']
    merged = streamed(model, "go")
    assert isinstance(merged, AIMessage)
    assert [c["args"] for c in merged.tool_calls] == [{"command": "ls"}]


def test_tool_result_goes_back_in_the_next_request(openai_server: FakeOpenAIServer) -> None:
    """A ToolMessage is sent as a `tool` message tied to the call id."""
    openai_server.add(text("done"))
    history: list[BaseMessage] = [
        AIMessage("", tool_calls=[{"name": "bash", "args": {"command": "ls"}, "id": "call_7"}]),
        ToolMessage("a.txt", tool_call_id="call_7"),
    ]
    assert client(openai_server).invoke(history).content == "done"
    sent = openai_server.chat_requests[0].messages
    assert sent[0]["tool_calls"][0]["id"] == "call_7"
    assert sent[1] == {"role": "tool", "content": "a.txt", "tool_call_id": "call_7"}


def test_models_endpoint_lists_the_model(openai_server: FakeOpenAIServer) -> None:
    """GET /v1/models answers with the server's model name."""
    models = openai.OpenAI(base_url=openai_server.base_url, api_key="k").models.list()
    assert [m.id for m in models] == ["test-model"]


# ----------------------------------------------------------------------------- retries


def test_server_error_is_retried_by_the_client(openai_server: FakeOpenAIServer) -> None:
    """A 500 followed by a good reply succeeds with max_retries=1 (client backoff, no header)."""
    openai_server.add(server_error(500), text("recovered"))
    assert client(openai_server, max_retries=1).invoke("hi").content == "recovered"
    assert len(openai_server.chat_requests) == 2


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_rate_limit_with_retry_after_is_retried(
    openai_server: FakeOpenAIServer, stream: bool
) -> None:
    """A 429 carrying Retry-After is retried and the next reply is used."""
    openai_server.add(rate_limited(retry_after=0.01), text("after the wait"))
    model = client(openai_server, max_retries=1)
    reply = streamed(model, "hi") if stream else model.invoke("hi")
    assert reply.content == "after the wait"
    assert len(openai_server.chat_requests) == 2


# ----------------------------------------------------------------------------- one clear line

FAILURES: list[tuple[str, list[Step], dict[str, Any], bool, str]] = [
    ("401", [unauthorized()], {}, False, "rejected the API key (HTTP 401)"),
    ("404-model", [model_not_found("test-model")], {}, False,
     "does not know the model 'test-model' (HTTP 404)"),
    ("garbage-json", [malformed()], {}, False, "sent a reply that is not valid JSON"),
    ("html-page", [malformed("<html>Bad gateway</html>", "text/html")], {}, False,
     "sent a reply that is not valid JSON"),
    ("garbage-sse", [malformed("not json at all")], {}, True,
     "sent a reply that is not valid JSON"),
    ("429", [rate_limited(), rate_limited()], {"max_retries": 1}, False,
     "still rate limiting (HTTP 429) after 1 retry"),
    ("503", [server_error(503, retry_after=0.01)] * 2, {"max_retries": 1}, True,
     "failed with HTTP 503 after 1 retry"),
    ("hang", [hang(5.0)], {"timeout": 0.2}, False, "did not answer within 0.2 s"),
    ("dropped", [drop_connection()], {}, False,
     "lost the connection to the model server at {url}: Server disconnected"),
]


@pytest.mark.parametrize(("steps", "options", "stream", "expected"),
                         [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES])
def test_model_failures_are_described_in_one_line(
    openai_server: FakeOpenAIServer, steps: list[Step], options: dict[str, Any], stream: bool,
    expected: str,
) -> None:
    """Each failure of a model call gives one line naming the server and what went wrong."""
    openai_server.add(*steps)
    started = time.monotonic()
    exc = call_error(client(openai_server, **options), stream=stream)
    line = describe_model_error(exc, base_url=openai_server.base_url,
                                retries=options.get("max_retries"))
    assert time.monotonic() - started < options.get("timeout", 5.0) + 1.5
    assert expected.format(url=openai_server.base_url) in line
    assert openai_server.base_url in line
    assert "\n" not in line


def test_refused_connection_names_the_url() -> None:
    """Nothing listening on the port gives 'connection refused' with the URL."""
    url = f"http://127.0.0.1:{closed_port()}/v1"
    model = ChatOpenAI(model="m", base_url=url, api_key=SecretStr("k"), max_retries=0)
    line = describe_model_error(call_error(model))
    assert line == f"cannot connect to the model server at {url}: connection refused " \
                   "(is it running?)"


def test_wrong_base_url_404_points_at_the_url() -> None:
    """A 404 that is not about the model (a base URL without /v1) says to check the base URL."""
    with FakeOpenAIServer() as server:
        model = ChatOpenAI(model="m", base_url=server.url, api_key=SecretStr("k"), max_retries=0)
        line = describe_model_error(call_error(model))
        assert f"the model server at {server.url} answered HTTP 404" in line
        assert "check the base URL" in line
        assert server.errors == ["unknown path POST /chat/completions"]
        with pytest.raises(AssertionError, match="unknown path"):
            server.assert_done()


def test_other_exceptions_give_type_and_whole_message_on_one_line() -> None:
    """Anything unknown is shown as its type and its message, lines joined."""
    assert describe_model_error(RuntimeError("first\n  second")) == "RuntimeError: first | second"


#: What llama-cpp-python's server answers when an assistant message has `content: null`.
VALIDATION_ERRORS = "7 validation errors:\n" + "\n".join(
    f"  {{'type': 'string_type', 'loc': ('body', 'messages', 2, 'typed-dict', 'content', {i}), "
    "'msg': 'Input should be a valid string', 'input': None}" for i in range(7))


def test_the_server_detail_after_the_first_line_is_kept(openai_server: FakeOpenAIServer) -> None:
    """A multi-line error message keeps what follows its first line, on one bounded line."""
    openai_server.add(http_error(500, VALIDATION_ERRORS, error_type="internal_server_error"))
    line = describe_model_error(call_error(client(openai_server)))
    assert (f"the model server at {openai_server.base_url} failed with HTTP 500: 7 validation "
            "errors: | {'type': 'string_type', 'loc': ('body', 'messages', 2, ") in line
    assert "'msg': 'Input should be a valid string'" in line
    assert "\n" not in line
    assert len(line) < 600
    assert line.endswith("…")


def test_an_empty_stream_names_the_server_and_the_model(openai_server: FakeOpenAIServer) -> None:
    """A stream that ends without content after HTTP 200 says where and what to set."""
    openai_server.add(malformed("[DONE]"))
    exc = call_error(client(openai_server, streaming=True))
    assert str(exc) == "No generations found in stream."
    line = describe_model_error(exc, base_url=openai_server.base_url, model="test-model")
    assert line.startswith(
        f"the model server at {openai_server.base_url} (model 'test-model') ended a streamed "
        "reply without any content (ValueError: No generations found in stream.)")
    assert "BASHGRAPH_MODEL_STREAMING=false" in line


def test_a_failure_after_http_200_names_the_server_and_the_model() -> None:
    """An exception the client raised on a 200 reply names where the reply came from."""
    line = describe_model_error(KeyError("choices"), base_url="http://h:1/v1", model="m")
    assert line == ("the model server at http://h:1/v1 (model 'm') answered, but the reply could "
                    "not be used: KeyError: 'choices'")
    assert describe_model_error(ValueError("boom"), model="local") == "the local model failed: ValueError: boom"


def test_as_model_error_keeps_the_cause() -> None:
    """as_model_error wraps into ModelError with the description, chained to the original."""
    original = KeyError("choices")
    error = as_model_error(original)
    assert isinstance(error, ModelError)
    assert str(error) == "KeyError: 'choices'"
    assert error.__cause__ is original
    assert as_model_error(error) is error


# ----------------------------------------------------------------------------- strict script


def test_request_past_the_script_is_reported() -> None:
    """A call past the script fails with a clear 500 (not retried) and assert_done reports it."""
    with FakeOpenAIServer(text("only one")) as server:
        model = client(server, max_retries=2)
        assert model.invoke("hi").content == "only one"
        exc = call_error(model)
        assert isinstance(exc, openai.InternalServerError)
        assert "arrived after the script ended (1 step(s))" in str(exc)
        assert len(server.chat_requests) == 2  # x-should-retry: false stopped the client retries
        with pytest.raises(AssertionError, match="chat request #2 arrived after the script"):
            server.assert_done()


def test_unused_steps_are_reported() -> None:
    """Steps never requested make assert_done fail and are listed by unused()."""
    with FakeOpenAIServer(text("a"), text("b")) as server:
        client(server).invoke("hi")
        assert server.unused() == [text("b")]
        with pytest.raises(AssertionError, match="1 script step"):
            server.assert_done()


def test_close_ends_a_hanging_answer_promptly() -> None:
    """Closing the server while it hangs on a request returns at once and frees the client."""
    server = FakeOpenAIServer(hang(30.0)).start()
    errors: list[BaseException] = []
    caller = threading.Thread(target=lambda: errors.append(call_error(client(server,
                                                                            timeout=60.0))))
    caller.start()
    while not server.chat_requests:
        time.sleep(0.01)
    started = time.monotonic()
    server.close()
    caller.join(5.0)
    assert time.monotonic() - started < 2.0
    assert isinstance(errors[0], openai.APIConnectionError)
