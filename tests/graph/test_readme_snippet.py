"""The README's Python snippet, run as a newcomer would without a key: one clear error."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_snippet_without_a_key_ends_in_one_clear_error(tmp_path: Path) -> None:
    """The first error is bashgraph's ConfigError naming what to set, raised before anything runs;
    no frame of the OpenAI client is in the traceback."""
    snippet = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert snippet is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BASHGRAPH_"))}
    run = subprocess.run([sys.executable, "-c", snippet.group(1)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == (
        "bashgraph.graph.errors.ConfigError: model 'gpt-4.1-mini' needs OPENAI_API_KEY (OpenAI API) or "
        "OPENAI_BASE_URL / --base-url (another OpenAI-compatible server)")
    assert "/openai/" not in run.stderr
    assert "During handling" not in run.stderr
    assert list(tmp_path.iterdir()) == []  # nothing ran, no database was made
