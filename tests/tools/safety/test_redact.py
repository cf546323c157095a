"""Secret redaction: known values by name, well-known key shapes by kind, results field by field."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bashgraph.tools.results import CommandResult, Outcome, SpawnErrorKind, spawn_failure
from bashgraph.tools.safety.redact import MIN_SECRET_LENGTH, SHAPES, Redactor

OPENAI = "sk-proj-" + "A1b2C3d4" * 6
ANTHROPIC = "sk-ant-api03-" + "Zz9_" * 10
JWT = ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
       "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U")
PEM = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\nAAAA\n"
       "-----END OPENSSH PRIVATE KEY-----")


@pytest.mark.parametrize(
    ("secret", "kind"),
    [
        (OPENAI, "openai_key"),
        ("sk-" + "x" * 48, "openai_key"),
        (ANTHROPIC, "anthropic_key"),
        ("AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
        ("ghp_" + "a" * 36, "github_token"),
        ("github_pat_11ABCDEFG0" + "x" * 40, "github_token"),
        ("xoxb-1234567890-abcdefghij", "slack_token"),
        ("AIza" + "S" * 35, "google_api_key"),
        (JWT, "jwt"),
        (PEM, "private_key"),
    ],
)
def test_well_known_key_shapes_are_redacted_by_kind(secret: str, kind: str) -> None:
    """Each shape is replaced whole by [REDACTED:<kind>], the text around it kept."""
    assert Redactor().redact(f"before {secret} after") == f"before [REDACTED:{kind}] after"


def test_bearer_tokens_and_url_passwords_keep_their_context() -> None:
    """`Bearer ` and `scheme://user:` stay; only the token and the password go."""
    text = "Authorization: Bearer abc.def-ghi_jkl\nurl=postgresql://app:hunter2@db:5432/x"
    assert Redactor().redact(text) == (
        "Authorization: Bearer [REDACTED:bearer_token]\n"
        "url=postgresql://app:[REDACTED:url_password]@db:5432/x")


def test_lowercase_bearer_is_redacted_too() -> None:
    """HTTP scheme names are case-insensitive; logs often print `bearer`."""
    assert Redactor().redact("authorization: bearer abcdefgh1234") == (
        "authorization: bearer [REDACTED:bearer_token]")


def test_every_shape_starts_with_a_plain_character() -> None:
    """The speed of the single alternation depends on every branch starting with a literal."""
    for pattern in SHAPES.values():
        assert pattern[0] not in ".^$*+?{}[]\\|()", pattern


def test_a_truncated_private_key_is_redacted_to_the_end() -> None:
    """A PEM block cut before its END line (capped output) is still hidden."""
    assert Redactor().redact("key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIE") == (
        "key:\n[REDACTED:private_key]")


def test_known_values_are_redacted_under_their_variable_name() -> None:
    """Values from the environment are labelled with the variable they came from."""
    redactor = Redactor({"DB_PASSWORD": "correct horse battery", "MY_TOKEN": "tok-123456"})
    text = "pw=correct horse battery t=tok-123456 tok-12"
    assert redactor.redact(text) == "pw=[REDACTED:DB_PASSWORD] t=[REDACTED:MY_TOKEN] tok-12"


def test_plain_values_are_labelled_secret_and_the_longest_match_wins() -> None:
    """Unnamed values read [REDACTED:secret]; a value containing another is replaced whole."""
    redactor = Redactor(["abcdef", "abcdefghij"])
    assert redactor.redact("x abcdefghij y abcdef") == "x [REDACTED:secret] y [REDACTED:secret]"
    assert redactor.redact("abcdefghij").count("REDACTED") == 1


def test_short_values_are_not_redacted() -> None:
    """Values under MIN_SECRET_LENGTH would shred ordinary text, so they are left alone."""
    short = "a" * (MIN_SECRET_LENGTH - 1)
    redactor = Redactor({"PASSWORD": short, "TOKEN": "1", "KEY": "true"})
    assert redactor.known_values == 0
    assert redactor.redact(f"{short} 1 true") == f"{short} 1 true"


def test_values_with_regex_characters_are_matched_literally() -> None:
    """A value such as `a.b*c(d)` matches only itself."""
    redactor = Redactor({"API_SECRET": "a.b*c(d)"})
    assert redactor.redact("a.b*c(d) axbbc(d)") == "[REDACTED:API_SECRET] axbbc(d)"


def test_from_environ_takes_secret_names_and_password_urls_only() -> None:
    """Variables the scrubbing drops are redacted; ordinary ones (HOME, PATH) are not."""
    environ = {"OPENAI_API_KEY": "opensesame-123", "GITHUB_TOKEN": "gh-tok-456789",
               "DATABASE_URL": "postgresql://u:pw@h/db", "HOME": "/home/someone",
               "PATH": "/usr/bin:/bin", "EDITOR": "vimvimvim"}
    redactor = Redactor.from_environ(environ)
    assert redactor.known_values == 3
    text = "opensesame-123 gh-tok-456789 postgresql://u:pw@h/db /home/someone vimvimvim"
    assert redactor.redact(text) == ("[REDACTED:OPENAI_API_KEY] [REDACTED:GITHUB_TOKEN] "
                                     "[REDACTED:DATABASE_URL] /home/someone vimvimvim")


def test_redact_result_covers_output_and_detail_but_not_the_command() -> None:
    """stdout, stderr and detail are redacted; command and cwd stay as the model wrote them."""
    redactor = Redactor({"API_KEY": "s3cr3t-value"})
    result = CommandResult(outcome=Outcome.EXIT_ERROR, command="cat .env", cwd="/w", exit_code=1,
                           stdout="API_KEY=s3cr3t-value\n", stderr=f"warn {OPENAI}\n",
                           stdout_bytes=21)
    clean = redactor.redact_result(result)
    assert clean.stdout == "API_KEY=[REDACTED:API_KEY]\n"
    assert clean.stderr == "warn [REDACTED:openai_key]\n"
    assert (clean.command, clean.cwd, clean.exit_code, clean.stdout_bytes) == (
        "cat .env", "/w", 1, 21)
    failed = spawn_failure(SpawnErrorKind.SANDBOX, "x", "bwrap: s3cr3t-value")
    assert redactor.redact_result(failed).detail == "bwrap: [REDACTED:API_KEY]"


def test_redact_result_returns_the_same_object_when_nothing_changes() -> None:
    """No secret, no copy."""
    result = CommandResult(outcome=Outcome.OK, command="ls", stdout="a\nb\n")
    assert Redactor({"K_TOKEN": "zzzzzzzz"}).redact_result(result) is result


def test_ordinary_text_is_left_alone() -> None:
    """Code, paths and prose that resemble nothing secret pass through unchanged."""
    text = ("def risk_task(sk): return 'skip-this'\n/home/u/.ssh/known_hosts\nBearer of news\n"
            "subtask-" + "a" * 30 + " BAKIAIOSFODNN7EXAMPLE\n"
            "https://example.com/a:b@c is not a URL password\nAKIA is a prefix\n")
    assert Redactor().redact(text) == text


def test_a_megabyte_with_a_hundred_known_values_is_redacted_in_well_under_a_second() -> None:
    """One compiled alternation: large outputs stay cheap (loose bound, not a benchmark)."""
    redactor = Redactor({f"SECRET_{i}": f"value-{i:04d}-xyz" for i in range(100)})
    text = ("lorem ipsum dolor sit amet " * 40 + "value-0042-xyz\n") * 1000
    started = time.perf_counter()
    redacted = redactor.redact(text)
    assert time.perf_counter() - started < 2.0
    assert redacted.count("[REDACTED:SECRET_42]") == 1000


def test_a_jwt_glued_to_a_word_is_left_and_a_later_one_still_found() -> None:
    """A JWT must start a word (as before), and a rejected start no longer hides the next one."""
    assert Redactor().redact(f"x{JWT}") == f"x{JWT}"
    assert Redactor().redact(f"x{JWT} {JWT}") == f"x{JWT} [REDACTED:jwt]"


#: Pieces of the shapes: starts without their ends, separators, and whole secrets.
SHAPE_PIECES = st.sampled_from([
    "eyJ", ".", "eyJabcde.", "sk-", "sk-ant-", "AKIA", "ghp_", "xoxb-", "AIza", "Bearer ",
    "bearer ", "://", ":", "@", "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----",
    "a", "Z9", "_-", " ", "\n", JWT, OPENAI,
])


@settings(max_examples=150, deadline=timedelta(seconds=2))
@given(st.lists(SHAPE_PIECES, min_size=1, max_size=20), st.integers(1, 50_000))
def test_any_mix_of_shape_pieces_is_redacted_in_linear_time(pieces: list[str], repeat: int) -> None:
    """Runs of starts that never end (`eyJeyJ…`, a JWT start with no dot) are where a pattern
    goes quadratic: 300 KB of one took over 30 s. The deadline bounds each example (up to
    300 KB), and whole secrets on their own are always found."""
    text = ("".join(pieces) * repeat)[:300_000]
    redacted = Redactor().redact(f"{text} {OPENAI} ")
    assert f" {OPENAI} " not in redacted
