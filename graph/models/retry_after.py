"""A server's `Retry-After`, honoured up to a ceiling, and what to say when it is past it.

The openai client waits what `Retry-After` asks (seconds or an HTTP date) when it is at most two
minutes, and past that does not retry at all. bashgraph makes the ceiling a setting
(`ChatSettings.retry_after_max_s`): a wait up to it is honoured, a longer one ends the
request at once, and the error line says when the server will take requests again.

`with_ceiling` changes that one rule of an openai client. How many retries were
made is read from the failed request itself (the client numbers each attempt in its
`x-stainless-retry-count` header), never from the configured maximum.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import math
import time
from collections.abc import Mapping
from typing import Any

import openai

DEFAULT_RETRY_AFTER_MAX_S = 60.0


def retry_after_s(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """The wait a response asks for, in seconds: `retry-after-ms`, else `retry-after` as
    seconds or as an HTTP date; None when it asks for none (or says it in no known form)."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) / divisor
        except ValueError:
            continue
        return value if math.isfinite(value) else None
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp() - (time.time() if now is None else now)


class RetryAfterRule:
    """The openai client's retry rule with bashgraph's ceiling on `Retry-After`, installed on
    one client (`install`): its own rule is asked for everything else."""

    def __init__(self, client: Any, ceiling_s: float) -> None:
        self.ceiling_s = ceiling_s
        self._should_retry = client._should_retry
        self._retry_timeout = client._calculate_retry_timeout

    def install(self, client: Any) -> None:
        # ChatOpenAI builds its clients itself from many options: the one it built is changed in
        # place (its two retry methods), where building another would have to repeat them all.
        client._should_retry = self.should_retry
        client._calculate_retry_timeout = self.retry_timeout
        client.bashgraph_retry_after = self

    def should_retry(self, response: Any) -> bool:
        wait = retry_after_s(response.headers)
        if wait is not None and wait > self.ceiling_s:
            return False  # past the ceiling: the caller is told when to come back
        if wait is not None and wait > 0 and response.headers.get("x-should-retry") is None \
                and (response.status_code == 429 or response.status_code >= 500):
            return True  # the client's own cap (two minutes) no longer applies
        return bool(self._should_retry(response))

    def retry_timeout(self, remaining_retries: int, options: Any, response_headers: Any = None) -> float:
        wait = retry_after_s(response_headers)
        if wait is not None and 0 < wait <= self.ceiling_s:
            return wait
        return float(self._retry_timeout(remaining_retries, options, response_headers))


def with_ceiling(client: Any, ceiling_s: float) -> Any:
    """`client` (an openai client) honouring Retry-After up to `ceiling_s`; changed in place."""
    rule = getattr(client, "bashgraph_retry_after", None)
    if isinstance(rule, RetryAfterRule):
        rule.ceiling_s = ceiling_s
    elif isinstance(client, openai.OpenAI | openai.AsyncOpenAI):
        RetryAfterRule(client, ceiling_s).install(client)
    return client


def retries_made(exc: BaseException) -> int | None:
    """How many retries the client made before `exc`, read from the last request it sent."""
    request = getattr(exc, "request", None)
    headers = getattr(request, "headers", None)
    raw = headers.get("x-stainless-retry-count") if headers is not None else None
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def wait_asked(exc: BaseException) -> float | None:
    """The wait the failed response asked for (Retry-After), in seconds; None if none."""
    response = getattr(exc, "response", None)
    return retry_after_s(getattr(response, "headers", None))


#: Waits told as a time to come back go up to ten years; a server's absurd Retry-After is clamped.
_MAX_TOLD_S = 10 * 365 * 86_400


def resume_advice(wait_s: float, ceiling_s: float | None, now: float | None = None) -> str:
    """`the server asks to wait 300 s, more than …; try again after 19:45:12 UTC`: when to come
    back (with the date when that is a day or more away)."""
    wait = min(max(wait_s, 0.0), _MAX_TOLD_S)
    moment = (time.time() if now is None else now) + wait
    shape = "%H:%M:%S UTC" if wait < 86_400 else "%Y-%m-%d %H:%M:%S UTC"
    until = dt.datetime.fromtimestamp(moment, dt.UTC).strftime(shape)
    asked = f"{math.ceil(wait):d} s" if wait_s <= _MAX_TOLD_S else "more than ten years"
    over = "" if ceiling_s is None or wait_s <= ceiling_s else \
        f", more than the {ceiling_s:g} s bashgraph waits (model_retry_after_max_s)"
    return f"the server asks to wait {asked}{over}; try again after {until}"
