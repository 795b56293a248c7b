"""Checks of user input, used once, at the boundary (configs, public functions, metrics).

Each returns the value it checked (normalised where that is natural) or raises
``constants.UsageError`` (a ``ValueError``; :class:`~findbench.constants.UsageTypeError`, also a
``TypeError``, for a value of the wrong type) with one line naming the field.
Internal functions trust their callers and do not call these again.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from typing import Any

from findbench.constants import UsageError, UsageTypeError


def integer(name: str, value: Any, low: int | None = None, *, optional: bool = False) -> int | None:
    """``value`` as an int ≥ ``low`` (bools refused); ``None`` passes when ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageTypeError(f"{name} must be an integer, got {value!r}")
    if low is not None and value < low:
        raise UsageError(f"{name} must be ≥ {low}, got {value}")
    return value


def positive_int(name: str, value: Any, *, optional: bool = False) -> int | None:
    """``value`` as an int ≥ 1."""
    return integer(name, value, 1, optional=optional)


def number(name: str, value: Any, low: float | None = None, high: float | None = None, *,
           optional: bool = False) -> float | None:
    """``value`` as a finite float in ``[low, high]`` (bools refused)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageTypeError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or (low is not None and value < low) or (high is not None and value > high):
        span = f"in [{low}, {high}]" if low is not None and high is not None else (
            f"≥ {low}" if low is not None else f"≤ {high}" if high is not None else "finite")
        raise UsageError(f"{name} must be {span}, got {value}")
    return value


def one_of(name: str, value: Any, choices: Iterable[Any]) -> Any:
    """``value`` if it is one of ``choices``; else one line with the nearest choice."""
    choices = list(choices)
    if value in choices:
        return value
    hint = did_you_mean(str(value), [str(c) for c in choices], n=1) or f" (choose from {', '.join(map(str, choices))})"
    raise UsageError(f"{name}: unknown value {value!r}{hint}")


def did_you_mean(value: str, known: Iterable[str], n: int = 3) -> str:
    """``"; did you mean 'a' or 'b'?"`` with the names of ``known`` nearest to ``value``, or ``""``."""
    near = difflib.get_close_matches(value, list(known), n=n, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(k) for k in near)}?" if near else ""


def str_list(name: str, value: Any, *, optional: bool = False) -> list[str] | None:
    """A string or a sequence of non-empty strings, as a list (a comma-separated string is split)."""
    if value is None and optional:
        return None
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise UsageTypeError(f"{name} must be a string or a list of non-empty strings, got {value!r}")
    return list(value)


def is_user_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the user's input refused (one line, no traceback: the command line and the
    Inspect tasks print it so): a ValueError (:class:`UsageError`, also the type errors these checks
    raise) or a FileNotFoundError; any other TypeError is a bug."""
    return isinstance(exc, (ValueError, FileNotFoundError))


def instance(name: str, value: Any, types: type | tuple[type, ...], what: str, *,
             exclude: type | tuple[type, ...] = ()) -> Any:
    """``value`` when it is one of ``types`` and none of ``exclude`` (a str is no list of strings);
    else :class:`UsageTypeError` "``name`` must be ``what``, got <its type's name>"."""
    if not isinstance(value, types) or isinstance(value, exclude):
        raise UsageTypeError(f"{name} must be {what}, got {type(value).__name__}")
    return value
