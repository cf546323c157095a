"""Old spill files in the default directory are removed when a new stream spills; nothing else."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bashgraph.tools import run_command
from bashgraph.tools.runner import capture, spill_prune

WEEK_AND_A_DAY = 8 * 24 * 3600
WEEK_LESS_AN_HOUR = 7 * 24 * 3600 - 3600
SPILLS = "head -c 5000 /dev/zero | tr '\\0' a"  # 5,000 chars against a cap of 100


@pytest.fixture
def default_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private stand-in for `<tmp>/bashgraph-spill`, and a process that has not pruned yet."""
    directory = tmp_path / "bashgraph-spill"
    directory.mkdir()
    monkeypatch.setattr(capture, "default_spill_dir", lambda: directory)
    spill_prune.reset_schedule()
    yield directory
    spill_prune.reset_schedule()


def aged(path: Path, seconds: float) -> Path:
    path.write_text("old output")
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))
    return path


def test_old_spill_files_go_and_everything_else_stays(default_dir: Path) -> None:
    """Spill files older than 7 days go (an hour short of that stays); other files stay."""
    old = aged(default_dir / "0a1b2c3d4e5f-stdout-abc123.log", WEEK_AND_A_DAY)
    old_err = aged(default_dir / "0a1b2c3d4e5f-stderr-def456.log", WEEK_AND_A_DAY)
    recent = aged(default_dir / "0a1b2c3d4e5f-stdout-new789.log", WEEK_LESS_AN_HOUR)  # 7 days is the cut
    foreign = aged(default_dir / "notes.txt", WEEK_AND_A_DAY)
    result = run_command(SPILLS, max_output_chars=100)
    assert result.stdout_file is not None
    assert Path(result.stdout_file).parent == default_dir
    assert not old.exists()
    assert not old_err.exists()
    assert recent.exists()
    assert foreign.exists()
    assert Path(result.stdout_file).exists()


def test_a_directory_the_caller_chose_is_never_pruned(default_dir: Path, tmp_path: Path) -> None:
    chosen = tmp_path / "mine"
    chosen.mkdir()
    old = aged(chosen / "0a1b2c3d4e5f-stdout-abc123.log", WEEK_AND_A_DAY)
    result = run_command(SPILLS, max_output_chars=100, spill_dir=chosen)
    assert result.stdout_file is not None
    assert Path(result.stdout_file).parent == chosen
    assert old.exists()


def test_a_process_prunes_at_most_once_an_interval(default_dir: Path) -> None:
    run_command(SPILLS, max_output_chars=100)  # the first spill of the process prunes
    late = aged(default_dir / "0a1b2c3d4e5f-stdout-late00.log", WEEK_AND_A_DAY)
    run_command(SPILLS, max_output_chars=100)
    assert late.exists()  # within the interval: no second scan
    later = time.monotonic() + spill_prune.PRUNE_INTERVAL_S + 1
    assert spill_prune.prune_if_due(default_dir, now=later) == 1
    assert not late.exists()


def test_an_unreadable_directory_prunes_nothing_and_raises_nothing(tmp_path: Path) -> None:
    assert spill_prune.prune(tmp_path / "missing", older_than=time.time()) == 0
