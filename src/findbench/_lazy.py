"""Lazy package attributes (PEP 562), so importing a package does not import torch.

A package's ``__init__`` lists its names once, by the module that defines them
(``_MODULES = {"findbench.judge.card": ("judge_card",), ...}``); its ``__getattr__`` and
``__all__`` are made from that one table."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def names_of(modules: Mapping[str, Sequence[str]]) -> list[str]:
    """The names of ``modules`` (a module path -> its names), in order: a package's ``__all__``."""
    return [name for names in modules.values() for name in names]


def lazy_getattr(package: str, modules: Mapping[str, Sequence[str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports the module of ``name`` (``modules``:
    a module path -> its names) on first access and returns its attribute ``name``."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(where[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
