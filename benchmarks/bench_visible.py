"""Time of the printed-text sanitiser (`bashgraph.tools.safety.visible`), and of the terminal's
other readers of model text, as the text grows.

Adversarial shapes at 10 KB, 100 KB and 1 MB: no control at all, every character an ESC, an
escape sequence per 5 characters, bidi overrides and zero-width characters, line feeds in
`one_line`; the secret redaction every output passes through, on a run of `eyJ` (the start of
a JWT, with no dot to end it) and on JWT shapes; then what the terminal does with the same
sizes: a command's output that is one endless line, fed in 4 KB chunks to the live area; a
runaway reply streamed in 4-character tokens; a final answer (a Markdown table) printed by the
terminal renderer, to a console in memory. Printed: µs per KB at each size, the growth of time
per KB from the smallest to the largest size (1.0 is linear; quadratic would be 100), and the
time relative to an anchor measured in the same rounds: `str.encode("utf-8")` of the same 1 MB
text, one C loop over every character. Then the slowest Markdown shapes found at
`MARKDOWN_MAX_CHARS`, the longest answer still laid out as Markdown: ms per answer.

    python benchmarks/bench_visible.py            # 7 rounds
    python benchmarks/bench_visible.py --quick    # 2 rounds (CI smoke)
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
from collections.abc import Callable

from rich.console import Console

from bashgraph.graph.cli.markdown import MARKDOWN_MAX_CHARS
from bashgraph.graph.cli.terminal import TerminalRenderer, _Running
from bashgraph.tools.safety.redact import Redactor
from bashgraph.tools.text import one_line, visible

SIZES = (10_000, 100_000, 1_000_000)
SHAPES: dict[str, str] = {
    "plain": "abcdefghij",
    "all ESC": "\x1b",
    "sequences": "\x1b[2Kx",
    "bidi+zw": "\u202ea\u200bb",
    "joiners": "👨\u200d👩 a\u200d#\ufe0f",
    "lines (one_line)": "ls -l\n",
}


#: The terminal's readers: (name, the repeated unit, what reads the text).
READERS: dict[str, tuple[str, Callable[[str], object]]] = {}


def live_output(text: str) -> None:
    run = _Running("cmd", 0.0)
    for start in range(0, len(text), 4096):
        run.add_output("stdout", text[start:start + 4096])


def live_tokens(text: str) -> None:
    renderer = TerminalRenderer(Console(file=io.StringIO(), color_system=None))
    for start in range(0, len(text), 4):
        renderer._on_model_token({"text": text[start:start + 4]})


def final_answer(text: str) -> None:
    console = Console(file=io.StringIO(), width=100, color_system=None)
    TerminalRenderer(console)._on_model_reply({"text": text, "tool_calls": []})


#: The slowest shapes for rich's Markdown found (per character), for the row at the limit.
MARKDOWN_SHAPES = {"table": "| a | *b* | `c` |\n", "block quote": "> " * 20 + "x\n" * 40,
                   "code block": "```\n" + "x = 1\n" * 40 + "```\n", "list": "- item\n",
                   "references": "&#x202E;a *b* `c` <!-- d -->\n"}


def markdown_at_limit(rounds: int) -> None:
    print(f"\n{'Markdown at the limit':<22}{'ms per answer':>14}   ({MARKDOWN_MAX_CHARS:,} characters)")
    for name, unit in MARKDOWN_SHAPES.items():
        text = (unit * (MARKDOWN_MAX_CHARS // len(unit) + 1))[:MARKDOWN_MAX_CHARS]
        spent = [seconds(final_answer, text) for _ in range(rounds)]
        print(f"{name:<22}{statistics.median(spent) * 1000:14.1f}")


REDACTOR = Redactor.from_environ({})

READERS.update({
    "redact: eyJeyJ… run": ("eyJ", REDACTOR.redact),
    "redact: JWT shapes": ("eyJhbGciOi.eyJzdWIiOiIx.aaaaaaaaaa ", REDACTOR.redact),
    "live: endless line": ("abcdefghij", live_output),
    "live: model tokens": ("word \x1b[2K", live_tokens),
    "final answer": ("| a | *b* | `c` |\n", final_answer),
})


def sanitise(shape: str) -> Callable[[str], object]:
    if shape in READERS:
        return READERS[shape][1]
    return one_line if shape.startswith("lines") else visible


def seconds(func: Callable[[str], object], text: str) -> float:
    started = time.perf_counter()
    func(text)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    rounds = 2 if parser.parse_args().quick else 7
    print(f"{'shape':<18}" + "".join(f"{f'{size // 1000} KB µs/KB':>16}" for size in SIZES)
          + f"{'growth':>8}{'x anchor (1 MB)':>17}")
    for shape, unit in [*SHAPES.items(), *((name, unit) for name, (unit, _) in READERS.items())]:
        texts = {size: (unit * (size // len(unit) + 1))[:size] for size in SIZES}
        ours: dict[int, list[float]] = {size: [] for size in SIZES}
        anchor: list[float] = []
        for _ in range(rounds):  # interleaved: ours at each size, then the anchor
            for size, text in texts.items():
                ours[size].append(seconds(sanitise(shape), text))
            anchor.append(seconds(str.encode, texts[SIZES[-1]]))
        per_kb = {size: statistics.median(ours[size]) / (size / 1000) * 1e6 for size in SIZES}
        growth = per_kb[SIZES[-1]] / per_kb[SIZES[0]]
        ratio = statistics.median(ours[SIZES[-1]]) / statistics.median(anchor)
        print(f"{shape:<18}" + "".join(f"{per_kb[size]:16.1f}" for size in SIZES)
              + f"{growth:8.2f}{ratio:17.2f}")
    markdown_at_limit(rounds)


if __name__ == "__main__":
    main()
