"""Instrument cards for judges: how well does a judge tell a right description from a close one?

:func:`judge_card` takes a :class:`~findbench.judge.config.JudgeCardConfig` and measures a judge
in three steps: the ladder (held-out functions, each with descriptions from right to empty,
:data:`RUNGS`, :func:`description_ladder`, and gaming probes that state no rule or hedge it,
:mod:`findbench.judge.probes`), judging (every description on FIND's unit tests, the near-miss
ones or both, :data:`~findbench.judge.config.TESTS`) and cost. It reports accuracy per rung, the AUROC of ``true``
against each other rung (:func:`auroc_ci`), each probe's inflation over the truth with a
paired-bootstrap verdict, and a baseline judge beside it on the same descriptions where one is
given: FIND's Table A3 is the rungs ``true`` and ``other`` with a baseline. The card is a
:class:`~findbench.judge.card_doc.JudgeCard`; :mod:`findbench.judge.card_doc` writes it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from findbench._checks import one_of
from findbench.constants import CONSTANT_DESCRIPTIONS
from findbench.judge.card_doc import (
    TEST_SUFFIX,
    VERDICTS,
    AurocInterval,
    Bootstrap,
    CardSettings,
    CategoryCost,
    Cost,
    Inflation,
    Interval,
    JudgeCard,
    Measurement,
    ProbeSummary,
    RungResult,
    write_card,
)
from findbench.judge.config import ALL_RUNGS, RUNGS, JudgeCardConfig

log = logging.getLogger(__name__)

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
#: The rows' column of each test set (``tests=``, :data:`TESTS`).
TEST_COLUMNS = {"find": "unit_tests", "near": "unit_tests_near"}

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


# ----------------------------------------------------------------------------- the ladder


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
    from findbench.find.strings import describe, validate_params

    steps = validate_params(_params(row))
    if len(steps) == 2:
        k = _rng(seed, row, "partial").randrange(2)
        return describe([steps[k]]), f"step {k + 1} of 2 ({steps[k][0].name})"
    spec = steps[0][0]
    return f"The function takes a string and {_STRING_FAMILY_PHRASES[spec.family]}.", f"family only ({spec.family})"


def _strings_near_miss(row: Mapping[str, Any], seed: int) -> tuple[str, str]:
    from findbench.find.strings import OPERATIONS, describe, make_function, validate_params

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
    truth = make_function(row)
    expected = [truth(x) for x in probes]
    fallback = None
    for new_spec, new_params, rule in candidates:
        new = list(steps)
        new[k] = (new_spec, new_params)
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
        fn = make_function(params)
        if [fn(x) for x in probes] != expected:
            return text, rule
    if fallback is None:  # pragma: no cover - every family has siblings
        raise ValueError(f"{row['function_id']}: no near-miss description found")
    return fallback


def _cosine_neighbours(names: Sequence[str], encoder: Any) -> np.ndarray:
    """Per name, every other index ordered by cosine similarity of the embeddings, most similar first."""
    vecs = np.asarray(encoder.encode(list(names)), dtype=np.float64)
    vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    sims = vecs @ vecs.T
    np.fill_diagonal(sims, -np.inf)
    # stable: ties keep the names' order
    return np.argsort(-sims, axis=1, kind="stable")[:, :-1]


def _entity_concepts(row: Mapping[str, Any]) -> list[str]:
    concepts = [c for c in (row.get("concept1"), row.get("concept2")) if c]
    if not concepts:
        raise ValueError(f"{row.get('function_id')}: an entity row needs concept1 (and concept2 for a composition)")
    return concepts


def _entity_member(row: Mapping[str, Any], concept: str, seed: int) -> tuple[str, str]:
    """An atomic entity's ``partial`` rung: one member word of the concept that its unit tests do not
    show; the concept's name alone where the word lists lack the concept."""
    from findbench.find.synthetic_neurons.entities import describe_entity
    from findbench.find.synthetic_neurons.entity_words import load_entity_words

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
    """Nearest other names by embedding, computed once per ladder."""

    def __init__(self, names: Sequence[str], encoder: Any):
        self.names = list(dict.fromkeys(names))
        self.index = {n: i for i, n in enumerate(self.names)}
        self.order = (
            _cosine_neighbours(self.names, encoder)
            if len(self.names) > 1
            else np.zeros((len(self.names), 0), dtype=int)
        )

    def nearest(self, name: str, exclude: Sequence[str]) -> str | None:
        for j in self.order[self.index[name]]:
            if self.names[j] not in exclude:
                return self.names[j]
        return None


