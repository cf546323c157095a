"""The `bashgraph` command: run, resume, threads, history, fork, graph.

It parses arguments and calls the Python API (session, threads, draw, models) — nothing else.
Heavy modules are imported by the command that needs them, so `--help` and usage errors are
quick. Exit statuses and the `--json` event schema are documented in docs/cli.md.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from bashgraph.graph.cli.status import ExitStatus, ResumeHint, absolute
from bashgraph.tools.safety import one_line

if TYPE_CHECKING:
    from bashgraph.graph import AgentConfig
    from bashgraph.graph.cli.progress import Renderer
    from bashgraph.graph.cli.run import RunSettings

Handler = Callable[[argparse.Namespace], int]
ANSWER_HELP = ("answer to the pending question: retry, skip, abort or a hint (environment fault); "
               "approve, reject or a JSON object such as '{\"action\": \"edit\", \"command\": \"ls\"}' "
               "(approval)")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `bashgraph` console script; returns the exit status."""
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C before a command set up its own handling (imports, set-up)
        return ExitStatus.INTERRUPTED


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
        return exit_.code if isinstance(exit_.code, int) else ExitStatus.USAGE
    undecodable = _not_utf8(args)
    if undecodable:
        print(f"bashgraph: error: {undecodable} is not valid UTF-8 text", file=sys.stderr)
        return ExitStatus.USAGE
    handler: Handler = args.handler
    if args.command in ("run", "resume"):  # the commands that start shell commands
        from bashgraph.tools.safety import protect_secrets

        protect_secrets()  # what commands can read of this process: see docs/safety.md
    try:
        return handler(args)
    except BrokenPipeError:
        return _output_closed()


def _not_utf8(args: argparse.Namespace) -> str | None:
    """The first argument Python could only decode with lone surrogates (bytes that are not
    UTF-8), by its name: a task or thread id like that cannot be sent to a model or printed."""
    for name, value in vars(args).items():
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and not text.isascii():
                try:
                    text.encode()
                except UnicodeEncodeError:
                    return name.replace("_", " ")
    return None


def _output_closed() -> int:
    """stdout was closed under us (`bashgraph threads | head -1`): stop quietly, as other tools
    do (a run says where it stopped on stderr first: graph/cli/run.py)."""
    import os

    with contextlib.suppress(OSError):
        # The interpreter's last flush of stdout would fail again, with a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return ExitStatus.PIPE_CLOSED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bashgraph",
        description="A LangGraph agent that gets work done with shell commands and knows how "
                    "each one failed.",
        epilog="exit status: 0 done, 1 failed, 2 usage, 3 paused (waiting for a person), "
               "4 environment fault, 130 interrupted (Ctrl-C). See docs/cli.md.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="start a task on a new thread (or a finished one)")
    run.add_argument("task", metavar="TASK", help="what to do, in plain words")
    run.add_argument("--thread", metavar="ID", help="thread id (default: a new one)")
    _run_options(run)
    run.set_defaults(handler=_run)

    resume = commands.add_parser("resume", help="continue a stopped thread")
    resume.add_argument("thread", metavar="THREAD")
    resume.add_argument("--answer", metavar="ANSWER", help=ANSWER_HELP)
    _run_options(resume)
    resume.set_defaults(handler=_resume)

    threads = commands.add_parser("threads", help="list threads: id, status, last update, task")
    _db_option(threads)
    threads.add_argument("--json", action="store_true", help="one JSON object per thread")
    threads.set_defaults(handler=_inspect("threads"))

    history = commands.add_parser("history", help="list a thread's checkpoints, newest first")
    history.add_argument("thread", metavar="THREAD")
    _db_option(history)
    history.add_argument("--json", action="store_true", help="one JSON object per checkpoint")
    history.set_defaults(handler=_inspect("history"))

    fork = commands.add_parser("fork", help="copy a checkpoint into a new thread (prints its id)")
    fork.add_argument("thread", metavar="THREAD")
    fork.add_argument("--checkpoint", metavar="ID", required=True, help="from `bashgraph history`")
    fork.add_argument("--thread", dest="new_thread", metavar="NEW", help="id of the new thread")
    _db_option(fork)
    fork.set_defaults(handler=_inspect("fork"))

    graph = commands.add_parser("graph", help="draw the agent's graph")
    graph.add_argument("--format", choices=("mermaid", "ascii", "png", "dot"), default="mermaid")
    graph.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    graph.set_defaults(handler=_inspect("graph"))
    return parser


