"""Helpers shared by the entity and relation generators."""

from __future__ import annotations

from typing import Callable, Sequence

from findbench.unit_tests import Item, build_unit_tests

__all__ = ["unit_tests_excluding", "derived_seed"]


def derived_seed(seed: int, *parts: int) -> int:
    """A deterministic int seed for a sub-draw (``build_unit_tests`` takes ints only)."""
    out = int(seed)
    for p in parts:
        out = out * 1_000_003 + int(p) + 1
    return out


def unit_tests_excluding(
    correct_items: Sequence[Sequence[Item]],
    *,
    seed: int,
    allowed: Callable[[int, int], bool],
    is_correct: Callable[[int, Item], bool],
) -> list[list[dict]]:
    """FIND unit tests whose distractors are never right for the function they test.

    ``build_unit_tests`` draws distractors from other functions' correct items; when
    functions overlap (a composition contains an atomic concept, two corrupted relations
    share an exception) such an item can be right for the tested function too. Here
    function ``i`` draws only from functions ``j`` with ``allowed(i, j)``, and only items with
    ``not is_correct(i, item)``; each function's draw uses its own derived seed.
    """
    tests = []
    for i, own in enumerate(correct_items):
        pools = []
        for j, items in enumerate(correct_items):
            if j == i or not allowed(i, j):
                continue
            keep = [it for it in items if not is_correct(i, it)]
            if keep:
                pools.append(keep)
        if not pools:
            raise ValueError(f"correct_items: no valid distractors for function {i}")
        tests.append(build_unit_tests([list(own), *pools], seed=derived_seed(seed, i))[0])
    return tests
