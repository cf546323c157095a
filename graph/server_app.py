"""The LangGraph server's `http.app` (langgraph.json): `runs.wait` and `runs.join` answer the
run's final state, also when another worker ran it.

The server builds those answers from the run's stream: the last `values` event the joining
worker received. With more than one worker the events of a run executed elsewhere arrive
through Redis, and langgraph-runtime-pg's join also ends when a status poll (after 0.5 s
without an event) finds the run finished, without reading what is still on its way; the
answer is then the state before the last step (langgraph-runtime-pg 0.11.1.post1, ops.py
`_stream_run_queue`). The run's status and the thread's values are written in one
transaction (`Threads.set_joint_status`), so once the join has ended the thread holds the
run's final state: this middleware answers from it — what the server itself answers when no
`values` event arrived, cut to the graph's output (`PublicState`, what `values` events carry)
— whenever the thread was last written by this very run.

The lifespan goes straight to the router: with an `http.app`, langgraph-api 0.11 adds a
middleware (EnsureStoreAccessible) that asks for the store on every message, the lifespan's
too, and runtime-pg has no store before its lifespan has started: the server would never start.

Everything else passes through untouched, and any doubt (another run wrote the thread since,
the run did not end in `success` or `error`, a read failed) keeps the server's answer.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware

from bashgraph.graph.state import PublicState

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

logger = logging.getLogger(__name__)

#: POST /threads/{id}/runs/wait and GET /threads/{id}/runs/{id}/join.
_WAIT = re.compile(r"/threads/[^/]+/runs/(?:wait|[^/]+/join)$")
#: The answer's Content-Location names the run: /threads/{thread_id}/runs/{run_id}.
_RUN = re.compile(r"/threads/([^/]+)/runs/([^/]+)$")
#: Request headers not copied to the reads (they describe the request's own body).
_BODY_HEADERS = {"content-length", "content-type", "transfer-encoding", "expect", "connection"}
#: Run statuses whose end is written to the thread with the run (the server's fallback reads them).
_WRITTEN_WITH_THREAD = ("success", "error")
#: The keys of the graph's output schema: a `values` event carries these, the thread all channels.
_OUTPUT_KEYS = PublicState.__required_keys__ | PublicState.__optional_keys__


@dataclass
class _Held:
    """What the server answers: kept back until its end, when the run is over."""

    run_path: str | None = None  # /threads/{t}/runs/{r} when the answer is a run's result
    chunks: list[bytes] = field(default_factory=list)


class FinalStateOnWait:
    """ASGI middleware: the answer of a wait or join is the thread's state at the run's end."""

    def __init__(self, app: ASGIApp, lifespan: ASGIApp | None = None) -> None:
        self.app, self.lifespan = app, lifespan
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and self.lifespan is not None:
            await self.lifespan(scope, receive, send)
            return
        found = _WAIT.search(str(scope.get("path", ""))) if scope["type"] == "http" else None
        if found is None:
            await self.app(scope, receive, send)
            return
        prefix = str(scope["path"])[: found.start()]
        held = _Held()

        async def hold_result(message: Message) -> None:
            if message["type"] == "http.response.start":
                held.run_path = _run_path(message)
            elif message["type"] == "http.response.body" and held.run_path is not None:
                body = bytes(message.get("body", b""))
                if body.strip():
                    held.chunks.append(body)  # the result; whitespace alone keeps the line open
                    body = b""
                if not message.get("more_body", False):
                    body += await self._final(scope, prefix, held.run_path, b"".join(held.chunks))
                message = {**message, "body": body}
            await send(message)

        await self.app(scope, receive, hold_result)

    async def _final(self, scope: Scope, prefix: str, run_path: str, server_answer: bytes) -> bytes:
        try:
            state = await self._thread_answer(scope, prefix + run_path)
        except Exception:  # a read that failed: the server's answer, as without this middleware
            logger.warning("could not read the thread after %s; the server's answer stands", run_path,
                           exc_info=True)
            return server_answer
        if state is None:
            return server_answer
        try:
            answered = json.loads(server_answer)
        except ValueError:
            return server_answer
        if isinstance(answered, dict) and "__feedback__" in answered:
            state["__feedback__"] = answered["__feedback__"]
        if answered == state:
            return server_answer
        logger.warning("%s: the server's answer was not the run's final state (an event still on its "
                       "way from another worker); answered from the thread", run_path)
        return json.dumps(state).encode()

    async def _thread_answer(self, scope: Scope, run_path: str) -> dict[str, Any] | None:
        """What the server's own fallback answers from the thread, when the thread was last
        written by this run's end (the run's `updated_at` and the thread's `state_updated_at`
        come from one timestamp); None otherwise."""
        client = self._reader(str(scope.get("root_path", "")))
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])
                   if k.decode("latin-1").lower() not in _BODY_HEADERS}
        run = (await client.get(run_path, headers=headers)).raise_for_status().json()
        if run.get("status") not in _WRITTEN_WITH_THREAD:
            return None
        thread_path = run_path.rsplit("/runs/", 1)[0]
        thread = (await client.get(thread_path, headers=headers)).raise_for_status().json()
        if not run.get("updated_at") or thread.get("state_updated_at") != run["updated_at"]:
            return None
        return thread_result(thread)

    def _reader(self, root_path: str) -> httpx.AsyncClient:
        """Reads go straight to the app behind this middleware, with the caller's headers (so
        its authentication applies), not over the network."""
        if self._client is None:
            transport = httpx.ASGITransport(app=self.app, root_path=root_path)
            self._client = httpx.AsyncClient(transport=transport, base_url="http://bashgraph-server-app",
                                             timeout=60)
        return self._client


def _run_path(start: Message) -> str | None:
    """The run an answer is the result of (from its Content-Location), if it succeeded."""
    if start.get("status") != 200:
        return None
    for name, value in start.get("headers", []):
        if bytes(name).lower() == b"content-location":
            found = _RUN.search(bytes(value).decode("latin-1"))
            return found.group(0) if found else None
    return None


def thread_result(thread: dict[str, Any]) -> dict[str, Any]:
    """A wait's result from a thread, as the server builds it without a `values` event: its
    error, its interrupts, else its values (those of the graph's output, as in a `values` event)."""
    status = thread.get("status")
    if status == "error":
        error = thread.get("error")
        return {"__error__": json.loads(error) if isinstance(error, str) else error}
    if status == "interrupted":
        interrupts = [one for listed in (thread.get("interrupts") or {}).values()
                      if isinstance(listed, list) for one in listed]
        if interrupts:
            return {"__interrupt__": interrupts}
    values = thread.get("values")
    return {k: v for k, v in values.items() if k in _OUTPUT_KEYS} if isinstance(values, dict) else {}


async def _router(scope: Scope, receive: Receive, send: Send) -> None:
    """The server's router: the server merges its routes and its lifespan into `app`."""
    await app.router(scope, receive, send)


#: Loaded by the server from langgraph.json (`"http": {"app": ...}`): no routes of its own.
app = Starlette(middleware=[Middleware(FinalStateOnWait, lifespan=_router)])
