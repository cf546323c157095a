"""Long scripted transcripts through bashgraph and LangChain's agents: what each sends the model.

Every agent runs the same transcript: a scripted model asks for the same commands in the same
order (real bash runs them), then answers "done". The anchors are LangChain's `create_agent`
with bashgraph's system prompt and its public LangChain tools (`make_bash_tool`, the job
tools: the same schemas and the same answers, binary described, outputs capped at 10,000
characters), alone and with `SummarizationMiddleware` (trigger at 75 % of the window, keep 20
messages) or `ContextEditingMiddleware` (`ClearToolUsesEdit` at 75 %, keep 3): what differs is
only what each agent keeps of the conversation. Tokens are the server measure of tests/support: 4 characters of the
request's JSON (messages and tool schemas) per token. Reported for each agent and transcript:

* tokens sent in all (summary requests included) and the largest request;
* the share of requests that start with the previous request's messages (a prefix-cache proxy);
* whether the task text, every command, and every failure's evidence are in the last request.

Run: `python benchmarks/bench_context.py` (add `--quick` for shorter transcripts);
`--per-step 1000` times bashgraph's steps at the start and the end of a 1,000-step run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai.chat_models.base import _convert_message_to_dict
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import PrivateAttr

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.models.prompts import DEFAULT_SYSTEM_PROMPT
from bashgraph.graph.testing import calls_reply
from bashgraph.tools.model_tools.bash_tool import make_bash_tool
from bashgraph.tools.model_tools.job_tools import make_job_tools

TASK = "Work through the checks of this project one command at a time, then report what failed."
SUMMARY = "Summary: ran the listed checks; failures are recorded with their commands."


@dataclass(frozen=True)
class Transcript:
    name: str
    commands: list[str]
    window: int
    failures: dict[str, str] = field(default_factory=dict)  # command -> evidence that shows it failed


def transcripts(quick: bool) -> list[Transcript]:
    scale = 4 if quick else 1
    small, fails = [], {}
    for i in range(200 // scale):
        if i % 10 == 3:
            command = f"ls /missing-{i}"
            fails[command] = f"/missing-{i}"
        else:
            command = f"echo item {i}; date +%Y"
        small.append(command)
    huge = [("seq 1 300000" if i % 8 == 4 else f"wc -c /etc/hostname; echo {i}") for i in range(40 // scale)]
    binary = [("cat /bin/ls" if i % 5 == 2 else f"head -c 3000 /bin/ls; echo {i}" if i % 5 == 4
               else f"echo {i}") for i in range(30 // scale)]
    mixed, mixed_fails = [], {}
    for i in range(300 // scale):
        if i % 60 == 11:
            command = "seq 1 200000"
        elif i % 45 == 7:
            command = f"head -c 2000 /bin/ls; echo {i}"
        elif i % 10 == 3:
            command = f"grep -q never /etc/hostname-{i}"
            mixed_fails[command] = f"/etc/hostname-{i}"
        else:
            command = f"echo step {i}"
        mixed.append(command)
    return [Transcript("many small outputs", small, 16_384, fails), Transcript("a few huge outputs", huge, 16_384),
            Transcript("binary outputs", binary, 16_384), Transcript("300 steps, 8k window", mixed, 8_192, mixed_fails)]


# ----------------------------------------------------------------------------- the model


class Recorder(BaseChatModel):
    """Replays the transcript's commands (one per call), records every request as sent."""

    commands: list[str]
    _next: int = PrivateAttr(default=0)
    _tools: list[dict[str, Any]] = PrivateAttr(default_factory=list)
    requests: list[list[dict[str, Any]]] = []  # noqa: RUF012 - set per instance in __init__
    summaries: list[list[dict[str, Any]]] = []  # noqa: RUF012
    raw: list[list[Any]] = []  # noqa: RUF012 - the requests as messages (for the estimate's error)
    times: list[float] = []  # noqa: RUF012 - when each request arrived (a step is the time between two)

    def __init__(self, commands: list[str]) -> None:
        super().__init__(commands=commands)  # type: ignore[call-arg]
        self.requests, self.summaries = [], []
        self.raw = []
        self.times = []

    @property
    def _llm_type(self) -> str:
        return "bench-recorder"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self._tools = [convert_to_openai_tool(t) for t in tools]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        wire = [_convert_message_to_dict(m) for m in messages]
        if is_summary_request(messages):
            self.summaries.append(wire)
            return ChatResult(generations=[ChatGeneration(message=AIMessage(SUMMARY))])
        self.requests.append(wire)
        self.raw.append(messages)
        self.times.append(time.perf_counter())
        if self._next < len(self.commands):
            reply = calls_reply(self.commands[self._next])
            self._next += 1
        else:
            reply = AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def tokens(self, wire: list[dict[str, Any]]) -> int:
        return len(json.dumps(wire, ensure_ascii=False)) // 4 + len(json.dumps(self._tools)) // 4


