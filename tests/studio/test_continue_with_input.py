"""Under the real `langgraph dev`: a run cancelled mid-command (or whose server was killed), then
continued with a new message or with `input={}` (not `None`), answers the cut-off call before the
model is called again.

LangGraph drops the stopped step when a thread goes on with input, so before this the model got
a history with an unanswered call: real servers answer that with HTTP 400, and with `{}` a
lenient one asked for the command again, which ran twice. The scripted model server here
refuses such a history as real ones do; the command must have run once, and the model must
have been told it was interrupted, right after the reply that asked for it.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.studio.test_exactly_once import (
    DEV_FLUSH_S,
    Server,
    _assert_told_interrupted,
    _marked_processes,
    _runs,
    _script,
    _start,
    _wait_for,
    model,  # noqa: F401 (the fixture)
    server,  # noqa: F401 (the fixture)
)
from tests.support.openai_server import FakeOpenAIServer, text

pytestmark = pytest.mark.slow

INPUTS: dict[str, Any] = {
    "message": {"messages": [{"role": "user", "content": "what happened?"}]},
    "empty": {},
}


@pytest.mark.parametrize("inputs", INPUTS)
def test_a_cancelled_run_continued_with_input_tells_the_model_and_runs_nothing_twice(
    server: Server, model: FakeOpenAIServer, inputs: str  # noqa: F811 (the fixtures)
) -> None:
    from langgraph_sdk import get_sync_client

    _script(model)
    work = Path(server.env["BASHGRAPH_WORKDIR"])
    counter = work / "counter"
    client, thread_id, run_id = _start(server)
    _wait_for(lambda: _runs(counter) == 1, "the command to start")
    client.runs.cancel(thread_id, run_id, wait=True)
    _wait_for(lambda: not _marked_processes(str(work)), "the cancelled command's tree to stop", 10)

    state = get_sync_client(url=server.url).runs.wait(thread_id, "bashgraph", input=INPUTS[inputs])

    assert _runs(counter) == 1, "the cancelled command ran a second time"
    _assert_told_interrupted(model, state)  # no request was refused: each call had its answer
    roles = [m["role"] for m in model.chat_requests[-1].messages]
    tail = ["assistant", "tool", "user"] if inputs == "message" else ["assistant", "tool"]
    assert roles[-len(tail):] == tail, roles


def test_a_run_cut_off_by_a_server_crash_continued_with_a_message_answers_the_call_first(
    server: Server, model: FakeOpenAIServer  # noqa: F811 (the fixtures)
) -> None:
    """kill -9 of the whole server while the command runs, a new server on the same state, and a
    new message. The new server takes the cut-off run up again itself (the message's run queues
    behind it): the command is stopped and reported `interrupted`, never run again, and each of
    the two model requests after the restart carries every answer."""
    from langgraph_sdk import get_sync_client

    _script(model)
    model.add(text("noted"))
    work = Path(server.env["BASHGRAPH_WORKDIR"])
    counter = work / "counter"
    _client, thread_id, _run_id = _start(server)
    _wait_for(lambda: _runs(counter) == 1, "the command to start")
    time.sleep(DEV_FLUSH_S + 2)  # one state flush of langgraph dev after the command started
    server.stop(signal.SIGKILL)
    server.start()

    state = get_sync_client(url=server.url).runs.wait(thread_id, "bashgraph", input=INPUTS["message"])

    assert _runs(counter) == 1, "the command cut off by the crash ran a second time"
    _assert_told_interrupted(model, state)
    _wait_for(lambda: not _marked_processes(str(work)), "no process of the command to be left", 10)
