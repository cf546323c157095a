"""The local model's prompt, grammar and reply parsing: pure functions, no llama.cpp.

Kept apart from `local` so they are tested without the model: ChatML built by hand (tool
output unescaped), the GBNF grammar of one JSON reply, context trimming, and reading the reply
back into an AIMessage.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from bashgraph.tools.results import clip

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
    """The tools the reply format can call; the others (the background-job tools, which take a
    `job_id`) are named as unavailable, since the system prompt may mention them."""
    lines, callable_names, others = [], tool_names(tools), []
    for tool in tools:
        function = tool.get("function", {})
        if function.get("name") not in callable_names:
            others.append(str(function.get("name")))
            continue
        description = str(function.get("description", "")).strip().split("\n")[0]
        lines.append(f"Tool `{function.get('name')}`: {clip(description, 200)}")
    if others:
        lines.append(f"Not available in this reply format: {', '.join(others)} and background "
                     "jobs; run every command in the foreground.")
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
