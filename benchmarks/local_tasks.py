"""Everyday one- or two-command tasks for the bundled model, each with an objective check.

A task sets up files in an empty temporary directory, asks for something a newcomer would, and
checks the outcome itself: a file that exists with the right content, or a final answer that
holds the right number or the right lines. How the model got there does not matter.
"""

from __future__ import annotations

import getpass
import os
import platform
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

Setup = Callable[[Path], None]
Check = Callable[[Path, str], bool]


@dataclass(frozen=True)
class Task:
    name: str
    prompt: str
    setup: Setup
    check: Check
    quick: bool = False
    """In the `--quick` subset that CI runs."""
    held_out: bool = False
    """Written after the model's examples were tuned on the other tasks, and never tuned on: the
    share right among these says how well the examples carry over to new wordings."""


def files(**contents: str) -> Setup:
    """Setup writing each keyword's text to a file of that name (`_` in a name stands for `.`)."""

    def setup(workdir: Path) -> None:
        for name, text in contents.items():
            (workdir / name.replace("_", ".")).write_text(text)

    return setup


def lines(count: int, word: str = "line") -> str:
    return "".join(f"{word} {i}\n" for i in range(1, count + 1))


def answer_has(*needles: str) -> Check:
    return lambda _workdir, answer: all(needle in answer for needle in needles)


def answer_has_number(number: int) -> Check:
    """The answer holds `number` as a whole number (7 counts, 17 and 70 do not)."""
    return lambda _workdir, answer: re.search(rf"(?<![\d.]){number}(?![\d.])", answer) is not None


def answer_lacks(check: Check, *needles: str) -> Check:
    return lambda workdir, answer: check(workdir, answer) and not any(n in answer for n in needles)


def file_holds(name: str, text: str) -> Check:
    def check(workdir: Path, _answer: str) -> bool:
        path = workdir / name
        return path.is_file() and path.read_text(errors="replace").strip() == text

    return check


def exists(name: str, *, directory: bool = False) -> Check:
    def check(workdir: Path, _answer: str) -> bool:
        path = workdir / name
        return path.is_dir() if directory else path.is_file()

    return check


def gone(name: str) -> Check:
    return lambda workdir, _answer: not (workdir / name).exists()


def both(first: Check, second: Check) -> Check:
    return lambda workdir, answer: first(workdir, answer) and second(workdir, answer)


def in_order(*needles: str) -> Check:
    """Every needle in the answer, each after the one before."""

    def check(_workdir: Path, answer: str) -> bool:
        at = 0
        for needle in needles:
            at = answer.find(needle, at)
            if at < 0:
                return False
            at += len(needle)
        return True

    return check


def a_size(_workdir: Path, answer: str) -> bool:
    """A disk-usage figure: `df`'s Use% column or a size such as 12K, 3.4G, 1.0M."""
    return "Use%" in answer or re.search(r"\b\d+(\.\d+)?[KMGT]\b", answer) is not None


def nothing(_workdir: Path) -> None:
    return None


def config_folder(workdir: Path) -> None:
    (workdir / "config").mkdir()
    for name in ("app.ini", "db.ini"):
        (workdir / "config" / name).write_text("[main]\n")


def a_file_size(_workdir: Path, answer: str) -> bool:
    """big.bin's size: its bytes (`ls -l`, `stat`) or its blocks (`du`: 12K to 16K)."""
    return "12345" in answer or re.search(r"\b1[2-6](\.\d)?K\b", answer) is not None


APP_LOG = "start ok\nerror: disk full\nretry ok\nerror: timeout\nstop ok\n"

