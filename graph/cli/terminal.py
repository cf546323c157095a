"""Progress on a terminal (rich): a spinner per running command with the tail of its output,
outcome badges, the model's words as they stream, and the question when a person must answer.

Text that bashgraph did not write itself (commands, the model's words, answers, questions,
thread ids, reasons, errors, command output) is printed as rich `Text` — never parsed as rich
markup — after `visible` / `one_line`: control characters show as symbols (`␛`), so no escape
sequence reaches the terminal. The final answer is Markdown, with links shown as `text (url)`
rather than as terminal hyperlinks. Commands a person copies (the resume command) are printed
without line breaks (`soft_wrap`): the terminal wraps them, and a copy gives the whole line.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO, cast

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.prompt import Prompt
from rich.spinner import Spinner
from rich.text import Text

from bashgraph.graph import FINAL_STATUSES
from bashgraph.graph.cli import questions
from bashgraph.graph.cli.markdown import renders_as_markdown, safe_markdown
from bashgraph.graph.cli.progress import (
    BADGE_WIDTH,
    DURATION_WIDTH,
    badge,
    compaction_line,
    duration,
    end_lines,
    job_line,
    preview_lines,
    step_line,
)
from bashgraph.graph.cli.signals import SignalAwareStdin
from bashgraph.graph.cli.status import ERROR_STATUSES
from bashgraph.tools.safety import one_line, visible

TAIL_LINES = 4
TOKEN_LINES = 3
#: What the live area keeps of one line of output, or of the model's words: no terminal is
#: wider, and an endless line (no newline in megabytes) then costs nothing per event.
LINE_CHARS = 1024
TOKEN_CHARS = TOKEN_LINES * LINE_CHARS
#: Badge colours by the badge's first word; every spawn error (timeout, not found, ...) is red.
_BADGE_STYLE = {"ok": "green", "exit": "yellow", "bad": "magenta"}
_END_STYLE = {"done": "bold green", "paused": "bold yellow", "interrupted": "bold yellow",
              "environment_fault": "bold magenta"}
#: What the run waits for after a node, shown next to the spinner when no command runs.
_WAITING_AFTER = {"agent": "starting commands", "tools": "deciding what to do next",
                  "retry": "deciding what to do next", "route": "waiting for the model"}
_WAITING_FOR_HOP = {"agent": "waiting for the model", "route": "deciding what to do next",
                    "retry": "waiting a moment before running it again",
                    "escalate": "deciding how to handle the failure",
                    "replan": "asking the model for a new plan", "__end__": "finishing"}


@dataclass
class _Running:
    command: str
    started: float
    spinner: Spinner = field(default_factory=lambda: Spinner("dots"))
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    partial: dict[str, str] = field(default_factory=dict)

    def add_output(self, stream: str, text: str) -> None:
        """Each line's start only (`LINE_CHARS`), and only the lines the tail can show."""
        *ended, rest = text.split("\n")
        start = self.partial.pop(stream, "")
        if ended:
            ended[0] = start + ended[0][:LINE_CHARS]
            for line in ended[-TAIL_LINES:]:
                self.tail.append(("! " if stream == "stderr" else "") + one_line(line[:LINE_CHARS]))
            start = ""
        self.partial[stream] = (start + rest[:LINE_CHARS])[:LINE_CHARS]


