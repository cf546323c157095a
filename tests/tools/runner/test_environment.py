"""The environment commands get: secrets scrubbed, explicit choices honoured."""

from __future__ import annotations

import pytest

from bashgraph.tools import is_secret_name, run_command, scrub_env
from bashgraph.tools.runner.options import minimal_env
from bashgraph.tools.safety.secret_names import has_secret_value

SECRET = "s3cr3t-value-for-tests"


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "LANGSMITH_API_KEY",
        "LANGCHAIN_TRACING_V2", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AZURE_CLIENT_ID",
        "GOOGLE_APPLICATION_CREDENTIALS", "GH_TOKEN", "GITHUB_TOKEN", "HF_TOKEN", "api_key",
        "apiKey", "MY_SERVICE_APIKEY", "DB_PASSWORD", "PGPASSWORD", "MYSQL_PWD", "DB_PASS",
        "SMTP_PASSWD", "SSH_AUTH_SOCK", "PRIVATE_KEY_PATH", "GPG_PASSPHRASE", "SESSION_COOKIE",
        "SLACK_WEBHOOK_URL", "SENTRY_DSN", "NPM_TOKEN", "DOCKER_AUTH_CONFIG", "MY_CREDENTIALS",
    ],
)
def test_secret_names_are_recognised(name: str) -> None:
    """Names of credentials, in any case and vendor namespace, are secret."""
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "PATH", "HOME", "LANG", "TERM", "USER", "PWD", "OLDPWD", "SHELL", "PYTHONPATH",
        "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "TOKENIZERS_PARALLELISM", "XDG_RUNTIME_DIR",
        "LC_ALL", "VIRTUAL_ENV", "CI", "GITHUB_WORKSPACE", "BASHGRAPH_RUN_ID",
    ],
)
def test_everyday_names_are_kept(name: str) -> None:
    """Ordinary variables, including ones that merely contain a stem (AUTHOR), are kept."""
    assert not is_secret_name(name)


def test_passwords_inside_urls_are_secret_values() -> None:
    """A URL carrying user:password is dropped whatever its variable is called."""
    assert has_secret_value("postgresql://app:hunter2@db:5432/x")
    assert not has_secret_value("https://example.org/path")
    assert not has_secret_value("postgresql://app@db/x")


def test_scrub_env_drops_secrets_and_keeps_pass_env() -> None:
    """scrub_env removes secret names unless they are passed through explicitly."""
    environ = {"PATH": "/bin", "OPENAI_API_KEY": "k", "GH_TOKEN": "t", "DB": "postgres://u:p@h/d"}
    assert scrub_env(environ) == {"PATH": "/bin"}
    assert scrub_env(environ, pass_env=["GH_TOKEN"]) == {"PATH": "/bin", "GH_TOKEN": "t"}


def test_env_output_shows_no_planted_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """`env` inside a command shows none of the secrets planted in the parent's environment."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("MY_DEPLOY_TOKEN", SECRET)
    monkeypatch.setenv("DATABASE_URL", f"postgresql://app:{SECRET}@db/x")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    result = run_command("env")
    assert SECRET not in result.stdout
    assert "HARMLESS_SETTING=visible" in result.stdout


def test_pass_env_lets_a_named_secret_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret named in pass_env reaches the command; others stay scrubbed."""
    monkeypatch.setenv("GH_TOKEN", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    result = run_command('echo "gh=$GH_TOKEN openai=$OPENAI_API_KEY"', pass_env=["GH_TOKEN"])
    assert result.stdout == f"gh={SECRET} openai=\n"


def test_explicit_env_is_set_and_not_scrubbed() -> None:
    """Variables given in `env` are the caller's choice: set as given, even secret-looking."""
    result = run_command('echo "$API_KEY $PLAIN"', env={"API_KEY": "chosen", "PLAIN": "p"})
    assert result.stdout == "chosen p\n"


def test_environment_changes_between_calls_are_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """A variable set after an earlier run reaches the next run (no stale cached environment)."""
    run_command("true")
    monkeypatch.setenv("BASHGRAPH_TEST_LATE", "late")
    assert run_command('echo "$BASHGRAPH_TEST_LATE"').stdout == "late\n"
    monkeypatch.delenv("BASHGRAPH_TEST_LATE")
    assert run_command('echo "${BASHGRAPH_TEST_LATE-unset}"').stdout == "unset\n"


def test_inherit_env_false_starts_from_a_minimal_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With inherit_env=False only PATH, HOME, LANG-like names and pass_env arrive."""
    monkeypatch.setenv("HARMLESS_SETTING", "x")
    monkeypatch.setenv("KEEP_ME", "k")
    result = run_command("env", inherit_env=False, pass_env=["KEEP_ME"])
    names = {line.split("=", 1)[0] for line in result.stdout.splitlines()}
    assert "HARMLESS_SETTING" not in names
    assert {"PATH", "KEEP_ME", "BASHGRAPH_RUN_ID"} <= names


def test_minimal_env_has_a_default_path() -> None:
    """Without PATH in the parent, commands still get a usable one."""
    assert minimal_env({"HOME": "/root"})["PATH"] == "/usr/local/bin:/usr/bin:/bin"


def test_every_command_carries_a_fresh_run_marker() -> None:
    """Each run gets its own BASHGRAPH_RUN_ID, the marker used to find escaped processes."""
    first = run_command('echo "$BASHGRAPH_RUN_ID"').stdout
    second = run_command('echo "$BASHGRAPH_RUN_ID"').stdout
    assert first != second
    assert len(first.strip().rsplit(":", 1)[-1]) == 32