def _partial(rows: Sequence[Mapping[str, Any]], category: str, seed: int) -> list[tuple[str, str]]:
    """Each row's ``partial`` description and the rule that made it."""
    if category == "strings":
        return [_strings_partial(r, seed) for r in rows]
    if category == "neurons_entities":
        from findbench.find.synthetic_neurons.entities import describe_entity

        out = []
        for r in rows:
            concepts = _entity_concepts(r)
            if len(concepts) == 2:
                k = _rng(seed, r, "partial").randrange(2)
                out.append((describe_entity([concepts[k]]), f"concept {k + 1} of 2"))
            else:
                out.append(_entity_member(r, concepts[0], seed))
        return out
    from findbench.find.synthetic_neurons.prompts import UNDEFINED
    from findbench.find.synthetic_neurons.relations import describe_relation

    out = []
    for r in rows:
        _, v = _relation_key(r)
        c1, c2 = str(r["concept1"]), str(r["concept2"])
        if v is None or not r.get("exception"):
            out.append(
                (
                    f'Maps {c1} to an attribute of it; returns "{UNDEFINED}" when the input is not {c1}.',
                    "input kind only",
                )
            )
        else:
            out.append((describe_relation(c1, c2), "without its exception"))
    return out


def _entity_near_misses(
    rows: Sequence[Mapping[str, Any]], pool: Sequence[Mapping[str, Any]], encoder: Any
) -> list[tuple[str, str]]:
    from findbench.find.synthetic_neurons.entities import describe_entity

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
    from findbench.find.synthetic_neurons.relations import describe_relation

    kinds: dict[str, tuple[str, str]] = {}
    exceptions: dict[tuple[str, int], str] = {}
    for r in (*pool, *rows):
        key, v = _relation_key(r)
        kinds.setdefault(key, (str(r["concept1"]), str(r["concept2"])))
        if v is not None and r.get("exception"):
            exceptions[(key, int(v))] = str(r["exception"])
    neighbours = _Neighbours([f"{c1} -> {c2}" for c1, c2 in kinds.values()], encoder)
    by_text = {f"{c1} -> {c2}": k for k, (c1, c2) in kinds.items()}

    def sibling(key: str) -> tuple[str, str]:
        own = "{} -> {}".format(*kinds[key])
        text = neighbours.nearest(own, [own])
        if text is None:
            raise ValueError(f"relation {key!r}: no other relation to make a near miss from; give a larger pool")
        other = by_text[text]
        return describe_relation(*kinds[other]), f"nearest relation: {key} -> {other}"

    out = []
    for r in rows:
        key, v = _relation_key(r)
        other_exc = None if v is None or not r.get("exception") else exceptions.get((key, 1 - int(v)))
        if other_exc and other_exc != r["exception"]:
            out.append(
                (
                    describe_relation(str(r["concept1"]), str(r["concept2"]), other_exc),
                    f"other exception ({2 - int(v)})",
                )
            )
        else:  # an uncorrupted relation, or the pool lacks the relation's other corruption
            out.append(sibling(key))
    return out


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
    ladder: dict[str, list[str]] = {}
    for rung in (r for r in RUNGS if r in rungs):
        if rung in made:
            ladder[rung] = [t for t, _ in made[rung]]
        elif rung == "other":
            ladder[rung] = wrong_descriptions(true, seed=seed)
        else:
            ladder[rung] = {
                "true": true,
                "constant": [CONSTANT_DESCRIPTIONS[category]] * len(rows),
                "empty": [""] * len(rows),
            }[rung]
    return ladder, {rung: [rule for _, rule in pairs] for rung, pairs in made.items()}