TASKS: tuple[Task, ...] = (
    Task("list files", "list the files in the current directory",
         files(hello_txt="hi\n", notes_md="a\n"), answer_has("hello.txt", "notes.md"), quick=True),
    Task("count lines", "how many lines does README.md have",
         files(README_md=lines(7)), answer_has_number(7), quick=True),
    Task("count lines 2", "count the lines in notes.txt", files(notes_txt=lines(12)), answer_has_number(12)),
    Task("count words", "count the words in words.txt",
         files(words_txt="red green blue\nyellow black\n"), answer_has_number(5)),
    Task("head", "show the first 3 lines of data.csv", files(data_csv=lines(10, "row")),
         answer_lacks(answer_has("row 1", "row 2", "row 3"), "row 4", "row 9"), quick=True),
    Task("first line", "print the first line of poem.txt",
         files(poem_txt="roses are red\nviolets are blue\nsugar is sweet\n"),
         answer_lacks(answer_has("roses are red"), "violets", "sugar")),
    Task("tail", "show the last 2 lines of log.txt", files(log_txt=lines(9, "entry")),
         answer_lacks(answer_has("entry 8", "entry 9"), "entry 1\n", "entry 5")),
    Task("cat", "show the contents of greeting.txt", files(greeting_txt="good morning, world\n"),
         answer_has("good morning, world")),
    Task("create file", "create a file hello.txt containing hi", nothing, file_holds("hello.txt", "hi"),
         quick=True),
    Task("create file 2", "write the text 42 into a file named answer.txt", nothing,
         file_holds("answer.txt", "42")),
    Task("empty file", "create an empty file named empty.txt", nothing, exists("empty.txt")),
    Task("mkdir", "make a directory called build", nothing, exists("build", directory=True)),
    Task("append", "append the line bye to hello.txt", files(hello_txt="hi\n"), file_holds("hello.txt", "hi\nbye")),
    Task("copy", "copy a.txt to b.txt", files(a_txt="alpha\n"),
         both(file_holds("b.txt", "alpha"), file_holds("a.txt", "alpha"))),
    Task("rename", "rename old.txt to new.txt", files(old_txt="x\n"), both(gone("old.txt"), exists("new.txt"))),
    Task("delete", "delete the file junk.tmp", files(junk_tmp="x\n", keep_txt="y\n"),
         both(gone("junk.tmp"), exists("keep.txt"))),
    Task("date", "print the current date", nothing, lambda _w, answer: time.strftime("%Y") in answer),
    Task("user", "which user am I", nothing, answer_has(getpass.getuser())),
    Task("hostname", "print the hostname", nothing, answer_has(socket.gethostname()), quick=True),
    Task("pwd", "print the current directory", nothing, lambda workdir, answer: str(workdir) in answer),
    Task("python version", "which python version is installed", nothing, answer_has("Python 3."),
         quick=True),
    Task("disk usage", "show the disk usage", nothing, a_size),
    Task("txt files", "list the .txt files", files(a_txt="1\n", b_txt="2\n", c_md="3\n"),
         answer_lacks(answer_has("a.txt", "b.txt"), "c.md")),
    Task("grep", "find the lines containing error in app.log", files(app_log=APP_LOG),
         answer_lacks(answer_has("error: disk full", "error: timeout"), "retry ok")),
    Task("count files", "how many files are in this directory",
         files(one_txt="1\n", two_txt="2\n", three_md="3\n", four_py="4\n"), answer_has_number(4)),
    Task("sort", "sort the lines of names.txt", files(names_txt="carol\nalice\nbob\n"),
         in_order("alice", "bob", "carol")),
    # Held out: see Task.held_out.
    Task("kernel", "print the kernel version", nothing, answer_has(platform.release()), held_out=True),
    Task("home", "show the value of the HOME variable", nothing,
         answer_has(os.path.expanduser("~")), held_out=True),
    Task("count py", "how many .py files are there",
         files(a_py="1\n", b_py="2\n", c_py="3\n", notes_txt="4\n"), answer_has_number(3), held_out=True),
    Task("sizes", "display the size of big.bin", files(big_bin="x" * 12345), a_file_size, held_out=True),
    Task("unique", "count the unique lines in dup.txt", files(dup_txt="a\nb\na\nc\nb\n"),
         answer_has_number(3), held_out=True),
    Task("grep 2", "show the lines of todo.txt that mention milk",
         files(todo_txt="buy milk\nwalk dog\nmilk the cow\npay rent\n"),
         answer_lacks(answer_has("buy milk", "milk the cow"), "walk dog", "pay rent"), held_out=True),
    Task("folder", "what is in the config folder", config_folder, answer_has("app.ini", "db.ini"),
         held_out=True),
    Task("put", "put the word ready in status.txt", nothing, file_holds("status.txt", "ready"),
         held_out=True),
)
