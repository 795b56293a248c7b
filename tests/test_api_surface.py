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


@pytest.mark.parametrize(("module", "old", "new"), [
    ("findbench.models", "shipped_evaluator_dir", "shipped_judge_dir"),
    ("findbench.models", "embedded_evaluator_dir", "embedded_judge_dir"),
    ("findbench.judge.data", "build_evaluator_data", "build_judge_data"),
    ("findbench.judge.data", "build_evaluator_rows", "build_judge_rows"),
    ("findbench.judge.data", "load_evaluator_data", "load_judge_data"),
    ("findbench.judge.train", "train_evaluator", "train_judge"),
])
def test_a_renamed_function_keeps_its_old_name_one_release(module, old, new):
    import importlib

    mod = importlib.import_module(module)
    assert getattr(mod, old).__wrapped__ is getattr(mod, new) and getattr(mod, old).__name__ == old
    if module.startswith("findbench.judge.") and old != "load_evaluator_data":  # the package's API: the new name
        import findbench.judge

        assert getattr(findbench.judge, new) is getattr(mod, new) and new in findbench.judge.__all__
        assert getattr(findbench.judge, old) is getattr(mod, old) and old not in findbench.judge.__all__


def test_an_old_name_warns_and_calls_the_new_one():
    from findbench.models import shipped_evaluator_dir, shipped_judge_dir

    with pytest.warns(FutureWarning, match="shipped_evaluator_dir is deprecated .* use shipped_judge_dir"):
        assert shipped_evaluator_dir() == shipped_judge_dir()
