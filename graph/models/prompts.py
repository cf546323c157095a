"""Texts the agent says to the model. Each one is built in exactly one place."""

DEFAULT_SYSTEM_PROMPT = """\
You are a careful engineer working in a Linux shell through the `bash` tool.
Run one command per tool call (or several independent calls at once). Each command starts in the
working directory the previous one ended in. When the task is done, answer in plain text without
calling a tool.

Every tool result tells you how the command ended:
- plain output: it succeeded (exit 0). Lines tagged [stderr] are warnings printed on the way.
- [exit code N] ...: the command ran and exited non-zero. That is evidence, not a crash: read
  [stdout]/[stderr] and decide. `grep` exiting 1 just means "no match"; 127 means the command
  does not exist here; 126 means it is not executable.
- [spawn error: KIND — ...]: the shell never ran or never finished (timeout, missing working
  directory, permission denied, killed, denied by a rule or a person). This is the environment,
  not your command's logic: do not repeat the same command unchanged; change approach or stop
  and explain.
- [args error] ...: your tool call itself was malformed; fix the arguments.
Long outputs are cut in the middle; the marker names a file holding the whole output.
Servers and watchers: see the `background` argument and the `bash_output`/`bash_kill` tools.
"""


def replan_message(attempts: list[str], reason: str) -> str:
    """The single message that asks for a new plan after repeated failures."""
    listing = "\n".join(f"{i}. {line}" for i, line in enumerate(attempts, 1))
    return (
        f"Stop and re-plan: {reason}.\n"
        f"Recent failed attempts:\n{listing}\n"
        "Do not run these commands again unchanged. Explain in one or two sentences what the "
        "evidence shows, then try a different approach, or give a final answer saying why the "
        "task cannot be done."
    )


def environment_fault_message(summary: str) -> str:
    """Told to the model when a spawn error is handed back to it (on_environment_error=model)."""
    return (
        f"Environment fault: {summary}\n"
        "The shell could not run this command; running it again unchanged will fail the same way. "
        "Use a different approach, or finish with a final answer that reports the fault."
    )


def skipped_message(summary: str) -> str:
    """Told to the model when a person chose to skip a failed command."""
    return f"A person chose to skip this failed command ({summary}). Continue without it."


def hint_message(hint: str) -> str:
    """A person's free-text hint after an escalation."""
    return f"A person looked at the environment fault and says: {hint}"


#: How the messages the graph writes start (a re-plan, an escalation's outcome, the note asking
#: again after an empty reply): they are not a person's task, so a compaction summarises them
#: instead of keeping them verbatim (a kept note would stand as an order to "reply again").
GRAPH_MESSAGE_PREFIXES = ("Stop and re-plan:", "Environment fault:", "A person chose to skip",
                          "A person looked at the environment fault", "Your last reply was empty:")

#: The id of the message that stands for a compacted history (graph/context.py): not a request.
SUMMARY_MESSAGE_ID = "bashgraph-context-summary"

SUMMARY_INSTRUCTIONS = """\
You are compacting the history of a shell agent's work so it can continue in a smaller context.
Below is a transcript of earlier turns. Write a summary for the agent itself, at most 300 words:
what was done and found (files, paths, versions, facts), what is still to do and the next step,
and what failed and why. The task text, the working directory, the background jobs and the list
of commands with their outcomes are kept separately: do not repeat them. Plain text, no tool calls."""


def compacted_summary(
    *, summarised: int, cwd: str, jobs: list[str], text: str | None, ledger: list[str], omitted: int
) -> str:
    """The message that stands for the compacted turns of a thread."""
    lines = [
        f"[Context compacted: the first {summarised:,} messages of this thread are summarised here "
        "(the tasks above are kept as they were; the full history stays in the thread's checkpoints). "
        "Cleared outputs name a file holding them: read it again with a command if you need it.]",
        f"Working directory: {cwd}",
        "Background jobs still running: " + ("; ".join(jobs) if jobs else "none"),
        "Summary of the earlier work:",
        text or "(no summary could be written; the commands below are what is known)",
        "Commands run in the summarised turns (outcome · command · why it failed):",
    ]
    if omitted:
        lines.append(f"[... {omitted:,} earlier commands not listed, successful ones first]")
    lines += [f"- {line}" for line in ledger] or ["- none"]
    return "\n".join(lines)
