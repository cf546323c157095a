"""A resume with other approval rules: what the new rules deny is refused, even once the step's
routing was saved under the old ones (a crash between the model's step and its commands)."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import ToolMessage

from bashgraph.graph import AgentConfig
from bashgraph.graph.session import open_session
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply


def test_a_command_the_resuming_rules_deny_does_not_run(tmp_path: Path) -> None:
    precious, db = tmp_path / "precious", str(tmp_path / "db.sqlite")
    precious.touch()
    model = ScriptedChatModel([calls_reply(f"rm -f {precious}"), answer("done")])
    with open_session(db, model=model, config=AgentConfig(workdir=str(tmp_path))) as session:
        for _ in session.run({"messages": [("user", "go")]}, "t", interrupt_before=["tools"]):
            pass
        assert session.state("t").next == ("tools",)
    stricter = AgentConfig(workdir=str(tmp_path), rules=("deny:rm *",))
    with open_session(db, model=model, config=stricter) as session:
        for _ in session.run(None, "t"):
            pass
        answers = [m for m in session.state("t").values["messages"] if isinstance(m, ToolMessage)]
    assert precious.exists()
    assert [m.artifact["outcome"] for m in answers] == ["spawn_error"]
    assert "denied by rule 'rm *'" in str(answers[0].content)
