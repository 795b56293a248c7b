"""Lazy package attributes (PEP 562), so importing a package does not import torch; and
renamed functions' old names, kept one release (:func:`renamed`)."""

from __future__ import annotations

import functools
import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``names[name]`` (a module path)
    on first access and returns its attribute ``name``."""

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def renamed(function: Callable[..., Any], old: str) -> Callable[..., Any]:
    """``function`` under its old name ``old``, kept one release: each call warns (FutureWarning) and calls it."""

    @functools.wraps(function)
    def alias(*args: Any, **kwargs: Any) -> Any:
        warnings.warn(f"{old} is deprecated and will be removed in the next release; use {function.__name__}",
                      FutureWarning, stacklevel=2)
        return function(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old
    alias.__doc__ = f"Deprecated: :func:`{function.__name__}`."
    return alias
