"""The commands the bundled model may write: its nearest examples' shapes, filled from the task.

Why: left free, a 135M model shown `bash$ whoami` wrote `whoami -user`; shown two `tail`
examples it wrote `ls -l /var/log/...`; it ran on past a command's end (`date -u 1012123…`) and
copied the examples' own file names. Greedy decoding of a model this small does not copy
reliably, but it does choose well among a few given forms. So a command is now one of the
nearest examples' commands, as a shape: the words the example took from its own request (its
file name, its count, its text) are slots, and a slot is filled with a word of the task. Shown
`head -n 5 server_old.log` for "show the first 5 lines of server_old.log", the model may write
`head -n 3 data.csv` for "show the first 3 lines of data.csv", and nothing it was not given.

A word of the task fills a slot only if the shell takes it literally (no quote, `$`, `;`, `&`,
redirection, `~` or glob; the one pattern is an extension's, `*.txt`, and never where two names
go), and a name is never an option (`-rf`), a piece of a quoted phrase, or a path run as a
program. The model must write one of the shapes whatever the request says, so no example's
command deletes or overwrites anything (local_prompt.EXAMPLES). Everything here is linear in the
task's length, which is capped, and the rule's size is bounded whatever the task holds.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

#: Only this much of the task gives words (a pasted log can be huge).
TASK_CHARS = 2000
#: At most this many distinct task words, each at most this long: the grammar stays small.
MAX_TASK_WORDS = 48
MAX_WORD_CHARS = 64
#: At most this many names form the pairs of a two-name shape (their count grows as its square).
MAX_PAIRED_NAMES = 12
#: At most this many words in a quoted text.
MAX_TEXT_WORDS = 8
#: Small words that never name a file, a program or a pattern.
SMALL_WORDS = frozenset({
    "a", "an", "the", "of", "in", "on", "to", "is", "are", "do", "does", "i", "me", "my", "it",
    "this", "that", "here", "for", "with", "and", "named", "called", "have", "has",
})
#: The slots a shape may have; each is a rule of the grammar.
NAME, NUMBER, TEXT = "name", "number", "text"
#: A name as a shape's first word, and two names in a row.
PROGRAM, PAIR = "program", "name-pair"
#: Names every shape may use: the current directory.
ALWAYS_NAMES = (".",)

_QUOTED_OR_WORD = re.compile(r"'[^']*'|\S+")
_TASK_WORD = re.compile(r"'[^']*'|\"[^\"]*\"|\S+")
_PROGRAM = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*")
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_.,:@%+=/~*-]+")
_EXTENSION = re.compile(r"\.[A-Za-z0-9]+")
_EDGE_PUNCTUATION = ",;:!?\"'`()"


class Part(NamedTuple):
    """One word of a shape: a literal word of the example's command, or a slot."""

    text: str
    slot: str | None = None


def shape(request: str, command: str) -> tuple[Part, ...]:
    """`command` with the words it took from `request` made slots: a number, a quoted text, or
    a name (a file, a folder, a pattern, a program the request names)."""
    asked = request.lower()
    asked_words = {_trimmed(word) for word in asked.split()}
    parts = []
    for word in _QUOTED_OR_WORD.findall(command):
        lowered = word.lower()
        if len(word) > 1 and word[0] == word[-1] == "'" and lowered[1:-1] in asked:
            parts.append(Part(word, TEXT))
        elif lowered in asked_words and word.isdigit():
            parts.append(Part(word, NUMBER))
        elif lowered in asked_words or lowered.lstrip("*") in asked_words:
            parts.append(Part(word, NAME))
        else:
            parts.append(Part(word))
    return tuple(parts)


class TaskWords(NamedTuple):
    """What a task offers the slots: names (files, folders, patterns, programs), numbers, and the
    words a quoted text may hold."""

    names: list[str]
    numbers: list[str]
    text: list[str]


def task_words(task: str, unnamed: frozenset[str] = frozenset()) -> TaskWords:
    """The task's own words, first come first, without the sentence's punctuation around them.

    A name is a plain word that names something: not a small or an instruction word (`unnamed`),
    not an option (`-rf`), no `~` and no glob but the pattern of an extension (`.txt` gives
    `*.txt`), and not a piece of a quoted phrase ("delete 'my notes.txt'" names no `notes.txt`).
    A quoted text may hold any plain word.
    """
    names: dict[str, None] = {}
    text: dict[str, None] = {}
    for raw in _TASK_WORD.findall(task[:TASK_CHARS]):
        phrase = len(raw) > 2 and raw[0] == raw[-1] and raw[0] in "'\"" and " " in raw.strip(raw[0])
        for word in map(_trimmed, raw.split()):
            if not word or len(word) > MAX_WORD_CHARS or not _PLAIN_WORD.fullmatch(word):
                continue
            text[word] = None
            if _EXTENSION.fullmatch(word):
                names[f"*{word}"] = None
            elif not phrase and _names_something(word, unnamed):
                names[word] = None
        if len(text) >= MAX_TASK_WORDS:
            break
    numbers = [word for word in text if word.isdigit()]
    return TaskWords([*list(names)[:MAX_TASK_WORDS], *ALWAYS_NAMES], numbers, list(text)[:MAX_TASK_WORDS])


