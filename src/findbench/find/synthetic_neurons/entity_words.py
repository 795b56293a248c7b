"""Curated word lists for FIND's synthetic entity neurons (FIND §2.3, Table A1).

``findbench/data/entities.json`` (``{"version": 1, "entities": {concept: [word, ...]}}``) holds
at least 24 words or short phrases per concept (140 concepts), each word in exactly one list
(case-insensitive); ten per concept become unit-test inputs, the rest are held out. Two lists of
loose associations ship beside them: ``entity_associations_train.json`` (the probes learn from
it) and ``entity_associations_heldout.json``, written by separate writers who saw neither, on
which :func:`heldout_associations` measures generalisation.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Mapping, Sequence
from importlib import resources

from findbench import _checks

_RESOURCE = "entities.json"
ENTITY_WORDS_VERSION = 1


@functools.lru_cache(maxsize=1)
def _load_raw() -> tuple[tuple[str, tuple[str, ...]], ...]:
    payload = json.loads(resources.files("findbench").joinpath("data", _RESOURCE).read_text(encoding="utf-8"))
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
    """Split one concept's words into ``(unit_words, held_out)``: disjoint, together every word.

    ``n_unit`` words (FIND: 10; at least one word stays held out) go to the unit tests, drawn by a
    ``random.Random(f"{seed}:{concept}")`` shuffle (same in every process, different per concept);
    ``held_out`` keeps the file's order.
    """
    _checks.instance("concept", concept, str, "a str")
    _checks.integer("n_unit", n_unit)
    _checks.integer("seed", seed)
    words = dict(_load_raw()).get(concept)
    if words is None:
        raise ValueError(f"concept: unknown entity concept {concept!r}")
    if not 1 <= n_unit < len(words):
        raise ValueError(
            f"n_unit must be between 1 and {len(words) - 1} for {concept!r}, got {n_unit}"
        )
    return split_list(words, concept, n_unit, seed)


def split_list(words: Sequence[str], concept: str, n_unit: int, seed: int) -> tuple[list[str], list[str]]:
    """:func:`split_words` of any word list ``words`` of ``concept``, unchecked."""
    order = list(range(len(words)))
    random.Random(f"{seed}:{concept}").shuffle(order)
    chosen = set(order[:n_unit])
    return [words[i] for i in order[:n_unit]], [w for i, w in enumerate(words) if i not in chosen]


_ASSOCIATIONS = {"train": "entity_associations_train.json", "held-out": "entity_associations_heldout.json"}


@functools.lru_cache(maxsize=2)
def _load_associations(role: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    name = _ASSOCIATIONS[role]
    payload = json.loads(resources.files("findbench").joinpath("data", name).read_text(encoding="utf-8"))
    if payload.get("version") != 1 or payload.get("role") != role:
        raise ValueError(f"{name}: expected version 1 and role {role!r}")
    assoc = payload.get("associations")
    if not isinstance(assoc, dict) or list(assoc) != list(ENTITY_CONCEPTS):
        raise ValueError(f"{name}: 'associations' must list every entity concept in order")
    return tuple((c, tuple(ws)) for c, ws in assoc.items())


def _member_keys() -> set[str]:
    return {w.casefold() for _c, ws in _load_raw() for w in ws}


def training_associations() -> dict[str, list[str]]:
    """Training associations the probes learn from: each concept's list without the words
    that are member words of any concept (those stay where the member split puts them),
    without words that two concepts' lists share, and without any word of the held-out
    association lists (decontamination: a probe never learns a word it is scored on)."""
    held_out = {w.casefold() for _c, ws in _load_associations("held-out") for w in ws}
    return _associations("train", _member_keys() | held_out)


def heldout_associations() -> dict[str, list[str]]:
    """Held-out associations to score probes on: each concept's list without the words two
    concepts share and without member words, so none counts for two concepts. No scored word
    was ever seen by a probe: :func:`training_associations` leaves out every word of these lists."""
    return _associations("held-out", _member_keys())


def _associations(role: str, drop: set[str]) -> dict[str, list[str]]:
    """The association lists of ``role`` without the words two concepts share and those in ``drop`` (casefolded)."""
    from collections import Counter

    lists = _load_associations(role)
    counts = Counter(w.casefold() for _c, ws in lists for w in ws)
    return {c: [w for w in ws if counts[w.casefold()] == 1 and w.casefold() not in drop] for c, ws in lists}


def probe_words(unit_words: Mapping[str, Sequence[str]], *, associations: bool = True) -> dict[str, list[str]]:
    """What the embedding probes learn from: each concept's unit-test words and, with
    ``associations``, its :func:`training_associations` (packaged concepts only). Held-out
    member words and held-out associations are never among them."""
    assoc = training_associations() if associations else {}
    return {c: [*u, *assoc.get(c, [])] for c, u in unit_words.items()}


def default_probe_words(seed: int = 0, n_unit: int = 10) -> dict[str, list[str]]:
    """:func:`probe_words` of the packaged concepts' unit-test words (the first part of
    :func:`split_words` for each concept, in concept order)."""
    return probe_words({c: split_words(c, n_unit=n_unit, seed=seed)[0] for c in ENTITY_CONCEPTS})
