"""bashgraph.graph.models: the chat models — the factory for any OpenAI-compatible server, and the
bundled local model with its prompt and reply parsing.

Every public name is imported on first use (module `__getattr__`): the factory imports the
OpenAI client, which the `bashgraph` command's quick paths do not need.
"""

from typing import TYPE_CHECKING

from bashgraph.tools.lazy_exports import lazy_exports

__all__ = [
    "DEFAULT_MODEL",
    "LOCAL_MODEL",
    "CompatibleChatOpenAI",
    "LocalChatModel",
    "as_model_error",
    "choose_model_name",
    "describe_model_error",
    "make_chat_model",
    "model_notice",
]

if TYPE_CHECKING:
    from bashgraph.graph.models.factory import (
        DEFAULT_MODEL,
        LOCAL_MODEL,
        as_model_error,
        choose_model_name,
        describe_model_error,
        make_chat_model,
        model_notice,
    )
    from bashgraph.graph.models.local import LocalChatModel
    from bashgraph.graph.models.openai_compat import CompatibleChatOpenAI

#: Where each public name lives.
_HOMES = {
    **dict.fromkeys(__all__, "factory"),
    "CompatibleChatOpenAI": "openai_compat",
    "LocalChatModel": "local",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__, globals())
