"""The judge card's ladder: per held-out function, descriptions from the right one to none.

:data:`RUNG_DEFINITIONS` says what each rung (:data:`~findbench.judge.config.RUNGS`) shows the judge:
the function's own description (``true``), one part of it (``partial``), a close but wrong one
(``near_miss``: a string step with another parameter or a sibling operation; the nearest other
entity concept or relation by name embedding), another function's (``other``,
:func:`wrong_descriptions`), the ``constant`` floor's and none (``empty``).
:func:`description_ladder` writes them for rows of one category; :mod:`findbench.judge.card`
measures a judge on them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from findbench._checks import instance
from findbench._guards import derangement
from findbench.constants import CONSTANT_DESCRIPTIONS
from findbench.find.strings import OPERATIONS, describe, make_function, validate_params
from findbench.find.synthetic_neurons.entities import describe_entity
from findbench.find.synthetic_neurons.entity_words import load_entity_words
from findbench.find.synthetic_neurons.prompts import UNDEFINED
from findbench.find.synthetic_neurons.relations import describe_relation
from findbench.judge.config import RUNGS
from findbench.judge.scoring import judge_category

#: What each rung of the ladder (:data:`~findbench.judge.config.RUNGS`) shows the judge.
RUNG_DEFINITIONS = {
    "true": "the function's own ground-truth description",
    "partial": "one part of it: one step of a string composition (atomic: the operation's family only), "
    "one of two entity concepts (atomic: one member word of the concept that no unit test shows), "
    "a corrupted relation without its exception (atomic: the input kind only)",
    "near_miss": "close but wrong: one string step with another parameter or a sibling operation of its family; "
    "the nearest other entity concept(s) by name embedding; a corrupted relation with its other exception, an atomic "
    "relation's nearest other relation by name embedding",
    "other": "another judged function's description (seeded derangement)",
    "constant": "the category-generic description of the `constant` floor",
    "empty": "no description: never shown to the judge, scores 0 by rule",
}
#: Atomic string functions' ``partial`` rung: what kind of operation, not which one.
_STRING_FAMILY_PHRASES = {
    "case": "changes the case of some letters",
    "reverse": "reorders its characters",
    "filter": "keeps, drops or rewrites some kinds of characters",
    "count": "returns a number written as English words",
    "position": "returns something about a single character of the string",
    "whitespace": "changes its whitespace",
    "replace": "replaces or removes some characters",
    "shift": "replaces letters by other letters of the alphabet",
    "insert": "adds characters to it",
    "split": "splits it on a character",
    "duplicate": "duplicates some of its characters",
    "swap": "moves some characters to other positions",
}
#: Parameter draws tried for a string near miss before sibling operations are.
_PARAM_TRIES = 12



def _params(row: Mapping[str, Any]) -> dict:
    params = row.get("params")
    if isinstance(params, str):
        params = json.loads(params) if params else {}
    if not isinstance(params, Mapping):
        raise ValueError(f"{row.get('function_id')}: params must be a JSON object, got {type(params).__name__}")
    return dict(params)


def _rng(seed: int, row: Mapping[str, Any], rung: str) -> random.Random:
    return random.Random(f"{seed}:{row['function_id']}:{rung}")


def _strings_partial(row: Mapping[str, Any], seed: int) -> tuple[str, str]:
    steps = validate_params(_params(row))
    if len(steps) == 2:
        k = _rng(seed, row, "partial").randrange(2)
        return describe([steps[k]]), f"step {k + 1} of 2 ({steps[k][0].name})"
    spec = steps[0][0]
    return f"The function takes a string and {_STRING_FAMILY_PHRASES[spec.family]}.", f"family only ({spec.family})"


def _strings_near_miss(row: Mapping[str, Any], seed: int) -> tuple[str, str]:
    steps = validate_params(_params(row))
    true_text = describe(steps)
    rng = _rng(seed, row, "near_miss")
    k = rng.randrange(len(steps))
    spec, _ = steps[k]
    candidates = [(spec, spec.sample(rng), "other parameter") for _ in range(_PARAM_TRIES if spec.param_kinds else 0)]
    siblings = sorted(s for s in OPERATIONS if OPERATIONS[s].family == spec.family and s != spec.name)
    rng.shuffle(siblings)
    candidates += [(OPERATIONS[s], OPERATIONS[s].sample(rng), f"sibling operation {s}") for s in siblings]
    probes = [str(x) for x in row.get("test_inputs") or []]
    expected = list(map(make_function(row), probes))
    fallback = None
    for new_spec, new_params, rule in candidates:
        new = [*steps[:k], (new_spec, new_params), *steps[k + 1 :]]
        params = {"ops": [{"op": s.name, "params": p} for s, p in new]}
        try:
            new = validate_params(params)
        except (TypeError, ValueError):
            continue
        text = describe(new)
        if text == true_text:
            continue
        rule = f"step {k + 1}: {rule}" if len(steps) == 2 else rule
        fallback = fallback or (text, rule + " (same outputs on the test inputs)")
        if list(map(make_function(params), probes)) != expected:
            return text, rule
    if fallback is None:  # pragma: no cover - every family has siblings
        raise ValueError(f"{row['function_id']}: no near-miss description found")
    return fallback


def _entity_concepts(row: Mapping[str, Any]) -> list[str]:
    concepts = [c for c in (row.get("concept1"), row.get("concept2")) if c]
    if not concepts:
        raise ValueError(f"{row.get('function_id')}: an entity row needs concept1 (and concept2 for a composition)")
    return concepts


def _entity_partial(row: Mapping[str, Any], seed: int) -> tuple[str, str]:
    """An entity's ``partial`` rung: one of a composition's two concepts; for an atomic one, one member word
    of the concept that its unit tests do not show (the concept's name alone where the word lists lack it)."""
    concepts = _entity_concepts(row)
    if len(concepts) == 2:
        k = _rng(seed, row, "partial").randrange(2)
        return describe_entity([concepts[k]]), f"concept {k + 1} of 2"
    concept = concepts[0]
    shown = {str(x).strip().lower() for ut in row.get("unit_tests") or [] for x in ut.get("inputs") or []}
    members = [w for w in load_entity_words().get(concept, []) if w.strip().lower() not in shown]
    if not members:
        return concept, "concept name alone (no member words)"
    word = _rng(seed, row, "partial").choice(members)
    return describe_entity([word]), f"one member word ({word})"


def _relation_key(row: Mapping[str, Any]) -> tuple[str, int | None]:
    params = _params(row)
    key = params.get("relation") or row.get("name", "").split("~")[0]
    if not key:
        raise ValueError(f"{row.get('function_id')}: a relation row needs params.relation")
    return str(key), params.get("exception_index")


class _Neighbours:
    """Nearest other names by embedding, computed once per ladder: per name, every other index ordered by
    cosine similarity of the embeddings, most similar first (ties keep the names' order)."""

    def __init__(self, names: Sequence[str], encoder: Any):
        self.names = list(dict.fromkeys(names))
        self.index = {n: i for i, n in enumerate(self.names)}
        self.order = np.zeros((len(self.names), 0), dtype=int)
        if len(self.names) > 1:
            vecs = np.asarray(encoder.encode(self.names), dtype=np.float64)
            vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
            sims = vecs @ vecs.T
            np.fill_diagonal(sims, -np.inf)
            self.order = np.argsort(-sims, axis=1, kind="stable")[:, :-1]

    def nearest(self, name: str, exclude: Sequence[str]) -> str | None:
        return next((self.names[j] for j in self.order[self.index[name]] if self.names[j] not in exclude), None)


def _partial(rows: Sequence[Mapping[str, Any]], category: str, seed: int) -> list[tuple[str, str]]:
    """Each row's ``partial`` description and the rule that made it."""
    if category == "strings":
        return [_strings_partial(r, seed) for r in rows]
    if category == "neurons_entities":
        return [_entity_partial(r, seed) for r in rows]
    return [(describe_relation(str(r["concept1"]), str(r["concept2"])), "without its exception")
            if _relation_key(r)[1] is not None and r.get("exception")
            else (f'Maps {r["concept1"]!s} to an attribute of it; returns "{UNDEFINED}" when the input is not '
                  f'{r["concept1"]!s}.', "input kind only")
            for r in rows]


def _entity_near_misses(
    rows: Sequence[Mapping[str, Any]], pool: Sequence[Mapping[str, Any]], encoder: Any
) -> list[tuple[str, str]]:
    neighbours = _Neighbours([c for r in (*pool, *rows) for c in _entity_concepts(r)], encoder)
    out = []
    for r in rows:
        concepts = _entity_concepts(r)
        swapped: list[str] = []
        for c in concepts:
            other = neighbours.nearest(c, [*concepts, *swapped])
            if other is None:
                raise ValueError(f"{r['function_id']}: no other concept to make a near miss from; give a larger pool")
            swapped.append(other)
        out.append(
            (
                describe_entity(swapped),
                "nearest concept: " + ", ".join(f"{a} -> {b}" for a, b in zip(concepts, swapped)),
            )
        )
    return out


def _relation_near_misses(
    rows: Sequence[Mapping[str, Any]], pool: Sequence[Mapping[str, Any]], encoder: Any
) -> list[tuple[str, str]]:
    kinds: dict[str, tuple[str, str]] = {}
    exceptions: dict[tuple[str, int], str] = {}
    for r in (*pool, *rows):
        key, v = _relation_key(r)
        kinds.setdefault(key, (str(r["concept1"]), str(r["concept2"])))
        if v is not None and r.get("exception"):
            exceptions[(key, int(v))] = str(r["exception"])
    neighbours = _Neighbours([f"{c1} -> {c2}" for c1, c2 in kinds.values()], encoder)
    by_text = {f"{c1} -> {c2}": k for k, (c1, c2) in kinds.items()}

    def near(r: Mapping[str, Any]) -> tuple[str, str]:
        key, v = _relation_key(r)
        other_exc = None if v is None or not r.get("exception") else exceptions.get((key, 1 - int(v)))
        if other_exc and other_exc != r["exception"]:
            return (describe_relation(str(r["concept1"]), str(r["concept2"]), other_exc),
                    f"other exception ({2 - int(v)})")
        # an uncorrupted relation, or the pool lacks the relation's other corruption: the nearest other relation
        own = "{} -> {}".format(*kinds[key])
        text = neighbours.nearest(own, [own])
        if text is None:
            raise ValueError(f"relation {key!r}: no other relation to make a near miss from; give a larger pool")
        other = by_text[text]
        return describe_relation(*kinds[other]), f"nearest relation: {key} -> {other}"

    return [near(r) for r in rows]


def _near_misses(
    rows: Sequence[Mapping[str, Any]], category: str, pool: Sequence[Mapping[str, Any]], seed: int, encoder: Any
) -> list[tuple[str, str]]:
    """Each row's ``near_miss`` description and the rule that made it."""
    if category == "strings":
        return [_strings_near_miss(r, seed) for r in rows]
    if category == "neurons_entities":
        return _entity_near_misses(rows, pool, encoder)
    return _relation_near_misses(rows, pool, encoder)


def _ladder(
    rows: Sequence[Mapping[str, Any]],
    category: str,
    pool: Sequence[Mapping[str, Any]],
    seed: int,
    encoder: Any,
    rungs: Sequence[str] = RUNGS,
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """``({rung: descriptions}, {rung: rules})`` for the ladder's ``rungs``; ``partial`` and ``near_miss``
    come with the rule that made each description."""
    true = [str(r["description"]) for r in rows]
    made: dict[str, list[tuple[str, str]]] = {}
    if "partial" in rungs:
        made["partial"] = _partial(rows, category, seed)
    if "near_miss" in rungs:
        made["near_miss"] = _near_misses(rows, category, pool, seed, encoder)
    for rung, pairs in made.items():
        same = [r["function_id"] for r, (t, _), d in zip(rows, pairs, true) if t.strip() == d.strip()]
        if same:
            raise ValueError(f"{category}: the {rung} description equals the true one for {same}")
    made.update({"true": [(d, "") for d in true], "constant": [(CONSTANT_DESCRIPTIONS[category], "")] * len(rows),
                 "empty": [("", "")] * len(rows)})
    ladder = {rung: wrong_descriptions(true, seed=seed) if rung == "other" else [t for t, _ in made[rung]]
              for rung in RUNGS if rung in rungs}
    return ladder, {rung: [rule for _, rule in made[rung]] for rung in ("partial", "near_miss") if rung in made}


def wrong_descriptions(descriptions: Sequence[str], *, seed: int = 0) -> list[str]:
    """Each description replaced by another of the list (a seeded :func:`~findbench._guards.derangement`
    never keeping its own text): the ``other`` rung, FIND's "wrong" descriptions of Table A3."""
    instance("descriptions", descriptions, Sequence, "a list of strings", exclude=str)
    return [descriptions[j] for j in derangement(descriptions, random.Random(seed))]


def _category_of(rows: Any, argument: str = "rows") -> str:
    """The one judged category of ``rows`` (at least two functions: the ``other`` rung needs them)."""

    cats = {r.get("category") for r in rows} if isinstance(rows, Sequence) and not isinstance(rows, str) else set()
    if len(rows) < 2 or len(cats) != 1:
        raise ValueError(
            f"{argument} must list at least two functions of one category, got {len(rows)} of {sorted(map(str, cats))}"
        )
    return judge_category(str(next(iter(cats))))


def _default_encoder(encoder: Any, category: str) -> Any:
    """``encoder``, else for entities and relations (whose near misses it embeds) the embedded MiniLM encoder."""
    if encoder is None and category != "strings":
        from findbench.lm.encoder import load_encoder

        return load_encoder()
    return encoder


def description_ladder(
    rows: Sequence[Mapping[str, Any]],
    *,
    pool: Sequence[Mapping[str, Any]] | None = None,
    seed: int = 0,
    encoder: Any = None,
) -> dict[str, list[str]]:
    """``{rung: [one description per row]}`` (:data:`RUNGS`) for two or more dataset rows of one category.

    Args:
        pool: the category's rows near misses are drawn from; default ``rows``.
        encoder: embeds concept and relation names (``encode(texts) -> (n, dim)``); default the
            embedded MiniLM encoder, loaded for entities and relations only.

    Deterministic for the same rows, pool and seed. ValueError where a ``partial`` or
    ``near_miss`` description would equal the true one.
    """
    category = _category_of(rows)
    pool = list(pool) if pool is not None else rows
    return _ladder(rows, category, pool, seed, _default_encoder(encoder, category))[0]
