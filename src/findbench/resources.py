"""Files shipped inside the package (cards, metric modules, data), found the same way in a
checkout and in an installed wheel: through :mod:`importlib.resources`, never ``__file__``."""

from __future__ import annotations

import functools
import importlib.util
from importlib import resources
from pathlib import Path
from typing import Any

#: The evaluate modules shipped with findbench (``findbench/metrics/<name>/<name>.py``).
METRICS = ("autointerp", "explanation_f1", "find_circuit", "find_domain", "find_exact_match", "find_nmse",
           "find_unit_test", "iia")


def _package_file(*parts: str) -> Path:
    # Installed from a wheel or as a checkout, the package is a plain folder on disk, so a
    # Traversable can stand in for a path (evaluate.load and open() need real paths).
    return Path(str(resources.files("findbench").joinpath(*parts)))


def metric_path(name: str) -> str:
    """Path of a findbench metric module, for ``evaluate.load`` from any folder::

        import evaluate, findbench
        metric = evaluate.load(findbench.metric_path("find_unit_test"))
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    if name not in METRICS:
        raise ValueError(f"name: unknown metric {name!r}; choose from {METRICS}")
    path = _package_file("metrics", name, f"{name}.py")
    if not path.is_file():
        raise FileNotFoundError(f"metric module {path} is missing from the installed package")
    return str(path)


def card_template(name: str) -> str:
    """Text of a card template from ``findbench/cards/`` (``find.md``, ``evaluator_data_card.md``, …)."""
    path = _package_file("cards", name)
    if not path.is_file():
        raise FileNotFoundError(f"card template {name!r} is not in findbench/cards")
    return path.read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def _pages():
    import jinja2  # imported on first use: parsing the command line stays fast

    return jinja2.Environment(loader=jinja2.PackageLoader("findbench", "templates"), autoescape=True, trim_blocks=True,
                              lstrip_blocks=True, undefined=jinja2.StrictUndefined)


def render_page(template: str, **context: Any) -> str:
    """An HTML page from ``findbench/templates/<template>``, which extends ``page.html.j2`` (the one page
    shell, with the stylesheet ``page.css`` inline); Jinja2's autoescape escapes every value."""
    return _pages().get_template(template).render(**context)


def data_path(*parts: str) -> Path:
    """Path of a data file shipped under ``findbench/data/``."""
    return _package_file("data", *parts)


def wheel_folder(module: str, marker: str, install: str) -> Path:
    """The folder of the installed data-only package ``module`` that holds ``marker`` (the
    embedded model and encoder ship as wheels); FileNotFoundError saying how to install it."""
    spec = importlib.util.find_spec(module)
    for loc in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(loc) / marker).is_file():
            return Path(loc)
    raise FileNotFoundError(f"{marker} is not installed: it ships in the {module} package (pip install {install})")
