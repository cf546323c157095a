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
redirection or glob but `*`), so a task's word cannot change what the shape does. Everything
here is linear in the task's length, which is capped, and the rule's size is bounded whatever
the task holds.
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
#: Names every shape may use: the current directory.
ALWAYS_NAMES = (".",)

_QUOTED_OR_WORD = re.compile(r"'[^']*'|\S+")
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


def task_words(task: str) -> list[str]:
    """The task's own words a slot may take: each plain word (`.txt` also as `*.txt`), first
    come first, without the sentence's punctuation around it."""
    words: dict[str, None] = {}
    for raw in task[:TASK_CHARS].split():
        word = _trimmed(raw)
        if not word or len(word) > MAX_WORD_CHARS or not _PLAIN_WORD.fullmatch(word):
            continue
        words[word] = None
        if _EXTENSION.fullmatch(word):
            words[f"*{word}"] = None
        if len(words) >= MAX_TASK_WORDS:
            break
    return list(words)


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
    no word of `unnamed` (`instruction_words`) fills a name."""
    words = task_words(task)
    # A bare extension names files only as a pattern (`ls *.py`), never as a file of its own.
    names = [word for word in words if word.lower() not in SMALL_WORDS | unnamed
             and not _EXTENSION.fullmatch(word)]
    names += ALWAYS_NAMES
    numbers = [word for word in words if word.isdigit()]
    text_words = [word for word in words if "'" not in word]
    shapes = list(dict.fromkeys(shape(request, command) for request, command in examples))
    rules = [f"command ::= {' | '.join(f'shape{i}' for i in range(len(shapes)))}"]
    for i, parts in enumerate(shapes):
        elements = _elements(parts, numbers, bool(text_words))
        rules.append(f"shape{i} ::= " + ' " " '.join(elements))
    rules.append(f"name ::= {' | '.join(_literals(names))}")
    if any("name-pair" in rule for rule in rules):
        rules.append(f"name-pair ::= {' | '.join(_pairs(names[:MAX_PAIRED_NAMES]))}")
    if numbers:
        rules.append(f"number ::= {' | '.join(_literals(numbers))}")
    if text_words:
        rules.append(f"text ::= \"'\" text-word (\" \" text-word){{0,{MAX_TEXT_WORDS - 1}}} \"'\"")
        rules.append(f"text-word ::= {' | '.join(_literals(text_words))}")
    return rules


def _elements(parts: Sequence[Part], numbers: Sequence[str], has_text: bool) -> list[str]:
    """The shape's grammar elements; two names in a row (`cp -n a b`) are a `name-pair`."""
    elements: list[str] = []
    for i, part in enumerate(parts):
        if part.slot == NAME and i and parts[i - 1].slot == NAME and elements[-1] == NAME:
            elements[-1] = "name-pair"
        else:
            elements.append(_element(part, numbers, has_text))
    return elements


def _pairs(names: Sequence[str]) -> list[str]:
    """Two different names, in the order the task gives them: "copy a.txt to b.txt" is
    `a.txt b.txt`. The model wrote `cp -n a.txt a.txt` when any two were allowed."""
    return [json.dumps(f"{first} {second}") for i, first in enumerate(names) for second in names[i + 1:]]


def _element(part: Part, numbers: Sequence[str], has_text: bool) -> str:
    """A part as a grammar element: its literal, or its slot's rule. A number slot with no number
    in the task keeps the example's (`tail -n 10` for "the last lines"); so does a text slot
    when the task has no word to quote."""
    if part.slot == NAME or (part.slot == NUMBER and numbers) or (part.slot == TEXT and has_text):
        return part.slot
    return json.dumps(part.text)


def _literals(words: Iterable[str]) -> list[str]:
    """GBNF string literals, each word once (json's escapes are GBNF's)."""
    return [json.dumps(word) for word in dict.fromkeys(words)]


def _trimmed(word: str) -> str:
    """A word without the sentence's punctuation around it ("hello.txt," → "hello.txt"); a
    full stop ends a sentence only after a letter, so `.` and `.txt` stay."""
    word = word.strip(_EDGE_PUNCTUATION)
    return word[:-1] if len(word) > 1 and word.endswith(".") and word[-2:-1] != "." else word


def words_of(command: str) -> Sequence[str]:
    """A command's words as shapes split them (quoted texts kept whole)."""
    return _QUOTED_OR_WORD.findall(command)
