"""What a command run without the sandbox can read of the agent process, as root and as a user.

Each probe is a fresh Python process (protect_secrets changes the whole process for good) that
holds a secret in its start-up environment and runs real commands with run_command: one reads
`/proc/$PPID/environ` through base64 (which redaction cannot see), one searches
`/proc/$PPID/mem` for the secret, one changes directory (the cwd channel must still work).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.graph.cli.conftest import cli_env
from tests.support.openai_server import FakeOpenAIServer, openai_server_fixture, text, tool_call  # noqa: F401

SECRET = "zq9x7-probe-secret-value-42"
WORKDIR = Path(__file__).resolve().parents[3]

#: Counts the secret's copies in the memory of the process given as argv[1].
MEM_SCAN = (
    "import sys\n"
    "pid, needle, n = sys.argv[1], sys.argv[2].encode(), 0\n"
    "try:\n"
    "    maps = open(f'/proc/{pid}/maps').read().splitlines(); mem = open(f'/proc/{pid}/mem', 'rb')\n"
    "except OSError as e:\n"
    "    print('refused', e.strerror); sys.exit()\n"
    "for line in maps:\n"
    "    a, b = (int(x, 16) for x in line.split()[0].split('-'))\n"
    "    try:\n"
    "        mem.seek(a); n += mem.read(b - a).count(needle)\n"
    "    except (OSError, ValueError):\n"
    "        pass\n"
    "print(n)\n"
)

PROBE = f"""
import base64, json, shlex, sys
from bashgraph.tools.runner.process import run_command
from bashgraph.tools.safety.secret_guard import protect_secrets
protection = protect_secrets() if sys.argv[1] == "protect" else None
environ = run_command("tr '\\\\0' '\\\\n' < /proc/$PPID/environ | base64 -w0")
scan = run_command(shlex.quote(sys.executable) + ' -c "$MEM_SCAN" $PPID {SECRET}')
moved = run_command("cd / && echo moved")
print(json.dumps({{
    "erased": list(protection.erased) if protection else [],
    "environ": base64.b64decode(environ.stdout or "").decode(errors="replace"),
    "environ_error": environ.stderr, "mem": scan.stdout.strip(), "cwd": moved.final_cwd,
}}))
"""


def probe(mode: str, python: str = sys.executable, pythonpath: str | None = None,
          user: list[str] | None = None) -> dict[str, Any]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SEKRIT_TOKEN": SECRET,
           "PYTHONPATH": pythonpath or os.pathsep.join(sys.path), "MEM_SCAN": MEM_SCAN}
    done = subprocess.run([*(user or []), python, "-c", PROBE, mode], env=env, cwd="/tmp",
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_without_protection_a_command_reads_the_agents_secrets() -> None:
    """The threat is real: the parent's start-up environment and memory both hold the secret."""
    seen = probe("none")
    assert SECRET in seen["environ"]
    assert seen["mem"].isdigit()
    assert int(seen["mem"]) > 0


@pytest.mark.skipif(os.geteuid() != 0, reason="the root case needs root")
def test_as_root_protection_hides_environ_and_memory() -> None:
    """As root: the environ block no longer holds the value, /proc/$PPID/mem is refused (the
    commands lack CAP_SYS_PTRACE), and commands still report their final directory."""
    seen = probe("protect")
    assert "SEKRIT_TOKEN" in seen["erased"]
    assert "SEKRIT_TOKEN=" in seen["environ"]  # the name stays, the value is gone
    assert SECRET not in seen["environ"]
    assert seen["mem"].startswith("refused"), seen["mem"]
    assert seen["cwd"] == "/"


@pytest.fixture
def as_nobody() -> Iterator[tuple[list[str], str, str]]:
    """setpriv to `nobody`, the system Python, and a copy of bashgraph.tools nobody can read
    (pytest's own tmp_path is private to root)."""
    setpriv, python = shutil.which("setpriv"), "/usr/bin/python3"
    if os.geteuid() != 0 or setpriv is None or not os.access(python, os.X_OK):
        pytest.skip("needs root, setpriv and /usr/bin/python3 to run a probe as nobody")
    root = Path(tempfile.mkdtemp(prefix="bashgraph-nobody-"))
    try:
        package = root / "bashgraph"
        shutil.copytree(WORKDIR / "tools", package / "tools",
                        ignore=shutil.ignore_patterns("__pycache__"))
        (package / "__init__.py").write_text("")
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"], python, str(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_as_a_user_protection_hides_environ_and_memory(as_nobody: tuple[list[str], str, str]) -> None:
    """As an ordinary user: unprotected, the same user's command reads everything; protected
    (non-dumpable), environ and mem are refused, and the cwd channel falls back to a file."""
    user, python, path = as_nobody
    assert SECRET in probe("none", python, path, user)["environ"]
    seen = probe("protect", python, path, user)
    assert SECRET not in seen["environ"]
    assert "Permission denied" in seen["environ_error"]
    assert seen["mem"].startswith("refused"), seen["mem"]
    assert seen["cwd"] == "/"


def test_the_cli_protects_its_secrets(tmp_path: Path, openai_server: FakeOpenAIServer) -> None:
    """`bashgraph run`, started cold with the key in its environment: the model asks for the
    agent's environ through base64 and gets no key back."""
    home, workdir = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    workdir.mkdir()
    env = {**cli_env(home, openai_server, tmp_path / "db.sqlite", workdir),
           "OPENAI_API_KEY": SECRET, "BASHGRAPH_APPROVAL": "never"}
    openai_server.add(tool_call("bash", {"command": "tr '\\0' '\\n' < /proc/$PPID/environ | base64 -w0"}),
                      text("done"))
    done = subprocess.run([sys.executable, "-m", "bashgraph.graph.cli", "run", "show env"], env=env,
                          cwd=home, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    answer = openai_server.chat_requests[1].messages[-1]["content"]
    shown = base64.b64decode(answer.strip().split()[0]).decode(errors="replace")
    assert "OPENAI_BASE_URL=" in shown  # it did read the agent's environ
    assert SECRET not in shown


SANDBOXED = """
import json, sys
from bashgraph.tools.runner.process import run_command
from bashgraph.tools.safety.sandbox import BwrapSandbox
from bashgraph.tools.safety.secret_guard import protect_secrets
protect_secrets()
with BwrapSandbox(sys.argv[1]) as box:
    result = run_command("cd /tmp && echo inside", cwd=sys.argv[1], sandbox=box)
print(json.dumps({"outcome": result.outcome.value, "out": result.stdout, "cwd": result.final_cwd}))
"""


def test_the_sandbox_still_works_in_a_protected_process(tmp_path: Path) -> None:
    """Non-dumpable and without CAP_SYS_PTRACE for children, bwrap still starts and reports."""
    from bashgraph.tools.safety.sandbox import sandbox_available

    reason = sandbox_available()
    if reason is not None:
        if os.environ.get("CI"):  # CI installs bubblewrap: a missing sandbox there is a failure
            pytest.fail(f"CI must run the sandbox tests: {reason}")
        pytest.skip(reason)
    done = subprocess.run([sys.executable, "-c", SANDBOXED, str(tmp_path)], capture_output=True,
                          text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"outcome": "ok", "out": "inside\n", "cwd": "/tmp"}