def wrong_descriptions(descriptions: Sequence[str], *, seed: int = 0) -> list[str]:
    """Each description replaced by another of the list (a seeded derangement never keeping its own
    text): the ``other`` rung, FIND's "wrong" descriptions of Table A3."""
    if isinstance(descriptions, str) or not isinstance(descriptions, Sequence):
        raise TypeError(f"descriptions must be a list of strings, got {type(descriptions).__name__}")
    n = len(descriptions)
    if n < 2 or len(set(descriptions)) < 2:
        raise ValueError("descriptions: need at least two distinct descriptions to swap")
    rng = random.Random(seed)
    for _ in range(1000):
        perm = list(range(n))
        rng.shuffle(perm)
        if all(descriptions[perm[i]] != descriptions[i] for i in range(n)):
            return [descriptions[j] for j in perm]
    # many repeated texts: the next distinct description in a rotation
    out = []
    for i, d in enumerate(descriptions):
        j = next(k for k in range(1, n + 1) if descriptions[(i + k) % n] != d)
        out.append(descriptions[(i + j) % n])
    return out


def _category_of(rows: Any, argument: str = "rows") -> str:
    """The one judged category of ``rows`` (at least two functions: the ``other`` rung needs them)."""
    from findbench.judge.scoring import judge_category

    cats = {r.get("category") for r in rows} if isinstance(rows, Sequence) and not isinstance(rows, str) else set()
    if len(rows) < 2 or len(cats) != 1:
        raise ValueError(
            f"{argument} must list at least two functions of one category, got {len(rows)} of {sorted(map(str, cats))}"
        )
    return judge_category(str(next(iter(cats))))


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
    if category != "strings" and encoder is None:
        from findbench.lm.encoder import load_encoder

        encoder = load_encoder()
    return _ladder(rows, category, list(pool) if pool is not None else rows, seed, encoder)[0]


# ----------------------------------------------------------------------------- statistics


def auroc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """AUROC of scores ``positive`` against ``negative``: the chance a positive outscores a negative, ties half."""
    from sklearn.metrics import roc_auc_score

    pos, neg = np.asarray(positive, dtype=np.float64), np.asarray(negative, dtype=np.float64)
    if not len(pos) or not len(neg):
        return math.nan
    if np.ptp(np.concatenate([pos, neg])) == 0:
        return 0.5  # every score equal (sklearn's value too, but without its warning)
    return float(roc_auc_score(np.r_[np.ones(len(pos)), np.zeros(len(neg))], np.r_[pos, neg]))


def _auroc_statistic(n_levels: int):
    """Vectorised AUROC of paired units ``(resamples, n, 2)`` of level indices (Mann-Whitney sum)."""

    def statistic(sample: np.ndarray) -> np.ndarray:
        size, n, _ = sample.shape
        offset = (np.arange(size) * n_levels)[:, None]
        pos = np.bincount((sample[..., 0].astype(np.int64) + offset).ravel(), minlength=size * n_levels).reshape(
            size, n_levels
        )
        neg = np.bincount((sample[..., 1].astype(np.int64) + offset).ravel(), minlength=size * n_levels).reshape(
            size, n_levels
        )
        below = np.cumsum(neg, axis=1) - neg  # negatives strictly below each level
        return ((pos * below).sum(1) + 0.5 * (pos * neg).sum(1)) / (n * n)

    return statistic


def auroc_ci(
    positive: Sequence[float], negative: Sequence[float], *, seed: int | None = None, n_resamples: int | None = None
) -> dict[str, Any]:
    """``{"auroc", "ci": [low, high], "n"}`` of paired scores (unit ``i``: ``positive[i]``,
    ``negative[i]``), bootstrapped over units (:func:`findbench.stats.bootstrap_ci`)."""
    from findbench import stats

    pos, neg = np.asarray(positive, dtype=np.float64), np.asarray(negative, dtype=np.float64)
    if pos.shape != neg.shape or pos.ndim != 1:
        raise ValueError(
            f"positive and negative must be paired 1-d score lists, got shapes {pos.shape} and {neg.shape}"
        )
    n = int(len(pos))
    if n == 0:
        return {"auroc": math.nan, "ci": [math.nan, math.nan], "n": 0}
    levels = np.unique(np.concatenate([pos, neg]))
    units = np.stack([np.searchsorted(levels, pos), np.searchsorted(levels, neg)], axis=1).astype(np.float64)
    low, high = stats.bootstrap_ci(
        units,
        statistic=_auroc_statistic(len(levels)),
        seed=stats.DEFAULT_SEED if seed is None else seed,
        n_resamples=stats.DEFAULT_RESAMPLES if n_resamples is None else n_resamples,
    )
    return {"auroc": auroc(pos, neg), "ci": [low, high], "n": n}


