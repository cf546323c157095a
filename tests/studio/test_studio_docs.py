"""docs/cli.md's LangGraph Studio section tells users to start the server the way the tests do."""

from __future__ import annotations

import re
from pathlib import Path

CLI_DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def studio_section() -> str:
    text = CLI_DOC.read_text()
    start = text.index("## LangGraph Studio")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def test_the_studio_command_needs_no_allow_blocking() -> None:
    """The documented `langgraph dev` command runs the server strict (the test server runs so)."""
    section = studio_section()
    commands = re.findall(r"```[a-z]*\n(.*?)```", section, flags=re.DOTALL)
    assert any("langgraph dev" in command for command in commands)
    assert not any("--allow-blocking" in command for command in commands)
    assert not re.search(r"\badd `--allow-blocking`", section)
