"""docs/benchmarks.md stays a reference: short, a command for every section's figures, and every
link into it from the other docs lands on one of its headings."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
MAX_LINES = 200
#: What produces a section's figures: a benchmark script, or (for the build) the pip command.
COMMAND = re.compile(r"`python benchmarks/\w+\.py[^`]*`|pip wheel")


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def sections() -> dict[str, str]:
    """Each `##` section's text by its heading."""
    parts = re.split(r"^## (.+)$", BENCHMARKS.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_reference_is_at_most_200_lines() -> None:
    lines = BENCHMARKS.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"docs/benchmarks.md has {len(lines)} lines (at most {MAX_LINES})"


def test_every_section_names_the_command_of_its_figures() -> None:
    missing = [heading for heading, text in sections().items() if not COMMAND.search(text)]
    assert not missing, f"sections with no command: {missing}"


def test_every_link_into_it_lands_on_a_heading() -> None:
    headings = re.findall(r"^#+ (.+)$", BENCHMARKS.read_text(encoding="utf-8"), flags=re.MULTILINE)
    anchors = {anchor(heading) for heading in headings}
    links = [(path.relative_to(ROOT), target)
             for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
             for target in re.findall(r"benchmarks\.md#([\w-]+)", path.read_text(encoding="utf-8"))]
    assert links, "no links found: the pattern no longer matches how the docs link"
    broken = [(str(path), target) for path, target in links if target not in anchors]
    assert not broken, f"links to no heading of docs/benchmarks.md: {broken}"


def test_an_anchor_is_what_github_makes() -> None:
    assert anchor("Long runs: the model's context") == "long-runs-the-models-context"
    assert anchor("Against create_agent") == "against-create_agent"