# ----------------------------------------------------------------------------- metering


class _MeteredLM:
    """Passes everything to ``inner`` and counts the tokens read and written, with the judge's
    tokenizer where it has one (else 4 characters a token)."""

    def __init__(self, lm: Any):
        from findbench.judge.scoring import unwrap_lm

        self.inner = lm
        self.name = getattr(lm, "name", type(lm).__name__)
        base = unwrap_lm(lm)
        tokenizer, render = getattr(base, "tokenizer", None), getattr(base, "render", None)
        self.exact = callable(tokenizer) and callable(render)
        self._tokenizer, self._render = tokenizer, render
        self._memo: dict[str, int] = {}
        self.tokens = 0
        self.requests = 0

    def __getattr__(self, name: str) -> Any:  # supports_constraints, in_process, hits, ...
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _count(self, text: str) -> int:
        if text not in self._memo:
            if self.exact:
                self._memo[text] = len(self._tokenizer(text, add_special_tokens=False)["input_ids"])
            else:
                self._memo[text] = max(1, math.ceil(len(text) / 4))
        return self._memo[text]

    def _prompts(self, conversations: Sequence[Sequence[Mapping[str, str]]], prefix: str = "") -> int:
        """Tokens of the prompts of one call; consecutive repeats count once, as the backends run them once."""
        total, last = 0, None
        for conv in conversations:
            if self.exact:
                text = self._render(list(conv), prefix)
            else:
                text = "\n".join(str(m.get("content", "")) for m in conv) + prefix
            if text != last:
                total += self._count(text)
            last = text
        return total

    def generate(self, conversations, **kwargs):
        out = self.inner.generate(conversations, **kwargs)
        self.requests += len(conversations)
        self.tokens += self._prompts(conversations) + sum(self._count(str(t)) for t in out)
        return out

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix: str = "", **kwargs):
        out = self.inner.candidate_logprobs(conversations, candidates, assistant_prefix=assistant_prefix, **kwargs)
        self.requests += len(conversations)
        self.tokens += self._prompts(conversations, assistant_prefix) + len(conversations)  # + the scored token
        return out

    def continuation_logprobs(self, conversations, continuations, **kwargs):
        out = self.inner.continuation_logprobs(conversations, continuations, **kwargs)
        self.requests += len(conversations)
        self.tokens += self._prompts(conversations) + sum(self._count(str(t)) for t in continuations)
        return out


# ----------------------------------------------------------------------------- the ladder of each category


@dataclass
class _Judged:
    """A category's judged functions with their descriptions: ``ladder[rung][i]`` is function ``i``'s,
    ``rules[rung][i]`` the rule that made a ``partial`` or ``near_miss`` one."""

    rows: list[dict]
    ladder: dict[str, list[str]]
    rules: dict[str, list[str]]


def _chosen_rungs(cfg: JudgeCardConfig) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ladder's rungs and the probes ``cfg`` judges, in card order."""
    from findbench.judge.probes import PROBE_RUNGS

    chosen = ALL_RUNGS if cfg.rungs is None else cfg.rungs
    return tuple(r for r in RUNGS if r in chosen), tuple(r for r in PROBE_RUNGS if r in chosen)


def _check_near(rows: Sequence[Mapping[str, Any]], category: str) -> None:
    lacking = [r.get("function_id") for r in rows if not r.get(TEST_COLUMNS["near"])]
    if lacking:
        raise ValueError(
            f"tests: near-miss tests need the rows' {TEST_COLUMNS['near']!r} column, which "
            f"{len(lacking)} of {len(rows)} {category} rows lack (e.g. {lacking[0]}); build data that "
            "has it, or judge on 'find'"
        )


