"""graph/server_app.py against a stand-in for the server: a wait whose stream ended on the state
before the last step is answered from the thread, which the run's end wrote; anything else
keeps the server's answer. (The real race, two workers under load, is in test_two_workers.py.)
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from bashgraph.graph.server_app import FinalStateOnWait

RUN_PATH = "/threads/t1/runs/r1"
STALE = {"messages": ["ask"], "status": "running"}
FINAL = {"messages": ["ask", "answer"], "status": "done"}


class FakeServer:
    """Answers a wait like langgraph-api does (whitespace, then the result, streamed), and the
    reads of the run and the thread from `run` and `thread`."""

    def __init__(self, result: Any, run: dict[str, Any], thread: dict[str, Any], status: int = 200):
        self.result, self.run, self.thread, self.status = result, run, thread, status
        self.reads: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope["path"]
        if scope["method"] == "GET" and not path.endswith("/join"):
            self.reads.append(path)
            found = {RUN_PATH: self.run, "/threads/t1": self.thread}.get(path)
            await _send_json(send, 200 if found else 404, found or {"detail": "not found"})
            return
        headers = [(b"content-type", b"application/json"), (b"content-location", RUN_PATH.encode())]
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        for chunk in (b"\n", json.dumps(self.result).encode(), b""):
            await send({"type": "http.response.body", "body": chunk, "more_body": bool(chunk)})


async def _send_json(send: Any, status: int, body: Any) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def _wait(server: FakeServer, path: str = "/threads/t1/runs/wait", method: str = "POST") -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=FinalStateOnWait(server))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.request(method, path, json={"input": {}} if method == "POST" else None)

    return asyncio.run(call())


def _ended(status: str = "success", at: str = "2026-01-01T00:00:01Z") -> dict[str, Any]:
    return {"run_id": "r1", "status": status, "updated_at": at}


def _thread(values: Any = None, at: str = "2026-01-01T00:00:01Z", **more: Any) -> dict[str, Any]:
    return {"thread_id": "t1", "status": "idle", "state_updated_at": at, "values": values, **more}


def test_a_wait_that_ended_before_the_last_event_answers_the_threads_final_state() -> None:
    server = FakeServer(STALE, _ended(), _thread(FINAL))
    answer = _wait(server)
    assert answer.status_code == 200
    assert answer.json() == FINAL
    assert server.reads == [RUN_PATH, "/threads/t1"]


def test_a_join_is_answered_the_same_way() -> None:
    assert _wait(FakeServer(STALE, _ended(), _thread(FINAL)), f"{RUN_PATH}/join", "GET").json() == FINAL


def test_an_error_and_an_interrupt_are_answered_as_the_server_answers_them_from_a_thread() -> None:
    error = {"error": "ValueError", "message": "boom"}
    failed = _thread(STALE, status="error", error=json.dumps(error))
    assert _wait(FakeServer(STALE, _ended("error"), failed)).json() == {"__error__": error}
    asked = {"value": "approve?", "id": "i1"}
    waiting = _thread(STALE, status="interrupted", interrupts={"task": [asked]})
    assert _wait(FakeServer(STALE, _ended(), waiting)).json() == {"__interrupt__": [asked]}


def test_feedback_the_server_added_is_kept() -> None:
    feedback = {"score": "https://example.invalid/feedback"}
    answer = _wait(FakeServer({**STALE, "__feedback__": feedback}, _ended(), _thread(FINAL)))
    assert answer.json() == {**FINAL, "__feedback__": feedback}


def test_the_servers_answer_stands_when_the_thread_is_not_this_runs_end() -> None:
    later = FakeServer(STALE, _ended(), _thread(FINAL, at="2026-01-01T00:00:02Z"))  # another run wrote it since
    assert _wait(later).json() == STALE
    cancelled = FakeServer(STALE, _ended("interrupted"), _thread(FINAL))
    assert _wait(cancelled).json() == STALE
    assert cancelled.reads == [RUN_PATH]
    unreadable = FakeServer(STALE, _ended(), {})  # the thread is not found: 404
    assert _wait(unreadable).json() == STALE


def test_other_answers_and_requests_pass_through_untouched() -> None:
    refused = FakeServer({"detail": "busy"}, _ended(), _thread(FINAL), status=409)
    assert _wait(refused).json() == {"detail": "busy"}
    assert refused.reads == []
    created = FakeServer(STALE, _ended(), _thread(FINAL))
    assert _wait(created, "/threads/t1/runs").json() == STALE
    assert created.reads == []