def is_summary_request(messages: list[BaseMessage]) -> bool:
    first = str(messages[0].content) if messages else ""
    last = str(messages[-1].content) if messages else ""
    return (isinstance(messages[0], SystemMessage) and first.startswith("You are compacting")) or \
        "Messages to summarize:" in last or "Context Extraction Assistant" in first + last


# ----------------------------------------------------------------------------- the agents


def run_bashgraph(transcript: Transcript, model: Recorder, workdir: str) -> None:
    config = AgentConfig(workdir=workdir, max_steps=len(transcript.commands) + 5, context_window=transcript.window,
                         replan_after=10_000, max_replans=0)
    agent = build_graph(model=model, config=config, checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage(TASK)]}, {"configurable": {"thread_id": "t"}, "recursion_limit": 100_000})


def langchain_runner(middleware: Callable[[Transcript, Recorder], list[Any]]) -> Callable[..., None]:
    def run(transcript: Transcript, model: Recorder, workdir: str) -> None:
        from langchain.agents import create_agent

        # bashgraph's own system prompt and tools (the public LangChain tools, giving the same
        # answers): what differs is only what each agent keeps of the conversation.
        tools = [make_bash_tool(background=True, cwd=workdir), *make_job_tools()]
        agent = create_agent(model, tools, system_prompt=DEFAULT_SYSTEM_PROMPT,
                             middleware=middleware(transcript, model))
        agent.invoke({"messages": [HumanMessage(TASK)]}, {"recursion_limit": 100_000})
    return run


def summarization(transcript: Transcript, model: Recorder) -> list[Any]:
    from langchain.agents.middleware import SummarizationMiddleware

    return [SummarizationMiddleware(model, trigger=("tokens", int(transcript.window * 0.75)), keep=("messages", 20))]


def context_editing(transcript: Transcript, model: Recorder) -> list[Any]:
    from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware

    return [ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=int(transcript.window * 0.75), keep=3)])]


AGENTS: dict[str, Callable[..., None]] = {
    "bashgraph": run_bashgraph,
    "create_agent": langchain_runner(lambda t, m: []),
    "+ Summarization": langchain_runner(summarization),
    "+ ContextEditing": langchain_runner(context_editing),
}


# ----------------------------------------------------------------------------- measuring


@dataclass
class Row:
    agent: str
    transcript: str
    total: int
    largest: int
    stable: float
    task_kept: bool
    commands_kept: float
    failures_kept: float | None
    seconds: float
    estimate_ratios: list[float] = field(default_factory=list)


def estimate_ratios(model: Recorder, tokenizer: Any) -> list[float]:
    """bashgraph's estimate of every 10th request over a real tokenizer's count of the same text
    (contents, tool calls as JSON, 4 tokens a message; the tool schemas left out of both)."""
    from bashgraph.graph.tokens import estimate

    ratios = []
    for messages in model.raw[::10]:
        real = 0
        for message in messages:
            calls = json.dumps([c["args"] for c in getattr(message, "tool_calls", [])])
            text = f"{message.content}{calls if calls != '[]' else ''}"
            real += len(tokenizer.tokenize(text.encode(), add_bos=False)) + 4
        ratios.append(estimate(messages) / real)
    return ratios


def smollm2_tokenizer() -> Any:
    """SmolLM2's tokenizer (the bundled model's vocabulary only), or None without the extra."""
    try:
        from llama_cpp import Llama

        from bashgraph.graph.models.local import bundled_model_path

        return Llama(model_path=str(bundled_model_path()), vocab_only=True, verbose=False)
    except Exception:  # the local extra is optional: the error column is then left out
        return None


