"""Commit habits, checked over every commit since they were adopted: a subject of at most 72
characters in the imperative ("Fix", not "Fixed" or "Fixes"), capitalised, with no full stop,
then a blank line and a body that says why. Merge commits are skipped.

Run from the repository: `python .ci/check_commits.py`. Exit 1 names each commit that breaks
a habit, one line each."""

from __future__ import annotations

import subprocess
import sys

#: The last commit made before the habits were adopted; everything after it is checked.
ADOPTED_AFTER = "94b92f1"
MAX_SUBJECT = 72
#: Imperative verbs that end like a past tense or a third person.
VERBS_ENDING_LIKE_FORMS = frozenset({"Embed", "Feed", "Need", "Seed", "Shed", "Speed", "Bring", "Pass",
                                     "Process", "Address", "Access", "Focus", "Bias", "Discuss", "Express"})


def problems(subject: str, body: str) -> list[str]:
    """What is wrong with one commit message, in words."""
    found = []
    if len(subject) > MAX_SUBJECT:
        found.append(f"subject is {len(subject)} characters (at most {MAX_SUBJECT})")
    first = subject.split(" ", 1)[0]
    if not first[:1].isupper():
        found.append("subject does not start with a capital letter")
    if subject.endswith("."):
        found.append("subject ends with a full stop")
    if first not in VERBS_ENDING_LIKE_FORMS and (first.endswith(("ed", "ing"))
                                                 or (first.endswith("s") and not first.endswith(("ss", "us", "is")))):
        found.append(f"subject starts with {first!r}: use the imperative")
    if not body.strip():
        found.append("no body saying why")
    return found


def commits(since: str) -> list[tuple[str, str, str]]:
    """(hash, subject, body) of each non-merge commit after `since`, oldest first."""
    log = subprocess.run(["git", "log", "--no-merges", "--reverse", "--format=%h%x00%s%x00%b%x1e",
                          f"{since}..HEAD"], capture_output=True, text=True, check=True).stdout
    return [tuple(entry.strip("\n").split("\x00", 2)) for entry in log.split("\x1e") if entry.strip()]  # type: ignore[misc]


def main() -> int:
    bad = 0
    for sha, subject, body in commits(ADOPTED_AFTER):
        for problem in problems(subject, body):
            print(f"{sha} {problem}: {subject[:60]}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