def _functions(
    cfg: JudgeCardConfig, category: str, rows: Mapping[str, Sequence[Mapping[str, Any]]] | None
) -> tuple[list[dict], Sequence[Mapping[str, Any]]]:
    """``(the functions judged, the pool near misses come from)``: ``rows[category]`` (both), else
    a seeded sample of the judge-data split's held-out functions (of the category's functions)."""
    if rows is not None:
        chosen = [dict(r) for r in rows[category]]
        _category_of(chosen, f"rows[{category!r}]")
        return chosen, rows[category]
    from findbench.find import load_rows
    from findbench.find.rows import sample_rows
    from findbench.judge.data import heldout_rows

    pool = load_rows(category, seed=cfg.function_seed, data=cfg.data)
    held = heldout_rows(
        category,
        data=cfg.data,
        data_seed=cfg.data_seed,
        heldout_fraction=cfg.heldout_fraction,
        evaluator_data=cfg.evaluator_data,
        rows=pool,
    )
    k = cfg.functions_per_category
    return (held if k is None else sample_rows(held, k, seed=cfg.seed)), pool


def _ladders(
    cfg: JudgeCardConfig, cats: Sequence[str], rows: Mapping[str, Sequence[Mapping[str, Any]]] | None, encoder: Any
) -> tuple[dict[str, _Judged], Any]:
    """Every category's functions and descriptions (a bad row fails here, before any judge loads),
    and the encoder of the near misses (None without them)."""
    from findbench.judge.probes import probe_ladder

    ladder_rungs, probe_rungs = _chosen_rungs(cfg)
    judged: dict[str, _Judged] = {}
    for cat in cats:
        chosen, pool = _functions(cfg, cat, rows)
        if cfg.tests != "find":
            _check_near(chosen, cat)
        if cat != "strings" and encoder is None and "near_miss" in ladder_rungs:
            from findbench.lm.encoder import load_encoder

            encoder = load_encoder()
        ladder, rules = _ladder(chosen, cat, pool, cfg.seed, encoder, ladder_rungs)
        if probe_rungs:
            probes = probe_ladder(chosen, cat, pool, seed=cfg.seed)[0]
            ladder.update({rung: probes[rung] for rung in probe_rungs})
        judged[cat] = _Judged(chosen, ladder, rules)
    return judged, encoder if "near_miss" in ladder_rungs else None


def _ladder_json(judged: Mapping[str, _Judged], rungs: Sequence[str]) -> dict[str, list[dict[str, str | None]]]:
    """Each function's descriptions (the master keys are the same for every function, ``empty`` is
    empty) and rules, per category."""
    shown = [r for r in rungs if r != "empty" and not r.startswith("master_key")]
    return {
        cat: [
            {
                "function_id": r["function_id"],
                "subcategory": r.get("subcategory"),
                **{rung: j.ladder[rung][i] for rung in shown},
                **{f"{rung}_rule": rules[i] for rung, rules in j.rules.items()},
            }
            for i, r in enumerate(j.rows)
        ]
        for cat, j in judged.items()
    }


# ----------------------------------------------------------------------------- judging


