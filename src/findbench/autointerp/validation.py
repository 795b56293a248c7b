"""Validation on known answers: do the scorers prefer a planted feature's true explanation?

:func:`planted_validation` collects the evidence of every latent of the
:class:`~findbench.autointerp.synthetic.SyntheticSAE` (the same pass a real SAE gets) and has
each scorer score several explanations per latent on the same windows: ``true`` (the planted
one), ``wrong`` (another latent's, a seeded :func:`~findbench._guards.derangement`), ``empty`` (``""``) and the gaming
probes of :mod:`findbench.autointerp.probes` (``everything``, ``hedged``, ``examples_only``,
``stuffed``, ``padded``). A scorer **separates** when ``mean(true − wrong) ≥``
:data:`MIN_SEPARATION` (0.1) **and** true beats wrong on at least :data:`MIN_WIN_RATE` (75 %)
of the latents. Against each probe, a paired bootstrap over latents of ``true − probe`` gives
the probe's **inflation** (``probe − true``, with its interval) and a verdict: ``truth above
probe`` (the interval of ``true − probe`` lies above 0), ``probe above truth`` (below 0) or
``no difference shown``.

Every explanation passes the same guards as in a run (:mod:`findbench.autointerp.explanations`):
cut to ``max_explanation_tokens`` (recorded per latent as ``explanation_truncated``) and flagged
``degenerate`` when empty, copied from the prompt or identical across latents.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from findbench import _checks
from findbench._guards import derangement
from findbench._io import atomic_write_json
from findbench.autointerp.config import MAX_EXPLANATION_TOKENS, PROBES, SCORERS, AutoInterpConfig
from findbench.autointerp.corpus import corpus_tokens, special_token_ids
from findbench.autointerp.detection import CHANCE, detection_floors
from findbench.autointerp.evidence import collect_evidence
from findbench.autointerp.explanations import cap_explanation, degenerate
from findbench.autointerp.probes import probe_explanations
from findbench.autointerp.prompts import TokenRenderer
from findbench.autointerp.scorers import make_scorer
from findbench.autointerp.synthetic import HOOK_NAME, SyntheticSAE
from findbench.lm.base import use_structured_outputs
from findbench.stats import DEFAULT_SEED, mean_ci, paired_bootstrap

log = logging.getLogger(__name__)

#: "separates": mean(true − wrong) at least this ...
MIN_SEPARATION = 0.1
#: ... and true > wrong on at least this share of the scored latents.
MIN_WIN_RATE = 0.75
#: The reference explanations each latent is scored with (then the probes).
KINDS = ("true", "wrong", "empty")
#: The verdicts of the truth against a probe.
VERDICTS = ("truth above probe", "probe above truth", "no difference shown")
#: Scorers that need an LM.
_LM_SCORERS = ("detection", "fuzz", "likelihood")


def quick_config(d_sae: int, scorers: Sequence[str] = SCORERS, **overrides: Any) -> AutoInterpConfig:
    """:meth:`AutoInterpConfig.quick` with a corpus of 200k tokens and every latent of the synthetic SAE
    (there are only a few; each fires hundreds of times in 200k tokens of WordNet glosses,
    whose first 150k tokens hold few birds)."""
    return AutoInterpConfig.quick(**{"total_tokens": 200_000, "override_latents": list(range(d_sae)),
                                     "scorers": list(scorers), **overrides})


def _verdict(true: Sequence[float], wrong: Sequence[float]) -> tuple[float, float, str]:
    diff = np.asarray(true, dtype=float) - np.asarray(wrong, dtype=float)
    separation = float(diff.mean())
    win_rate = float((diff > 0).mean())
    ok = separation >= MIN_SEPARATION and win_rate >= MIN_WIN_RATE
    return separation, win_rate, "separates" if ok else "does not separate"


def probe_verdict(true: Sequence[float], probe: Sequence[float], *, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """The probe's score (``mean``, ``ci``, ``n``), its ``inflation`` over the truth (``probe −
    true``, with ``inflation_ci`` and ``p_value`` from a paired bootstrap over latents) and the
    ``verdict`` (one of :data:`VERDICTS`; ``truth_above_probe``: whether it is the first)."""
    cmp = paired_bootstrap(true, probe, seed=seed)
    low, high = cmp.diff_ci
    verdict = VERDICTS[0] if low > 0 else VERDICTS[1] if high < 0 else VERDICTS[2]
    # (+ 0.0: a zero difference is reported as 0.0, not -0.0)
    return {**mean_ci(probe, seed=seed), "inflation": -cmp.diff + 0.0, "inflation_ci": [-high + 0.0, -low + 0.0],
            "p_value": cmp.p_value, "verdict": verdict, "truth_above_probe": verdict == VERDICTS[0]}


def planted_validation(
    model,
    tokenizer,
    *,
    scorers: Sequence[str] = SCORERS,
    lm=None,
    encoder=None,
    config: AutoInterpConfig | None = None,
    tokens: np.ndarray | None = None,
    rules: Sequence[str] | None = None,
    batch_size: int = 32,
    output: str | os.PathLike | None = None,
    structured_outputs: str | None = None,
    probes: Sequence[str] = PROBES,
    max_explanation_tokens: int | None = MAX_EXPLANATION_TOKENS,
    progress: bool = True,
) -> dict[str, Any]:
    """Score true, wrong, empty and probe explanations of planted features with each scorer.

    Args:
        lm: the scoring LM of ``detection``, ``fuzz`` and ``likelihood``.
        encoder: sentence encoder of the ``embedding`` scorer (default: the embedded MiniLM).
        config: evidence settings (default :func:`quick_config`); its ``random_seed`` seeds the
            derangement and the probes.
        tokens: corpus rows ``[rows, llm_context_size]`` (default: ``config.dataset``, tokenized).
        rules: the planted rules (default :data:`~findbench.autointerp.synthetic.DEFAULT_RULES`).
        output: a JSON file to write the result to.
        structured_outputs: for the detection answers (default ``config.structured_outputs``).
        probes: the gaming probes to score (names from :data:`~findbench.autointerp.config.PROBES`; ``()``: none).
        max_explanation_tokens: explanations are cut to this many tokens of ``tokenizer`` before
            scoring (``None``: no cap, to measure without it).

    Returns:
        ``{"scorers": {name: {<kind>: mean per kind, "separation", "win_rate", "verdict", "truth",
        "probes": {probe: :func:`probe_verdict`}, "truth_above_every_probe", "n_latents", "floors",
        "unparsed", "seconds", "rows"}}, "kinds", "explanations": {kind: {"n_truncated",
        "n_degenerate", "degenerate_reasons"}}, "latents", "skipped", "criterion", "config", "model",
        "structured_outputs", "corpus_tokens", "seconds"}``.
    """
    t0 = time.perf_counter()
    scorers = [_checks.one_of("scorers", s, SCORERS) for s in _checks.str_list("scorers", scorers)]
    if not scorers or len(set(scorers)) != len(scorers):
        raise ValueError(f"scorers must be distinct names from {SCORERS}, got {scorers!r}")
    probes = [_checks.one_of("probes", p, PROBES) for p in _checks.str_list("probes", probes)]
    if len(set(probes)) != len(probes):
        raise ValueError(f"probes must not repeat a probe, got {probes!r}")
    _checks.positive_int("max_explanation_tokens", max_explanation_tokens, optional=True)
    needs_lm = [s for s in scorers if s in _LM_SCORERS]
    if needs_lm and lm is None:
        raise ValueError(f"scorers {needs_lm} need an LM: pass lm= (e.g. findbench.lm.load_lm('embedded'))")

    sae = SyntheticSAE.for_model(model, tokenizer, rules)
    cfg = config or quick_config(sae.cfg.d_sae, scorers)
    latents = list(cfg.override_latents) if cfg.override_latents is not None else list(range(sae.cfg.d_sae))
    if any(j >= sae.cfg.d_sae for j in latents):
        raise ValueError(f"config.override_latents must lie in [0, {sae.cfg.d_sae}) (the synthetic SAE's latents)")
    if tokens is None:
        tokens = corpus_tokens(tokenizer, cfg.corpus)
    tokens = np.asarray(tokens)
    t_ev = time.perf_counter()
    evidence = collect_evidence(
        model,
        sae,
        tokens,
        latents,
        cfg,
        hook_name=HOOK_NAME,
        special_ids=sorted(special_token_ids(tokenizer)),
        batch_size=batch_size,
        progress=progress,
    )
    evidence_seconds = time.perf_counter() - t_ev
    usable = [ev for ev in evidence if ev.skipped is None]
    skipped = {sae.rules[ev.latent]: ev.skipped for ev in evidence if ev.skipped is not None}
    if skipped:
        log.warning("planted validation: %d latents skipped (too few activations): %s", len(skipped), skipped)
    if len(usable) < 2:
        raise ValueError(
            f"only {len(usable)} planted latents have enough activations on the corpus ({skipped}); use more tokens"
        )

    renderer = TokenRenderer(tokenizer)
    perm = derangement(range(len(usable)), np.random.default_rng(cfg.random_seed))
    true = [sae.explanations[ev.latent] for ev in usable]
    written = {
        "true": true,
        "wrong": [true[p] for p in perm],
        "empty": [""] * len(usable),
        **probe_explanations(
            true, usable, renderer, act_threshold_frac=cfg.act_threshold_frac, seed=cfg.random_seed, probes=probes
        ),
    }
    kinds = [*KINDS, *probes]
    explanations, truncated, flagged = {}, {}, {}
    for kind in kinds:
        capped = [
            cap_explanation(e, tokenizer, max_explanation_tokens) if max_explanation_tokens else (e, False)
            for e in written[kind]
        ]
        explanations[kind] = [text for text, _ in capped]
        truncated[kind] = [cut for _, cut in capped]
        flagged[kind] = degenerate(explanations[kind])
    latent_rows = [
        {
            "latent": ev.latent,
            "rule": sae.rules[ev.latent],
            "true_explanation": true[i],
            "wrong_explanation": explanations["wrong"][i],
            "wrong_from_rule": sae.rules[usable[perm[i]].latent],
            "probe_explanations": {p: written[p][i] for p in probes},
            "explanation_truncated": {k: truncated[k][i] for k in kinds},
            "degenerate": {k: flagged[k][i] for k in kinds},
            "top_max_act": ev.top_max_act,
            "n_random_with_activity": ev.n_random_with_activity,
        }
        for i, ev in enumerate(usable)
    ]

    setting = cfg.structured_outputs if structured_outputs is None else structured_outputs
    structured = lm is not None and use_structured_outputs(lm, setting)
    truth = [[i for i, w in enumerate(ev.scoring, start=1) if w.active] for ev in usable]
    per_scorer: dict[str, Any] = {}
    for name in scorers:
        t_s = time.perf_counter()
        scorer = make_scorer(name, cfg, lm=lm, renderer=renderer, encoder=encoder, progress=progress,
                             structured=structured)
        items = [(ev, explanations[kind][i]) for kind in kinds for i, ev in enumerate(usable)]
        results = scorer.score(items)
        n = len(usable)
        by_kind = {kind: results[k * n : (k + 1) * n] for k, kind in enumerate(kinds)}
        scores = {kind: [float(r["score"]) for r in by_kind[kind]] for kind in kinds}
        separation, win_rate, verdict = _verdict(scores["true"], scores["wrong"])
        against = {p: probe_verdict(scores["true"], scores[p]) for p in probes}
        rows = [
            {
                **latent_rows[i],
                **{kind: scores[kind][i] for kind in kinds},
                "details": {kind: {k: v for k, v in by_kind[kind][i].items() if k != "score"} for kind in kinds},
            }
            for i in range(n)
        ]
        per_scorer[name] = {
            **{kind: float(np.mean(scores[kind])) for kind in kinds},
            "separation": separation,
            "win_rate": win_rate,
            "verdict": verdict,
            "truth": mean_ci(scores["true"]),
            "probes": against,
            "truth_above_every_probe": all(v["truth_above_probe"] for v in against.values()),
            "n_latents": n,
            "floors": detection_floors(truth, [len(ev.scoring) for ev in usable])
            if name == "detection"
            else {"chance": CHANCE},
            "unparsed": {kind: sum(not r.get("parsed", True) for r in by_kind[kind]) for kind in kinds},
            "seconds": round(time.perf_counter() - t_s, 2),
            "rows": rows,
        }
        log.info(
            "planted validation, %s: true %.3f, wrong %.3f, empty %.3f -> %s; %s",
            name,
            per_scorer[name]["true"],
            per_scorer[name]["wrong"],
            per_scorer[name]["empty"],
            verdict,
            ", ".join(f"{p} {v['mean']:.3f} ({v['verdict']})" for p, v in against.items()),
        )

    result = {
        "model": sae.cfg.metadata.model_name,
        "hook_name": HOOK_NAME,
        "kinds": kinds,
        "latents": latent_rows,
        "rules": sae.describe(),
        "skipped": skipped,
        "explanations": {
            k: {
                "n_truncated": sum(truncated[k]),
                "n_degenerate": sum(r is not None for r in flagged[k]),
                "degenerate_reasons": dict(sorted(Counter(r for r in flagged[k] if r).items())),
            }
            for k in kinds
        },
        "max_explanation_tokens": max_explanation_tokens,
        "criterion": {
            "min_separation": MIN_SEPARATION,
            "min_win_rate": MIN_WIN_RATE,
            "text": f"separates: mean(true - wrong) >= {MIN_SEPARATION} "
            f"and true > wrong on >= {MIN_WIN_RATE:.0%} of latents",
            "probes": "truth above probe: the 95% paired bootstrap interval (over latents) of true - probe "
            "lies above 0",
        },
        "config": cfg.to_dict(),
        "corpus_tokens": int(tokens.size),
        "lm": getattr(lm, "name", None) or (type(lm).__name__ if lm is not None else None),
        "structured_outputs": {"setting": setting, "applied": structured},
        "scorers": per_scorer,
        "seconds": {"evidence": round(evidence_seconds, 2), "total": round(time.perf_counter() - t0, 2)},
    }
    if output is not None:
        atomic_write_json(output, result)
    return result


def _interval(mean: float, ci: Sequence[float], signed: bool = False) -> str:
    f = "+.3f" if signed else ".3f"
    return f"{mean:{f}} [{ci[0]:{f}}, {ci[1]:{f}}]"


def validation_tables(result: dict[str, Any]) -> str:
    """Markdown tables of a :func:`planted_validation` result: per scorer, true / wrong / empty and
    the separation verdict; then per scorer and explanation, its score with interval, its
    inflation over the truth and the verdict, with how many latents' explanations were flagged
    ``degenerate`` or cut to the length cap."""
    scorers = result["scorers"]
    lines = [
        "| scorer | true | wrong | empty | true − wrong | true > wrong | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in scorers.items():
        wins = round(s["win_rate"] * s["n_latents"])
        lines.append(
            f"| {name} | {s['true']:.3f} | {s['wrong']:.3f} | {s['empty']:.3f} | {s['separation']:+.3f} | "
            f"{wins} of {s['n_latents']} | {s['verdict']} |"
        )
    lines += [
        "",
        "| scorer | explanation | score [95% CI] | inflation over truth [95% CI] | verdict | degenerate | cut to cap |",
        "|---|---|---|---|---|---|---|",
    ]
    flags = result.get("explanations", {})
    for name, s in scorers.items():
        n = s["n_latents"]
        for kind, row in [("true", {**s["truth"], "verdict": "(the truth)"}), *s["probes"].items()]:
            f = flags.get(kind, {})
            inflation = "" if kind == "true" else _interval(row["inflation"], row["inflation_ci"], signed=True)
            lines.append(
                f"| {name} | {kind} | {_interval(row['mean'], row['ci'])} | {inflation} | {row['verdict']} | "
                f"{f.get('n_degenerate', 0)} of {n} | {f.get('n_truncated', 0)} of {n} |"
            )
    every = [name for name, s in scorers.items() if s["probes"] and s["truth_above_every_probe"]]
    lines += [
        "",
        f"Truth above every probe: {', '.join(every) if every else 'no scorer'} "
        f"(of {', '.join(scorers)}; paired bootstrap over latents, 95%).",
    ]
    return "\n".join(lines)
