"""Rate limits: `Retry-After` honoured up to a ceiling; past it, the request stops at once and
the error says when to try again, counting only the retries that were made.

Before, a 429 with `Retry-After: 300` was not retried at all (the openai client's own limit is
two minutes), yet the error said "after 2 retries" and not how long to wait.
"""

from __future__ import annotations

import email.utils
import re
import time
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from bashgraph.graph import AgentConfig
from bashgraph.graph.models.factory import describe_model_error, make_chat_model
from bashgraph.graph.models.openai_compat import CompatibleChatOpenAI
from bashgraph.graph.models.retry_after import retry_after_s
from tests.support.openai_script import ErrorReply, error_body
from tests.support.openai_server import (
    FakeOpenAIServer,
    http_error,
    openai_server_fixture,  # noqa: F401 (registers the fixture)
    rate_limited,
    text,
)


def limited(retry_after: str) -> ErrorReply:
    return ErrorReply(429, error_body("Rate limit reached.", "requests", "rate_limit_exceeded"),
                      {"retry-after": retry_after})


def failure(server: FakeOpenAIServer, **settings: Any) -> str:
    config = AgentConfig(model=server.model, base_url=server.base_url, **settings)
    try:
        make_chat_model(config, environ={}).invoke("hi")
    except Exception as exc:
        return describe_model_error(exc, base_url=server.base_url,
                                    retry_after_max_s=config.chat.retry_after_max_s)
    raise AssertionError("the call succeeded")


def resume_time(line: str) -> float:
    """The moment `try again after HH:MM:SS UTC` names, as a timestamp near now."""
    match = re.search(r"try again after (\d\d):(\d\d):(\d\d) UTC", line)
    assert match, line
    hours, minutes, seconds = (int(part) for part in match.groups())
    now = time.gmtime()
    named = time.mktime((*now[:3], hours, minutes, seconds, 0, 0, 0)) - time.mktime(time.gmtime(0))
    return named if named > time.time() - 43_200 else named + 86_400


@pytest.mark.parametrize("header", ["300", "date"])
def test_a_wait_past_the_ceiling_stops_at_once_and_says_when(openai_server: FakeOpenAIServer, header: str) -> None:
    """Retry-After 300 s (as seconds, or as an HTTP date) over a 60 s ceiling: one request only,
    no retry claimed, and the time to try again."""
    value = email.utils.formatdate(time.time() + 300, usegmt=True) if header == "date" else "300"
    openai_server.add(limited(value))
    line = failure(openai_server, model_max_retries=2, model_retry_after_max_s=60)
    assert len(openai_server.chat_requests) == 1
    assert "is rate limiting (HTTP 429): Rate limit reached." in line
    assert "retr" not in line.split(" — ")[0]  # no "after 2 retries": none was made
    assert "more than the 60 s bashgraph waits (model_retry_after_max_s)" in line
    assert abs(resume_time(line) - (time.time() + 300)) < 5


def test_a_wait_within_the_ceiling_is_honoured(openai_server: FakeOpenAIServer) -> None:
    """Retry-After 0.05 s under the ceiling: the client waits it and retries."""
    openai_server.add(limited("0.05"), text("after the wait"))
    config = AgentConfig(model=openai_server.model, base_url=openai_server.base_url, model_max_retries=1)
    assert make_chat_model(config, environ={}).invoke("hi").content == "after the wait"


def test_retries_counted_are_the_retries_made(openai_server: FakeOpenAIServer) -> None:
    """Two 429s with max_retries=1: "after 1 retry", read from the failed request."""
    openai_server.add(rate_limited(), rate_limited())
    line = failure(openai_server, model_max_retries=1)
    assert "is still rate limiting (HTTP 429) after 1 retry" in line


def test_the_ceiling_may_be_above_the_clients_own_limit() -> None:
    """The openai client never waits more than 120 s; the ceiling decides instead (no sleep here:
    the client's own rule is asked)."""
    model = CompatibleChatOpenAI(model="m", base_url="http://127.0.0.1:9/v1", api_key=SecretStr("k"),
                                 retry_after_max_s=200)
    for client in (model.root_client, model.root_async_client):
        response = httpx.Response(429, headers={"retry-after": "150"})
        assert client._should_retry(response) is True
        assert client._calculate_retry_timeout(1, None, response.headers) == 150
        assert client._should_retry(httpx.Response(429, headers={"retry-after": "250"})) is False


def test_the_ceiling_is_a_setting() -> None:
    assert AgentConfig().chat.retry_after_max_s == 60
    assert AgentConfig.from_env({"BASHGRAPH_MODEL_RETRY_AFTER_MAX_S": "5"}).chat.retry_after_max_s == 5


@pytest.mark.parametrize(("headers", "expected"), [
    ({"retry-after": "7"}, 7.0),
    ({"retry-after": "0.25"}, 0.25),
    ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
    ({"retry-after": "Fri, 04 Dec 2026 19:45:00 GMT"}, 300.0),
    ({"retry-after": "soon"}, None),
    ({}, None),
])
def test_retry_after_forms(headers: dict[str, str], expected: float | None) -> None:
    now = email.utils.parsedate_to_datetime("Fri, 04 Dec 2026 19:40:00 GMT").timestamp()
    assert retry_after_s(headers, now=now) == expected


def test_server_errors_keep_their_own_rule(openai_server: FakeOpenAIServer) -> None:
    """A 500 without Retry-After is retried as the client always did."""
    openai_server.add(http_error(500, "boom", error_type="server_error"), text("fine"))
    config = AgentConfig(model=openai_server.model, base_url=openai_server.base_url, model_max_retries=1)
    assert make_chat_model(config, environ={}).invoke("hi").content == "fine"


def test_an_absurd_wait_is_told_without_failing() -> None:
    """A hostile Retry-After (1e300 s, or a day away) still gives one line with a date."""
    from bashgraph.graph.models.retry_after import resume_advice

    now = email.utils.parsedate_to_datetime("Fri, 04 Dec 2026 19:40:00 GMT").timestamp()
    assert resume_advice(1e300, 60, now=now).startswith("the server asks to wait more than ten years, more than ")
    assert resume_advice(90_000, 60, now=now).endswith("try again after 2026-12-05 20:40:00 UTC")
    assert resume_advice(300, 60, now=now).endswith("try again after 19:45:00 UTC")