class TerminalRenderer:
    """rich renderer; one live area at the bottom, finished lines printed above it."""

    def __init__(self, console: Console | None = None, answers: TextIO | None = None) -> None:
        self.console = console or Console(highlight=False)
        self._answers = answers or cast("TextIO", SignalAwareStdin())
        """Where a person's answers are read: a read that Ctrl-C always interrupts, whichever
        thread receives it (a test gives its own lines)."""
        self._lock = threading.Lock()  # the live area is redrawn from rich's refresh thread
        self._running: dict[str, _Running] = {}
        self._tokens = ""
        self._waiting = "waiting for the model"
        self._spinner = Spinner("dots")
        self._last_reason: str | None = None
        self._live: Live | None = None

    # -- the live area -------------------------------------------------------------------------
    def view(self) -> RenderableType:
        """The live area: running commands with their output tail, else what the run waits for."""
        with self._lock:
            parts: list[RenderableType] = []
            for run in self._running.values():
                elapsed = f"{time.monotonic() - run.started:.1f}s"
                text = Text.assemble(("$ ", "dim"), run.command, (f"  {elapsed}", "dim"))
                run.spinner.update(text=self._fit(text, 2))  # the spinner's frame and a space
                parts.append(run.spinner)
                parts.extend(self._fit(Text("    " + line, style="dim")) for line in run.tail)
            if not parts:
                self._spinner.update(text=Text(self._waiting, style="dim"))
                parts.append(self._spinner)
                tokens = self._tokens.strip().split("\n")[-TOKEN_LINES:]
                parts.extend(self._fit(Text("  " + one_line(line), style="italic dim")) for line in tokens if line)
            return Group(*parts)

    def _fit(self, text: Text, margin: int = 0) -> Text:
        """`text` cut at the terminal's edge (…), so the live area's lines never wrap."""
        text.truncate(max(self.console.width - margin, 1), overflow="ellipsis")
        return text

    def _start_live(self) -> None:
        if self._live is None:
            self._live = Live(get_renderable=self.view, console=self.console,
                              refresh_per_second=8, transient=True, redirect_stderr=False)
            self._live.start()

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    # -- events ---------------------------------------------------------------------------------
    def emit(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind not in ("end", "paused"):
            self._start_live()
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(event)

    def _on_start(self, event: Mapping[str, Any]) -> None:
        verb = "resuming" if event.get("command") == "resume" else "thread"
        self.console.print(Text.assemble((f"{verb} ", "bold"), (one_line(event["thread_id"]), "bold cyan"),
                                         (one_line(f"  model {event.get('model')}"), "dim")))

    def _on_model_token(self, event: Mapping[str, Any]) -> None:
        with self._lock:  # the latest words only: a runaway reply is not copied whole per token
            self._tokens = (self._tokens + str(event["text"])[-TOKEN_CHARS:])[-TOKEN_CHARS:]

    def _on_model_reply(self, event: Mapping[str, Any]) -> None:
        with self._lock:
            self._tokens = ""
        text = visible(str(event.get("text") or "").strip())
        if not event.get("tool_calls"):
            self._print_answer(text)
        elif text:
            self.console.print(Text.assemble((f"model · step {event.get('step')}  ", "bold blue"), text))

    def _print_answer(self, text: str) -> None:
        """The final answer (already `visible`): Markdown in a panel, or past
        `MARKDOWN_MAX_CHARS` plain text written as it is (rich's layout costs tens of
        microseconds per line even for plain text; the terminal wraps the lines itself)."""
        if renders_as_markdown(text):
            answer = safe_markdown(text)
            self.console.print(Panel(answer, title="final answer", title_align="left", border_style="green"))
            return
        self._stop_live()  # the live area is drawn below the cursor: out of the way first
        self.console.print(Text(f"final answer ({len(text):,} characters, shown as plain text)",
                                style="bold green"))
        self.console.file.write(text + "\n")
        self.console.file.flush()

    def _on_command_start(self, event: Mapping[str, Any]) -> None:
        with self._lock:
            command = one_line(str(event.get("command")))
            self._running[str(event.get("call_id"))] = _Running(command, time.monotonic())

    def _on_command_output(self, event: Mapping[str, Any]) -> None:
        with self._lock:
            run = self._running.get(str(event.get("call_id")))
            if run is not None:
                run.add_output(str(event.get("stream")), str(event.get("text") or ""))

    def _on_command_end(self, event: Mapping[str, Any]) -> None:
        with self._lock:
            self._running.pop(str(event.get("call_id")), None)
        words = badge(event)
        style = _BADGE_STYLE.get(words.split()[0], "red")
        # Fixed columns, so a run's lines line up; a long command is cut at the terminal's
        # edge rather than wrapped under the badges (--json and `history` keep it whole).
        line = Text.assemble((f" {words:<{BADGE_WIDTH}} ", f"bold reverse {style}"), " ",
                             (f"{duration(event):>{DURATION_WIDTH}}", "dim"), "  $ ",
                             one_line(str(event.get("command"))))
        self.console.print(line, no_wrap=True, overflow="ellipsis")
        for output in preview_lines(event):
            self.console.print(Text(one_line(output), style="dim"), no_wrap=True, overflow="ellipsis")

    def _on_job_start(self, event: Mapping[str, Any]) -> None:
        self.console.print(Text(one_line(job_line(event)), style="cyan"))

    def _on_job_end(self, event: Mapping[str, Any]) -> None:
        self.console.print(Text(one_line(job_line(event)), style="cyan"))

    def _on_job_held(self, event: Mapping[str, Any]) -> None:
        self.console.print(Text(one_line(job_line(event)), style="bold yellow"))

    def _on_compaction(self, event: Mapping[str, Any]) -> None:
        self.console.print(Text(one_line(compaction_line(event)), style="magenta"))

    def _on_job_output(self, event: Mapping[str, Any]) -> None:
        """The last lines a read of a job returned, dimmed, like a command's live tail."""
        lines = [line for line in str(event.get("text") or "").splitlines() if line.strip()]
        tag = f"  {event.get('job_id')} {'!' if event.get('stream') == 'stderr' else '│'} "
        for line in lines[-TAIL_LINES:]:
            self.console.print(Text(one_line(tag + line), style="dim"), no_wrap=True, overflow="ellipsis")

    def _on_node(self, event: Mapping[str, Any]) -> None:
        node = event["node"]
        if node == "route" and event.get("reason"):
            self._last_reason = str(event["reason"])
        line = step_line(event, self._last_reason)
        if line:
            self.console.print(Text(one_line(line), style="bold yellow"))
        with self._lock:
            hop = "__end__" if event.get("status") in FINAL_STATUSES else event.get("next")
            self._waiting = (_WAITING_FOR_HOP.get(str(hop)) if hop else None) \
                or _WAITING_AFTER.get(node, "waiting for the model")

    def _on_answer(self, event: Mapping[str, Any]) -> None:
        self.console.print(Text(one_line(f"answer given: {questions.answer_words(event['answer'])}"), style="bold"))
        with self._lock:
            self._waiting = "applying the answer"

    def _on_paused(self, event: Mapping[str, Any]) -> None:
        self._stop_live()
        for question in event["questions"]:
            self._show(question, interactive=False)
        self.console.print(Text(one_line(f"answer with: {event['answer_with']}")), soft_wrap=True)

    def _on_end(self, event: Mapping[str, Any]) -> None:
        self._stop_live()
        if event["status"] in ERROR_STATUSES:
            error = Text.assemble(("bashgraph: error: ", "bold red"), one_line(str(event["reason"])))
            Console(stderr=True, highlight=False).print(error, soft_wrap=True)  # may hold a command
            return
        first, *rest = end_lines(event)
        self.console.print(Text(one_line(first), style=_END_STYLE.get(str(event["status"]), "bold red")))
        for line in rest:  # the resume command: never broken, so a copy of it runs as printed
            self.console.print(Text(one_line(line)), soft_wrap=True)

    # -- asking a person ------------------------------------------------------------------------
    def ask(self, question: Mapping[str, Any]) -> Any:
        """Show a pending question and its evidence; return the person's answer."""
        self._stop_live()
        self._show(question, interactive=True)
        choices = list(question.get("choices") or [])
        if question.get("kind") == "approval":
            return self._ask_approval(question, choices)
        return self._prompt("[bold]answer[/]", questions.default(question))

    def _ask_approval(self, question: Mapping[str, Any], choices: list[str]) -> Any:
        # The choices are listed in the box above; the prompt shows only the default.
        action = Prompt.ask("[bold]answer[/]", choices=choices, show_choices=False,
                            default=questions.default(question), console=self.console, stream=self._answers)
        if action == "edit":
            requests = question.get("requests") or [{}]
            proposed = str(requests[0].get("command") or "")
            # Not rich's `default=`: it would print the proposed command raw.
            prompt = Text.assemble("command to run instead (Enter: ", one_line(proposed), ")")
            command = Prompt.ask(prompt, default="", show_default=False, console=self.console, stream=self._answers)
            return {"action": "edit", "command": command or proposed}
        if action == "reject":
            # Not rich's `default=""` shown: it prints an empty `()`.
            message = Prompt.ask("message for the model (Enter: none)", default="", show_default=False,
                                 console=self.console, stream=self._answers)
            return {"action": "reject", "message": message} if message else "reject"
        return action

    def _prompt(self, text: str, default: str | None) -> str:
        while True:
            answer = (Prompt.ask(text, console=self.console, stream=self._answers) if default is None
                      else Prompt.ask(text, default=default, console=self.console, stream=self._answers)).strip()
            if answer:
                return answer

    def _show(self, question: Mapping[str, Any], *, interactive: bool) -> None:
        text = "\n".join(questions.lines(question, interactive=interactive))
        self.console.print(Panel(Text(text), title="waiting for you", title_align="left", border_style="yellow"))

    def pause(self) -> None:
        """Clear the live area (spinners, output tails): a signal's message comes next; the
        area comes back with the next event."""
        self._stop_live()

    def close(self) -> None:
        self._stop_live()
