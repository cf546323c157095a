"""The commit check that .ci/run makes: each habit is caught, and good messages pass."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "check_commits.py"


def load_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_commits", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("subject", ["Fix the flaky pipe test", "Pass the reply's reasoning back",
                                     "Embed the drawing", "Refuse cut-off tool calls"])
def test_an_imperative_subject_with_a_body_passes(subject: str) -> None:
    assert load_check().problems(subject, "Because.") == []


@pytest.mark.parametrize(("subject", "body", "complaint"), [
    ("Fix " + "x" * 69, "why", "subject is 73 characters"),
    ("Fixed the test", "why", "use the imperative"),
    ("Fixes the test", "why", "use the imperative"),
    ("Adding a test", "why", "use the imperative"),
    ("fix the test", "why", "capital letter"),
    ("Fix the test.", "why", "full stop"),
    ("Fix the test", "  \n", "no body"),
])
def test_each_broken_habit_is_named(subject: str, body: str, complaint: str) -> None:
    [problem] = load_check().problems(subject, body)
    assert complaint in problem