def _judge(
    meter: _MeteredLM,
    mode: str,
    judged: Mapping[str, _Judged],
    rungs: Sequence[str],
    test_sets: Sequence[str],
    progress: bool,
) -> tuple[list[RungResult], list[CategoryCost]]:
    """Every category's descriptions judged on each test set: a result per rung and a cost per call."""
    from findbench.judge.scoring import judge_unit_tests

    results: list[RungResult] = []
    timing: list[CategoryCost] = []
    for cat, j in judged.items():
        for test_set in test_sets:
            # one judge call per category and test set with every rung: the options' priors (pmi) are computed once
            n = len(j.rows)
            unit_tests = [r[TEST_COLUMNS[test_set]] for r in j.rows]
            log.info(
                "judge card %s (%s): %s, %s tests, %d functions x %d descriptions",
                meter.name,
                mode,
                cat,
                test_set,
                n,
                len(rungs),
            )
            tokens0 = meter.tokens
            t0 = time.perf_counter()
            res = judge_unit_tests(
                meter,
                [d for rung in rungs for d in j.ladder[rung]],
                unit_tests * len(rungs),
                cat,
                mode=mode,
                progress=progress,
            )
            seconds, tokens = time.perf_counter() - t0, meter.tokens - tokens0
            empty, truncated = set(res["empty"]), set(res["truncated"])
            start = len(results)
            for k, rung in enumerate(rungs):
                idx = range(k * n, (k + 1) * n)
                judged_tests = [d for i in idx if i not in empty for d in res["decisions"][i]]
                unparsed = sum(d["chosen"] is None for d in judged_tests) if mode == "generate" else None
                results.append(
                    RungResult(
                        category=cat,
                        rung=rung,
                        tests=test_set,
                        n_functions=n,
                        n_unit_tests=sum(len(t) for t in unit_tests),
                        judged_unit_tests=len(judged_tests),
                        accuracy=float(np.mean([res["per_function"][i] for i in idx])),
                        per_function=[res["per_function"][i] for i in idx],
                        function_ids=[r["function_id"] for r in j.rows],
                        truncated=sum(i in truncated for i in idx),
                        unparsed=unparsed,
                        unparsed_rate=None if unparsed is None or not judged_tests else unparsed / len(judged_tests),
                    )
                )
            timing.append(
                CategoryCost(
                    category=cat,
                    tests=test_set,
                    seconds=seconds,
                    tokens=tokens,
                    judged_unit_tests=sum(r.judged_unit_tests for r in results[start:]),
                )
            )
    return results, timing


# ----------------------------------------------------------------------------- cost


def _per_1000(value: float, n: int) -> float | None:
    return None if not n else float(value) * 1000.0 / n


def _cache_state(lm: Any) -> tuple[int | None, int | None, int | None]:
    """A request cache's hits, misses and answers so far (None where ``lm`` has no cache)."""
    hits, misses = getattr(lm, "hits", None), getattr(lm, "misses", None)
    return hits, misses, len(lm) if hits is not None and hasattr(lm, "__len__") else None


def _cost(
    meter: _MeteredLM,
    lm: Any,
    before: tuple[int | None, int | None, int | None],
    mode: str,
    results: Sequence[RungResult],
    timing: Sequence[CategoryCost],
) -> Cost:
    """What judging cost: unit tests, seconds, tokens and requests (per 1,000 unit tests too),
    unparsed answers, the request cache's part, the machine."""
    from findbench.judge.scoring import unwrap_lm

    judged = sum(t.judged_unit_tests for t in timing)
    seconds, tokens = sum(t.seconds for t in timing), sum(t.tokens for t in timing)
    unparsed = sum(r.unparsed for r in results) if mode == "generate" else None
    hits0, misses0, entries0 = before
    return Cost(
        judged_unit_tests=judged,
        seconds=seconds,
        tokens=tokens,
        requests=meter.requests,
        seconds_per_1000_unit_tests=_per_1000(seconds, judged),
        tokens_per_1000_unit_tests=_per_1000(tokens, judged),
        tokens_counted_with="the judge's tokenizer" if meter.exact else "an estimate (4 characters a token)",
        unparsed=unparsed,
        unparsed_rate=None if unparsed is None or not judged else unparsed / judged,
        cache_hits=None if hits0 is None else lm.hits - hits0,
        cache_misses=None if misses0 is None else lm.misses - misses0,
        cache_entries_before=entries0,
        device=str(getattr(unwrap_lm(lm), "device", "")) or None,
        cpus=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        machine=platform.machine(),
        per_category=list(timing),
    )


# ----------------------------------------------------------------------------- statistics per rung


