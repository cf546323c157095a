"""The final answer as Markdown, with nothing hidden or disguised reaching the terminal.

Each piece is made visible after parsing, not before: markdown-it turns character references
(`&#x202E;`, `&#8203;`, `&shy;`) into the characters they name, so text made visible first
could still put a bidi override or a zero-width space on the screen. HTML, which rich does not
draw, is shown as written rather than dropped: no part of what the model wrote is hidden from
the person reading it.

rich lays Markdown out at tens of microseconds per character (a 1 MB table took over a minute),
so an answer longer than `MARKDOWN_MAX_CHARS` is not rendered: `renders_as_markdown` says so, and
the terminal prints it as plain text, which costs a copy.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from markdown_it.token import Token
from rich.markdown import Markdown

from bashgraph.tools.safety import visible

#: Longer final answers are shown as plain text: at this size the slowest shapes measured
#: (block quotes, tables, code blocks; benchmarks/bench_visible.py) take well under a second.
MARKDOWN_MAX_CHARS = 8_000


def renders_as_markdown(text: str) -> bool:
    """True when `text` is short enough to be laid out as Markdown in bounded time."""
    return len(text) <= MARKDOWN_MAX_CHARS


def safe_markdown(text: str) -> Markdown:
    """`text` rendered as Markdown (links shown as text), every piece of it made visible."""
    markdown = Markdown(text, hyperlinks=False)
    for token in _every_token(markdown.parsed):
        _make_visible(token)
    return markdown


def _every_token(tokens: Sequence[Token]) -> Iterator[Token]:
    waiting = list(tokens)  # no recursion: how deep the nesting goes is the model's choice
    while waiting:
        token = waiting.pop()
        yield token
        waiting.extend(token.children or ())


def _make_visible(token: Token) -> None:
    token.content = visible(token.content)
    token.info = visible(token.info)
    token.attrs = {name: visible(str(value)) for name, value in token.attrs.items()}
    if token.type == "html_inline":
        token.type = "text"
    elif token.type == "html_block":
        token.type = "code_block"
