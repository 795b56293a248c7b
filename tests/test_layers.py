"""The import contracts in pyproject.toml hold, and they fail when a change breaks them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._paths import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def tree(tmp_path) -> Path:
    """A copy of the package and its pyproject.toml, imported instead of the checkout."""
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(REPO / "src" / "findbench", tmp_path / "src" / "findbench",
                    ignore=shutil.ignore_patterns("__pycache__", "metrics", "data", "cards"))
    return tmp_path


def test_contracts_hold_on_the_checkout(tree):
    proc = _lint(tree)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "Contracts: 2 kept, 0 broken." in proc.stdout


@pytest.mark.parametrize(("module", "line", "broken"), [
    # a low layer importing a higher one (models -> judge: the cycle the layout issue removed)
    ("models.py", "from findbench.judge import scoring  # noqa", "findbench layers"),
    # a cycle between two siblings of one package
    ("find/synthetic_neurons/entity_words.py", "from findbench.find.synthetic_neurons import entities  # noqa",
     "no cycles between siblings"),
])
def test_a_broken_import_rule_fails(tree, module, line, broken):
    path = tree / "src" / "findbench" / module
    path.write_text(path.read_text() + f"\n{line}\n")
    proc = _lint(tree)
    assert proc.returncode != 0
    assert f"{broken}" in proc.stdout and "BROKEN" in proc.stdout


def test_a_module_outside_every_layer_fails(tree):
    (tree / "src" / "findbench" / "stray.py").write_text('"""Placed in no layer."""\n')
    proc = _lint(tree)
    assert proc.returncode != 0 and "stray" in proc.stdout
