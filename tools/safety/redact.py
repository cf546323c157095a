"""Keep secrets out of command output before it reaches the model, the checkpoints or the journal.

Two sources of secrets, matched by one compiled regular expression (one pass over the text):

* values we know: the values of the environment variables whose names look like credentials
  (`options.is_secret_name`, plus values that carry a password inside a URL). The environment
  scrubbing keeps them out of a command's environment, but a command can still read them from a
  file (`cat .env`) and print them;
* well-known key shapes (`SHAPES`): OpenAI, Anthropic, AWS, GitHub, Slack, Google keys, JWTs,
  PEM private keys, `Bearer` tokens and `user:password@` in URLs, whoever they belong to.

Each match becomes `[REDACTED:<name>]`: the variable's name for a known value, else the shape's
kind. Known values shorter than `MIN_SECRET_LENGTH` are not redacted: a 3-character "secret"
would shred ordinary text and hide nothing worth hiding.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping

from bashgraph.tools.results import CommandResult
from bashgraph.tools.runner.options import has_secret_value, is_secret_name

MIN_SECRET_LENGTH = 6
#: Kind -> pattern. Each starts with a plain character: the whole alternation then starts with
#: literals only, which lets the regex engine skip ahead in C instead of trying every branch at
#: every position (25x faster on ordinary output). Shapes that need a word boundary before them
#: get it checked in `_label` for the same reason. Order matters (`sk-ant-` before `sk-`).
SHAPES: dict[str, str] = {
    "private_key": r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?"
                   r"(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
    "anthropic_key": r"sk-ant-[A-Za-z0-9_\-]{20,}",
    "openai_key": r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
    "aws_access_key": r"A(?:KIA|SIA)[0-9A-Z]{16}\b",
    "github_token": r"g(?:h[pousr]_[A-Za-z0-9]{36,}|ithub_pat_[A-Za-z0-9_]{22,})",
    "slack_token": r"xox[abposr]-[A-Za-z0-9\-]{10,}",
    "google_api_key": r"AIza[0-9A-Za-z_\-]{35}",
    # The one shape whose run must be followed by something (`.`): without the boundary,
    # every `eyJ` inside a long run of `eyJeyJ…` would scan to the run's end (quadratic).
    # The look-behind comes after the first character, which stays a plain literal.
    "jwt": r"e(?<![A-Za-z0-9_\-]e)yJ[A-Za-z0-9_\-]{5,}+\.eyJ[A-Za-z0-9_\-]{5,}+\.[A-Za-z0-9_\-]{10,}",
    # `Bearer ` and `scheme://user:` stay visible: they say what was there.
    "bearer_token": r"Bearer +[A-Za-z0-9._~+/=\-]{8,}",
    "bearer_token_lower": r"bearer +[A-Za-z0-9._~+/=\-]{8,}",
    "url_password": r"://[^/@\s:]*:[^/@\s]+(?=@)",
}
_WORD_BOUNDED = frozenset({"anthropic_key", "openai_key", "aws_access_key", "github_token",
                           "slack_token", "google_api_key", "jwt"})


class Redactor:
    """Replaces known secret values and well-known key shapes in text.

    `secrets` is either a mapping of names to values (the names label the redactions) or plain
    values (labelled `secret`).
    """

    def __init__(self, secrets: Mapping[str, str] | Iterable[str] = ()) -> None:
        named = secrets.items() if isinstance(secrets, Mapping) else (
            ("secret", value) for value in secrets)
        self._names: dict[str, str] = {}
        for name, value in named:
            if len(value) >= MIN_SECRET_LENGTH:
                self._names.setdefault(value, name)
        shapes = [f"{re.escape(p[0])}(?P<{kind}>{p[1:]})" for kind, p in SHAPES.items()]
        self._pattern = re.compile("|".join([*_literal_alternatives(self._names), *shapes]))

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Redactor:
        """A redactor for every variable of `environ` that the environment scrubbing drops."""
        return cls({name: value for name, value in environ.items()
                    if is_secret_name(name) or has_secret_value(value)})

    @property
    def known_values(self) -> int:
        """How many secret values are redacted by value (not counting the shapes)."""
        return len(self._names)

    def redact(self, text: str) -> str:
        """`text` with every secret replaced by `[REDACTED:<name or kind>]`."""
        return self._pattern.sub(self._label, text) if text else text

    def redact_result(self, result: CommandResult) -> CommandResult:
        """`result` with its output and detail redacted.

        `command` and `cwd` are kept: they are the model's own words, already stored verbatim in
        its message, and the journal and the "same command failed twice" check compare them.
        Spill files (`stdout_file`) are not rewritten; reading one through the tool redacts it.
        """
        stdout, stderr = self.redact(result.stdout), self.redact(result.stderr)
        detail = self.redact(result.detail) if result.detail else result.detail
        if (stdout, stderr, detail) == (result.stdout, result.stderr, result.detail):
            return result
        return dataclasses.replace(result, stdout=stdout, stderr=stderr, detail=detail)

    def _label(self, match: re.Match[str]) -> str:
        kind, text = match.lastgroup, match.group()
        if kind is None:  # a known value: those branches have no group
            return f"[REDACTED:{self._names.get(text, 'secret')}]"
        start = match.start()
        if kind in _WORD_BOUNDED and start and _is_word_char(match.string[start - 1]):
            return text  # `task-ant-…` is not a key
        if kind.startswith("bearer_token"):
            prefix, _, _ = text.partition(" ")
            return f"{prefix} [REDACTED:bearer_token]"
        if kind == "url_password":
            return text[: text.index(":", 3) + 1] + "[REDACTED:url_password]"
        return f"[REDACTED:{kind}]"


def _literal_alternatives(values: Iterable[str]) -> list[str]:
    """Values grouped by first character (`a(?:bc|b)`), longest first within each group.

    Values with different first characters never compete at one position; within a group the
    longer one is tried first, so a value containing another is replaced whole.
    """
    groups: dict[str, list[str]] = {}
    for value in sorted(values, key=len, reverse=True):
        groups.setdefault(value[0], []).append(re.escape(value[1:]))
    return [f"{re.escape(first)}(?:{'|'.join(rests)})" for first, rests in groups.items()]


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"
