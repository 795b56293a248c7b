"""The AutoInterp tests' small corpus."""

from __future__ import annotations

import pytest

from .test_run import SENTENCES


@pytest.fixture()
def corpus(tmp_path, monkeypatch):
    """A text corpus of :data:`~tests.autointerp.test_run.SENTENCES` (a fresh findbench cache beside it)."""
    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(SENTENCES * 60) + "\n")
    return path
