"""Curated word lists for FIND's synthetic entity neurons (FIND §2.3, Table A1).

FIND's entity neurons respond to words belonging to one of 140 concepts ("chess",
"the Middle Ages", "a quantity indicating a percentage", ...) or, for the composite
neurons, to either of two concepts. Every entity function needs words known to belong to
its concept: ten of them become the function's unit-test inputs, the others are held out
(to calibrate the embedding-similarity neuron and as exemplars).

The lists ship in ``findbench/data/entities.json`` (``{"version": 1, "entities": {concept:
[word, ...]}}``), written for this project: at least 24 words or short phrases per
concept, each word in exactly one concept's list (case-insensitive), so that a word never
counts as correct for two different atomic neurons.
"""

from __future__ import annotations

import functools
import json
import random
from importlib import resources

__all__ = ["ENTITY_CONCEPTS", "ENTITY_WORDS_VERSION", "load_entity_words", "split_words", "default_unit_words"]

_RESOURCE = "entities.json"
ENTITY_WORDS_VERSION = 1


@functools.lru_cache(maxsize=1)
def _load_raw() -> tuple[tuple[str, tuple[str, ...]], ...]:
    text = resources.files("findbench").joinpath("data", _RESOURCE).read_text(encoding="utf-8")
    payload = json.loads(text)
    if payload.get("version") != ENTITY_WORDS_VERSION:
        raise ValueError(
            f"{_RESOURCE}: version {payload.get('version')!r}, expected {ENTITY_WORDS_VERSION}"
        )
    entities = payload.get("entities")
    if not isinstance(entities, dict) or not entities:
        raise ValueError(f"{_RESOURCE}: 'entities' must be a non-empty object")
    return tuple((concept, tuple(words)) for concept, words in entities.items())


ENTITY_CONCEPTS: tuple[str, ...] = tuple(concept for concept, _ in _load_raw())


def load_entity_words() -> dict[str, list[str]]:
    """Return ``{concept: [word, ...]}`` for all entity concepts, in FIND's Table A1 order.

    The file is read once; every call returns fresh lists, so callers may mutate them.
    """
    return {concept: list(words) for concept, words in _load_raw()}


def split_words(concept: str, n_unit: int = 10, seed: int = 0) -> tuple[list[str], list[str]]:
    """Split one concept's words into unit-test words and held-out words.

    Args:
        concept: one of :data:`ENTITY_CONCEPTS` (exact spelling).
        n_unit: how many words go to the unit tests (FIND uses 10); at least 1 and
            leaving at least one word held out.
        seed: the split is a shuffle by ``random.Random(f"{seed}:{concept}")``, so it is
            the same in every process and differs between concepts.

    Returns:
        ``(unit_words, held_out)``: disjoint lists that together hold every word of the
        concept; ``unit_words`` in shuffled order, ``held_out`` in the file's order.
    """
    if not isinstance(concept, str):
        raise TypeError(f"concept must be a str, got {type(concept).__name__}")
    if isinstance(n_unit, bool) or not isinstance(n_unit, int):
        raise TypeError(f"n_unit must be an int, got {type(n_unit).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    words = dict(_load_raw()).get(concept)
    if words is None:
        raise ValueError(f"concept: unknown entity concept {concept!r}")
    if not 1 <= n_unit < len(words):
        raise ValueError(
            f"n_unit must be between 1 and {len(words) - 1} for {concept!r}, got {n_unit}"
        )
    order = list(range(len(words)))
    random.Random(f"{seed}:{concept}").shuffle(order)
    chosen = order[:n_unit]
    chosen_set = set(chosen)
    unit = [words[i] for i in chosen]
    held_out = [w for i, w in enumerate(words) if i not in chosen_set]
    return unit, held_out


def default_unit_words(seed: int = 0, n_unit: int = 10) -> dict[str, list[str]]:
    """Unit-test words of every packaged concept (the embedding probes' training words):
    the first part of :func:`split_words` for each concept, in concept order."""
    return {c: split_words(c, n_unit=n_unit, seed=seed)[0] for c in ENTITY_CONCEPTS}