def _probe_summary(truth: Sequence[float], probe: Sequence[float], resamples: int) -> ProbeSummary:
    """A probe's score, its inflation over the truth (probe - truth, paired bootstrap over functions)
    and whether the truth is above it (the inflation's interval lies below 0)."""
    from findbench import stats

    cmp = stats.paired_bootstrap(probe, truth, n_resamples=resamples)
    low, high = (float(x) for x in cmp.diff_ci)
    return ProbeSummary(
        score=Interval(**stats.mean_ci(probe, n_resamples=resamples)),
        inflation=Inflation(mean=cmp.diff, ci=[low, high], n=cmp.n, p_value=cmp.p_value),
        truth_above_probe=high < 0,
        verdict=VERDICTS[0] if high < 0 else VERDICTS[2] if low > 0 else VERDICTS[1],
    )


def _summaries(
    results: Sequence[RungResult],
    cats: Sequence[str],
    rungs: Sequence[str],
    probe_rungs: Sequence[str],
    test_set: str,
    resamples: int,
) -> dict[str, Any]:
    """``accuracy``, ``auroc`` and (with probes) ``probes`` of one test set, keys suffixed as
    :data:`TEST_SUFFIX` says."""
    from findbench import stats

    def per_function(cat: str | None, rung: str) -> list[float]:
        return [
            v
            for r in results
            if r.rung == rung and r.test_set == test_set and cat in (None, r.category)
            for v in r.per_function
        ]

    groups: list[tuple[str, str | None]] = [(c, c) for c in cats] + ([("all", None)] if len(cats) > 1 else [])
    everything = [*rungs, *probe_rungs]
    suffix = TEST_SUFFIX[test_set]
    out: dict[str, Any] = {
        "accuracy" + suffix: {
            name: {
                rung: Interval(**stats.mean_ci(per_function(cat, rung), n_resamples=resamples)) for rung in everything
            }
            for name, cat in groups
        },
        "auroc" + suffix: {
            name: {
                rung: AurocInterval(
                    **auroc_ci(per_function(cat, "true"), per_function(cat, rung), n_resamples=resamples)
                )
                for rung in everything
                if rung != "true"
            }
            for name, cat in groups
        },
    }
    if probe_rungs:
        out["probes" + suffix] = {
            name: {
                rung: _probe_summary(per_function(cat, "true"), per_function(cat, rung), resamples)
                for rung in probe_rungs
            }
            for name, cat in groups
        }
    return out


# ----------------------------------------------------------------------------- the card


def _measure(
    spec: Any, lm: Any, mode: str, judged: Mapping[str, _Judged], cfg: JudgeCardConfig, resamples: int, progress: bool
) -> dict[str, Any]:
    """One judge in one mode on every description: its name, tables, results and cost."""
    from findbench.judge.scoring import JUDGE_MODES
    from findbench.models import judge_identity

    one_of("mode", mode, JUDGE_MODES)
    if mode == "pmi" and not callable(getattr(lm, "continuation_logprobs", None)):
        raise TypeError(
            f"mode='pmi' needs an LM with continuation_logprobs (findbench.lm.ScoringLM); {lm.name} has none"
        )
    ladder_rungs, probe_rungs = _chosen_rungs(cfg)
    test_sets = _test_sets(cfg.tests)
    meter, before = _MeteredLM(lm), _cache_state(lm)
    results, timing = _judge(meter, mode, judged, (*ladder_rungs, *probe_rungs), test_sets, progress)
    tables: dict[str, Any] = {}
    for test_set in test_sets:
        tables.update(_summaries(results, list(judged), ladder_rungs, probe_rungs, test_set, resamples))
    return {
        "judge": meter.name,
        "spec": os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else meter.name,
        "judge_identity": judge_identity(spec, mode=mode),
        "mode": mode,
        **tables,
        "results": results,
        "cost": _cost(meter, lm, before, mode, results, timing),
    }


def _baselines(
    cfg: JudgeCardConfig, judged: Mapping[str, _Judged], resamples: int, progress: bool
) -> list[Measurement] | None:
    """The baseline judge in each of its modes (labelled ``before``, or ``before (<mode>)`` for several)."""
    from findbench.judge.scoring import judge_mode_of, load_judge

    if cfg.baseline is None:
        return None
    modes = cfg.baseline_mode or [judge_mode_of(cfg.baseline)]
    lm = load_judge(cfg.baseline, cache=cfg.baseline_cache, batch_size=cfg.batch_size)
    return [
        Measurement(
            label=f"before ({m})" if len(modes) > 1 else "before",
            **_measure(cfg.baseline, lm, m, judged, cfg, resamples, progress),
        )
        for m in modes
    ]


