"""FIND unit tests (FIND §3.1): per function, triplets of one correct item and two distractors
from other functions of the same category. An item is an input (entities) or an
``(input, output)`` pair (strings, relations); callers choose the correct items, this module
draws distractors and positions by seed.

Near-miss unit tests (``unit_tests_near``, :func:`near_miss_tests`) have the same form, but their
distractors are near misses of the function itself: for pairs the same input with the output of
a slightly different function, for words the words of the nearest concepts. The categories
say what is near; this module assembles the triplets.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

from findbench import _checks

Item = str | tuple[str, str]

N_TESTS = 10
N_OPTIONS = 3


def _key(item: Item) -> Hashable:
    return item if isinstance(item, str) else tuple(item)


def _triplet(rng: random.Random, item: Item, wrong: list[Item]) -> dict:
    """The test with the correct ``item`` at a random position among the ``wrong`` ones."""
    pos = rng.randrange(len(wrong) + 1)
    options = [*wrong[:pos], item, *wrong[pos:]]
    if isinstance(item, str):
        return {"inputs": options, "outputs": None, "correct": pos + 1}
    return {"inputs": [o[0] for o in options], "outputs": [o[1] for o in options], "correct": pos + 1}


def build_unit_tests(
    correct_items: Sequence[Sequence[Item]],
    *,
    seed: int,
    n_options: int = N_OPTIONS,
    allowed: Callable[[int, int], bool] | None = None,
    is_correct: Callable[[int, Item], bool] | None = None,
) -> list[list[dict]]:
    """Unit tests for every function of one category.

    Args:
        correct_items: ``correct_items[i]`` lists function i's correct items: strings (inputs only)
            or ``(input, output)`` pairs, one kind per category.
        seed: every draw comes from ``random.Random(seed)`` in a fixed order.
        n_options: options per test (FIND uses 3).
        allowed: ``allowed(i, j)``: whether function ``j`` may lend distractors to function ``i``.
        is_correct: ``is_correct(i, item)``: whether ``item`` is also right for function ``i``;
            such items are never its distractors, so every test has exactly one right answer.

    Returns:
        ``tests[i]``: ``{"inputs": [...], "outputs": [...] | None, "correct": k}`` (``k`` 1-based);
        a distractor never equals another option of its test. ValueError when no valid distractor
        can be found.
    """
    _checks.instance("seed", seed, int, "an int")
    _checks.integer("n_options", n_options, 2)
    if len(correct_items) < 2:
        raise ValueError("correct_items: need at least two functions to draw distractors from")
    kinds = {isinstance(it, str) for items in correct_items for it in items}
    if len(kinds) > 1:
        raise TypeError("correct_items: mix of plain inputs and (input, output) pairs")
    for i, items in enumerate(correct_items):
        if not items:
            raise ValueError(f"correct_items[{i}] is empty")
        for it in items:
            if not isinstance(it, str) and not (isinstance(it, (tuple, list)) and len(it) == 2):
                raise TypeError(f"correct_items[{i}]: items must be str or (input, output), got {it!r}")
    rng = random.Random(seed)
    n = len(correct_items)

    def distractors(i: int, item: Item) -> list[Item]:
        """``n_options - 1`` distinct items of other functions, none equal to ``item`` nor right for ``i``."""
        wrong: list[Item] = []
        seen = {_key(item)}
        tries = 0
        while len(wrong) < n_options - 1:
            tries += 1
            if tries > 10000:
                raise ValueError(f"correct_items: cannot find {n_options - 1} distinct distractors for function {i}")
            j = rng.randrange(n - 1)
            j = j + 1 if j >= i else j  # any function but i
            if allowed is not None and not allowed(i, j):
                continue
            cand = rng.choice(correct_items[j])
            if _key(cand) in seen or (is_correct is not None and is_correct(i, cand)):
                continue
            seen.add(_key(cand))
            wrong.append(cand)
        return wrong

    # function by function, item by item: the distractors are drawn, then the right answer's position
    return [[_triplet(rng, item, distractors(i, item)) for item in items] for i, items in enumerate(correct_items)]


@dataclass
class NearMissTests:
    """What :func:`near_miss_tests` made for one function.

    Attributes:
        tests: the triplets, ``{"inputs", "outputs" | None, "correct"}`` as in :func:`build_unit_tests`.
        skipped: candidate correct items passed over for want of enough distinct near misses.
    """

    tests: list[dict]
    skipped: int = 0


def near_miss_tests(
    candidates: Iterable[Item],
    near: Callable[[Item], Iterable[Item]],
    *,
    rng: random.Random,
    n_tests: int = N_TESTS,
    n_options: int = N_OPTIONS,
) -> NearMissTests:
    """Unit tests of one function whose distractors are its near misses.

    Args:
        candidates: correct items (inputs or ``(input, output)`` pairs, one kind), best first; read
            lazily until ``n_tests`` tests are made.
        near: ``near(item)``: wrong items for ``item`` in order of preference (for a pair, its input
            with a near-miss output); the caller guarantees the function does not produce them.
        rng: draws the correct option's position (a stream of its own, so other draws stay as they are).

    Returns:
        :class:`NearMissTests`: the first ``n_options - 1`` distinct wrong items of ``near`` (none equal
        to the correct item) with the correct one at a random position; an item with fewer is
        skipped. ValueError when the candidates run out before ``n_tests`` tests.
    """
    _checks.integer("n_options", n_options, 2)
    out = NearMissTests([])
    for item in candidates:
        if len(out.tests) == n_tests:
            break
        seen = {_key(item)}
        wrong: list[Item] = []
        for cand in near(item):
            if _key(cand) not in seen:
                seen.add(_key(cand))
                wrong.append(cand)
                if len(wrong) == n_options - 1:
                    break
        if len(wrong) < n_options - 1:
            out.skipped += 1
            continue
        out.tests.append(_triplet(rng, item, wrong))
    if len(out.tests) < n_tests:
        raise ValueError(
            f"candidates: only {len(out.tests)} of {n_tests} items have {n_options - 1} distinct near misses"
        )
    return out
