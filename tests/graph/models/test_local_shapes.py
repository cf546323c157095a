"""The commands the bundled model may write (no model loaded, but for the grammar's compile
check): the nearest examples' shapes, their slots filled with the task's plain words."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from bashgraph.graph.models.local_prompt import EXAMPLES, best_examples, reply_grammar, task_of
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
from bashgraph.graph.models.prompts import SUMMARY_MESSAGE_ID, replan_message

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
    assert command_rule("copy it", [("copy x_1.mp3 to y_2.mp3", "cp -n x_1.mp3 y_2.mp3")],
                        instruction_words(EXAMPLES)) == ['command ::= "ls"']


def test_words_that_say_what_to_do_name_nothing() -> None:
    """Shown `ls docs_old | wc -l`, the model wrote `ls directory | wc -l`."""
    rules = command_rule("how many files are in this directory", [("how many files are in the docs_old folder",
                                                                   "ls docs_old | wc -l")],
                         instruction_words(EXAMPLES))
    assert 'name ::= "."' in rules


def test_task_words_drop_the_sentences_punctuation_and_shell_syntax() -> None:
    words = task_words("Count the lines of 'notes.txt', then a.md. Also $(rm -rf ~); x|y `id` and .py?")
    assert words.text == ["Count", "the", "lines", "of", "notes.txt", "then", "a.md", "Also", "-rf", "~",
                          "id", "and", ".py"]
    assert words.names == ["Count", "lines", "notes.txt", "then", "a.md", "Also", "id", "*.py", "."]


@pytest.mark.parametrize(("task", "not_a_name"), [
    ("remove the * character from notes.txt", "*"),
    ("delete -rf in notes.txt", "-rf"),
    ("show ~/.bashrc", "~/.bashrc"),
    ("append hi to 'my notes.txt'", "notes.txt"),
    ('show "my notes.txt"', "notes.txt"),
])
def test_a_name_is_never_a_glob_an_option_a_home_or_a_piece_of_a_quoted_phrase(task: str, not_a_name: str) -> None:
    """"delete 'my notes.txt'" took `notes.txt` for the file; `*` made `rm *` possible."""
    assert not_a_name not in task_words(task).names


def test_a_path_is_never_run_as_a_program() -> None:
    """`node --version` makes its first word a slot: `./deploy.sh --version` would run the script."""
    grammar = reply_grammar(["bash"], task="which version of ./deploy.sh is installed")
    assert "deploy" not in grammar
    assert '"python"' in reply_grammar(["bash"], task="which python version is installed")


def test_the_request_is_the_newest_a_person_wrote() -> None:
    """A re-plan quotes a failed command's output: its words must fill no slot, and a later
    request's shapes are its own, not the first request's."""
    messages: list[BaseMessage] = [HumanMessage("delete old.txt"), AIMessage("x"),
                                   HumanMessage("now show me the contents of notes.txt"),
                                   HumanMessage(replan_message(["cat secrets.env"], "cat: secrets.env: no such file")),
                                   HumanMessage("summary of old work", id=SUMMARY_MESSAGE_ID)]
    assert task_of(messages) == "now show me the contents of notes.txt"
    assert task_of([HumanMessage("x" * 10_000_000)]) == "x" * 2000


def test_a_huge_task_gives_a_bounded_grammar() -> None:
    assert len(task_words(" ".join(f"file{i}.txt" for i in range(1_000_000))).names) <= MAX_TASK_WORDS + 1
    assert task_words("x" * 10_000_000).text == []
    assert len(reply_grammar(["bash"], task="copy " + " ".join(f"f{i}.txt" for i in range(10_000)))) < 20_000


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.text(max_size=400))
def test_any_task_fills_slots_with_plain_words_only(task: str) -> None:
    """Whatever the task holds, a slot takes only plain shell words, so a task's word cannot
    change a shape's meaning (no quote, `$`, `;`, `&`, redirection), and the grammar stays small."""
    words = task_words(task)
    assert len(words.text) <= MAX_TASK_WORDS
    assert len(words.names) <= MAX_TASK_WORDS + 1
    assert all(PLAIN.fullmatch(word) and len(word) <= MAX_WORD_CHARS + 1 for word in words.names + words.text)
    assert not any(word.startswith("-") or "~" in word for word in words.names)
    grammar = reply_grammar(["bash"], task=task)
    assert len(grammar) < 20_000
    assert re.search(r"::= *$", grammar, re.MULTILINE) is None  # no empty rule: llama.cpp would crash


GRAMMAR_TASKS = ["", "list the files", "write 'hi' into \"a b.txt\" \\ \x00 \u202e é 😀 [x] {y}",
                 "a" * 5000, "count .py files ./a/b ~/c", "copy a.txt to b.txt", "show the last lines of x.log",
                 "create a file containing", "copy it", "rename the file", "search", "make a copy"]


@pytest.fixture(scope="module")
def parses() -> Callable[[str], bool]:
    """llama.cpp's own grammar parser (the vocabulary only, no weights): `LlamaGrammar.from_string`
    only stores the text, so it cannot tell a grammar that would crash the process."""
    pytest.importorskip("llama_cpp", reason="the local model needs pip install 'bashgraph[local]'")
    from llama_cpp.llama import Llama

    from bashgraph.graph.models.local import bundled_model_path, grammar_parses

    llama = Llama(model_path=str(bundled_model_path()), vocab_only=True, verbose=False)
    return lambda gbnf: grammar_parses(llama, gbnf)


def test_the_parser_check_can_fail(parses: Callable[[str], bool]) -> None:
    assert parses('root ::= "a"')
    assert not parses("root ::= missing-rule\n")
    assert not parses("root ::= (\n")


@pytest.mark.parametrize("task", GRAMMAR_TASKS)
def test_llama_cpp_parses_the_grammar_of_these_tasks(parses: Callable[[str], bool], task: str) -> None:
    for allow_answer in (True, False):
        assert parses(reply_grammar(["bash"], allow_answer=allow_answer, task=task))


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from(["copy", "rename", "a.txt", "b.md", "'x y'", "the", "lines", "of", "5", "*", "-n",
                                 "count", "write", "into", "first", "list", ".py", "~", "search", "folder"]),
                max_size=8).map(" ".join) | st.text(max_size=60))
def test_llama_cpp_parses_the_grammar_of_any_task(parses: Callable[[str], bool], task: str) -> None:
    assert parses(reply_grammar(["bash"], allow_answer=False, task=task))
