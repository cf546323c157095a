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
