"""What the benchmarks compare against: `create_agent`'s tools as most agents write them, and
the scripted replies both agents get (one command per model step, then an answer)."""

from __future__ import annotations

import asyncio
import subprocess

from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from bashgraph.graph.testing import answer, calls_reply


@tool("bash")
def bash(command: str) -> str:
    """Run a shell command (the anchor's tool: a plain subprocess, like most agents use)."""
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=False)
    return done.stdout + done.stderr


@tool("bash")
async def abash(command: str) -> str:
    """Run a shell command without blocking the event loop (the anchor's best async case)."""
    process = await asyncio.create_subprocess_exec(
        "bash", "-c", command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    return (out + err).decode()


def script(steps: int, command: str) -> list[AIMessage]:
    """`steps` replies that each run `command`, then the final answer."""
    return [*(calls_reply(command) for _ in range(steps)), answer("done")]
