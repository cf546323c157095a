"""The bundled model on everyday tasks: the share it gets right, each checked objectively.

    python benchmarks/bench_local_tasks.py            # every task (figures in docs/benchmarks.md)
    python benchmarks/bench_local_tasks.py --quick    # the CI subset: 6 tasks the model gets right
    python benchmarks/bench_local_tasks.py --only lines   # the tasks whose name holds "lines"

Each task (benchmarks/local_tasks.py) runs in a new empty temporary directory, through the real
graph with its default settings (approval rules included) and real bash, as
`bashgraph run "<task>"` does with no key: the bundled SmolLM2 in this process, greedy
decoding. A task is right when its check passes: a file exists with the right content, or the
final answer holds the right number or lines. A run that stops to ask a person counts as wrong.
The full run FAILS (exit status 1) below TARGET_RIGHT; the quick subset is reported only (one
wrong task on another CPU would flip it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # benchmarks.local_tasks

from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from bashgraph.graph import AgentConfig, build_graph  # noqa: E402
from benchmarks.local_tasks import TASKS, Task  # noqa: E402

TARGET_RIGHT = 0.6
MAX_STEPS = 8
"""Model calls per task: the bundled model either gets an everyday task in a few or not at all."""


def run_task(model: Any, task: Task) -> tuple[bool, list[str], str]:
    """(right, commands run, final answer) of one task in a fresh directory."""
    with tempfile.TemporaryDirectory(prefix="bench-local-") as tmp:
        workdir = Path(tmp).resolve()
        task.setup(workdir)
        config = AgentConfig(workdir=str(workdir), max_steps=MAX_STEPS)
        graph = build_graph(model=model, config=config, checkpointer=InMemorySaver())
        state = graph.invoke({"messages": [HumanMessage(task.prompt)]},
                             {"configurable": {"thread_id": "bench"}})
        messages = state.get("messages", [])
        commands = [str(call["args"].get("command")) for m in messages if isinstance(m, AIMessage)
                    for call in m.tool_calls]
        last = messages[-1] if messages else None
        asked = bool(state.get("__interrupt__"))
        answer = str(last.text) if isinstance(last, AIMessage) and not last.tool_calls else ""
        right = not asked and task.check(workdir, answer)
        return right, commands, ("[asked a person] " if asked else "") + answer


def one_line(text: str, width: int) -> str:
    flat = " ⏎ ".join(part for part in text.splitlines() if part.strip())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the CI subset")
    parser.add_argument("--only", default="", help="run the tasks whose name holds this text")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every answer whole")
    args = parser.parse_args()

    try:
        from bashgraph.graph.models.local import create_local_model
        model = create_local_model()
    except (ImportError, Exception) as missing:
        print(f"skipped: the bundled model is not available ({missing})")
        return 0
    tasks = [t for t in TASKS if (t.quick or not args.quick) and args.only in t.name]
    right = 0
    started = time.perf_counter()
    for task in tasks:
        began = time.perf_counter()
        ok, commands, answer = run_task(model, task)
        right += ok
        shown = answer if args.verbose else one_line(answer, 70)
        print(f"{'right' if ok else 'WRONG':5}  {task.name:15} {time.perf_counter() - began:5.1f}s  "
              f"$ {one_line(' ; '.join(commands) or '(none)', 60)}\n{'':23}→ {shown}", flush=True)
    total = len(tasks)
    share = right / total if total else 0.0
    print(f"\nright: {right}/{total} ({share:.0%}) in {time.perf_counter() - started:.0f}s; "
          f"target {TARGET_RIGHT:.0%} (full run)")
    return 1 if not args.quick and not args.only and share < TARGET_RIGHT else 0


if __name__ == "__main__":
    sys.exit(main())
