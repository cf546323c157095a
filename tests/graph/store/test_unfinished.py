"""The Python API after a death between a step's saved writes and its checkpoint (LangGraph's
`next` then reads empty): new input is refused, `run(None, ...)` continues to the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from bashgraph.graph import AgentConfig
from bashgraph.graph.errors import UnfinishedThreadError
from bashgraph.graph.session import open_session
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply


class Died(Exception):
    """Stands for the process dying at that write (nothing after it happens)."""


def test_new_input_is_refused_until_the_pending_writes_are_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = SqliteSaver.put

    def put(self: SqliteSaver, config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        if metadata.get("step") == 4:
            raise Died
        return original(self, config, checkpoint, metadata, versions)

    db = str(tmp_path / "db.sqlite")
    model = ScriptedChatModel([calls_reply(f"echo one >> {tmp_path}/runs"), calls_reply(f"echo two >> {tmp_path}/runs"),
                               answer("done")])
    config = AgentConfig(workdir=str(tmp_path))
    with open_session(db, model=model, config=config) as session:
        monkeypatch.setattr(SqliteSaver, "put", put)
        with pytest.raises(Died):
            for _ in session.run({"messages": [HumanMessage("count")]}, "t1"):
                pass
        monkeypatch.setattr(SqliteSaver, "put", original)
        assert session.state("t1").next == ()  # what made the CLI think it had finished
        with pytest.raises(UnfinishedThreadError):
            for _ in session.run({"messages": [HumanMessage("something else")]}, "t1"):
                pass
        for _ in session.run(None, "t1"):
            pass
        assert session.state("t1").values["status"] == "done"
    assert (tmp_path / "runs").read_text() == "one\ntwo\n"
