"""The real entry points, started cold: the `bashgraph` console script and `python -m`."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest


def test_console_script_prints_help_with_every_command() -> None:
    """`bashgraph --help` (the installed console script) lists the commands and exit statuses."""
    script = shutil.which("bashgraph")
    if script is None:
        pytest.skip("the console script is not installed (pip install -e .)")
    done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    for command in ("run", "resume", "threads", "history", "fork", "graph"):
        assert f"    {command} " in done.stdout
    assert "3 paused (waiting for a person)" in done.stdout.replace("\n", " ")


def test_python_dash_m_reports_a_usage_error_with_status_2() -> None:
    """`python -m bashgraph.graph.cli run` without a task: argparse's message, exit 2."""
    done = subprocess.run([sys.executable, "-m", "bashgraph.graph.cli", "run"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "the following arguments are required: TASK" in done.stderr
