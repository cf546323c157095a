"""Choosing and building the chat model: the automatic local rule, ChatOpenAI settings, the local extra."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_openai import ChatOpenAI

from bashgraph.graph.config import AgentConfig
from bashgraph.graph.errors import ConfigError
from bashgraph.graph.models.factory import (
    DEFAULT_MODEL,
    LOCAL_EXTRA_HINT,
    LOCAL_MODEL,
    PLACEHOLDER_API_KEY,
    choose_model_name,
    make_chat_model,
    model_notice,
)
from tests.support.openai_server import (
    FakeOpenAIServer,
    openai_server_fixture,  # noqa: F401 (registers the `openai_server` fixture)
    server_error,
    text,
)

# ----------------------------------------------------------------------------- choosing a model


@pytest.mark.parametrize(("config", "environ", "expected"), [
    (AgentConfig(), {}, LOCAL_MODEL),
    (AgentConfig(), {"OPENAI_API_KEY": "sk"}, DEFAULT_MODEL),
    (AgentConfig(), {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}, DEFAULT_MODEL),
    (AgentConfig(base_url="http://127.0.0.1:1/v1"), {}, DEFAULT_MODEL),
    (AgentConfig(), {"BASHGRAPH_MODEL": "qwen"}, "qwen"),
    (AgentConfig(model="gpt-x"), {"BASHGRAPH_MODEL": "qwen"}, "gpt-x"),
    (AgentConfig(model="local"), {"OPENAI_API_KEY": "sk"}, LOCAL_MODEL),
], ids=["nothing", "key", "env-url", "config-url", "env-model", "config-model", "forced-local"])
def test_choose_model_name(config: AgentConfig, environ: dict[str, str], expected: str) -> None:
    """The local model is chosen only when no endpoint or key is configured, or when asked."""
    assert choose_model_name(config, environ) == expected


def test_notice_only_when_local_is_chosen_automatically() -> None:
    """The one-line notice appears for the automatic choice, not for an explicit one."""
    notice = model_notice(AgentConfig(), {})
    assert notice is not None
    assert "\n" not in notice
    assert "OPENAI_BASE_URL" in notice
    assert model_notice(AgentConfig(model="local"), {}) is None
    assert model_notice(AgentConfig(), {"OPENAI_API_KEY": "sk"}) is None


def test_made_model_talks_to_the_configured_server(openai_server: FakeOpenAIServer) -> None:
    """make_chat_model applies base_url, model, timeout and retries; with no key set it sends the
    fixed key `not-needed` (PLACEHOLDER_API_KEY), which keyless local servers accept."""
    openai_server.add(server_error(502, retry_after=0.01), text("hi there"))
    config = AgentConfig(model="my-model", base_url=openai_server.base_url,
                         request_timeout_s=7.0, model_max_retries=1)
    model = make_chat_model(config, environ={})
    assert isinstance(model, ChatOpenAI)
    assert model.request_timeout == 7.0
    assert model.invoke("hi").content == "hi there"
    request = openai_server.chat_requests[-1]
    assert request.model == "my-model"
    assert request.headers["authorization"] == f"Bearer {PLACEHOLDER_API_KEY}"


def test_made_model_sends_the_key_from_the_environment(openai_server: FakeOpenAIServer) -> None:
    """OPENAI_BASE_URL and OPENAI_API_KEY from `environ` are used when the config has none."""
    openai_server.add(text("ok"))
    environ = {"OPENAI_BASE_URL": openai_server.base_url, "OPENAI_API_KEY": "sk-env"}
    make_chat_model(AgentConfig(), environ=environ).invoke("hi")
    request = openai_server.chat_requests[0]
    assert request.headers["authorization"] == "Bearer sk-env"
    assert request.model == DEFAULT_MODEL


def test_named_model_without_endpoint_or_key_is_a_config_error() -> None:
    """Asking for a remote model with no key and no URL fails before any request."""
    with pytest.raises(ConfigError, match="needs OPENAI_API_KEY"):
        make_chat_model(AgentConfig(model="gpt-x"), environ={})


def fake_local_module(create: Any) -> types.ModuleType:
    module = types.ModuleType("bashgraph.graph.models.local")
    module.create_local_model = create  # type: ignore[attr-defined]
    return module


def test_local_model_is_created_by_the_local_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """`local` returns whatever bashgraph.graph.models.local.create_local_model builds."""
    local = FakeListChatModel(responses=["hi"])
    monkeypatch.setitem(sys.modules, "bashgraph.graph.models.local",
                        fake_local_module(lambda: local))
    model: BaseChatModel = make_chat_model(AgentConfig(), environ={})
    assert model is local


def test_missing_local_extra_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """When llama_cpp cannot be imported, the error says which extra to install."""
    def create() -> BaseChatModel:
        import llama_cpp  # None in sys.modules below: raises ModuleNotFoundError

        raise AssertionError(llama_cpp)

    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    monkeypatch.setitem(sys.modules, "bashgraph.graph.models.local", fake_local_module(create))
    with pytest.raises(ConfigError, match=r"pip install 'bashgraph\[local\]'"):
        make_chat_model(AgentConfig(model="local"), environ={})
    assert LOCAL_EXTRA_HINT.startswith("the local model needs")