class _VersionAction(argparse.Action):
    """`--version`: looked up only when asked for (importlib.metadata is not free to import)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"bashgraph {version()}")
        parser.exit()


def version() -> str:
    """The installed distribution's version; "unknown" when run from a source tree not installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    try:
        return installed_version("bashgraph")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="PATH|URL",
                        help="checkpoint database: a SQLite file or postgresql://... "
                             "(default: $BASHGRAPH_DB, else ~/.local/state/bashgraph/checkpoints.sqlite)")


def _run_options(parser: argparse.ArgumentParser) -> None:
    _db_option(parser)
    parser.add_argument("--model", help="model name (default: $BASHGRAPH_MODEL; 'local' for the bundled one)")
    parser.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)")
    parser.add_argument("--workdir", metavar="DIR", help="directory the first command runs in (default: .)")
    parser.add_argument("--timeout", type=float, metavar="S", help="time limit of a command, seconds")
    parser.add_argument("--max-steps", type=int, metavar="N", help="model calls allowed in one run")
    parser.add_argument("--on-env-error", choices=("ask", "stop", "model"),
                        help="what an environment fault does: ask a person, stop, or tell the model")
    parser.add_argument("--request-timeout", type=float, metavar="S", help="time limit of one model request")
    parser.add_argument("--model-retries", type=int, metavar="N", help="retries of a model request on 429/5xx")
    parser.add_argument("--retry-after-max", type=float, metavar="S",
                        help="longest Retry-After waited for; a longer one stops the run (default 60)")
    parser.add_argument("--keep-think", action="store_true", default=None,
                        help="keep a leading <think>…</think> block in the model's text")
    parser.add_argument("--context-window", type=int, metavar="TOKENS",
                        help="tokens the model takes per request (default: what the server says, else 32768)")
    parser.add_argument("--approval", choices=("never", "rules", "always"),
                        help="when to ask a person before a command (default: rules)")
    parser.add_argument("--rule", action="append", metavar="ACTION:PATTERN",
                        help="approval rule, e.g. 'ask:git push *' (repeatable; see docs/safety.md)")
    parser.add_argument("--policy", metavar="FILE", help="TOML or JSON file of approval rules")
    parser.add_argument("--sandbox", action="store_true", default=None,
                        help="run every command in bubblewrap (read-only system, no network)")
    parser.add_argument("--allow-network", action="store_true", default=None,
                        help="with --sandbox: keep the network")
    parser.add_argument("--json", action="store_true", help="print one JSON event per line")


# ----------------------------------------------------------------------------- run / resume


def _run(args: argparse.Namespace) -> int:
    from bashgraph.graph.cli.run import run_task

    settings = _run_settings(args)
    if isinstance(settings, ExitStatus):
        return settings
    return run_task(args.task, args.thread or new_thread_id(), settings)


def _resume(args: argparse.Namespace) -> int:
    from bashgraph.graph.cli.questions import read_answer
    from bashgraph.graph.cli.run import resume_thread

    settings = _run_settings(args)
    if isinstance(settings, ExitStatus):
        return settings
    answer = None if args.answer is None else read_answer(args.answer)
    return resume_thread(args.thread, answer, settings)


