"""The commands the bundled model may write (no model loaded, but for the grammar's compile
check): the nearest examples' shapes, their slots filled with the task's plain words."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bashgraph.graph.models.local_prompt import EXAMPLES, best_examples, reply_grammar
from bashgraph.graph.models.local_shapes import (
    MAX_TASK_WORDS,
    MAX_WORD_CHARS,
    NAME,
    NUMBER,
    TEXT,
    Part,
    command_rule,
    instruction_words,
    shape,
    task_words,
)

PLAIN = re.compile(r"[A-Za-z0-9_.,:@%+=/~*-]+")


def test_a_shape_makes_slots_of_what_the_command_took_from_its_request() -> None:
    assert shape("show the first 5 lines of server_old.log", "head -n 5 server_old.log") == (
        Part("head"), Part("-n"), Part("5", NUMBER), Part("server_old.log", NAME))
    assert shape("create a file memo_new.txt containing buy milk", "echo 'buy milk' >> memo_new.txt") == (
        Part("echo"), Part("'buy milk'", TEXT), Part(">>"), Part("memo_new.txt", NAME))
    assert shape("list the .csv files", "ls *.csv") == (Part("ls"), Part("*.csv", NAME))
    assert shape("what time is it", "date") == (Part("date"),)


def test_no_example_file_name_reaches_the_grammar() -> None:
    """Copying an example's file into an unrelated task was a wrong answer the grammar now rules out."""
    for request, command in EXAMPLES:
        grammar = reply_grammar(["bash"], task="count the lines of notes.txt")
        names = [part.text for part in shape(request, command) if part.slot == NAME]
        assert not any(f'"{name}"' in grammar for name in names if "_" in name)


def test_only_the_nearest_shapes_are_allowed() -> None:
    """A nearer and a farther shape side by side, the model took the farther: only the nearest
    are in the grammar (`ls *.csv` for "list the .txt files", not `ls -la`)."""
    assert [command for _request, command in best_examples("list the .txt files")] == ["ls *.csv"]
    assert '"-la"' not in reply_grammar(["bash"], task="list the .txt files")


def test_two_names_come_in_the_tasks_order() -> None:
    """`cp -n a.txt a.txt` was written when any two names were allowed."""
    rules = "\n".join(command_rule("copy a.txt to b.txt", [("copy x_1.mp3 to y_2.mp3", "cp -n x_1.mp3 y_2.mp3")],
                                   instruction_words(EXAMPLES)))
    assert 'name-pair ::= "a.txt b.txt" | "a.txt ." | "b.txt ."' in rules


def test_words_that_say_what_to_do_name_nothing() -> None:
    """Shown `ls docs_old | wc -l`, the model wrote `ls directory | wc -l`."""
    rules = command_rule("how many files are in this directory", [("how many files are in the docs_old folder",
                                                                   "ls docs_old | wc -l")],
                         instruction_words(EXAMPLES))
    assert 'name ::= "."' in rules


def test_task_words_drop_the_sentences_punctuation_and_shell_syntax() -> None:
    words = task_words("Count the lines of 'notes.txt', then a.md. Also $(rm -rf ~); x|y `id` and .py?")
    assert words == ["Count", "the", "lines", "of", "notes.txt", "then", "a.md", "Also", "-rf", "~",
                     "id", "and", ".py", "*.py"]


def test_a_huge_task_gives_a_bounded_grammar() -> None:
    assert len(task_words(" ".join(f"file{i}.txt" for i in range(1_000_000)))) <= MAX_TASK_WORDS
    assert task_words("x" * 10_000_000) == []
    assert len(reply_grammar(["bash"], task="copy " + " ".join(f"f{i}.txt" for i in range(10_000)))) < 20_000


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.text(max_size=400))
def test_any_task_fills_slots_with_plain_words_only(task: str) -> None:
    """Whatever the task holds, a slot takes only plain shell words, so a task's word cannot
    change a shape's meaning (no quote, `$`, `;`, `&`, redirection), and the grammar stays small."""
    words = task_words(task)
    assert len(words) <= MAX_TASK_WORDS
    assert all(PLAIN.fullmatch(word) and len(word) <= MAX_WORD_CHARS + 1 for word in words)
    assert len(reply_grammar(["bash"], task=task)) < 20_000


GRAMMAR_TASKS = ["", "list the files", "write 'hi' into \"a b.txt\" \\ \x00 \u202e é 😀 [x] {y}",
                 "a" * 5000, "count .py files ./a/b ~/c", "copy a.txt to b.txt", "show the last lines of x.log",
                 "create a file containing"]


@pytest.mark.parametrize("task", GRAMMAR_TASKS)
def test_the_grammar_compiles_for_any_task(task: str) -> None:
    """llama.cpp's own grammar parser accepts the rules, whatever the task's characters."""
    grammar_module = pytest.importorskip("llama_cpp.llama_grammar",
                                         reason="the local model needs pip install 'bashgraph[local]'")
    for allow_answer in (True, False):
        grammar = grammar_module.LlamaGrammar.from_string(
            reply_grammar(["bash"], allow_answer=allow_answer, task=task), verbose=False)
        assert grammar is not None
