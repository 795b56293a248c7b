"""Paths the tests share: the checkout and the reference data beside it."""

from pathlib import Path

#: The checkout (the folder holding pyproject.toml).
REPO = Path(__file__).resolve().parents[1]
#: Reference data of the original projects (``../shared/anchors``; never copied into the repo).
ANCHORS = REPO.parent / "shared" / "anchors"
