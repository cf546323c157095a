"""Which environment variables are secrets: by name, or by a password inside a URL value.

Whatever a command prints lands in the model's context, the checkpoints and the logs, so a
variable that looks like a credential is kept from it: the runner drops it from a command's
environment (tools/runner/environment.py), redaction replaces its value in output, the secret
guard keeps it from a command line.

The rule, case-insensitive, on the name split into words at `_`, `-` and `.`:

* a word *contains* one of `SECRET_STEMS` (so `apikey`, `GITHUB_TOKEN`, `DB_PASSWORD`,
  `SSH_AUTH_SOCK` all go), unless the word is one of `HARMLESS_WORDS` — a short, explicit list of
  everyday words that merely contain a stem (`AUTHOR` in `GIT_AUTHOR_NAME`, `TOKENIZERS` in
  `TOKENIZERS_PARALLELISM`, `KEYBOARD`);
* or a word *is* one of `SECRET_WORDS` (short words too common as substrings: `PASS`, `PWD`),
  except the shell's own `PWD`/`OLDPWD`;
* or the name starts with one of `SECRET_PREFIXES` (whole vendor namespaces: `OPENAI_`, `AWS_`...);
* or the *value* carries a password inside a URL (`postgresql://user:pw@host/db`).

Dropping a harmless variable costs a `pass_env` entry; leaking a key costs the key, so the rule
errs towards dropping.
"""

from __future__ import annotations

import functools
import re

SECRET_STEMS = (
    "KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDS", "AUTH",
    "PRIVATE", "COOKIE", "WEBHOOK",
)
SECRET_WORDS = frozenset({"PASS", "PWD", "PW", "PAT", "DSN"})
HARMLESS_WORDS = frozenset({"AUTHOR", "AUTHORS", "KEYBOARD", "KEYMAP", "TOKENIZERS"})
HARMLESS_NAMES = frozenset({"PWD", "OLDPWD"})
SECRET_PREFIXES = (
    "OPENAI_", "ANTHROPIC_", "LANGSMITH_", "LANGCHAIN_", "AWS_", "AZURE_", "GOOGLE_", "GCP_",
    "GCLOUD_", "GH_", "HF_", "HUGGING_FACE_", "HUGGINGFACE_", "MISTRAL_", "COHERE_", "GROQ_",
    "GEMINI_", "DEEPSEEK_", "TOGETHER_", "REPLICATE_", "OPENROUTER_", "XAI_", "VERTEX_",
    "SLACK_", "STRIPE_", "SENTRY_",
)

_WORD_SPLIT = re.compile(r"[_.\-]+")
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^/@\s:]*:[^/@\s]+@")


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True when an environment variable called `name` should not reach a command.

    Cached: the same few dozen names are checked on every command.
    """
    upper = name.upper()
    if upper in HARMLESS_NAMES:
        return False
    if upper.startswith(SECRET_PREFIXES):
        return True
    for word in _WORD_SPLIT.split(upper):
        if word in SECRET_WORDS:
            return True
        if word not in HARMLESS_WORDS and any(stem in word for stem in SECRET_STEMS):
            return True
    return False


def has_secret_value(value: str) -> bool:
    """True when `value` embeds a password in a URL (`scheme://user:password@host`)."""
    return "://" in value and _URL_PASSWORD.search(value) is not None
