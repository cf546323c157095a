"""The local model's prompt, grammar and reply parsing: pure functions, no llama.cpp.

Kept apart from `local` so they are tested without the model: ChatML built by hand (tool
output unescaped), the GBNF grammar of one JSON reply, context trimming, and reading the reply
back into an AIMessage.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from bashgraph.graph.models.local_shapes import SMALL_WORDS, command_rule, instruction_words
from bashgraph.graph.models.prompts import DEFAULT_SYSTEM_PROMPT, GRAPH_MESSAGE_PREFIXES, SUMMARY_MESSAGE_ID
from bashgraph.tools import NO_OUTPUT, clip

#: Longest answer the grammar lets the model write. Bounding it ends a rambling reply in a
#: parseable shape well before the token cap cuts it mid-string (a command is bounded by its
#: shape: `local_shapes`).
MAX_ANSWER_CHARS = 600

SYSTEM_INSTRUCTIONS = """\
You turn each request into one bash command run in the current directory.
Reply with one line only: {tool}$ <the command>"""

#: Worked examples. The few nearest to the task (`nearest_examples`) are shown to the model as
#: earlier turns of the conversation, the nearest last: a 135M model adapts the example next to
#: the task (another file name, another count) far more reliably than it follows a rule or picks
#: from a long list (measured: docs/benchmarks.md). None is an answer (the answer is built from
#: the real output: `grounded_answer`). The model writes an example's command only as its shape,
#: filled with the task's own words (`local_shapes`), and the model must write one of the nearest
#: shapes whatever the request says ("show notes.txt, do not delete it" came nearest to a delete
#: example, and the file went). So none deletes anything, none overwrites a file (`cp -n`,
#: `mv -n`, writes append), and an example's own file is never touched.
EXAMPLES: tuple[tuple[str, str], ...] = (
    ("how many lines are in report_2019.txt", "wc -l report_2019.txt"),
    ("count the lines of draft_v3.md", "wc -l draft_v3.md"),
    ("count the words in essay_draft.txt", "wc -w essay_draft.txt"),
    ("how many words does letter_v2.txt have", "wc -w letter_v2.txt"),
    ("show the first 5 lines of server_old.log", "head -n 5 server_old.log"),
    ("print the first line of names_2019.csv", "head -n 1 names_2019.csv"),
    ("show the last 10 lines of server_old.log", "tail -n 10 server_old.log"),
    ("print the last line of notes_2019.md", "tail -n 1 notes_2019.md"),
    ("what is in todo_list.txt", "cat todo_list.txt"),
    ("show the contents of config_old.ini", "cat config_old.ini"),
    ("find the lines with TODO in main_v2.c", "grep TODO main_v2.c"),
    ("search for warning in build_old.log", "grep warning build_old.log"),
    ("sort the lines of guests_2019.txt", "sort guests_2019.txt"),
    ("list the files here", "ls -la"),
    ("what files are in this folder", "ls"),
    ("list the .csv files", "ls *.csv"),
    ("show only the .json files", "ls *.json"),
    ("how many files are in the docs_old folder", "ls docs_old | wc -l"),
    ("count the files here", "ls | wc -l"),
    ("create a file memo_new.txt containing buy milk", "echo 'buy milk' >> memo_new.txt"),
    ("write hello world into greeting_new.txt", "echo 'hello world' >> greeting_new.txt"),
    ("append the line done to tasks_new.txt", "echo 'done' >> tasks_new.txt"),
    ("add the word end at the end of list_new.txt", "echo 'end' >> list_new.txt"),
    ("create an empty file called build_new.log", "touch build_new.log"),
    ("make a folder named photos_new", "mkdir -p photos_new"),
    ("create a directory called cache_new", "mkdir -p cache_new"),
    ("copy song_v1.mp3 to song_v2.mp3", "cp -n song_v1.mp3 song_v2.mp3"),
    ("rename draft_old.txt to draft_new.txt", "mv -n draft_old.txt draft_new.txt"),
    ("what time is it", "date"),
    ("show the date and time", "date"),
    ("who am I logged in as", "whoami"),
    ("show my user name", "whoami"),
    ("what is the hostname of this machine", "hostname"),
    ("print the working directory", "pwd"),
    ("which node version is installed", "node --version"),
    ("how much disk space is free", "df -h"),
    ("disk usage of the photos_old folder", "du -sh photos_old"),
)

#: Examples shown per task. Measured on 10 tasks: 2 got 9 right, 1 got 7 (no second shape to fall
#: back on), 4 got 2 of the first 5 (the distractors: `tail` for "the first 3 lines").
EXAMPLES_SHOWN = 2
#: Only this much of the task is compared with the examples (a pasted log can be huge).
MATCHED_TASK_CHARS = 2000
_WORD = re.compile(r"[a-z0-9]+")
#: A bare extension (".txt", "*.py") stands for "files of a kind", whichever the kind.
_EXTENSION = re.compile(r"\*?\.[a-z0-9]+")

ANSWER_ONLY_INSTRUCTIONS = "Reply with one line only: answer: <your answer>"
RETRY_NOTE = "That command failed. Reply with a different command."

REPLY_START = "<|im_start|>assistant\n"
PROMPT_MARK = "$ "
"""After a tool's name, starts a call: `bash$ ls -la`."""
ANSWER_MARK = "answer: "
"""Starts a final answer."""
UNUSABLE_REPLY = "The local model produced an unusable reply (not one tool call or answer): {text}"


