"""Each package's ``__init__`` is its API: no module imports another package's internals (CONTRIBUTING.md).

A name or module starting with ``_`` is internal to the package that defines it. Another package may not import it;
the top-level helpers ``findbench._io``, ``findbench._checks``, ``findbench._typed``, ``findbench._config`` ... are
the shared lowest layer and open to all.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from tests._paths import REPO

SRC = REPO / "src" / "findbench"


def _unit(package: Path, parts: list[str]) -> str:
    """The unit a module belongs to: its top-level subpackage, or itself for a top-level module."""
    return parts[1] if (package / parts[1]).is_dir() else ".".join(parts[:2])


def internal_imports(package: Path) -> list[str]:
    """``path:line: module name`` for each import of another unit's ``_``-prefixed module or name."""
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("").parts
        own = _unit(package, list(rel))
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported = [(node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                imported = [(alias.name, "") for alias in node.names]
            else:
                continue
            for module, name in imported:
                parts = module.split(".")
                if parts[0] != package.name or len(parts) < 2:
                    continue
                if len(parts) == 2 and parts[1].startswith("_"):
                    continue  # findbench._io, findbench._checks, ...: the shared lowest layer
                if _unit(package, parts) == own:
                    continue
                private_name = name.startswith("_") and not name.startswith("__")
                if private_name or any(part.startswith("_") for part in parts[1:]):
                    found.append(f"{path.relative_to(package.parent)}:{node.lineno}: {module} {name}".rstrip())
    return found


def test_no_package_imports_another_packages_internals():
    assert internal_imports(SRC) == []


def _last_line(path: Path) -> int:
    return len(path.read_text().splitlines())


@pytest.fixture
def tree(tmp_path) -> Path:
    """A copy of the package's source, to plant imports in."""
    shutil.copytree(SRC, tmp_path / "findbench", ignore=shutil.ignore_patterns("__pycache__", "data", "cards"))
    return tmp_path / "findbench"


@pytest.mark.parametrize(("module", "line"), [
    ("cli.py", "from findbench.sandbox import _worker"),
    ("cli.py", "from findbench.sandbox._worker import rmtree"),
    ("pipeline.py", "import findbench.interpret._inspect_registry"),
    ("judge/card.py", "from findbench.interpret.run import _record_run_info"),
    ("interpret/run.py", "from findbench.schema import _anything"),
])
def test_an_import_of_another_packages_internals_is_found(tree, module, line):
    path = tree / module
    path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    assert [hit.split(": ", 1)[0] for hit in internal_imports(tree)] == [f"findbench/{module}:{_last_line(path)}"]


@pytest.mark.parametrize(("module", "line"), [
    ("interpret/report.py", "from findbench._io import atomic_write_text"),  # the shared lowest layer
    ("sandbox/__init__.py", "from findbench.sandbox._worker import rmtree"),  # its own package
    ("interpret/run.py", "from findbench.interpret._inspect_registry import __name__ as _n"),  # its own package
    ("cli.py", "from findbench.judge import __doc__"),  # a dunder is not an internal
])
def test_an_allowed_import_is_not_found(tree, module, line):
    path = tree / module
    path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    assert internal_imports(tree) == []


@pytest.mark.parametrize(("module", "old"), [
    ("findbench.models", "shipped_evaluator_dir"),
    ("findbench.models", "embedded_evaluator_dir"),
    ("findbench.judge.data", "build_evaluator_data"),
    ("findbench.judge.data", "build_evaluator_rows"),
    ("findbench.judge.data", "load_evaluator_data"),
    ("findbench.judge.train", "train_evaluator"),
    ("findbench.judge", "build_evaluator_data"),
    ("findbench.judge", "evaluator_report"),
    ("findbench.judge", "judge_report"),
])
def test_a_retired_name_is_gone(module, old):
    """No release yet, so renamed and deprecated names went at once (README, "What went")."""
    import importlib

    mod = importlib.import_module(module)
    assert not hasattr(mod, old)
    assert old not in getattr(mod, "__all__", ())


@pytest.mark.parametrize("package", ["findbench", "findbench.judge", "findbench.interpret", "findbench.autointerp",
                                     "findbench.lm"])
def test_a_lazy_package_lists_each_name_once_and_exports_them_all(package):
    """``__all__`` is made from the package's one table of names (``_MODULES``), and each name is its module's."""
    import importlib

    mod = importlib.import_module(package)
    lazy = [name for names in mod._MODULES.values() for name in names]
    assert len(set(mod.__all__)) == len(mod.__all__) and set(lazy) <= set(mod.__all__)
    for module, names in mod._MODULES.items():
        for name in names:
            assert getattr(mod, name) is getattr(importlib.import_module(module), name)
    assert all(hasattr(mod, name) for name in mod.__all__)
