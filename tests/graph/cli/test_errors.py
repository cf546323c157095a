"""Exit statuses 1 and 2: model failures keep the thread, usage errors are one clear line."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from bashgraph.graph.store.locks import thread_lock
from tests.graph.cli.conftest import Cli
from tests.support.openai_server import (
    FakeOpenAIServer,
    Step,
    hang,
    http_error,
    malformed,
    rate_limited,
    server_error,
    text,
    tool_call,
)


def closed_port_url() -> str:
    """The base URL of a port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


MODEL_FAULTS = {
    "connection refused": ([], ("--base-url", closed_port_url()), "connection refused (is it running?)"),
    "http 500": ([server_error()], (), "failed with HTTP 500: The server had an error"),
    "429 after a retry": ([rate_limited(), rate_limited()], ("--model-retries", "1"),
                          "is still rate limiting (HTTP 429) after 1 retry"),
    "malformed json": ([malformed()], (), "sent a reply that is not valid JSON"),
    "hang": ([hang(5)], ("--request-timeout", "0.3"), "did not answer within 0.3 s (request timeout)"),
    "http 500 with detail lines": (
        [http_error(500, "2 validation errors:\n  {'loc': ('body', 'messages', 2, 'content')}\n  {'x': 1}")],
        (), "failed with HTTP 500: 2 validation errors: | {'loc': ('body', 'messages', 2, 'content')} | {'x': 1}"),
    "error after http 200": ([malformed('{"error": {"message": "model crashed"}}')], (),
                             "(model 'gpt-4.1-mini') answered, but the reply could not be used: "
                             "ValueError: {'message': 'model crashed'}"),
}


@pytest.mark.parametrize("fault", MODEL_FAULTS.values(), ids=MODEL_FAULTS.keys())
def test_model_error_keeps_the_thread_and_resume_succeeds(
    cli: Cli, openai_server: FakeOpenAIServer, fault: tuple[list[Step], tuple[str, ...], str]
) -> None:
    """A failed model call exits 1 with one line and the resume command; resume then finishes."""
    steps, options, words = fault
    openai_server.add(*steps)
    failed = cli("run", "say hello", "--thread", "m1", *options)
    assert failed.code == 1, failed.err
    status, resume = failed.out.splitlines()[-2:]
    url = options[1] if options[:1] == ("--base-url",) else openai_server.base_url
    assert status.startswith("status: model error: ")
    assert f"the model server at {url}" in status
    assert words in status
    assert resume == " ".join(["continue with: bashgraph resume m1", *options])
    assert "Traceback" not in failed.err

    openai_server.add(text("hello"))
    resumed = cli("resume", "m1", "--json")
    assert resumed.code == 0, resumed.err
    assert resumed.events[-1]["status"] == "done"
    task = openai_server.chat_requests[-1].messages[1]
    assert (task["role"], task["content"]) == ("user", "say hello")


