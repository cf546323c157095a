"""The model's words on a terminal: a final answer in Markdown that cannot put a hidden or
disguising character on the screen, whatever character references it holds, and that hides no
part of the answer; a live area that keeps only what it shows, however long a reply or a line."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from bashgraph.graph.cli import terminal
from bashgraph.graph.cli.markdown import MARKDOWN_MAX_CHARS, safe_markdown
from bashgraph.graph.cli.terminal import LINE_CHARS, TAIL_LINES, TOKEN_CHARS, TerminalRenderer, _Running
from bashgraph.tools.safety import visible

#: Character references for what safety.md shows as `�`: bidi overrides and isolates, zero-width
#: characters, a soft hyphen; and for ESC, which would start an escape sequence.
REFERENCES = ["&#x202E;", "&#x202C;", "&#8203;", "&shy;", "&lrm;", "&#x2066;", "&#27;", "&#x1b;",
              "&#x200D;", "&#xFEFF;", "&#x9b;"]
MARKDOWN = ["*", "_", "`", "```\n", "\n\n", "# ", "- ", "> ", "[a](", ")", "|", "<!-- ", " -->", "<div>",
            "</div>", "<b>", "&amp;", "&", ";", "#"]


def rendered(text: str, width: int = 80) -> str:
    """What a terminal would get, without rich's own colours (so every character is the text's)."""
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, force_terminal=False).print(safe_markdown(text))
    return out.getvalue()


def hidden(shown: str) -> list[str]:
    """Characters the sanitiser would have replaced: none may reach the terminal."""
    again = visible(shown)  # one character for one: where it differs, something was left
    return [f"U+{ord(ch):04X}" for ch, kept in zip(shown, again, strict=True) if ch != kept]


def test_character_references_do_not_bring_hidden_characters_back() -> None:
    shown = rendered("file is safe.&#x202E;txt.exe&#x202C; &#8203;&shy;&lrm;&#x2066; and &#27;[2J")
    assert hidden(shown) == []
    assert "file is safe.�txt.exe�" in shown


def test_html_is_shown_as_written_not_dropped() -> None:
    shown = rendered("before <!-- the rest of the answer --> after\n\n<div>a block</div>\n")
    assert "<!-- the rest of the answer -->" in shown
    assert "<div>a block</div>" in shown


def test_links_and_code_keep_their_words() -> None:
    shown = rendered("see [the docs](http://example.com/&#x202E;x) and `a && b`")
    assert "the docs" in shown
    assert "a && b" in shown
    assert hidden(shown) == []


def test_the_renderer_prints_the_final_answer_through_it() -> None:
    out = io.StringIO()
    renderer = TerminalRenderer(Console(file=out, width=80, color_system=None, force_terminal=False))
    renderer._on_model_reply({"text": "done &#x202E;txt.exe <!-- kept -->", "tool_calls": []})
    assert hidden(out.getvalue()) == []
    assert "<!-- kept -->" in out.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(REFERENCES + MARKDOWN), st.text(max_size=8)), max_size=40))
def test_no_markdown_puts_a_hidden_character_on_the_terminal(pieces: list[str]) -> None:
    assert hidden(rendered("".join(pieces))) == []


# -- the live area: the latest words and the start of each output line, nothing more ---------
def test_a_runaway_reply_keeps_only_the_latest_words() -> None:
    renderer = TerminalRenderer(Console(file=io.StringIO(), width=80, color_system=None))
    for index in range(20_000):
        renderer._on_model_token({"text": f"word{index} "})
    assert len(renderer._tokens) <= TOKEN_CHARS
    assert renderer._tokens.endswith("word19999 ")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab\n", max_size=3000), max_size=12))
def test_the_output_tail_is_the_last_lines_cut_at_their_start(chunks: list[str]) -> None:
    """Fed in any chunks, the tail holds what splitting the whole output would give: the last
    complete lines, each cut to LINE_CHARS; the unfinished line is kept to LINE_CHARS too."""
    run = _Running("cmd", 0.0)
    for chunk in chunks:
        run.add_output("stdout", chunk)
    *ended, rest = "".join(chunks).split("\n")
    assert list(run.tail) == [line[:LINE_CHARS] for line in ended[-TAIL_LINES:]]
    if chunks:
        assert run.partial["stdout"] == rest[:LINE_CHARS]


def test_a_final_answer_past_the_markdown_limit_is_printed_as_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich needs tens of microseconds per character to lay out Markdown (a 1 MB table took over
    a minute): past MARKDOWN_MAX_CHARS the answer is written as it is, every character of it
    still made visible, and no Markdown is built."""
    def no_markdown(text: str) -> None:
        raise AssertionError("a long answer must not be laid out as Markdown")

    monkeypatch.setattr(terminal, "safe_markdown", no_markdown)
    row = "| a \x1b[2J | *b* |\n"
    text = "# title\n" + row * (MARKDOWN_MAX_CHARS // len(row) + 1)
    out = io.StringIO()
    TerminalRenderer(Console(file=out, width=80, color_system=None, force_terminal=False))._on_model_reply(
        {"text": text, "tool_calls": []})
    shown = out.getvalue()
    assert shown.startswith(f"final answer ({len(text.strip()):,} characters, shown as plain text)\n")
    assert shown.endswith(visible(text.strip()) + "\n")  # every line, as written: `#`, `*`, `|`
    assert hidden(shown) == []


def test_a_final_answer_within_the_limit_is_still_markdown() -> None:
    out = io.StringIO()
    TerminalRenderer(Console(file=out, width=80, color_system=None, force_terminal=False))._on_model_reply(
        {"text": "# title\n\n*b*" + " x" * (MARKDOWN_MAX_CHARS // 2 - 20), "tool_calls": []})
    assert "final answer" in out.getvalue()
    assert "*b*" not in out.getvalue()  # emphasis rendered, not written
