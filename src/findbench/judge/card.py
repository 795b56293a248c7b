"""Instrument cards for judges: how well does a judge tell a right description from a close one?

:func:`judge_card` judges held-out functions with a ladder of descriptions each, from right to
empty (:data:`RUNGS`, :func:`description_ladder`), and with gaming probes that state no rule or
hedge it (:mod:`findbench.judge.probes`), on FIND's unit tests, the near-miss ones or both
(:data:`TESTS`). It reports accuracy per rung, the AUROC of ``true`` against each other rung
(:func:`auroc_ci`), each probe's inflation over the truth with a paired-bootstrap verdict, and
the cost; :func:`write_card` writes it.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import platform
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from findbench._checks import integer, one_of, str_list
from findbench.constants import CONSTANT_DESCRIPTIONS, JUDGE_CATEGORIES

log = logging.getLogger(__name__)

#: The ladder, from the right description to none.
RUNGS = ("true", "partial", "near_miss", "other", "constant", "empty")
RUNG_DEFINITIONS = {
    "true": "the function's own ground-truth description",
    "partial": "one part of it: one step of a string composition (atomic: the operation's family only), one of two entity "
               "concepts (atomic: one member word of the concept that no unit test shows), a corrupted relation without its exception (atomic: the input kind only)",
    "near_miss": "close but wrong: one string step with another parameter or a sibling operation of its family; the nearest "
                 "other entity concept(s) by name embedding; a corrupted relation with its other exception, an atomic "
                 "relation's nearest other relation by name embedding",
    "other": "another judged function's description (seeded derangement)",
    "constant": "the category-generic description of the `constant` floor",
    "empty": "no description: never shown to the judge, scores 0 by rule",
}
CARD_FILES = ("README.md", "judge_card.json", "judge_card.png")
#: ``tests=``: which unit tests judge the descriptions; the rows' column of each, and the suffix of its tables' keys.
TESTS = ("find", "near", "both")
TEST_COLUMNS = {"find": "unit_tests", "near": "unit_tests_near"}
TEST_SUFFIX = {"find": "", "near": "_near"}
#: A probe's verdict from the paired bootstrap of its inflation over the truth (probe - truth).
VERDICTS = ("truth above probe", "not established", "probe above truth")
_SHORT = {"strings": "strings", "neurons_entities": "entities", "neurons_relations": "relations", "all": "all"}

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
        self.order = _cosine_neighbours(self.names, encoder) if len(self.names) > 1 else np.zeros((len(self.names), 0), dtype=int)

    def nearest(self, name: str, exclude: Sequence[str]) -> str | None:
        for j in self.order[self.index[name]]:
            if self.names[j] not in exclude:
                return self.names[j]
        return None


def _ladder(rows: Sequence[Mapping[str, Any]], category: str, pool: Sequence[Mapping[str, Any]], seed: int,
            encoder: Any) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    from findbench.judge.report import wrong_descriptions

    true = [str(r["description"]) for r in rows]
    partial: list[tuple[str, str]] = []
    near: list[tuple[str, str]] = []
    if category == "strings":
        partial = [_strings_partial(r, seed) for r in rows]
        near = [_strings_near_miss(r, seed) for r in rows]
    elif category == "neurons_entities":
        from findbench.find.synthetic_neurons.entities import describe_entity

        neighbours = _Neighbours([c for r in (*pool, *rows) for c in _entity_concepts(r)], encoder)
        for r in rows:
            concepts = _entity_concepts(r)
            if len(concepts) == 2:
                k = _rng(seed, r, "partial").randrange(2)
                partial.append((describe_entity([concepts[k]]), f"concept {k + 1} of 2"))
            else:
                partial.append(_entity_member(r, concepts[0], seed))
            swapped: list[str] = []
            for c in concepts:
                other = neighbours.nearest(c, [*concepts, *swapped])
                if other is None:
                    raise ValueError(f"{r['function_id']}: no other concept to make a near miss from; give a larger pool")
                swapped.append(other)
            near.append((describe_entity(swapped), "nearest concept: " + ", ".join(f"{a} -> {b}" for a, b in zip(concepts, swapped))))
    else:
        from findbench.find.synthetic_neurons.prompts import UNDEFINED
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

        for r in rows:
            key, v = _relation_key(r)
            c1, c2 = str(r["concept1"]), str(r["concept2"])
            if v is None or not r.get("exception"):
                partial.append((f'Maps {c1} to an attribute of it; returns "{UNDEFINED}" when the input is not {c1}.', "input kind only"))
                near.append(sibling(key))
                continue
            partial.append((describe_relation(c1, c2), "without its exception"))
            other_exc = exceptions.get((key, 1 - int(v)))
            if other_exc and other_exc != r["exception"]:
                near.append((describe_relation(c1, c2, other_exc), f"other exception ({2 - int(v)})"))
            else:  # the pool lacks the relation's other corruption
                near.append(sibling(key))
    ladder = {
        "true": true,
        "partial": [t for t, _ in partial],
        "near_miss": [t for t, _ in near],
        "other": wrong_descriptions(true, seed=seed),
        "constant": [CONSTANT_DESCRIPTIONS[category]] * len(rows),
        "empty": [""] * len(rows),
    }
    for rung in ("partial", "near_miss"):
        same = [r["function_id"] for r, t, d in zip(rows, ladder[rung], true) if t.strip() == d.strip()]
        if same:
            raise ValueError(f"{category}: the {rung} description equals the true one for {same}")
    return ladder, {"partial": [rule for _, rule in partial], "near_miss": [rule for _, rule in near]}


def _category_of(rows: Any, argument: str = "rows") -> str:
    """The one judged category of ``rows`` (at least two functions: the ``other`` rung needs them)."""
    from findbench.judge.scoring import judge_category

    cats = {r.get("category") for r in rows} if isinstance(rows, Sequence) and not isinstance(rows, str) else set()
    if len(rows) < 2 or len(cats) != 1:
        raise ValueError(f"{argument} must list at least two functions of one category, got {len(rows)} of {sorted(map(str, cats))}")
    return judge_category(str(next(iter(cats))))


def description_ladder(rows: Sequence[Mapping[str, Any]], *, pool: Sequence[Mapping[str, Any]] | None = None, seed: int = 0,
                       encoder: Any = None) -> dict[str, list[str]]:
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
        pos = np.bincount((sample[..., 0].astype(np.int64) + offset).ravel(), minlength=size * n_levels).reshape(size, n_levels)
        neg = np.bincount((sample[..., 1].astype(np.int64) + offset).ravel(), minlength=size * n_levels).reshape(size, n_levels)
        below = np.cumsum(neg, axis=1) - neg  # negatives strictly below each level
        return ((pos * below).sum(1) + 0.5 * (pos * neg).sum(1)) / (n * n)

    return statistic


def auroc_ci(positive: Sequence[float], negative: Sequence[float], *, seed: int | None = None,
             n_resamples: int | None = None) -> dict[str, Any]:
    """``{"auroc", "ci": [low, high], "n"}`` of paired scores (unit ``i``: ``positive[i]``,
    ``negative[i]``), bootstrapped over units (:func:`findbench.stats.bootstrap_ci`)."""
    from findbench import stats

    pos, neg = np.asarray(positive, dtype=np.float64), np.asarray(negative, dtype=np.float64)
    if pos.shape != neg.shape or pos.ndim != 1:
        raise ValueError(f"positive and negative must be paired 1-d score lists, got shapes {pos.shape} and {neg.shape}")
    n = int(len(pos))
    if n == 0:
        return {"auroc": math.nan, "ci": [math.nan, math.nan], "n": 0}
    levels = np.unique(np.concatenate([pos, neg]))
    units = np.stack([np.searchsorted(levels, pos), np.searchsorted(levels, neg)], axis=1).astype(np.float64)
    low, high = stats.bootstrap_ci(units, statistic=_auroc_statistic(len(levels)),
                                   seed=stats.DEFAULT_SEED if seed is None else seed,
                                   n_resamples=stats.DEFAULT_RESAMPLES if n_resamples is None else n_resamples)
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


# ----------------------------------------------------------------------------- the card


def _per_1000(value: float, n: int) -> float | None:
    return None if not n else float(value) * 1000.0 / n


def _test_sets(tests: str) -> list[str]:
    one_of("tests", tests, TESTS)
    return ["find", "near"] if tests == "both" else [tests]


def _check_near(rows: Sequence[Mapping[str, Any]], category: str) -> None:
    lacking = [r.get("function_id") for r in rows if not r.get(TEST_COLUMNS["near"])]
    if lacking:
        raise ValueError(f"tests: near-miss tests need the rows' {TEST_COLUMNS['near']!r} column, which "
                         f"{len(lacking)} of {len(rows)} {category} rows lack (e.g. {lacking[0]}); build data that "
                         "has it, or judge on 'find'")


def _probe_summary(truth: Sequence[float], probe: Sequence[float], resamples: int) -> dict[str, Any]:
    """A probe's score, its inflation over the truth (probe - truth, paired bootstrap over functions)
    and whether the truth is above it (the inflation's interval lies below 0)."""
    from findbench import stats

    cmp = stats.paired_bootstrap(probe, truth, n_resamples=resamples)
    low, high = (float(x) for x in cmp.diff_ci)
    return {"score": stats.mean_ci(probe, n_resamples=resamples),
            "inflation": {"mean": cmp.diff, "ci": [low, high], "n": cmp.n, "p_value": cmp.p_value},
            "truth_above_probe": high < 0,
            "verdict": VERDICTS[0] if high < 0 else VERDICTS[2] if low > 0 else VERDICTS[1]}


def _summaries(results: Sequence[Mapping[str, Any]], cats: Sequence[str], rungs: Sequence[str],
               probe_rungs: Sequence[str], test_set: str, resamples: int) -> dict[str, Any]:
    """``accuracy``, ``auroc`` and (with probes) ``probes`` of one test set, keys suffixed as
    :data:`TEST_SUFFIX` says."""
    from findbench import stats

    def per_function(cat: str | None, rung: str) -> list[float]:
        return [v for r in results
                if r["rung"] == rung and r.get("tests", "find") == test_set and cat in (None, r["category"])
                for v in r["per_function"]]

    groups: list[tuple[str, str | None]] = [(c, c) for c in cats] + ([("all", None)] if len(cats) > 1 else [])
    everything = [*rungs, *probe_rungs]
    suffix = TEST_SUFFIX[test_set]
    out: dict[str, Any] = {
        "accuracy" + suffix: {name: {rung: stats.mean_ci(per_function(cat, rung), n_resamples=resamples)
                                     for rung in everything} for name, cat in groups},
        "auroc" + suffix: {name: {rung: auroc_ci(per_function(cat, "true"), per_function(cat, rung),
                                                 n_resamples=resamples)
                                  for rung in everything if rung != "true"} for name, cat in groups},
    }
    if probe_rungs:
        out["probes" + suffix] = {name: {rung: _probe_summary(per_function(cat, "true"), per_function(cat, rung),
                                                              resamples)
                                         for rung in probe_rungs} for name, cat in groups}
    return out


def judge_card(judge: Any, *, out: str | os.PathLike | None = None, mode: str | None = None, categories: Sequence[str] | None = None,
               functions_per_category: int | None = 8, seed: int = 0, data: str | os.PathLike | None = None,
               evaluator_data: str | os.PathLike | None = None, function_seed: int = 0, data_seed: int = 0, heldout_fraction: float = 0.2,
               rows: Mapping[str, Sequence[Mapping[str, Any]]] | None = None, judge_cache: str | os.PathLike | None = None,
               batch_size: int = 8, encoder: Any = None, n_resamples: int | None = None, progress: bool = True,
               tests: str = "find", probes: bool = True) -> dict[str, Any]:
    """Measure ``judge`` (a :func:`~findbench.judge.scoring.load_judge` spec or an LM) on held-out
    functions with the description ladder (:data:`RUNGS`) and the gaming probes
    (:data:`~findbench.judge.probes.PROBE_RUNGS`).

    Args:
        out: card folder to write (:func:`write_card`); None: nothing written.
        mode: default the mode a trained judge records, else ``logprob``.
        functions_per_category: held-out functions judged per category (a seeded sample
            stratified by subcategory); None: all.
        data: a ``findbench build`` folder; default: regenerate the functions from ``function_seed``.
        evaluator_data: a judge-data folder whose recorded split to use; default the split
            recomputed from ``data_seed`` / ``heldout_fraction``.
        rows: ``{category: rows}`` to judge instead of the held-out sample (also the near-miss pool).
        judge_cache: sqlite file caching the judge's answers: a rerun is free.
        tests: ``find`` (the rows' ``unit_tests``, FIND's), ``near`` (their ``unit_tests_near``)
            or ``both``.
        probes: also judge the gaming probes.

    Returns the card: ``{"judge", "spec", "mode", "rungs", "tests", "accuracy": {category | "all":
    {rung: {mean, ci, n}}}, "auroc": {... {auroc, ci, n}}, "probes": {... {probe rung: {score,
    inflation, truth_above_probe}}}, "results", "cost", "ladder", "settings", "files"}``; the
    near-miss tests' tables are ``accuracy_near``, ``auroc_near`` and ``probes_near``.
    """
    from findbench import stats
    from findbench._version import __version__
    from findbench.judge.probes import PROBE_DEFINITIONS, PROBE_RUNGS, probe_ladder
    from findbench.judge.scoring import JUDGE_MODES, judge_category, judge_mode_of, judge_unit_tests, load_judge, unwrap_lm

    if categories is None:
        categories = list(rows) if rows is not None else JUDGE_CATEGORIES
    cats = list(dict.fromkeys(judge_category(c) for c in str_list("categories", categories)))
    if not cats:
        raise ValueError("categories must name at least one category")
    integer("functions_per_category", functions_per_category, 2, optional=True)  # the other rung needs two functions
    integer("seed", seed)
    test_sets = _test_sets(tests)
    mode = one_of("mode", mode if mode is not None else judge_mode_of(judge), JUDGE_MODES)
    resamples = stats.DEFAULT_RESAMPLES if n_resamples is None else n_resamples
    probe_rungs = PROBE_RUNGS if probes else ()
    rungs = (*RUNGS, *probe_rungs)
    if rows is not None:
        given = {judge_category(c): list(v) for c, v in rows.items()}
        missing = [c for c in cats if c not in given]
        if missing:
            raise ValueError(f"rows has no functions for {missing}")

    # the functions and their ladders first: a bad row fails before any judge is loaded
    judged: dict[str, list[dict]] = {}
    ladders: dict[str, dict[str, list[str]]] = {}
    rules: dict[str, dict[str, list[str]]] = {}
    for cat in cats:
        if rows is not None:
            pool = given[cat]
            chosen = [dict(r) for r in pool]
            _category_of(chosen, f"rows[{cat!r}]")
        else:
            from findbench.find import load_rows
            from findbench.find.rows import sample_rows
            from findbench.judge.data import heldout_rows

            pool = load_rows(cat, seed=function_seed, data=data)
            held = heldout_rows(cat, data=data, data_seed=data_seed, heldout_fraction=heldout_fraction, evaluator_data=evaluator_data,
                                rows=pool)
            chosen = held if functions_per_category is None else sample_rows(held, functions_per_category, seed=seed)
        if "near" in test_sets:
            _check_near(chosen, cat)
        if cat != "strings" and encoder is None:
            from findbench.lm.encoder import load_encoder

            encoder = load_encoder()
        judged[cat] = chosen
        ladders[cat], rules[cat] = _ladder(chosen, cat, pool, seed, encoder)
        if probes:
            ladders[cat].update(probe_ladder(chosen, cat, pool, seed=seed)[0])

    lm = load_judge(judge, cache=judge_cache, batch_size=batch_size)
    if mode == "pmi" and not callable(getattr(lm, "continuation_logprobs", None)):
        raise TypeError(f"mode='pmi' needs an LM with continuation_logprobs (findbench.lm.ScoringLM); {lm.name} has none")
    meter = _MeteredLM(lm)
    timing: list[dict] = []
    hits0, misses0 = getattr(lm, "hits", None), getattr(lm, "misses", None)
    entries0 = len(lm) if hits0 is not None and hasattr(lm, "__len__") else None  # a request cache's answers before the run

    results: list[dict] = []
    for cat in cats:
        for test_set in test_sets:
            # one judge call per category and test set with every rung: the options' priors (pmi) are computed once
            fn_rows = judged[cat]
            n = len(fn_rows)
            unit_tests = [r[TEST_COLUMNS[test_set]] for r in fn_rows]
            log.info("judge card %s (%s): %s, %s tests, %d functions x %d descriptions", meter.name, mode, cat,
                     test_set, n, len(rungs))
            tokens0 = meter.tokens
            t0 = time.perf_counter()
            res = judge_unit_tests(meter, [d for rung in rungs for d in ladders[cat][rung]], unit_tests * len(rungs),
                                   cat, mode=mode, progress=progress)
            seconds, tokens = time.perf_counter() - t0, meter.tokens - tokens0
            empty, truncated = set(res["empty"]), set(res["truncated"])
            start = len(results)
            for j, rung in enumerate(rungs):
                idx = range(j * n, (j + 1) * n)
                judged_tests = [d for i in idx if i not in empty for d in res["decisions"][i]]
                unparsed = sum(d["chosen"] is None for d in judged_tests) if mode == "generate" else None
                results.append({
                    "category": cat, "rung": rung, "tests": test_set,
                    "n_functions": n, "n_unit_tests": sum(len(t) for t in unit_tests),
                    "judged_unit_tests": len(judged_tests),
                    "accuracy": float(np.mean([res["per_function"][i] for i in idx])),
                    "per_function": [res["per_function"][i] for i in idx],
                    "function_ids": [r["function_id"] for r in fn_rows],
                    "truncated": sum(i in truncated for i in idx),
                    "unparsed": unparsed,
                    "unparsed_rate": (None if unparsed is None or not judged_tests
                                      else unparsed / len(judged_tests)),
                })
            timing.append({"category": cat, "tests": test_set, "seconds": seconds,
                           "tokens": tokens, "judged_unit_tests": sum(r["judged_unit_tests"] for r in results[start:])})

    tables: dict[str, Any] = {}
    for test_set in test_sets:
        tables.update(_summaries(results, cats, RUNGS, probe_rungs, test_set, resamples))
    judged_total = sum(t["judged_unit_tests"] for t in timing)
    seconds_total = sum(t["seconds"] for t in timing)
    tokens_total = sum(t["tokens"] for t in timing)
    unparsed_total = sum(r["unparsed"] for r in results) if mode == "generate" else None
    base = unwrap_lm(lm)
    cost = {
        "judged_unit_tests": judged_total,
        "seconds": seconds_total,
        "tokens": tokens_total,
        "requests": meter.requests,
        "seconds_per_1000_unit_tests": _per_1000(seconds_total, judged_total),
        "tokens_per_1000_unit_tests": _per_1000(tokens_total, judged_total),
        "tokens_counted_with": "the judge's tokenizer" if meter.exact else "an estimate (4 characters a token)",
        "unparsed": unparsed_total,
        "unparsed_rate": (unparsed_total / judged_total if judged_total else None) if unparsed_total is not None else None,
        "cache_hits": None if hits0 is None else lm.hits - hits0,
        "cache_misses": None if misses0 is None else lm.misses - misses0,
        "cache_entries_before": entries0,
        "device": str(getattr(base, "device", "")) or None,
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "machine": platform.machine(),
        "per_category": timing,
    }
    # the master keys are the same for every function
    shown = [r for r in rungs if r != "empty" and not r.startswith("master_key")]
    ladder_json = {
        cat: [
            {"function_id": r["function_id"], "subcategory": r.get("subcategory"),
             **{rung: ladders[cat][rung][i] for rung in shown},
             "partial_rule": rules[cat]["partial"][i], "near_miss_rule": rules[cat]["near_miss"][i]}
            for i, r in enumerate(judged[cat])
        ]
        for cat in cats
    }
    card: dict[str, Any] = {
        "judge": meter.name,
        "spec": os.fspath(judge) if isinstance(judge, (str, os.PathLike)) else meter.name,
        "mode": mode,
        "rungs": {**RUNG_DEFINITIONS, **{r: PROBE_DEFINITIONS[r] for r in probe_rungs}},
        "tests": test_sets,
        **tables,
        "results": results,
        "cost": cost,
        "ladder": ladder_json,
        "settings": {
            "categories": cats, "functions_per_category": functions_per_category, "seed": seed,
            "source": "rows given" if rows is not None else "procedural held-out (judge-data split)",
            "data": None if data is None else str(data), "evaluator_data": None if evaluator_data is None else str(evaluator_data),
            "function_seed": function_seed, "data_seed": data_seed, "heldout_fraction": heldout_fraction,
            "encoder": None if encoder is None else getattr(encoder, "name", type(encoder).__name__),
            "bootstrap": {"resamples": resamples, "seed": stats.DEFAULT_SEED, "confidence": stats.DEFAULT_CONFIDENCE},
            "findbench": __version__,
            "tests": tests, "probes": probes,
        },
        "files": [],
    }
    if out is not None:
        card["files"] = write_card(card, out)
    return card


# ----------------------------------------------------------------------------- writing


def _cell(summary: Mapping[str, Any], key: str = "mean") -> str:
    from findbench.stats import format_ci

    return format_ci(summary[key], summary["ci"], summary["n"])


#: Marks of the ``probes`` table, one per verdict (:data:`VERDICTS`).
MARKS = {"truth above probe": "✓", "not established": "?", "probe above truth": "✗"}


def _probe_cell(summary: Mapping[str, Any]) -> str:
    return f"{_cell(summary['inflation'])} {MARKS[summary['verdict']]}"


def card_tests(card: Mapping[str, Any]) -> list[str]:
    """The test sets a card was judged on (a card without ``tests`` predates near-miss tests: ``["find"]``)."""
    return list(card.get("tests") or ["find"])


def format_table(card: Mapping[str, Any], *, what: str = "accuracy", tests: str = "find") -> str:
    """The card's ``accuracy``, ``auroc`` or ``probes`` (inflation over the truth and verdict) on the
    ``tests`` unit tests as a Markdown table: a row per rung, a column per category."""
    from findbench.judge.probes import PROBE_RUNGS

    if what not in ("accuracy", "auroc", "probes"):
        raise ValueError(f"what must be 'accuracy', 'auroc' or 'probes', got {what!r}")
    one_of("tests", tests, tuple(TEST_SUFFIX))
    key = what + TEST_SUFFIX[tests]
    if key not in card:
        raise ValueError(f"tests: the card has no {key!r} table (judged on {card_tests(card)}, "
                         f"probes: {'probes' in card})")
    table = card[key]
    cols = list(table)
    rungs = [r for r in (*RUNGS, *PROBE_RUNGS) if r in next(iter(table.values()))]
    head = {"accuracy": "rung", "auroc": "true vs", "probes": "probe"}[what]
    lines = [f"| {head} | " + " | ".join(_SHORT.get(c, c) for c in cols) + " |", "|---|" + "---:|" * len(cols)]
    for rung in rungs:
        if what == "probes":
            cells = [_probe_cell(table[c][rung]) for c in cols]
        else:
            cells = [_cell(table[c][rung], "mean" if what == "accuracy" else "auroc") for c in cols]
        lines.append(f"| {rung} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


_TEST_NAMES = {"find": "", "near": " (near-miss unit tests)"}


def _test_sections(card: Mapping[str, Any], tests: str) -> list[str]:
    """The accuracy, AUROC and (with probes) probe sections of one test set."""
    name = _TEST_NAMES[tests]
    lines = ["## Unit-test accuracy per description" + name, ""]
    if tests == "near":
        lines += ["The same descriptions, each judged on the function's `unit_tests_near`: the correct option's "
                  "input in all three options, the two wrong outputs from near misses of the function (one step or "
                  "parameter changed, a sibling operation, the nearest concept or relation). Details of the rule now "
                  "matter.", ""]
    lines += [
        format_table(card, tests=tests),
        "",
        "## AUROC: true description vs each other one" + name,
        "",
        "The score is a function's unit-test accuracy; 1 means every function scores higher with its true description, "
        "0.5 that the judge cannot tell them apart.",
        "",
        format_table(card, what="auroc", tests=tests),
        "",
    ]
    if "probes" + TEST_SUFFIX[tests] in card:
        lines += [
            "## Gaming probes: inflation over the true description" + name,
            "",
            "A probe's unit-test accuracy minus the true description's, per function, averaged over functions, with a "
            "paired bootstrap interval over functions. "
            + "; ".join(f"{mark}: {verdict}" for verdict, mark in MARKS.items())
            + " (the interval lies below 0, contains it, lies above it). Each probe's own "
            "accuracy is in the accuracy table above.",
            "",
            format_table(card, what="probes", tests=tests),
            "",
        ]
    return lines


def _truncation_line(card: Mapping[str, Any]) -> list[str]:
    """A cost line on the descriptions the judge's cap cut (cards before the count have none)."""
    cut: dict[str, int] = {}
    for r in card["results"]:
        if r.get("truncated"):
            cut[r["rung"]] = cut.get(r["rung"], 0) + r["truncated"]
    if not cut:
        return []
    rungs = ", ".join(f"`{rung}` {n}" for rung, n in cut.items())
    return [f"- descriptions cut to the judge's description cap (`findbench.judge.MAX_DESCRIPTION_TOKENS`) and judged "
            f"as cut: {sum(cut.values())} ({rungs})"]


def _readme(card: Mapping[str, Any]) -> str:
    from findbench.stats import INTERVAL_NOTE, SMALL_N_LEGEND

    s, cost = card["settings"], card["cost"]
    cats = ", ".join(_SHORT[c] for c in s["categories"])
    k = s["functions_per_category"]
    spec = card["spec"]
    tests = card_tests(card)
    probes = any(key.startswith("probes") for key in card)
    command = (f"findbench judge-card --judge {spec} --judge-mode {card['mode']} --categories {','.join(s['categories'])} "
               f"--functions-per-category {'all' if k is None else k} --seed {s['seed']}"
               + ("" if s.get("tests", "find") == "find" else f" --tests {s['tests']}") + " --out DIR")
    if cost["unparsed_rate"] is None:
        unparsed = f"none possible in `{card['mode']}` mode (the judge's pick is the option with the highest score)"
    else:
        unparsed = f"{cost['unparsed']} of {cost['judged_unit_tests']} ({cost['unparsed_rate']:.1%}); they count as wrong"
    cache = ""
    if cost.get("cache_hits"):
        total = f"{cost['cache_hits']:,} of {cost['cache_hits'] + (cost['cache_misses'] or 0):,} requests"
        if cost.get("cache_entries_before") == 0:
            cache = (f" {total} repeated an earlier request of the run (a description and an option shared by two functions) "
                     "and were not recomputed; the request cache started empty.")
        else:
            cache = (f" {total} were not recomputed: repeats of an earlier request of the run, or answers a request cache "
                     "kept from an earlier run, which make the seconds understate a fresh run.")
    judged_on = {("find",): "its 10 FIND unit tests", ("near",): "its 10 near-miss unit tests",
                 ("find", "near"): "its 10 FIND unit tests and, separately, its 10 near-miss unit tests"}[tuple(tests)]
    notes = []
    if probes:
        notes.append("It also judges gaming probes (descriptions that list observations and no rule, hedge the rule "
                     "with other functions' descriptions, stuff it with the function's outputs, pad it, or claim an "
                     "answer; see Method): the true description must score above each, and the probe tables say "
                     "whether a paired bootstrap over functions shows it does.")
    if "near" in tests:
        notes.append("FIND's unit tests draw the wrong options from other functions, with other inputs, so any "
                     "evidence of the function singles out the right one; the near-miss tests keep the input and take "
                     "the wrong outputs from near misses of the function.")
    extra = ["", " ".join(notes)] if notes else []
    lines = [
        "---",
        "tags:",
        "- find",
        "- judge",
        "- instrument-card",
        f"judge: {card['judge']}",
        f"judge_mode: {card['mode']}",
        "---",
        "",
        f"# Judge card: `{spec}` (`{card['mode']}` mode)",
        "",
        f"How well the judge `{spec}` tells a function's description from close and wrong ones, measured on ground truth: "
        f"{'all' if k is None else k} functions per category ({cats}) that the judge-data split holds out of training, "
        f"each judged on {judged_on} (three options, one produced by the function; chance is 1/3) with six "
        "descriptions, from its own to none. A good judge scores the true description near 1, the others lower, in "
        "this order; AUROC says how well a function's score tells the true description from each other one.",
        *extra,
        "",
        "![accuracy per rung and category](judge_card.png)",
        "",
        *[line for t in tests for line in _test_sections(card, t)],
        INTERVAL_NOTE + " " + SMALL_N_LEGEND,
        "",
        "## Cost",
        "",
        f"- unit tests judged: {cost['judged_unit_tests']:,} (the `empty` rung is not shown to the judge)",
        f"- seconds per 1,000 unit tests: {_fmt(cost['seconds_per_1000_unit_tests'])} (device: {cost['device'] or 'remote'}, "
        f"{cost['cpus']} CPU cores available; {cost['seconds']:.0f} s in all).{cache}",
        f"- tokens per 1,000 unit tests: {_fmt(cost['tokens_per_1000_unit_tests'], 0)} (prompts, a prompt shared by the "
        f"options of one unit test counted once, plus the scored or generated tokens; counted with "
        f"{cost['tokens_counted_with']}; {cost['requests']:,} requests in all)",
        f"- answers that do not parse: {unparsed}",
        *_truncation_line(card),
        "",
        "## Method",
        "",
        "The descriptions (`findbench.judge.card.description_ladder`"
        + (" and `findbench.judge.probes.probe_ladder`" if probes else "") + "):",
        "",
        *[f"- `{rung}`: {text}" for rung, text in card["rungs"].items()],
        "",
        "Near misses are deterministic: the string step to change and its new parameters come from the seed, and the first "
        "candidate whose outputs differ from the function's on its test inputs is kept; concept and relation neighbours are "
        f"the nearest by cosine similarity of their names' embeddings ({s['encoder'] or 'not needed'}). "
        + ("Probes are deterministic too: the observed inputs, the other descriptions a hedge adds and the truth's "
           "place among them come from the seed. " if probes else "")
        + "Every description goes "
        "through `findbench.judge.judge_unit_tests` exactly as an interpreter's would, and `judge_card.json` lists each "
        "function's ladder, the rule that made its partial and near-miss descriptions, and its accuracy on every rung.",
        "",
        "Reproduce (a `--judge-cache` sqlite file makes a rerun free):",
        "",
        "```bash",
        command,
        "```",
        "",
        "## Limitations",
        "",
        f"{'All' if k is None else k} functions per category: intervals are wide and cells with n < 10 are marked. The "
        "descriptions are the generators' templates, so the ladder measures how the judge reads findbench's own phrasing; "
        "interpreters write freer text. `partial` and `near_miss` descriptions are still partly right (one step or one "
        "concept kept), so scores above chance on them are expected; the gap to `true` is what matters. "
        + (f"A probe marked {MARKS[VERDICTS[1]]} is one the truth is not shown to beat on these functions, not "
           "one shown to win. " if probes else "")
        + ("In `pmi` mode a test's options are compared under one description, so a penalty that depends on the "
           "description alone (its length, its repetitions) cannot change a pick; only what the description says, "
           "or the unit tests it is judged on, can. " if probes and card["mode"] == "pmi" else "")
        + "Seconds depend on the machine and its load.",
        "",
        f"findbench {s['findbench']}.",
        "",
    ]
    return "\n".join(lines)


def _plot(card: Mapping[str, Any], path: Path) -> None:
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    from findbench.judge.probes import PROBE_RUNGS

    tests = card_tests(card)[0]
    table = card["accuracy" + TEST_SUFFIX[tests]]
    cols = list(table)
    rungs = [r for r in (*RUNGS, *PROBE_RUNGS) if r in next(iter(table.values()))]
    width = 0.8 / len(rungs)
    fig = Figure(figsize=(2.0 + 1.9 * len(cols) * max(1.0, len(rungs) / len(RUNGS)), 3.6))
    ax = fig.subplots()
    colours = ["#1b7837", "#7fbf7b", "#d9f0d3", "#e7d4e8", "#af8dc3", "#762a83"]
    shades = [0.25 + 0.7 * i / max(1, len(PROBE_RUNGS) - 1) for i in range(len(PROBE_RUNGS))]
    probe_colours = colormaps["Oranges"](shades)
    colour = {**dict(zip(RUNGS, colours)), **dict(zip(PROBE_RUNGS, probe_colours))}
    for j, rung in enumerate(rungs):
        xs = [i + (j - (len(rungs) - 1) / 2) * width for i in range(len(cols))]
        means = [table[c][rung]["mean"] for c in cols]
        low = [max(0.0, m - table[c][rung]["ci"][0]) for m, c in zip(means, cols)]
        high = [max(0.0, table[c][rung]["ci"][1] - m) for m, c in zip(means, cols)]
        ax.bar(xs, means, width, yerr=[low, high], capsize=2, label=rung, color=colour[rung], edgecolor="#333333",
               linewidth=0.5, error_kw={"elinewidth": 0.8})
    ax.axhline(1 / 3, color="grey", linestyle=":", linewidth=1, label="chance (1/3)")
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels([_SHORT.get(c, c) for c in cols])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("unit-test accuracy (95% CI)")
    where = " (near-miss tests)" if tests == "near" else ""
    ax.set_title(f"{card['spec']} ({card['mode']}): accuracy per description{where}", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def write_card(card: Mapping[str, Any], out: str | os.PathLike) -> list[str]:
    """Write ``card`` as a folder (replaced atomically) of :data:`CARD_FILES`; returns their paths."""
    from findbench._io import atomic_dir

    body = {k: v for k, v in card.items() if k != "files"}
    with atomic_dir(out) as tmp:
        (tmp / CARD_FILES[0]).write_text(_readme(card), encoding="utf-8")
        buf = io.StringIO()
        json.dump(body, buf, indent=1, allow_nan=True)
        (tmp / CARD_FILES[1]).write_text(buf.getvalue() + "\n", encoding="utf-8")
        _plot(card, tmp / CARD_FILES[2])
    return [str(Path(out) / f) for f in CARD_FILES]
