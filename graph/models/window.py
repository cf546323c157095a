"""What a model server says about its context window: asked up front, or read from its refusal.

* Asked: vLLM lists `max_model_len` for each model in `GET /v1/models`; llama.cpp's server gives
  `n_ctx` in `GET /props` (`default_generation_settings`), and its `/v1/models` names the model's
  trained length in `meta.n_ctx_train` (used only when `/props` says nothing).
* Read from a refusal: an HTTP 400 saying the request is longer than the context, in the
  shapes of OpenAI ("This model's maximum context length is 16385 tokens. However, your
  messages resulted in …", code `context_length_exceeded`), vLLM (the same sentence), and
  llama.cpp (type `exceed_context_size_error` with `n_ctx`; "request (4476 tokens) exceeds the
  available context size (4096 tokens)"; or "the request exceeds the available context size").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

#: One look-up per graph, on the first model call: a slow server must not stall the run long.
ASK_TIMEOUT_S = 5.0

_MAXIMUM = re.compile(r"maximum context length (?:is|of) (\d+)", re.IGNORECASE)
_AVAILABLE = re.compile(r"available context size \((\d+) tokens\)", re.IGNORECASE)
_WINDOW_OF = re.compile(r"context (?:window|length) of (\d+)", re.IGNORECASE)
_OVERFLOW_WORDS = (
    "maximum context length", "context_length_exceeded", "exceed_context_size_error",
    "exceeds the available context size", "context length exceeded", "exceed context window",
    "exceeds the context window", "input exceeds the context window", "prompt is too long",
)


class ContextOverflow(Exception):
    """The server refused a request as longer than its context window (`window`: as it said)."""

    def __init__(self, message: str, window: int | None) -> None:
        super().__init__(message)
        self.window = window


def overflow_of(exc: BaseException) -> ContextOverflow | None:
    """`exc` read as a context-length refusal, or None when it is something else."""
    if isinstance(exc, ContextOverflow):
        return exc
    import openai  # here: a graph that is only inspected or forked never imports the client

    if not isinstance(exc, openai.BadRequestError | openai.UnprocessableEntityError):
        return None
    body: Any = exc.body
    error = body.get("error", body) if isinstance(body, dict) else {}
    fields = error if isinstance(error, dict) else {}
    text = " ".join(str(part) for part in (exc.message, fields.get("message"), fields.get("code"),
                                           fields.get("type")) if part)
    if not any(words in text.lower() for words in _OVERFLOW_WORDS):
        return None
    return ContextOverflow(text[:300], _window_named(text, fields))


def _window_named(text: str, fields: dict[str, Any]) -> int | None:
    n_ctx = fields.get("n_ctx")
    if isinstance(n_ctx, int) and n_ctx > 0:
        return n_ctx
    for pattern in (_MAXIMUM, _AVAILABLE, _WINDOW_OF):
        if found := pattern.search(text):
            return int(found.group(1))
    return None


def ask_window(base_url: str, model: str | None, api_key: str | None = None) -> int | None:
    """The window the server at `base_url` (…/v1) reports for `model`; None when it says none.

    Blocking (HTTP): call it off the event loop. Any failure is "no answer": the budget then
    falls back to the setting's default, and a refusal still teaches the real window."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        with httpx.Client(timeout=ASK_TIMEOUT_S, headers=headers) as client:
            listed = _from_models(_get(client, base_url.rstrip("/") + "/models"), model)
            props = _from_props(_get(client, root + "/props"))
    except (httpx.HTTPError, ValueError):
        return None
    return props or listed


def _get(client: httpx.Client, url: str) -> Any:
    response = client.get(url)
    return response.json() if response.status_code == 200 else None


def _from_models(body: Any, model: str | None) -> int | None:
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        return None
    chosen = [e for e in entries if isinstance(e, dict) and (model is None or e.get("id") == model)]
    for entry in chosen or [e for e in entries if isinstance(e, dict)][:1]:
        for value in (entry.get("max_model_len"), (entry.get("meta") or {}).get("n_ctx_train")):
            if isinstance(value, int) and value > 0:
                return value
    return None


def _from_props(body: Any) -> int | None:
    settings = body.get("default_generation_settings") if isinstance(body, dict) else None
    value = (settings or {}).get("n_ctx") if isinstance(settings, dict) else None
    return value if isinstance(value, int) and value > 0 else None
