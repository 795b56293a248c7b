"""Backbone report (FIND appendix G) for any synthetic-neuron backbone.

Entities: per atomic neuron, mean activation on held-out words of its own concept vs other
concepts', their ROC AUC and the concept x concept matrix (FIND Figure A4 analog, a PNG
heatmap), on held-out member words and on held-out loose associations. Relations: per function,
accuracy on held-out table entries (and "undefined" on other relations' inputs); per relation,
served domain size, source, and accuracy and coverage-miss rate on an independent check set
(:func:`~findbench.find.synthetic_neurons.relation_tables.relation_check`).
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from findbench import _checks, schema
from findbench._io import atomic_dir, csv_text
from findbench.find.config import BackboneReportConfig
from findbench.find.synthetic_neurons.backbones import (
    DEFAULT_LM,
    ENTITY_BACKENDS,
    RELATION_BACKENDS,
    RelationNeuron,
    expected_answer,
    fit_entity_probes,
    make_function,
)
from findbench.find.synthetic_neurons.entities import entity_splits, generate_entities
from findbench.find.synthetic_neurons.entity_words import ENTITY_CONCEPTS, heldout_associations, probe_words
from findbench.find.synthetic_neurons.prompts import UNDEFINED
from findbench.find.synthetic_neurons.relation_tables import normalize_text, relation_check
from findbench.find.synthetic_neurons.relations import (
    generate_relations,
    other_kind_inputs,
    relation_splits,
    resolve_tables,
)
from findbench.stats import bootstrap_ci

log = logging.getLogger(__name__)

#: ``backbone_report``'s backend -> (entity backend, relation backend); None: the defaults.
_BACKENDS = {None: ("embedding", "table"), "embedding": ("embedding", "table"), "table": ("embedding", "table"),
             "lm": ("lm", "lm")}


def _at_most(rng: random.Random, items: Sequence, k: int | None) -> list:
    """``k`` of ``items`` drawn by ``rng``, or all of them in order (``rng`` untouched) when ``k`` is
    None or not below their number."""
    return list(items) if k is None or k >= len(items) else rng.sample(items, k)


def entity_selectivity(
    *,
    backend: str = "embedding",
    model: Any = None,
    limit: int | None = None,
    words_per_concept: int | None = None,
    seed: int = 0,
    rows: Sequence[dict] | None = None,
    splits: dict | None = None,
    held_out: str = "members",
) -> dict[str, Any]:
    """Selectivity of atomic entity neurons on held-out words.

    Args:
        model: encoder (embedding) or LM / model spec (lm); default: the rows' own.
        limit: number of concepts (seeded sample, kept in FIND order); None = all.
        words_per_concept: held-out words per concept (seeded sample); None = all.
        rows, splits: precomputed ``generate_entities`` rows / ``entity_splits`` (tests).
        held_out: ``"members"`` (held-out member words) or ``"associations"`` (the held-out loose
            associations, :func:`~findbench.find.synthetic_neurons.entity_words.heldout_associations`).

    Returns:
        ``{"concepts", "matrix" (mean score of neuron i on concept j's words), "per_concept"
        (own_mean, other_mean, auc), "summary"}``.
    """
    from sklearn.metrics import roc_auc_score

    _checks.one_of("backend", backend, ENTITY_BACKENDS)
    _checks.positive_int("limit", limit, optional=True)
    _checks.positive_int("words_per_concept", words_per_concept, optional=True)
    _checks.one_of("held_out", held_out, ("members", "associations"))
    rows = list(rows) if rows is not None else generate_entities(seed)
    splits = splits if splits is not None else entity_splits(seed)
    atomic = [r for r in rows if r["subcategory"] == "atomic"]
    rng = random.Random(f"report:{seed}")
    atomic = [atomic[i] for i in sorted(_at_most(rng, range(len(atomic)), limit))]
    concepts = [r["concept1"] for r in atomic]
    held_words = {c: h for c, (_u, h) in splits.items()} if held_out == "members" else heldout_associations()
    unknown = [c for c in concepts if c not in held_words]
    if unknown:
        raise ValueError(f"held_out: no held-out {held_out} for concepts {unknown[:3]}")
    words, owner = [], []
    for j, c in enumerate(concepts):
        held = _at_most(rng, held_words[c], words_per_concept)
        words += held
        owner += [j] * len(held)
    owner_arr = np.array(owner)
    n = len(concepts)
    matrix = np.zeros((n, n))
    per_concept = []
    t0 = time.perf_counter()
    refit = backend == "embedding" and model is not None
    if refit:  # what generate_entities fits on: associations for the packaged concepts only
        training = probe_words(
            {c: u for c, (u, _h) in splits.items()}, associations=list(splits) == list(ENTITY_CONCEPTS)
        )
    for i, row in enumerate(tqdm(atomic, desc=f"entity neurons ({backend})", leave=False)):
        # lm=model: the LM of the lm backend (unused by the embedding backend, where model is None here)
        fn = make_function(_with_encoder(row, model, training), backend) if refit else make_function(
            row, backend, lm=model)
        scores = np.asarray(fn(words), dtype=np.float64)
        matrix[i] = [scores[owner_arr == j].mean() for j in range(n)]
        own = owner_arr == i
        per_concept.append(
            {
                "concept": concepts[i],
                "own_mean": float(scores[own].mean()),
                "other_mean": float(scores[~own].mean()),
                "auc": float(roc_auc_score(own, scores)) if n > 1 else float("nan"),
                "n_own": int(own.sum()),
                "n_other": int((~own).sum()),
            }
        )
    summary = {
        "backend": backend,
        "model": _model_name(backend, model, atomic),
        "held_out": held_out,
        "n_concepts": n,
        "n_words": len(words),
        "n_scores": n * len(words),
        "own_mean": float(np.mean([p["own_mean"] for p in per_concept])),
        "other_mean": float(np.mean([p["other_mean"] for p in per_concept])),
        "auc_mean": float(np.mean([p["auc"] for p in per_concept])),
        # 95 % bootstrap intervals over the concepts (findbench.stats); n = n_concepts
        **{
            f"{key}_ci": list(bootstrap_ci([p[src] for p in per_concept if math.isfinite(p[src])]))
            for key, src in (("own_mean", "own_mean"), ("other_mean", "other_mean"), ("auc_mean", "auc"))
        },
        "auc_min": float(np.min([p["auc"] for p in per_concept])),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    return {"concepts": concepts, "matrix": matrix, "per_concept": per_concept, "summary": summary}


def _model_name(backend: str, model: Any, rows: Sequence[dict]) -> str:
    if model is None:
        if backend == "lm":
            return DEFAULT_LM
        return json.loads(rows[0]["params"])["backbones"]["embedding"]["encoder"] if rows else ""
    return getattr(model, "name", None) or str(model)


def _with_encoder(row: dict, encoder: str, training: dict) -> dict:
    """A copy of an entity row whose embedding probes are refitted on ``training`` words for
    another encoder."""
    params = json.loads(row["params"])
    probes, info = fit_entity_probes(training, encoder=encoder, seed=params.get("seed", 0))
    params["backbones"]["embedding"].update(
        encoder=encoder, probes=[probes[c].to_dict() for c in params["concepts"]], fit=info
    )
    return {**row, "params": schema.dumps(params)}


def relation_check_accuracy(
    table, answer, *, seed: int = 0, limit: int | None = None, held_out: Sequence | None = None
) -> dict[str, Any]:
    """Check one relation against its independent check set.

    Args:
        table: the relation's table.
        answer: ``inputs -> answers`` of the atomic neuron (any backbone).
        seed, limit: seeded sample of at most ``limit`` check items (None = all).
        held_out: held-out entries, the check of hand-written tables.

    Returns:
        ``{"n_served" (entries the table serves), "source", "check_source", "n_check"
        (answers compared: served check inputs with a known answer, or held-out entries),
        "check_accuracy", "n_coverage_check" (check inputs known to be of the relation's
        kind), "coverage_miss_rate" (the share of those the table does not serve)}``.
    """
    check = relation_check(table.key)
    items = _at_most(random.Random(f"report:check:{seed}:{table.key}"), check.items, limit)
    served = [(x, expected) for x, expected in items if table.lookup(x) is not None]
    if check.held_out:
        entries = _at_most(random.Random(f"report:held:{seed}:{table.key}"), held_out or (), limit)
        answers = answer([e.input for e in entries]) if entries else []
        ok = [a != UNDEFINED and e.accepts(a) for e, a in zip(entries, answers)]
    else:
        asked = [(x, expected) for x, expected in served if expected]
        answers = answer([x for x, _e in asked]) if asked else []
        ok = [normalize_text(a) in {normalize_text(e) for e in expected} for (_x, expected), a in zip(asked, answers)]
    return {
        "n_served": len(table.entries),
        "source": table.source,
        "check_source": check.source,
        "n_check": len(ok),
        "check_accuracy": float(np.mean(ok)) if ok else float("nan"),
        "n_coverage_check": len(items),
        "coverage_miss_rate": (1.0 - len(served) / len(items)) if items else float("nan"),
    }


def relation_accuracy(
    *,
    backend: str = "table",
    model: Any = None,
    limit: int | None = None,
    entries_per_relation: int | None = None,
    n_out_of_domain: int = 5,
    seed: int = 0,
    rows: Sequence[dict] | None = None,
    tables=None,
    check: bool | None = None,
) -> dict[str, Any]:
    """Accuracy of relation neurons on held-out table entries (and out-of-domain inputs).

    Args:
        backend: ``"table"`` or ``"lm"``.
        model: LM / model spec for the lm backend.
        limit: first ``limit`` functions in FIND order (25 = the atomic relations); None = all.
        entries_per_relation: held-out entries per function (seeded sample); None = all.
        n_out_of_domain: inputs of other relations' kinds per function (expected "undefined").
        seed, rows, tables: generation seed; precomputed rows / tables (tests).
        check: also check each relation (its atomic neuron) against its independent check
            set, :func:`relation_check_accuracy` (``entries_per_relation`` caps it too); the
            packaged relations only.
    """
    _checks.one_of("backend", backend, RELATION_BACKENDS)
    _checks.positive_int("limit", limit, optional=True)
    _checks.positive_int("entries_per_relation", entries_per_relation, optional=True)
    check = tables is None if check is None else check
    tables = resolve_tables(tables)
    rows = (list(rows) if rows is not None else generate_relations(seed, tables=tables))[:limit]
    by_key = {t.key: i for i, t in enumerate(tables)}
    rng = random.Random(f"report:{seed}")
    per_function = []
    per_relation: dict[str, dict[str, Any]] = {}
    t0 = time.perf_counter()
    for row in tqdm(rows, desc=f"relation neurons ({backend})", leave=False):
        params = json.loads(row["params"])
        ti = by_key[params["relation"]]
        table, v = tables[ti], params["exception_index"]
        held = _at_most(rng, relation_splits(table, seed)["held_out"], entries_per_relation)
        pool = other_kind_inputs(tables, ti)
        ood = rng.sample(pool, min(n_out_of_domain, len(pool)))
        fn = make_function(row, backend, lm=model if backend == "lm" else None, tables=tables)
        if table.key not in per_relation:  # the same columns for a relation and its two corruptions
            per_relation[table.key] = {"n_served": len(table.entries), "source": table.source}
            if check:
                neuron = RelationNeuron(table, None, backend, lm=getattr(fn, "_lm", None))
                per_relation[table.key] = relation_check_accuracy(
                    table, neuron.answers, seed=seed, limit=entries_per_relation,
                    held_out=relation_splits(table, seed)["held_out"])
        answers = fn([e.input for e in held] + ood)
        expected = [expected_answer(table, v, e) for e in held]
        ok_in = [(a == UNDEFINED) if x == UNDEFINED else (a != UNDEFINED and e.accepts(a))
                 for e, x, a in zip(held, expected, answers)]
        n_undef = expected.count(UNDEFINED)
        ok_undef = sum(good for good, x in zip(ok_in, expected) if x == UNDEFINED)
        ok_ood = [a == UNDEFINED for a in answers[len(held) :]]
        per_function.append(
            {
                "function_id": row["function_id"],
                "relation": table.key,
                "subcategory": row["subcategory"],
                "exception": row["exception"] or "",
                "n_entries": len(held),
                "accuracy": float(np.mean(ok_in)) if ok_in else float("nan"),
                "n_exception_entries": n_undef,
                "exception_accuracy": (ok_undef / n_undef) if n_undef else float("nan"),
                "n_out_of_domain": len(ood),
                "out_of_domain_accuracy": float(np.mean(ok_ood)) if ok_ood else float("nan"),
                **per_relation[table.key],
                "examples": [{"input": e.input, "expected": x, "answer": a}
                             for e, x, a in list(zip(held, expected, answers))[:3]],
            }
        )
    seconds = round(time.perf_counter() - t0, 3)
    # the units of the accuracy's 95 % bootstrap interval: whole functions, entry-weighted
    units = [(p["n_entries"], p["accuracy"] * p["n_entries"]) for p in per_function if p["n_entries"] > 0]
    summary = {
        "backend": backend,
        "model": (getattr(model, "name", None) or str(model or DEFAULT_LM)) if backend == "lm" else "tables",
        "n_functions": len(per_function),
        "n_entries": sum(p["n_entries"] for p in per_function),
        "accuracy": _pooled(per_function, "n_entries", "accuracy"),
        "accuracy_ci": list(bootstrap_ci(units, statistic=lambda s: s[..., 1].sum(axis=1) / s[..., 0].sum(axis=1)))
        if units else [float("nan"), float("nan")],
        "accuracy_atomic": _pooled([p for p in per_function if p["subcategory"] == "atomic"], "n_entries", "accuracy"),
        "accuracy_corrupted": _pooled([p for p in per_function if p["subcategory"] == "corruption"], "n_entries",
                                      "accuracy"),
        "exception_accuracy": _pooled(per_function, "n_exception_entries", "exception_accuracy"),
        "out_of_domain_accuracy": _pooled(per_function, "n_out_of_domain", "out_of_domain_accuracy"),
        "seconds": seconds,
    }
    if check:  # every relation's check against its independent check set, pooled
        rel = list(per_relation.values())
        summary.update({
            "n_served": sum(r["n_served"] for r in rel),
            "check_accuracy": _pooled(rel, "n_check", "check_accuracy"),
            "check_accuracy_min": min((r["check_accuracy"] for r in rel if r["n_check"]), default=float("nan")),
            "coverage_miss_rate": _pooled(rel, "n_coverage_check", "coverage_miss_rate"),
            "per_relation": {k: dict(r) for k, r in per_relation.items()},
        })
    return {"per_function": per_function, "per_relation": per_relation, "summary": summary}


def _pooled(rows: Sequence[Mapping[str, Any]], key_n: str, key_acc: str) -> float:
    """The ``key_n``-weighted mean of ``key_acc`` over ``rows`` (those with ``key_n`` > 0; none: NaN)."""
    items = [r for r in rows if r[key_n] > 0]
    total = sum(r[key_n] for r in items)
    return float(sum(r[key_acc] * r[key_n] for r in items) / total) if total else float("nan")


def _csv(rows: list[dict], columns: Sequence[str]) -> str:
    return csv_text(
        columns, ([f"{v:.6f}" if isinstance(v, float) else v for v in (r.get(k, "") for k in columns)] for r in rows)
    )


def _heatmap(path: Path, concepts: Sequence[str], matrix: np.ndarray, title: str) -> None:
    # Figure() draws on its own Agg canvas, leaving pyplot and the global backend untouched.
    from matplotlib.figure import Figure

    n = len(concepts)
    size = min(4 + 0.12 * n, 20)
    fig = Figure(figsize=(size, size))
    ax = fig.subplots()
    im = ax.imshow(matrix, vmin=0.0, vmax=1.0, cmap="viridis")
    ax.set(xlabel="held-out words of concept", ylabel="neuron (concept)", title=title)
    if n <= 60:
        ax.set_xticks(range(n), concepts, rotation=90, fontsize=6)
        ax.set_yticks(range(n), concepts, fontsize=6)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="mean activation")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def backbone_report(cfg: BackboneReportConfig) -> dict[str, Any]:
    """Write FIND's appendix-G backbone report into ``cfg.out`` (replaced atomically) with the settings
    ``cfg`` (``findbench backbone-report``'s flags; ``model`` may also be an LM object): ``summary.json``,
    ``entities.csv``, ``entity_associations.csv``, ``entity_matrix.csv``, ``entity_selectivity.png``
    and ``relations.csv``. ``backend`` None uses the defaults (embedding / table); ``"lm"`` runs both
    categories through ``model``. ``limit`` caps concepts (seeded sample) and relation functions
    (FIND order); ``words_per_concept`` and ``entries_per_relation`` cap held-out items per neuron.
    Returns the summary dict.
    """
    backend, model, limit, seed = cfg.backend, cfg.model, cfg.limit, cfg.seed
    ent_backend, rel_backend = _BACKENDS[_checks.one_of("backend", backend, _BACKENDS)]
    summary: dict[str, Any] = {"seed": seed, "limit": limit}
    files: dict[str, str] = {}
    entity_result = None
    if "entities" in cfg.categories:
        ent_model = model if backend in ("lm", "embedding") else None
        shared = {"rows": generate_entities(seed), "splits": entity_splits(seed)}  # both held-out sets, same neurons
        for held_out, key in (("members", "entities"), ("associations", "entity_associations")):
            result = entity_selectivity(backend=ent_backend, model=ent_model, limit=limit,
                                        words_per_concept=cfg.words_per_concept, seed=seed, held_out=held_out, **shared)
            s = summary[key] = result["summary"]
            files[f"{key}.csv"] = _csv(result["per_concept"], ["concept", "own_mean", "other_mean", "auc", "n_own",
                                                               "n_other"])
            log.info("%s, held-out %s (%s): own %.3f vs other %.3f, AUC %.3f", key, held_out, ent_backend,
                     s["own_mean"], s["other_mean"], s["auc_mean"])
            entity_result = entity_result or result
        concepts = entity_result["concepts"]
        matrix_rows = [{"concept": c, **dict(zip(concepts, map(float, row)))}
                       for c, row in zip(concepts, entity_result["matrix"])]
        files["entity_matrix.csv"] = _csv(matrix_rows, ["concept", *concepts])
    if "relations" in cfg.categories:
        rel = relation_accuracy(
            backend=rel_backend,
            model=model if backend == "lm" else None,
            limit=limit,
            entries_per_relation=cfg.entries_per_relation,
            seed=seed,
        )
        summary["relations"] = rel["summary"]
        files["relations.csv"] = _csv(
            rel["per_function"],
            [
                "function_id",
                "relation",
                "subcategory",
                "exception",
                "n_entries",
                "accuracy",
                "n_exception_entries",
                "exception_accuracy",
                "n_out_of_domain",
                "out_of_domain_accuracy",
                "n_served",
                "source",
                "check_source",
                "n_check",
                "check_accuracy",
                "n_coverage_check",
                "coverage_miss_rate",
            ],
        )
        log.info("relations (%s): accuracy %.3f", rel_backend, summary["relations"]["accuracy"])
    with atomic_dir(cfg.out) as tmp:
        for name, text in files.items():
            (tmp / name).write_text(text, encoding="utf-8")
        if entity_result is not None:
            s = entity_result["summary"]
            _heatmap(
                tmp / "entity_selectivity.png",
                entity_result["concepts"],
                entity_result["matrix"],
                f"entity neurons, {s['backend']} ({s['model']}): "
                f"own {s['own_mean']:.2f} vs other {s['other_mean']:.2f}",
            )
        (tmp / "summary.json").write_text(
            json.dumps(summary, indent=2, sort_keys=True, default=float) + "\n", encoding="utf-8"
        )
    return summary
