"""Which leading words of a simple command are keywords and assignments, and which is the program.

Like bash, a word is a keyword only where a command starts, before any assignment, redirection
or quoted word: `if`, `!`, `time` and `{` there are grammar, while `x=1 time`, `>f !` and `'if'`
name programs. `for`/`select`/`case` headers are no command (`for x in …`), except that a
command starts after their `do` or `{` (`for x do cmd`, `for ((…)) do cmd`, `for ((…)) { cmd; }`).
"""

from __future__ import annotations

from bashgraph.tools.safety.wrappers import ASSIGNMENT, program_name

KEYWORDS = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while",
                      "until", "esac", "time", "coproc"})
_HEADERS = frozenset({"for", "select", "case"})  # their words are not a command


def command_words(words: list[str], functions: set[str], keyword_words: int = -1,
                  piped_in: bool = False) -> list[str]:
    """Drop leading keywords and assignments; reduce the program to its base name.

    Like bash, a word is a keyword only before any assignment, redirection or quoted word
    (`x=1 time`, `>f !` and `'if'` name programs); `keyword_words` is how many words may be
    keywords (-1: any). `time` and `!` are keywords only where a pipeline starts: after a pipe
    (`piped_in`), `| time ls` runs /usr/bin/time, until `{`, `if`… start a new list."""
    index, after_time = 0, False
    limit = len(words) if keyword_words < 0 else keyword_words
    pipeline_start = not piped_in
    while index < len(words):
        word = words[index]
        if index >= limit and not ASSIGNMENT.match(word):
            break
        if word in ("time", "!") and not pipeline_start:
            break
        # `coproc` runs one command, not a pipeline: `coproc time -f x rm` runs /usr/bin/time.
        pipeline_start = (pipeline_start or word in KEYWORDS) and word != "coproc"
        if ASSIGNMENT.match(word):
            limit = min(limit, index)
        body = next((w for w in words[index + 1 : index + 3] if w in ("do", "{")), None)
        if word in ("for", "select") and body is not None:
            # `for x do cmd`, `for ((…)) do cmd`, and bash's `for ((…)) { cmd; }`, `for x { cmd; }`
            index = words.index(body, index + 1) + 1
        elif word in _HEADERS:
            return []
        elif word == "function":
            functions.update(words[index + 1 : index + 2])
            index += 2
        elif word == "coproc" and words[index + 2 : index + 3] == ["{"]:
            index += 3  # `coproc NAME { …; }`
            pipeline_start = True
        elif word in KEYWORDS or ASSIGNMENT.match(word) or (after_time and word in ("-p", "--")):
            after_time = word == "time" or (after_time and word in ("-p", "--"))
            index += 1
        else:
            break
    rest = words[index:]
    return [program_name(rest[0]), *rest[1:]] if rest else []
