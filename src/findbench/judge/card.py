"""Instrument cards for judges: how well does a judge tell a right description from a close one?

:func:`judge_card` takes a :class:`~findbench.judge.config.JudgeCardConfig` and measures a judge
in three steps: the ladder (held-out functions, each with descriptions from right to empty,
:mod:`findbench.judge.ladder`, and gaming probes that state no rule or hedge it,
:mod:`findbench.judge.probes`), judging (every description on FIND's unit tests, the near-miss
ones or both, :data:`~findbench.judge.config.TESTS`) and cost. It reports accuracy per rung, the AUROC of ``true``
against each other rung (:func:`findbench.stats.auroc_ci`), each probe's inflation over the truth with a
paired-bootstrap verdict, and a baseline judge beside it on the same descriptions where one is
given: FIND's Table A3 is the rungs ``true`` and ``other`` with a baseline. The card is a
:class:`~findbench.judge.card_doc.JudgeCard`; :mod:`findbench.judge.card_doc` writes it.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from findbench import stats
from findbench._version import __version__
from findbench.find import load_rows, sample_rows
from findbench.judge import scoring  # scoring.load_judge: looked up at each call (tests stand in for it)
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
from findbench.judge.data import heldout_rows
from findbench.judge.ladder import RUNG_DEFINITIONS, _category_of, _default_encoder, _ladder
from findbench.judge.ladder import description_ladder as description_ladder  # the written cards name it here
from findbench.judge.probes import PROBE_DEFINITIONS, PROBE_RUNGS, probe_ladder
from findbench.judge.scoring import judge_category, judge_mode_of, judge_unit_tests, unwrap_lm
from findbench.models import judge_identity

log = logging.getLogger(__name__)

#: The rows' column of each test set (``tests=``, :data:`TESTS`).
TEST_COLUMNS = {"find": "unit_tests", "near": "unit_tests_near"}

# ----------------------------------------------------------------------------- metering


class _MeteredLM:
    """Passes everything to ``inner`` and counts the tokens read and written, with the judge's
    tokenizer where it has one (else 4 characters a token)."""

    def __init__(self, lm: Any):
        self.inner = lm
        self.name = getattr(lm, "name", type(lm).__name__)
        base = unwrap_lm(lm)
        self._tokenizer, self._render = getattr(base, "tokenizer", None), getattr(base, "render", None)
        self.exact = callable(self._tokenizer) and callable(self._render)
        self._count = functools.cache(self._tokens)  # each distinct text tokenized once
        self.tokens = self.requests = 0

    def __getattr__(self, name: str) -> Any:  # supports_constraints, in_process, hits, ...
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _tokens(self, text: str) -> int:
        return (len(self._tokenizer(text, add_special_tokens=False)["input_ids"]) if self.exact
                else max(1, math.ceil(len(text) / 4)))

    def _prompts(self, conversations: Sequence[Sequence[Mapping[str, str]]], prefix: str = "") -> int:
        """Tokens of the prompts of one call; consecutive repeats count once, as the backends run them once."""
        texts = [self._render(list(conv), prefix) if self.exact
                 else "\n".join(str(m.get("content", "")) for m in conv) + prefix for conv in conversations]
        return sum(self._count(text) for text, last in zip(texts, [None, *texts]) if text != last)

    def _tally(self, conversations: Sequence, tokens: int, out: Any) -> Any:
        self.requests += len(conversations)
        self.tokens += tokens
        return out

    def generate(self, conversations, **kwargs):
        out = self.inner.generate(conversations, **kwargs)
        return self._tally(conversations, self._prompts(conversations) + sum(self._count(str(t)) for t in out), out)

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix: str = "", **kwargs):
        out = self.inner.candidate_logprobs(conversations, candidates, assistant_prefix=assistant_prefix, **kwargs)
        # + the scored token
        return self._tally(conversations, self._prompts(conversations, assistant_prefix) + len(conversations), out)

    def continuation_logprobs(self, conversations, continuations, **kwargs):
        out = self.inner.continuation_logprobs(conversations, continuations, **kwargs)
        return self._tally(conversations, self._prompts(conversations) + sum(map(self._count, map(str, continuations))),
                           out)


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

    chosen = ALL_RUNGS if cfg.rungs is None else cfg.rungs
    return tuple(r for r in RUNGS if r in chosen), tuple(r for r in PROBE_RUNGS if r in chosen)


def _functions(
    cfg: JudgeCardConfig, category: str, rows: Mapping[str, Sequence[Mapping[str, Any]]] | None
) -> tuple[list[dict], Sequence[Mapping[str, Any]]]:
    """``(the functions judged, the pool near misses come from)``: ``rows[category]`` (both), else
    a seeded sample of the judge-data split's held-out functions (of the category's functions)."""
    if rows is not None:
        chosen = [dict(r) for r in rows[category]]
        _category_of(chosen, f"rows[{category!r}]")
        return chosen, rows[category]

    pool = load_rows(category, seed=cfg.function_seed, data=cfg.data)
    held = heldout_rows(cfg, category, pool)
    k = cfg.functions_per_category
    return (held if k is None else sample_rows(held, k, seed=cfg.seed)), pool


def _ladders(
    cfg: JudgeCardConfig, cats: Sequence[str], rows: Mapping[str, Sequence[Mapping[str, Any]]] | None, encoder: Any
) -> tuple[dict[str, _Judged], Any]:
    """Every category's functions and descriptions (a bad row fails here, before any judge loads),
    and the encoder of the near misses (None without them)."""

    ladder_rungs, probe_rungs = _chosen_rungs(cfg)
    judged: dict[str, _Judged] = {}
    for cat in cats:
        chosen, pool = _functions(cfg, cat, rows)
        lacking = [r.get("function_id") for r in chosen if not r.get(TEST_COLUMNS["near"])]
        if cfg.tests != "find" and lacking:
            raise ValueError(
                f"tests: near-miss tests need the rows' {TEST_COLUMNS['near']!r} column, which "
                f"{len(lacking)} of {len(chosen)} {cat} rows lack (e.g. {lacking[0]}); build data that "
                "has it, or judge on 'find'"
            )
        if "near_miss" in ladder_rungs:
            encoder = _default_encoder(encoder, cat)
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
            tokens0, t0 = meter.tokens, time.perf_counter()
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
                    **stats.auroc_ci(per_function(cat, "true"), per_function(cat, rung), n_resamples=resamples)
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

    scoring._check_mode(lm, mode)  # before the meter, which has every method
    ladder_rungs, probe_rungs = _chosen_rungs(cfg)
    test_sets = _test_sets(cfg.tests)
    meter, before = _MeteredLM(lm), _cache_state(lm)
    results, timing = _judge(meter, mode, judged, (*ladder_rungs, *probe_rungs), test_sets, progress)
    tables = {k: v for test_set in test_sets
              for k, v in _summaries(results, list(judged), ladder_rungs, probe_rungs, test_set, resamples).items()}
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

    if cfg.baseline is None:
        return None
    modes = cfg.baseline_mode or [judge_mode_of(cfg.baseline)]
    lm = scoring.load_judge(cfg.baseline, cache=cfg.baseline_cache, batch_size=cfg.batch_size)
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
    lm = scoring.load_judge(cfg.judge, cache=cfg.judge_cache, batch_size=cfg.batch_size)
    measured = _measure(cfg.judge, lm, mode, judged, cfg, resamples, progress)
    card = JudgeCard(
        **{k: v for k, v in measured.items() if k not in ("results", "cost")},
        rungs={**{r: RUNG_DEFINITIONS[r] for r in ladder_rungs}, **{r: PROBE_DEFINITIONS[r] for r in probe_rungs}},
        tests=_test_sets(cfg.tests),
        results=measured["results"],
        cost=measured["cost"],
        baseline=_baselines(cfg, judged, resamples, progress),
        ladder=_ladder_json(judged, (*ladder_rungs, *probe_rungs)),
        settings=CardSettings.of(
            cfg,
            categories=cats,
            source="rows given" if rows is not None else "procedural held-out (judge-data split)",
            encoder=None if encoder is None else getattr(encoder, "name", type(encoder).__name__),
            bootstrap=Bootstrap(resamples=resamples, seed=stats.DEFAULT_SEED, confidence=stats.DEFAULT_CONFIDENCE),
            findbench=__version__,
            probes=bool(probe_rungs),
        ),
    )
    if cfg.out is not None:
        write_card(card, cfg.out)
    return card
