"""An OpenAI-compatible chat-completions server for tests: scripted replies and faults, real HTTP.

The real `ChatOpenAI` client talks to it over 127.0.0.1, so the wire format is what gets tested:

    with FakeOpenAIServer(tool_call("bash", {"command": "ls"}), text("done")) as server:
        model = ChatOpenAI(model=server.model, base_url=server.base_url, api_key="test")
        ...
        assert server.chat_requests[1].messages[-1]["role"] == "tool"
        server.assert_done()

Each POST /v1/chat/completions consumes the next script step, answered as JSON or as SSE chunks
depending on the request's `stream` flag. The server is strict: a request past the end of the
script gets a 500 and is recorded in `errors`; `assert_done()` also reports unused steps. A
request whose history has a tool call with no answer gets the 400 real servers send
(tests/support/openai_history.py), takes no script step, and is recorded in `errors` too.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.support.openai_history import history_problem
from tests.support.openai_script import (
    Custom,
    DropConnection,
    ErrorReply,
    Exchange,
    Hang,
    MalformedReply,
    RecordedRequest,
    Step,
    TextReply,
    ToolCall,
    ToolCallsReply,
    completion_body,
    context_length_error,
    drop_connection,
    error_body,
    exchange_for,
    hang,
    http_error,
    malformed,
    model_not_found,
    prompt_tokens,
    rate_limited,
    server_error,
    stream_chunks,
    text,
    tool_call,
    tool_calls,
    unauthorized,
)

__all__ = [  # the script vocabulary is re-exported: tests import everything from here
    "DEFAULT_MODEL",
    "DropConnection",
    "ErrorReply",
    "FakeOpenAIServer",
    "Hang",
    "MalformedReply",
    "RecordedRequest",
    "Step",
    "TextReply",
    "ToolCall",
    "ToolCallsReply",
    "drop_connection",
    "hang",
    "http_error",
    "malformed",
    "model_not_found",
    "openai_server_fixture",
    "rate_limited",
    "server_error",
    "text",
    "tool_call",
    "tool_calls",
    "unauthorized",
]

DEFAULT_MODEL = "test-model"


# ----------------------------------------------------------------------------- HTTP side


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked SSE, as the real API serves them
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Keep pytest output clean; the server records requests instead."""

    def do_GET(self) -> None:
        fake = self.server.fake
        fake._record(RecordedRequest("GET", self.path, self._headers(), None))
        if self.path.rstrip("/") == "/v1/models":
            entry = {"id": fake.model, "object": "model", "created": 0, "owned_by": "tests"}
            if fake.window is not None and fake.report_window and fake.overflow_shape == "vllm":
                entry["max_model_len"] = fake.window
            self._send_json(200, {"object": "list", "data": [entry]})
        elif self.path.rstrip("/") == "/props":  # llama.cpp's server; OpenAI's answers 404
            if fake.window is not None and fake.report_window and fake.overflow_shape == "llamacpp":
                self._send_json(200, {"default_generation_settings": {"n_ctx": fake.window}})
            else:
                self._send_json(404, error_body("not found", "invalid_request_error"))
        else:
            self._send_json(404, fake._fault(f"unknown path GET {self.path}"))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        fake = self.server.fake
        request = RecordedRequest("POST", self.path, self._headers(), body)
        if self.path != "/v1/chat/completions":
            fake._record(request)
            self._send_json(404, fake._fault(f"unknown path POST {self.path}"))
        elif not isinstance(body, dict):
            fake._record(request)
            self._send_json(400, fake._fault(f"request body is not a JSON object: {raw[:80]!r}"))
        elif (problem := history_problem(body.get("messages") or [])) is not None:
            fake._record(request)
            fake._fault(problem)
            self._send_json(400, error_body(problem, "invalid_request_error"))
        elif (refusal := fake._refuse_for_length(request)) is not None:
            self._send_json(400, refusal)
        elif (step := fake._receive_chat(request)) is None:
            # x-should-retry: the client must not hide this mistake behind its own retries
            self._send_json(500, fake._fault(fake._past_end_message()), {"x-should-retry": "false"})
        else:
            try:
                self._play(step[1], exchange_for(step[0], request, fake.model), request)
            except ConnectionError:
                self.close_connection = True  # the client gave up first (its timeout)

    def _play(self, step: Step, ex: Exchange, request: RecordedRequest) -> None:
        if isinstance(step, Hang):
            if self.server.stopping.wait(step.seconds):
                return self._drop()
            return self._play(step.then, ex, request)
        if isinstance(step, Custom):
            answer = step.answer(request, ex)
            if answer.events is not None:
                return self._send_events(list(answer.events))
            return self._send_json(answer.status, answer.body or {}, answer.headers)
        if isinstance(step, DropConnection):
            return self._drop()
        if isinstance(step, ErrorReply):
            return self._send_json(step.status, step.body, step.headers)
        if isinstance(step, MalformedReply):
            if ex.stream:
                return self._send_events([step.body])
            return self._send(200, step.body.encode(), step.content_type)
        if ex.stream:
            return self._send_events([json.dumps(c) for c in stream_chunks(step, ex)] + ["[DONE]"])
        return self._send_json(200, completion_body(step, ex))

    def _headers(self) -> dict[str, str]:
        return {name.lower(): value for name, value in self.headers.items()}

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):  # the client or close() may have ended it already
            self.connection.shutdown(socket.SHUT_RDWR)

    def _send_json(self, status: int, body: Mapping[str, Any],
                   headers: Mapping[str, str] | None = None) -> None:
        self._send(status, json.dumps(body).encode(), "application/json", headers)

    def _send(self, status: int, payload: bytes, content_type: str,
              headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _send_events(self, data: list[str]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for item in data:
            event = f"data: {item}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class _HTTPServer(ThreadingHTTPServer):
    """Tracks its connections and worker threads so `close()` can end them all, idle or not."""

    daemon_threads = True

    def __init__(self, fake: FakeOpenAIServer) -> None:
        self.fake = fake
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._workers: list[threading.Thread] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind would call socket.getfqdn(), a reverse DNS lookup: skip it.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        worker = threading.Thread(target=self.process_request_thread,
                                  args=(request, client_address), daemon=True)
        with self._lock:
            self._connections.add(request)
            self._workers = [w for w in self._workers if w.is_alive()] + [worker]
        worker.start()

    def shutdown_request(self, request: Any) -> None:
        with self._lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client closing its idle keep-alive connection is normal; anything else is recorded."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError):
            return
        self.fake._fault(f"the server itself failed: {error!r}")
        super().handle_error(request, client_address)

    def end_connections(self, join_timeout: float) -> list[threading.Thread]:
        """Wake hangs, cut keep-alive connections, join workers; returns the ones still alive."""
        self.stopping.set()
        with self._lock:
            connections, workers = list(self._connections), list(self._workers)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by the client
                connection.shutdown(socket.SHUT_RDWR)
        for worker in workers:
            worker.join(join_timeout)
        return [w for w in workers if w.is_alive()]


# ----------------------------------------------------------------------------- the server


class FakeOpenAIServer:
    """A strict scripted OpenAI-compatible server on 127.0.0.1 (a free port); a context manager."""

    def __init__(self, *script: Step, model: str = DEFAULT_MODEL, window: int | None = None,
                 report_window: bool = False, overflow_shape: str = "openai",
                 answer_first: Callable[[RecordedRequest], Step | None] | None = None) -> None:
        """`window`: a request whose prompt passes it (`prompt_tokens`) is refused with HTTP 400
        in the words of `overflow_shape` ("openai", "vllm", "llamacpp"), without taking a script
        step; `report_window`: the server also says its window (vLLM's /v1/models, llama.cpp's
        /props); `answer_first`: consulted before the script, a step it returns answers the request
        without taking a script step (e.g. every summary request of a compaction)."""
        self.answer_first = answer_first
        self.model = model
        self.window = window
        self.report_window = report_window
        self.overflow_shape = overflow_shape
        self.refused: list[int] = []  # the prompt tokens of each request refused for length
        self._lock = threading.Lock()
        self._script: list[Step] = list(script)
        self._next = 0
        self._requests: list[RecordedRequest] = []
        self._errors: list[str] = []
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle
    def start(self) -> FakeOpenAIServer:
        if self._httpd is None:
            self._httpd = _HTTPServer(self)
            self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                            name="fake-openai-server", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and end every connection and worker thread (idempotent)."""
        httpd, thread, self._httpd, self._thread = self._httpd, self._thread, None, None
        if httpd is None or thread is None:
            return
        httpd.shutdown()
        stuck = httpd.end_connections(join_timeout=5.0)
        httpd.server_close()
        thread.join(5.0)
        if stuck:
            raise RuntimeError(f"FakeOpenAIServer: {len(stuck)} worker thread(s) did not end")

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- addresses
    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeOpenAIServer is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What OPENAI_BASE_URL / `base_url` should be set to."""
        return self.url + "/v1"

    # --- script
    def add(self, *steps: Step) -> None:
        """Append steps to the script (also allowed while requests are being served)."""
        with self._lock:
            self._script.extend(steps)

    def unused(self) -> list[Step]:
        with self._lock:
            return self._script[self._next:]

    # --- what happened
    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in arrival order (GET /v1/models included)."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == "/v1/chat/completions"]

    @property
    def errors(self) -> list[str]:
        """Protocol mistakes seen: requests past the script, unknown paths, non-JSON bodies."""
        with self._lock:
            return list(self._errors)

    def assert_done(self) -> None:
        """Fail if a request went past the script (or was malformed), or if steps were unused."""
        problems = self.errors
        if leftover := self.unused():
            problems.append(f"{len(leftover)} script step(s) never requested: {leftover!r}")
        if problems:
            raise AssertionError("FakeOpenAIServer: " + "; ".join(problems))

    # --- used by the handler threads
    def _refuse_for_length(self, request: RecordedRequest) -> dict[str, Any] | None:
        """The 400 of a request longer than `window` (recorded), or None when it fits."""
        tokens = prompt_tokens(request)
        if self.window is None or tokens <= self.window:
            return None
        with self._lock:
            self._requests.append(request)
            self.refused.append(tokens)
        return context_length_error(self.overflow_shape, self.window, tokens)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _receive_chat(self, request: RecordedRequest) -> tuple[int, Step] | None:
        """Record a chat request and take its script step (index, step); None past the end."""
        with self._lock:  # one lock for both, so the n-th recorded request gets the n-th step
            self._requests.append(request)
            if self.answer_first is not None and (first := self.answer_first(request)) is not None:
                return -1, first
            if self._next >= len(self._script):
                return None
            self._next += 1
            return self._next - 1, self._script[self._next - 1]

    def _past_end_message(self) -> str:
        with self._lock:
            count = sum(r.path == "/v1/chat/completions" for r in self._requests)
            return (f"FakeOpenAIServer: chat request #{count} arrived after the script ended "
                    f"({len(self._script)} step(s))")

    def _fault(self, message: str) -> dict[str, Any]:
        with self._lock:
            self._errors.append(message)
        return error_body(message, "server_error")


@pytest.fixture(name="openai_server")
def openai_server_fixture() -> Iterator[FakeOpenAIServer]:
    """A started FakeOpenAIServer with an empty script; teardown fails on leftovers or overruns."""
    with FakeOpenAIServer() as server:
        yield server
    server.assert_done()
