"""Time of the printed-text sanitiser (`bashgraph.tools.safety.visible`) as the text grows.

Adversarial shapes at 10 KB, 100 KB and 1 MB: no control at all, every character an ESC, an
escape sequence per 5 characters, bidi overrides and zero-width characters, line feeds in
`one_line`. Printed: µs per KB at each size, the growth of time per KB from the smallest to the
largest size (1.0 is linear; quadratic would be 100), and the time relative to an anchor
measured in the same rounds: `str.encode("utf-8")` of the same 1 MB text, one C loop over every
character.

    python benchmarks/bench_visible.py            # 7 rounds
    python benchmarks/bench_visible.py --quick    # 2 rounds (CI smoke, < 5 s)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from bashgraph.tools.safety.visible import one_line, visible

SIZES = (10_000, 100_000, 1_000_000)
SHAPES: dict[str, str] = {
    "plain": "abcdefghij",
    "all ESC": "\x1b",
    "sequences": "\x1b[2Kx",
    "bidi+zw": "\u202ea\u200bb",
    "lines (one_line)": "ls -l\n",
}


def sanitise(shape: str) -> Callable[[str], str]:
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
    for shape, unit in SHAPES.items():
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


if __name__ == "__main__":
    main()