def measure(agent: str, transcript: Transcript, tokenizer: Any = None) -> Row:
    model = Recorder(transcript.commands)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as workdir:
        AGENTS[agent](transcript, model, workdir)
    seconds = time.perf_counter() - started
    sizes = [model.tokens(r) for r in model.requests]
    stable = sum(prev == cur[:len(prev)] for prev, cur in zip(model.requests, model.requests[1:], strict=False))
    last = json.dumps(model.requests[-1], ensure_ascii=False)
    named = sum(json.dumps(c, ensure_ascii=False)[1:-1] in last for c in transcript.commands)
    failed = sum(evidence in last for evidence in transcript.failures.values())
    return Row(agent, transcript.name, sum(sizes) + sum(model.tokens(r) for r in model.summaries), max(sizes),
               stable / max(len(model.requests) - 1, 1), json.dumps(TASK)[1:-1] in last,
               named / len(transcript.commands), failed / len(transcript.failures) if transcript.failures else None,
               seconds, estimate_ratios(model, tokenizer) if tokenizer is not None and agent == "bashgraph" else [])


def per_step(steps: int) -> None:
    """bashgraph's time per step (model request to model request: the graph, our per-request
    work, one `true`, an in-memory checkpoint) at the start and the end of a long 8k-window run."""
    model = Recorder(["true"] * steps)
    with tempfile.TemporaryDirectory() as workdir:
        run_bashgraph(Transcript("per step", model.commands, 8_192), model, workdir)
    gaps = [b - a for a, b in zip(model.times, model.times[1:], strict=False)]
    first, last = sorted(gaps[:100]), sorted(gaps[-100:])
    start, end = first[len(first) // 2] * 1000, last[len(last) // 2] * 1000
    print(f"\nper step over {steps} steps (8k window, in-memory checkpoints): median "
          f"{start:.1f} ms in the first 100, {end:.1f} ms in the last 100")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter transcripts (a smoke run)")
    parser.add_argument("--agents", nargs="*", default=list(AGENTS), choices=list(AGENTS))
    parser.add_argument("--per-step", type=int, metavar="N", help="only time bashgraph's steps over N steps")
    args = parser.parse_args()
    if args.per_step:
        per_step(args.per_step)
        return
    tokenizer = smollm2_tokenizer()
    rows = [measure(agent, transcript, tokenizer) for transcript in transcripts(args.quick) for agent in args.agents]
    print("| transcript | agent | tokens sent | largest request | prefix-stable | task kept | commands named "
          "| failures' evidence | s |")
    print("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    for r in rows:
        failures = "—" if r.failures_kept is None else f"{r.failures_kept:.0%}"
        print(f"| {r.transcript} | {r.agent} | {r.total:,} | {r.largest:,} | {r.stable:.0%} | "
              f"{'yes' if r.task_kept else 'no'} | {r.commands_kept:.0%} | {failures} | {r.seconds:.1f} |")
    goals(rows)
    if args.quick:
        print("(--quick: most transcripts stay under the budget, so the goals are read from a full run)")
    ratios = sorted(x for r in rows for x in r.estimate_ratios)
    if ratios:
        print(f"estimate / SmolLM2 tokenizer over {len(ratios)} requests: min {ratios[0]:.2f}, "
              f"median {ratios[len(ratios) // 2]:.2f}, max {ratios[-1]:.2f} (above 1: the estimate is high)")
    sys.stdout.flush()


def goals(rows: list[Row]) -> None:
    """The issue's goals, checked on this run."""
    ours = {r.transcript: r for r in rows if r.agent == "bashgraph"}
    anchors = [r for r in rows if r.agent != "bashgraph"]
    fewer = all(ours[r.transcript].total < r.total for r in anchors if r.transcript in ours)
    summ = [r for r in anchors if r.agent == "+ Summarization"]
    ratio = sum(ours[r.transcript].total for r in summ) / max(sum(r.total for r in summ), 1)
    stable = min((r.stable for r in ours.values()), default=0.0)
    print(f"\nfewer tokens than every anchor on every transcript: {'yes' if fewer else 'NO'}")
    print(f"total vs create_agent + SummarizationMiddleware: {ratio:.2f}x (goal <= 0.5x)")
    print(f"prefix-stable requests, lowest transcript: {stable:.0%} (goal >= 90 %)")


if __name__ == "__main__":
    main()