class Turn(NamedTuple):
    """One ChatML turn: the role and the exact text the model reads."""

    role: str
    text: str


# ----------------------------------------------------------------------------- grammar


def reply_grammar(tool_names: Sequence[str], *, allow_answer: bool = True, task: str = "") -> str:
    """GBNF for one reply: a call of one of `tool_names` (`bash$ <command>` on one line), or, if
    allowed, a final answer (`answer: <text>`).

    The command is raw text, not a JSON string: inside JSON a small model that wants to write
    `echo "hi"` ends the string at its quote (`echo ` ran), and its escapes go wrong. It is one
    of the shapes of `task`'s nearest examples, its slots filled with the task's words
    (`local_shapes`).
    """
    forms = ["call"] if tool_names else []
    if allow_answer or not tool_names:
        forms.append("answer")
    rules = [f"root ::= {' | '.join(forms)}"]
    if tool_names:
        names = " | ".join(json.dumps(f"{name}{PROMPT_MARK}") for name in tool_names)
        rules.append(f"call ::= ({names}) command")
        rules += command_rule(task, best_examples(task), instruction_words(EXAMPLES))
    # One line as well: allowed line breaks, the model rambled to the cap (minutes of CPU).
    rules.append(f'answer ::= {json.dumps(ANSWER_MARK)} [^\\x00-\\x1f\\x7f]{{1,{MAX_ANSWER_CHARS}}} "\\n"?')
    return "\n".join(rules) + "\n"


# ----------------------------------------------------------------------------- the prompt


def tool_call_text(name: str, command: str) -> str:
    """A tool call as the model writes it (also how earlier calls are shown back to it): like a
    shell prompt, `bash$ ls -la`. Line breaks of a longer command are shown as spaces."""
    return f"{name}{PROMPT_MARK}{' '.join(command.splitlines())}"


def build_turns(
    messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]], *, max_tool_chars: int = 1500
) -> list[Turn]:
    """The conversation as ChatML turns: instructions, the examples nearest to the task (the
    first human message), then the messages.

    Tool results become plain user turns ("Output of `cmd`:"): SmolLM2 has no tool role, and the
    text is kept exactly as rendered (no HTML escaping), only clipped to `max_tool_chars`. A
    failed result asks for a different command. The agent's default system prompt, written for
    large models (background jobs, outcome tags), is left out: to a 135M model it is noise. A
    system prompt of the user's own is kept.
    """
    names = tool_names(tools)
    commands: dict[str, str] = {}
    system: list[str] = []
    turns: list[Turn] = []
    for message in messages:
        text = str(message.text)
        if isinstance(message, SystemMessage) and not turns:
            system += [] if text == DEFAULT_SYSTEM_PROMPT else [text]
        elif isinstance(message, SystemMessage):
            turns.append(Turn("system", text))
        elif isinstance(message, AIMessage):
            turns.append(Turn("assistant", _ai_text(message, commands)))
        elif isinstance(message, ToolMessage):
            turns.append(Turn("user", _result_text(message, commands, max_tool_chars)))
        else:
            turns.append(Turn("user", text))
    if not names:
        return [Turn("system", "\n\n".join([*system, ANSWER_ONLY_INSTRUCTIONS])), *turns]
    instructions = SYSTEM_INSTRUCTIONS.format(tool=names[0])
    task = task_of(messages)
    return [Turn("system", "\n\n".join([*system, instructions])), *example_turns(names[0], task),
            *turns]


def task_of(messages: Sequence[BaseMessage]) -> str:
    """The request the model answers (its head): the newest message a person wrote, not one the
    graph wrote (a re-plan quoting a failed command's output, an escalation's outcome, a
    context summary); "" if there is none."""
    for message in reversed(messages):
        text = str(message.text)
        if (isinstance(message, HumanMessage) and message.id != SUMMARY_MESSAGE_ID
                and not text.startswith(GRAPH_MESSAGE_PREFIXES)):
            return text[:MATCHED_TASK_CHARS]
    return ""


def nearest_examples(task: str, count: int | None = None) -> list[tuple[str, str]]:
    """The `count` (default `EXAMPLES_SHOWN`) examples sharing the most words with `task`, the
    nearest last (ties: the earlier example is nearer). Linear in the task's length, which is
    capped."""
    return [EXAMPLES[i] for i in _ranked(_scores(task))[-(count or EXAMPLES_SHOWN):]]


def best_examples(task: str) -> list[tuple[str, str]]:
    """Of the shown examples, those sharing the most with `task` (all shown if none shares a
    word): the model, given a nearer and a farther shape, took the farther one too often
    (`ls -la` for "list the .txt files", next to `ls *.csv`)."""
    scores = _scores(task)
    top = max(scores)
    return [EXAMPLES[i] for i in _ranked(scores)[-EXAMPLES_SHOWN:] if not top or scores[i] == top]