def _names_something(word: str, unnamed: frozenset[str]) -> bool:
    return (word.lower() not in SMALL_WORDS | unnamed and not word.startswith("-")
            and "~" not in word and "*" not in word)


@functools.cache
def instruction_words(examples: tuple[tuple[str, str], ...]) -> frozenset[str]:
    """Words the examples' requests use to say what to do ("count", "lines", "directory"), as
    opposed to what they name: never a name for a slot. Shown `ls docs_old | wc -l`, the model
    filled "how many files are in this directory" as `ls directory | wc -l`."""
    said = {_trimmed(word) for request, _command in examples for word in request.lower().split()}
    named = {word.strip("'*") for request, command in examples
             for part in shape(request, command) if part.slot for word in part.text.lower().split()}
    return frozenset(said - named)


def command_rule(task: str, examples: Sequence[tuple[str, str]],
                 unnamed: frozenset[str] = frozenset()) -> list[str]:
    """GBNF rules defining `command`: one of `examples`' shapes, its slots filled from `task`;
    no word of `unnamed` (`instruction_words`) fills a name. A shape the task cannot fill (two
    names, one given) is left out; when none is left, the command is `ls` (it reads nothing and
    changes nothing)."""
    words = task_words(task, unnamed)
    slots = {
        NAME: words.names,
        PROGRAM: [name for name in words.names if _PROGRAM.fullmatch(name)],
        PAIR: _pairs([name for name in words.names if "*" not in name][:MAX_PAIRED_NAMES]),
        NUMBER: words.numbers,
        TEXT: words.text,
    }
    shapes = [elements for elements in dict.fromkeys(
        tuple(_elements(shape(request, command), slots)) for request, command in examples)
        if all(slots.get(element, True) for element in elements)]
    if not shapes:
        return ['command ::= "ls"']
    rules = [f"command ::= {' | '.join(f'shape{i}' for i in range(len(shapes)))}"]
    rules += [f"shape{i} ::= " + ' " " '.join(elements) for i, elements in enumerate(shapes)]
    used = {element for elements in shapes for element in elements}
    for slot in (NAME, PROGRAM, PAIR, NUMBER):
        if slot in used:
            rules.append(f"{slot} ::= {' | '.join(_literals(slots[slot]))}")
    if TEXT in used:
        rules.append(f"{TEXT} ::= \"'\" text-word (\" \" text-word){{0,{MAX_TEXT_WORDS - 1}}} \"'\"")
        rules.append(f"text-word ::= {' | '.join(_literals(slots[TEXT]))}")
    return rules


def _elements(parts: Sequence[Part], slots: dict[str, list[str]]) -> list[str]:
    """The shape's grammar elements: literals and slot names. The first word, when a slot, takes
    a program's name (never a path: `./deploy.sh --version` would run the script); two names in a
    row (`cp -n a b`) are a pair. A number or text slot the task has nothing for keeps the
    example's word (`tail -n 10` for "the last lines")."""
    elements: list[str] = []
    for i, part in enumerate(parts):
        if part.slot == NAME and i == 0:
            elements.append(PROGRAM)
        elif part.slot == NAME and elements and elements[-1] == NAME:
            elements[-1] = PAIR
        elif part.slot == NAME or (part.slot in (NUMBER, TEXT) and slots[part.slot]):
            elements.append(part.slot)
        else:
            elements.append(json.dumps(part.text))
    return elements


def _pairs(names: Sequence[str]) -> list[str]:
    """Two different names, in the order the task gives them: "copy a.txt to b.txt" is
    `a.txt b.txt`. The model wrote `cp -n a.txt a.txt` when any two were allowed."""
    return [f"{first} {second}" for i, first in enumerate(names) for second in names[i + 1:]]


def _literals(words: Iterable[str]) -> list[str]:
    """GBNF string literals, each word once (json's escapes are GBNF's)."""
    return [json.dumps(word) for word in dict.fromkeys(words)]


def _trimmed(word: str) -> str:
    """A word without the sentence's punctuation around it ("hello.txt," → "hello.txt"); a
    full stop ends a sentence only after a letter, so `.` and `.txt` stay."""
    word = word.strip(_EDGE_PUNCTUATION)
    return word[:-1] if len(word) > 1 and word.endswith(".") and word[-2:-1] != "." else word