def test_a_429_retried_in_time_does_not_fail_the_run(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """The client retries a 429 by itself; the run only sees the answer."""
    openai_server.add(rate_limited(), text("hello"))
    result = cli("run", "say hello", "--model-retries", "1")
    assert result.code == 0, result.err
    assert len(openai_server.chat_requests) == 2


def test_busy_thread_exits_1_and_runs_nothing(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """A thread held by another worker: one line saying so, exit 1, no model call."""
    cli.db.parent.mkdir(parents=True)
    with thread_lock(str(cli.db), "b1"):
        result = cli("run", "say hello", "--thread", "b1")
    assert result.code == 1
    assert result.err.startswith("bashgraph: error: thread b1 is busy: another worker is running it (pid ")
    assert result.out == ""  # a refusal is said alone
    assert openai_server.chat_requests == []


REFUSED = {
    "unknown thread": ["resume", "nope"],
    "unfinished thread": ["run", "again", "--thread", "u1"],
}


@pytest.mark.parametrize("argv", REFUSED.values(), ids=REFUSED.keys())
def test_a_refusal_comes_first_and_alone(cli: Cli, openai_server: FakeOpenAIServer, argv: list[str]) -> None:
    """No `thread nope` line, no model notice before the error: the one line says it all; with
    --json, the `end` event alone."""
    openai_server.add(tool_call("bash", {"command": "echo hi"}))
    assert cli("run", "wait", "--thread", "u1", "--approval", "always").code == 3  # u1: unfinished
    result = cli(*argv, OPENAI_API_KEY="", OPENAI_BASE_URL="")  # the bundled model's notice
    assert result.code == 2
    assert result.out == ""
    assert len(result.err.splitlines()) == 1, result.err
    assert result.err.startswith(("bashgraph: error: no thread nope", "bashgraph: error: thread u1 has not finished"))
    as_json = cli(*argv, "--json", OPENAI_API_KEY="", OPENAI_BASE_URL="")
    assert [(e["event"], e["status"]) for e in as_json.events] == [("end", "config_error")]
    assert as_json.err == ""


def _garbage_db(tmp_path: Path) -> str:
    path = tmp_path / "garbage.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    return str(path)


USAGE_ERRORS = {
    "missing task": (lambda _: ["run"], {}, "the following arguments are required: TASK"),
    "bad flag value": (lambda _: ["run", "x", "--timeout", "0"], {}, "timeout_s must be positive, got 0.0"),
    "not a number": (lambda _: ["run", "x", "--max-steps", "many"], {}, "invalid int value: 'many'"),
    "bad environment": (lambda _: ["run", "x"], {"BASHGRAPH_MAX_STEPS": "many"},
                        "BASHGRAPH_MAX_STEPS='many' is not a valid int"),
    "bad rule": (lambda _: ["run", "x", "--rule", "maybe:rm *"], {}, "maybe"),
    "unusable database": (lambda tmp: ["run", "x", "--db", _garbage_db(tmp)], {},
                          "not a usable SQLite database"),
    "unknown thread": (lambda _: ["resume", "nope"], {}, "no thread nope in the checkpoint database"),
    "unknown history": (lambda _: ["history", "nope"], {}, "no thread nope in the checkpoint database"),
    "fork of nothing": (lambda _: ["fork", "nope", "--checkpoint", "c"], {}, "thread nope has no checkpoint c"),
    "no model configured": (lambda _: ["run", "x", "--model", "gpt-x"], {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""},
                            "bashgraph: error: model 'gpt-x' needs OPENAI_API_KEY (OpenAI API) or OPENAI_BASE_URL / "
                            "--base-url (another OpenAI-compatible server)\n"),
}


@pytest.mark.parametrize(("argv", "env", "words"), USAGE_ERRORS.values(), ids=USAGE_ERRORS.keys())
def test_usage_errors_exit_2_with_one_line(
    cli: Cli, tmp_path: Path, argv: Callable[[Path], list[str]], env: dict[str, str], words: str
) -> None:
    """Bad arguments, settings or databases, unknown threads: exit 2, one line, no traceback."""
    result = cli.start(*argv(tmp_path), **env).finish()
    assert result.code == 2
    assert words in result.err
    assert "Traceback" not in result.err
    assert result.err.splitlines()[-1].startswith(("bashgraph: error: ", "bashgraph run: error: "))


def test_resume_hints_carry_the_options_the_thread_was_started_with(
    cli: Cli, openai_server: FakeOpenAIServer
) -> None:
    """Started with --approval always and a rule; resumed with --answer alone: the hints it prints
    (and those of `run --thread` on it) still carry both, and one given now wins."""
    openai_server.add(tool_call("bash", {"command": "echo a"}))
    started = cli("run", "two", "--thread", "h1", "--approval", "always", "--rule", "deny:rm *",
                  "--timeout", "9")
    assert started.code == 3, started.err
    openai_server.add(server_error())
    resumed = cli("resume", "h1", "--answer", "approve", "--timeout", "5")
    assert resumed.code == 1, resumed.out  # a model error: the thread waits for a resume
    expected = "bashgraph resume h1 --timeout 5.0 --approval always --rule 'deny:rm *'"
    assert resumed.out.splitlines()[-1] == f"continue with: {expected}"
    again = cli("run", "other", "--thread", "h1")
    assert again.err.strip() == f"bashgraph: error: thread h1 has not finished; continue it with: {expected}"
