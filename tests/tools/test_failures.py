"""The spawn error taxonomy: one entry per kind, read by results, the docs and (elsewhere) routing."""

from __future__ import annotations

import errno
import json
from collections import Counter

import pytest

from bashgraph.tools import TRANSIENT_KINDS as EXPORTED_TRANSIENT_KINDS
from bashgraph.tools import SpawnErrorKind as ExportedKind
from bashgraph.tools.failures import KINDS, UNLISTED_ERRNO_KIND, Nature, SpawnErrorKind, kind_of_errno
from bashgraph.tools.results import CommandResult, Outcome, args_error, spawn_failure
from tests.support.generated_docs import SECTIONS, expected_text, section_text

#: Every kind value a checkpoint, a journal row or a `--json` consumer may hold. Kinds may be
#: added; one removed or renamed from this list would make old checkpoints fail to load.
STORED_VALUES = ("not_found", "permission_denied", "timeout", "signal", "resource", "interrupted", "sandbox",
                 "denied")


def test_every_kind_has_exactly_one_entry() -> None:
    """A kind without an entry would have no meaning, no route and no row in the docs."""
    assert set(KINDS) == set(SpawnErrorKind)


@pytest.mark.parametrize("value", STORED_VALUES)
def test_every_stored_value_still_loads(value: str) -> None:
    """Old checkpoints keep loading: each value ever stored reads back as the same kind."""
    stored = {"outcome": "spawn_error", "command": "x", "spawn_error": value}
    result = CommandResult.from_dict(json.loads(json.dumps(stored)))
    assert result.spawn_error == value
    assert result.to_dict()["spawn_error"] == value


def test_the_old_homes_export_the_same_kinds() -> None:
    """`bashgraph.tools` and `bashgraph.tools.results` keep exporting the taxonomy's names."""
    from bashgraph.tools import results

    assert ExportedKind is results.SpawnErrorKind is SpawnErrorKind
    assert EXPORTED_TRANSIENT_KINDS is results.TRANSIENT_KINDS
    assert {kind for kind, entry in KINDS.items() if entry.transient} == EXPORTED_TRANSIENT_KINDS


def test_no_errno_is_filed_under_two_kinds() -> None:
    """The classifier reads the errnos from the entries: each must name one kind."""
    counts = Counter(code for entry in KINDS.values() for code in entry.errnos)
    assert [errno.errorcode[code] for code, n in counts.items() if n > 1] == []
    assert all(kind_of_errno(code) is kind for kind, entry in KINDS.items() for code in entry.errnos)


def test_an_unlisted_errno_has_no_kind_of_its_own() -> None:
    """The runner files it under `UNLISTED_ERRNO_KIND`, a kind that is worth another try."""
    assert kind_of_errno(errno.EIO) is None
    assert KINDS[UNLISTED_ERRNO_KIND].transient


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_result_reads_its_kind_from_the_taxonomy(kind: SpawnErrorKind) -> None:
    """`transient`, `refused` and `environment_fault` say what the kind's entry says."""
    entry = KINDS[kind]
    result = spawn_failure(kind, "x", "detail")
    assert result.transient is entry.transient
    assert result.refused is (entry.nature is Nature.REFUSAL)
    assert result.environment_fault is (entry.nature is Nature.ENVIRONMENT_FAULT)
    assert not (result.refused and result.environment_fault)


def test_denied_is_a_refusal_not_an_environment_fault() -> None:
    """A refused command keeps its public value, but nothing may treat it as a fault."""
    result = spawn_failure(SpawnErrorKind.DENIED, "rm -rf /", "denied by rule 'rm *'")
    assert (result.outcome.value, result.to_dict()["spawn_error"]) == ("spawn_error", "denied")
    assert (result.refused, result.environment_fault, result.transient) == (True, False, False)
    assert KINDS[SpawnErrorKind.DENIED].route == "agent"


@pytest.mark.parametrize("result", [
    CommandResult(Outcome.OK, "true", exit_code=0),
    CommandResult(Outcome.EXIT_ERROR, "false", exit_code=1),
    args_error("'command' is required"),
], ids=lambda r: r.outcome.value)
def test_only_a_spawn_error_is_a_fault_or_a_refusal(result: CommandResult) -> None:
    assert (result.transient, result.refused, result.environment_fault) == (False, False, False)


def test_a_spawn_error_without_a_kind_counts_as_an_environment_fault() -> None:
    """Routing stays safe on a malformed result: a person is asked rather than the fault ignored."""
    result = CommandResult(Outcome.SPAWN_ERROR, "x")
    assert (result.environment_fault, result.refused, result.transient) == (True, False, False)


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_entry_says_what_it_is_in_one_line(kind: SpawnErrorKind) -> None:
    """The entries become table cells and badges: one line each, no table syntax."""
    entry = KINDS[kind]
    for text in (entry.meaning, entry.produced_by, entry.words):
        assert text
        assert text.strip() == text
        assert not {"\n", "|"} & set(text)


@pytest.mark.parametrize("name", list(SECTIONS))
def test_the_generated_docs_are_current(name: str) -> None:
    """The docs' generated sections are what the code makes now. When this fails, run
    `python -m tests.support.generated_docs` and commit the rewritten docs."""
    assert section_text(name) == expected_text(name)


def test_the_kinds_table_has_a_row_per_kind() -> None:
    table = section_text("spawn-kinds")
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [kind.value for kind in KINDS]
