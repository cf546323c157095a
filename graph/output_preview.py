"""A few lines of a command's output for the person watching: its head and tail, collapsed.

The model reads the whole (capped) output; a person reads this preview under the command's line
(`command_end` events carry it, see docs/cli.md) and the spill file for the rest. The text is
the result's: already capped by `max_output_chars`, decoded and made visible by the runner.
The preview adds its own bounds: at most `HEAD_LINES + TAIL_LINES` lines of at most
`LINE_CHARS` characters each, found by looking at the text's two ends only, so a stream of one
endless line or of binary bytes costs one count of its line feeds and nothing more.
"""

from __future__ import annotations

from typing import Any

from bashgraph.tools.results import CommandResult

HEAD_LINES = 3
TAIL_LINES = 3
#: What a preview keeps of one line (a long line is cut with `…`).
LINE_CHARS = 200
ELLIPSIS = "…"


def stream_preview(text: str, *, whole: bool = True) -> list[str]:
    """The first and last lines of `text`, with `… N more lines …` between when some are left
    out (`… more lines …` when `text` is not `whole`: its middle was cut, so the count is not known)."""
    if text.endswith("\n"):
        text = text[:-1]
    if not text.strip():
        return []
    total = text.count("\n") + 1
    if total <= HEAD_LINES + TAIL_LINES:
        region = (HEAD_LINES + TAIL_LINES) * (LINE_CHARS + 1)
        if len(text) <= region:
            return [_cut(line) for line in text.split("\n")]
    region = HEAD_LINES * (LINE_CHARS + 1)
    head = _ends(text[:region].split("\n"), HEAD_LINES, cut_last=True)
    tail = _ends(text[-region:].split("\n"), TAIL_LINES, cut_last=False)
    left_out = total - len(head) - len(tail)
    if not whole:
        marker = f"{ELLIPSIS} more lines {ELLIPSIS}"
    elif left_out > 0:
        marker = f"{ELLIPSIS} {left_out:,} more line{'s' * (left_out != 1)} {ELLIPSIS}"
    else:
        marker = ELLIPSIS  # few lines, but long ones: their middle is left out
    return [*head, marker, *tail]


def _ends(pieces: list[str], count: int, *, cut_last: bool) -> list[str]:
    """`count` lines from one end of a region of the text, each cut to `LINE_CHARS`. Fewer
    pieces than `count` mean a long line crosses the region's edge: it is shown cut there."""
    partial = len(pieces) <= count
    lines = pieces[:count] if cut_last else pieces[-count:]
    lines = [_cut(line) for line in lines]
    if partial and cut_last and not lines[-1].endswith(ELLIPSIS):
        lines[-1] += ELLIPSIS
    elif partial and not cut_last:
        lines[0] = ELLIPSIS + pieces[-len(lines)][-(LINE_CHARS - 1):]
    return lines


def _cut(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS - 1] + ELLIPSIS


def preview_fields(result: CommandResult) -> dict[str, Any]:
    """The preview fields of a `command_end` event: each stream's preview, and the spill file
    that holds all of the output when it went over the cap."""
    return {
        "stdout_preview": stream_preview(result.stdout, whole=not (result.truncated or result.stdout_file)),
        "stderr_preview": stream_preview(result.stderr, whole=not (result.truncated or result.stderr_file)),
        "output_file": result.stdout_file or result.stderr_file,
    }
