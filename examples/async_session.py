"""The async session: a run cancelled mid-command (what Ctrl-C does), then resumed.

Cancelling the task stops the running command's process tree and frees the thread; the resume,
in a new session on the same SQLite file, reports the command `interrupted` to the model instead
of running it again.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from langchain_core.messages import ToolMessage

from bashgraph.graph import AgentConfig, aopen_session
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db, config = str(Path(tmp, "runs.sqlite")), AgentConfig(workdir=tmp, on_environment_error="model")
        model = ScriptedChatModel([calls_reply("touch started; sleep 60"), answer("The sleep was cut off; stopping.")])

        async def first_run() -> None:
            async with aopen_session(db, model=model, config=config) as session:
                async for chunk in session.arun({"messages": [("user", "sleep a minute")]}, "thread-1"):
                    print("update from", ", ".join(chunk))

        running = asyncio.create_task(first_run())
        while not Path(tmp, "started").exists():
            await asyncio.sleep(0.05)
        running.cancel()
        try:
            await running
        except asyncio.CancelledError:
            print("cancelled while `sleep 60` ran")

        async with aopen_session(db, model=model, config=config) as session:
            async for _ in session.arun(None, "thread-1"):  # continue the thread
                pass
            state = (await session.astate("thread-1")).values
        result = next(m for m in state["messages"] if isinstance(m, ToolMessage)).artifact
        print(f"the command: {result['outcome']}/{result['spawn_error']}")
        print(f"status: {state['status']}; answer: {state['messages'][-1].content}")


if __name__ == "__main__":
    asyncio.run(main())