def _ranked(scores: list[float]) -> list[int]:
    """The examples' indices, nearest last (ties: the earlier example is nearer)."""
    return sorted(range(len(EXAMPLES)), key=lambda i: (scores[i], -i))


def _scores(task: str) -> list[float]:
    """How much each example's request shares with `task`: the weights of the shared words."""
    words = _words(task[:MATCHED_TASK_CHARS])
    weights = _word_weights()
    return [sum(weights[word] for word in words & _words(request)) for request, _command in EXAMPLES]


@functools.cache
def _word_weights() -> dict[str, float]:
    """1 / the number of examples using a word: a rare word ("date", "append") says more about
    the task than a common one ("show", "file")."""
    counts = Counter(word for request, _command in EXAMPLES for word in _words(request))
    return {word: 1 / count for word, count in counts.items()}


def _words(text: str) -> frozenset[str]:
    """The words of `text` that say what to do: names of files (with a dot, an underscore or a
    slash) and small words are left out; a bare extension counts as the word `<extension>`."""
    tokens = text.lower().split()
    kind = {"<extension>"} if any(_EXTENSION.fullmatch(token) for token in tokens) else set()
    kept = (token for token in tokens if not any(c in token for c in "._/"))
    return frozenset(word for token in kept for word in _WORD.findall(token)) - SMALL_WORDS | kind


def example_turns(tool: str, task: str) -> list[Turn]:
    """The examples nearest to `task` as request and reply turns."""
    turns = []
    for request, command in nearest_examples(task):
        turns += [Turn("user", request), Turn("assistant", tool_call_text(tool, command))]
    return turns


def leading_turns(tools: Sequence[dict[str, Any]]) -> int:
    """How many turns come before the conversation's own: the system turn and the examples."""
    return 1 + (2 * EXAMPLES_SHOWN if tool_names(tools) else 0)


def _result_text(message: ToolMessage, commands: dict[str, str], max_tool_chars: int) -> str:
    command = commands.get(message.tool_call_id)
    head = f"Output of `{command}`:" if command else "Tool output:"
    text = f"{head}\n{clip(str(message.text), max_tool_chars)}"
    return text if message.status == "success" else f"{text}\n{RETRY_NOTE}"


def _ai_text(message: AIMessage, commands: dict[str, str]) -> str:
    lines = []
    for call in message.tool_calls:
        command = str(call["args"].get("command", ""))
        commands[call.get("id") or ""] = command
        lines.append(tool_call_text(call["name"], command))
    return "\n".join(lines) or f"{ANSWER_MARK}{message.text}"


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


def fit_turns(turns: list[Turn], count_tokens: Callable[[str], int], budget: int, *,
              leading: int = 1) -> list[Turn]:
    """Drop the oldest middle turns until the turns fit `budget` tokens (of `chatml_turn`s).

    The `leading` turns (the system prompt and the examples: `leading_turns`) and the task after
    them always stay, with a note saying how much was left out; if the rest still does not fit,
    the longest turn is halved until it does.
    """
    head, middle = turns[: leading + 1], turns[leading + 1 :]
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

    `cut` means the token cap stopped the reply: an answer cut short is still kept (marked), a
    command cut short never runs.
    """
    for name in names:
        command = text.removeprefix(f"{name}{PROMPT_MARK}")
        if command != text and command.strip() and "\n" not in command and not cut:
            call_id = f"call_{uuid.uuid4().hex}"
            return AIMessage(content="", tool_calls=[
                {"name": name, "args": {"command": command.strip()}, "id": call_id, "type": "tool_call"}
            ])
    answer = text.removeprefix(ANSWER_MARK).removesuffix("\n")
    answer = "" if "\n" in answer else answer.strip()
    if text.startswith(ANSWER_MARK) and answer:
        return AIMessage(content=f"{answer} [cut at the token cap]" if cut else answer)
    return AIMessage(content=UNUSABLE_REPLY.format(text=clip(text, 300) or "(empty)"))


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


def grounded_answer(messages: Sequence[BaseMessage], *, max_chars: int = 1500) -> str | None:
    """The final answer once a command succeeded: the command and what it printed, verbatim.

    A 135M model that writes its own answer makes one up (it copied a prompt example, or named a
    directory that does not exist); the command's real output cannot be wrong about itself.
    None while the last message is not a success.
    """
    command = previous_success(messages)
    if command is None:
        return None
    output = str(messages[-1].text).strip()
    if not output or output == NO_OUTPUT:
        return f"Ran `{command}`: it succeeded and printed nothing."
    return f"Ran `{command}`. Its output:\n{clip(output, max_chars)}"


def has_result(messages: Sequence[BaseMessage]) -> bool:
    """Whether a command's result is in the conversation (before one, only a call is allowed)."""
    return any(isinstance(message, ToolMessage) for message in messages)
