"""A chat model made when it is first called: what `build_graph(model=None)` binds.

A graph that is only looked at — a thread's state or history, a fork, a drawing — never calls its
model, so it should not need one: no endpoint, no key, no weights loaded. With `model=None` the
graph holds this stand-in; its first call makes the model the `AgentConfig` names
(`make_chat_model`, reading the environment then: the same choice and the same one-line
ConfigError as `bashgraph run`), binds the tools, and keeps it for every later call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable, RunnableConfig

if TYPE_CHECKING:  # a type only: the settings come from the core above, which builds the models
    from bashgraph.graph.config import AgentConfig

BoundModel = Runnable[LanguageModelInput, AIMessage]


def model_settings(config: AgentConfig) -> tuple[object, ...]:
    """The fields of `config` that decide which model `make_chat_model` makes, and how."""
    return (config.chat.model, config.chat.base_url, config.chat.request_timeout_s, config.chat.max_retries,
            config.chat.streaming, config.chat.retry_after_max_s)


class LazyModel:
    """The chat model `config` names, made on first use, once however many callers race.

    One can serve several graphs built from configs that name the same model (a session and
    the ones `with_config` makes from it): the client is made, or the local weights loaded,
    once for all of them.
    """

    def __init__(self, config: AgentConfig) -> None:
        self.settings = model_settings(config)
        self._config = config
        self._model: BaseChatModel | None = None
        self._lock = threading.Lock()

    def serves(self, config: AgentConfig) -> bool:
        """Whether `config` names the model this one makes."""
        return model_settings(config) == self.settings

    def get(self) -> BaseChatModel:
        with self._lock:
            if self._model is None:
                # Imported here: the client (or the local model's weights) only when a call needs it.
                from bashgraph.graph.models.factory import make_chat_model

                self._model = make_chat_model(self._config)
            return self._model


class DeferredChatModel(Runnable[LanguageModelInput, AIMessage]):
    """Stands for the model `config` names, with `tools` bound, until it is first called.

    `lazy`: where the model comes from, when it serves `config` (else a LazyModel of its own).
    """

    def __init__(self, config: AgentConfig, tools: Sequence[Any], lazy: LazyModel | None = None) -> None:
        self.config = config
        self.tools = list(tools)
        self.lazy = lazy if lazy is not None and lazy.serves(config) else LazyModel(config)
        self._bound: BoundModel | None = None
        self._lock = threading.Lock()

    def bound(self) -> BoundModel:
        """The model with its tools, made on the first call (once, however many calls race)."""
        with self._lock:
            if self._bound is None:
                self._bound = self.lazy.get().bind_tools(self.tools)
            return self._bound

    def invoke(self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any) -> AIMessage:
        return self.bound().invoke(input, config, **kwargs)

    async def ainvoke(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AIMessage:
        # Made in a thread: importing the client or loading local weights takes seconds, which
        # would stall every other run on the event loop.
        bound = self._bound
        if bound is None:
            bound = await asyncio.to_thread(self.bound)
        return await bound.ainvoke(input, config, **kwargs)