def new_thread_id() -> str:
    """Sortable by start time, unique enough for one person's database."""
    import secrets
    import time

    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def _run_settings(args: argparse.Namespace) -> RunSettings | ExitStatus:
    """Settings from flags and environment, the model, and the renderer; or a usage error."""
    from bashgraph.graph import ConfigError, StoreError, make_policy
    from bashgraph.graph.cli.run import RunSettings
    from bashgraph.graph.models import make_chat_model, model_notice
    from bashgraph.tools.safety import PolicyError

    try:
        config = agent_config(args)
        make_policy(config)  # a bad --rule or --policy file: one line now, not a traceback later
        notice = model_notice(config)  # said by the run once the thread passed its checks
        model = make_chat_model(config)
        hint = ResumeHint(repeated_options(args))  # reads --db: a URL it cannot place is an error
    except (ConfigError, PolicyError, StoreError) as exc:
        print(f"bashgraph: error: {one_line(str(exc))}", file=sys.stderr)
        return ExitStatus.USAGE
    renderer, tokens, ask = _renderer(args.json)
    return RunSettings(db=args.db, config=config, model=model, renderer=renderer, hint=hint,
                       tokens=tokens, ask=ask, notice=notice)


def agent_config(args: argparse.Namespace) -> AgentConfig:
    """The settings of `run`/`resume`: their flags, by the settings' flat names, over the
    `BASHGRAPH_*` variables (a flag not given is None: the variable or the default holds)."""
    from bashgraph.graph import AgentConfig

    return AgentConfig.from_env(
        workdir=args.workdir, timeout_s=args.timeout, max_steps=args.max_steps,
        on_environment_error=args.on_env_error, model=args.model, base_url=args.base_url,
        request_timeout_s=args.request_timeout, model_max_retries=args.model_retries,
        model_retry_after_max_s=args.retry_after_max, context_window=args.context_window,
        approval=args.approval, rules=tuple(args.rule) if args.rule else None,
        policy_file=args.policy, sandbox=args.sandbox, allow_network=args.allow_network,
        keep_think=args.keep_think,
    )


def _renderer(as_json: bool) -> tuple[Renderer, bool, Callable[[dict[str, Any]], Any] | None]:
    """JSON lines; rich on a terminal (it streams the model's words and can ask); plain lines."""
    from bashgraph.graph.cli.progress import JsonRenderer, PlainRenderer

    if as_json:
        return JsonRenderer(), False, None
    if sys.stdout.isatty():
        from bashgraph.graph.cli.terminal import TerminalRenderer

        terminal = TerminalRenderer()
        return terminal, True, terminal.ask if sys.stdin.isatty() else None
    return PlainRenderer(), False, None


#: Options a printed resume command repeats when they were given: (attribute, flag, is a path).
_REPEATED = (
    ("db", "--db", True), ("model", "--model", False), ("base_url", "--base-url", False),
    ("workdir", "--workdir", True), ("timeout", "--timeout", False),
    ("max_steps", "--max-steps", False), ("on_env_error", "--on-env-error", False),
    ("request_timeout", "--request-timeout", False), ("model_retries", "--model-retries", False),
    ("retry_after_max", "--retry-after-max", False),
    ("context_window", "--context-window", False),
    ("approval", "--approval", False), ("policy", "--policy", True),
)


def repeated_options(args: argparse.Namespace) -> tuple[str, ...]:
    """The run options given on this command line, as `resume` must repeat them."""
    words: list[str] = []
    for name, flag, is_path in _REPEATED:
        value = getattr(args, name)
        if value is not None:
            words += [flag, absolute(str(value)) if is_path else str(value)]
    words += [word for rule in args.rule or () for word in ("--rule", rule)]
    words += [flag for name, flag in (("sandbox", "--sandbox"), ("allow_network", "--allow-network"),
                                      ("keep_think", "--keep-think"))
              if getattr(args, name)]
    return tuple(words)


# ----------------------------------------------------------------------------- inspection


def _inspect(command: str) -> Handler:
    def handler(args: argparse.Namespace) -> int:
        from bashgraph.graph.cli.inspection import run_inspection

        return run_inspection(command, args)

    return handler