def _test_sets(tests: str) -> list[str]:
    return ["find", "near"] if tests == "both" else [tests]


def judge_card(
    cfg: JudgeCardConfig,
    rows: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    *,
    encoder: Any = None,
    progress: bool = True,
) -> JudgeCard:
    """Measure ``cfg.judge`` (a :func:`~findbench.judge.scoring.load_judge` spec or, from Python, an
    LM) on held-out functions with the description ladder (:data:`RUNGS`) and the gaming probes
    (:data:`~findbench.judge.probes.PROBE_RUNGS`), or the rungs ``cfg.rungs``; beside it the
    ``cfg.baseline`` judge on the same descriptions. Writes the card folder ``cfg.out`` (unless None).

    Args:
        rows: ``{category: rows}`` to judge instead of the held-out sample (also the near-miss pool).
        encoder: embeds concept and relation names for their near misses (``encode(texts)``);
            default the embedded MiniLM encoder.

    FIND's Table A3 (true vs wrong descriptions, untuned vs tuned) is ``rungs=["true", "other"]``
    with a ``baseline``: :func:`findbench.judge.card_doc.format_comparison`.
    """
    from findbench import stats
    from findbench._version import __version__
    from findbench.judge.probes import PROBE_DEFINITIONS
    from findbench.judge.scoring import judge_category, judge_mode_of, load_judge

    cats = list(dict.fromkeys(judge_category(c) for c in cfg.categories))
    if rows is not None:
        rows = {judge_category(c): list(v) for c, v in rows.items()}
        missing = [c for c in cats if c not in rows]
        if missing:
            raise ValueError(f"rows has no functions for {missing}")
    mode = cfg.judge_mode if cfg.judge_mode is not None else judge_mode_of(cfg.judge)
    resamples = stats.DEFAULT_RESAMPLES if cfg.n_resamples is None else cfg.n_resamples
    ladder_rungs, probe_rungs = _chosen_rungs(cfg)

    judged, encoder = _ladders(cfg, cats, rows, encoder)
    lm = load_judge(cfg.judge, cache=cfg.judge_cache, batch_size=cfg.batch_size)
    measured = _measure(cfg.judge, lm, mode, judged, cfg, resamples, progress)
    card = JudgeCard(
        **{k: v for k, v in measured.items() if k not in ("results", "cost")},
        rungs={**{r: RUNG_DEFINITIONS[r] for r in ladder_rungs}, **{r: PROBE_DEFINITIONS[r] for r in probe_rungs}},
        tests=_test_sets(cfg.tests),
        results=measured["results"],
        cost=measured["cost"],
        baseline=_baselines(cfg, judged, resamples, progress),
        ladder=_ladder_json(judged, (*ladder_rungs, *probe_rungs)),
        settings=CardSettings(
            categories=cats,
            functions_per_category=cfg.functions_per_category,
            seed=cfg.seed,
            source="rows given" if rows is not None else "procedural held-out (judge-data split)",
            data=None if cfg.data is None else str(cfg.data),
            evaluator_data=None if cfg.evaluator_data is None else str(cfg.evaluator_data),
            function_seed=cfg.function_seed,
            data_seed=cfg.data_seed,
            heldout_fraction=cfg.heldout_fraction,
            encoder=None if encoder is None else getattr(encoder, "name", type(encoder).__name__),
            bootstrap=Bootstrap(resamples=resamples, seed=stats.DEFAULT_SEED, confidence=stats.DEFAULT_CONFIDENCE),
            findbench=__version__,
            tests=cfg.tests,
            probes=bool(probe_rungs),
            rungs=cfg.rungs,
            baseline_mode=cfg.baseline_mode,
        ),
    )
    if cfg.out is not None:
        write_card(card, cfg.out)
    return card
