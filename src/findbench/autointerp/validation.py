"""Validation on known answers: do the scorers prefer a planted feature's true explanation?

:func:`planted_validation` collects the evidence of every latent of the
:class:`~findbench.autointerp.synthetic.SyntheticSAE` (the same pass a real SAE gets) and has
each scorer score three explanations per latent on the same windows: ``true`` (the planted
one), ``wrong`` (another latent's, a seeded derangement) and ``empty`` (``""``). A scorer
**separates** when ``mean(true − wrong) ≥`` :data:`MIN_SEPARATION` (0.1) **and** true beats
wrong on at least :data:`MIN_WIN_RATE` (75 %) of the latents.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from findbench import _checks
from findbench._io import atomic_write_json
from findbench.autointerp.config import SCORERS, AutoInterpConfig
from findbench.autointerp.corpus import corpus_tokens, special_token_ids
from findbench.autointerp.detection import CHANCE, detection_floors
from findbench.autointerp.evidence import collect_evidence
from findbench.autointerp.prompts import TokenRenderer
from findbench.autointerp.scorers import make_scorer
from findbench.autointerp.synthetic import HOOK_NAME, SyntheticSAE
from findbench.lm.base import use_structured_outputs

log = logging.getLogger(__name__)

#: "separates": mean(true − wrong) at least this ...
MIN_SEPARATION = 0.1
#: ... and true > wrong on at least this share of the scored latents.
MIN_WIN_RATE = 0.75
#: The explanations each latent is scored with.
KINDS = ("true", "wrong", "empty")
#: Scorers that need an LM.
_LM_SCORERS = ("detection", "fuzz", "likelihood")


def quick_config(d_sae: int, scorers: Sequence[str] = SCORERS, **overrides: Any) -> AutoInterpConfig:
    """SAEBench's settings with a corpus of 200k tokens and every latent of the synthetic SAE
    (there are only a few; each fires hundreds of times in 200k tokens of WordNet glosses,
    whose first 150k tokens hold few birds)."""
    kw: dict[str, Any] = {"total_tokens": 200_000, "override_latents": list(range(d_sae)), "scorers": list(scorers)}
    kw.update(overrides)
    return AutoInterpConfig(**kw)


def derangement(n: int, seed: int = 42) -> list[int]:
    """A seeded permutation of ``range(n)`` with no fixed point (``n >= 2``)."""
    if n < 2:
        raise ValueError(f"a derangement needs at least 2 items, got {n}")
    rng = np.random.default_rng(seed)
    while True:
        perm = rng.permutation(n)
        if not (perm == np.arange(n)).any():
            return [int(p) for p in perm]


def _verdict(true: Sequence[float], wrong: Sequence[float]) -> tuple[float, float, str]:
    diff = np.asarray(true, dtype=float) - np.asarray(wrong, dtype=float)
    separation = float(diff.mean())
    win_rate = float((diff > 0).mean())
    ok = separation >= MIN_SEPARATION and win_rate >= MIN_WIN_RATE
    return separation, win_rate, "separates" if ok else "does not separate"


def planted_validation(model, tokenizer, *, scorers: Sequence[str] = SCORERS, lm=None, encoder=None, config: AutoInterpConfig | None = None,
                       tokens: np.ndarray | None = None, rules: Sequence[str] | None = None, batch_size: int = 32,
                       output: str | os.PathLike | None = None, structured_outputs: str | None = None,
                       progress: bool = True) -> dict[str, Any]:
    """Score true, wrong and empty explanations of planted features with each scorer.

    Args:
        lm: the scoring LM of ``detection``, ``fuzz`` and ``likelihood``.
        encoder: sentence encoder of the ``embedding`` scorer (default: the embedded MiniLM).
        config: evidence settings (default :func:`quick_config`).
        tokens: corpus rows ``[rows, llm_context_size]`` (default: ``config.dataset``, tokenized).
        rules: the planted rules (default :data:`~findbench.autointerp.synthetic.DEFAULT_RULES`).
        output: a JSON file to write the result to.
        structured_outputs: for the detection answers (default ``config.structured_outputs``).

    Returns:
        ``{"scorers": {name: {"true", "wrong", "empty", "separation", "win_rate", "verdict",
        "n_latents", "floors", "unparsed", "seconds", "rows"}}, "latents", "skipped", "criterion",
        "config", "model", "structured_outputs", "corpus_tokens", "seconds"}``.
    """
    t0 = time.perf_counter()
    scorers = [_checks.one_of("scorers", s, SCORERS) for s in _checks.str_list("scorers", scorers)]
    if not scorers or len(set(scorers)) != len(scorers):
        raise ValueError(f"scorers must be distinct names from {SCORERS}, got {scorers!r}")
    needs_lm = [s for s in scorers if s in _LM_SCORERS]
    if needs_lm and lm is None:
        raise ValueError(f"scorers {needs_lm} need an LM: pass lm= (e.g. findbench.lm.load_lm('embedded'))")

    sae = SyntheticSAE.for_model(model, tokenizer, rules)
    cfg = config or quick_config(sae.cfg.d_sae, scorers)
    latents = list(cfg.override_latents) if cfg.override_latents is not None else list(range(sae.cfg.d_sae))
    if any(j >= sae.cfg.d_sae for j in latents):
        raise ValueError(f"config.override_latents must lie in [0, {sae.cfg.d_sae}) (the synthetic SAE's latents)")
    if tokens is None:
        tokens = corpus_tokens(tokenizer, cfg.dataset, context_size=cfg.llm_context_size, total_tokens=cfg.total_tokens)
    tokens = np.asarray(tokens)
    t_ev = time.perf_counter()
    evidence = collect_evidence(model, sae, tokens, latents, cfg, hook_name=HOOK_NAME, special_ids=sorted(special_token_ids(tokenizer)),
                                batch_size=batch_size, progress=progress)
    evidence_seconds = time.perf_counter() - t_ev
    usable = [ev for ev in evidence if ev.skipped is None]
    skipped = {sae.rules[ev.latent]: ev.skipped for ev in evidence if ev.skipped is not None}
    if skipped:
        log.warning("planted validation: %d latents skipped (too few activations): %s", len(skipped), skipped)
    if len(usable) < 2:
        raise ValueError(f"only {len(usable)} planted latents have enough activations on the corpus ({skipped}); use more tokens")

    perm = derangement(len(usable), cfg.random_seed)
    true = [sae.explanations[ev.latent] for ev in usable]
    explanations = {"true": true, "wrong": [true[p] for p in perm], "empty": [""] * len(usable)}
    latent_rows = [
        {"latent": ev.latent, "rule": sae.rules[ev.latent], "true_explanation": true[i], "wrong_explanation": explanations["wrong"][i],
         "wrong_from_rule": sae.rules[usable[perm[i]].latent], "top_max_act": ev.top_max_act,
         "n_random_with_activity": ev.n_random_with_activity}
        for i, ev in enumerate(usable)
    ]

    renderer = TokenRenderer(tokenizer)
    setting = cfg.structured_outputs if structured_outputs is None else structured_outputs
    structured = lm is not None and use_structured_outputs(lm, setting)
    truth = [[i for i, w in enumerate(ev.scoring, start=1) if w.active] for ev in usable]
    per_scorer: dict[str, Any] = {}
    for name in scorers:
        t_s = time.perf_counter()
        scorer = make_scorer(name, lm=lm, renderer=renderer, encoder=encoder, act_threshold_frac=cfg.act_threshold_frac,
                             seed=cfg.random_seed, max_new_tokens=cfg.max_tokens_in_prediction, progress=progress,
                             structured=structured)
        items = [(ev, explanations[kind][i]) for kind in KINDS for i, ev in enumerate(usable)]
        results = scorer.score(items)
        n = len(usable)
        by_kind = {kind: results[k * n : (k + 1) * n] for k, kind in enumerate(KINDS)}
        scores = {kind: [float(r["score"]) for r in by_kind[kind]] for kind in KINDS}
        separation, win_rate, verdict = _verdict(scores["true"], scores["wrong"])
        rows = [{**latent_rows[i], **{kind: scores[kind][i] for kind in KINDS},
                 "details": {kind: {k: v for k, v in by_kind[kind][i].items() if k != "score"} for kind in KINDS}}
                for i in range(n)]
        per_scorer[name] = {
            **{kind: float(np.mean(scores[kind])) for kind in KINDS},
            "separation": separation,
            "win_rate": win_rate,
            "verdict": verdict,
            "n_latents": n,
            "floors": detection_floors(truth, [len(ev.scoring) for ev in usable]) if name == "detection" else {"chance": CHANCE},
            "unparsed": {kind: sum(not r.get("parsed", True) for r in by_kind[kind]) for kind in KINDS},
            "seconds": round(time.perf_counter() - t_s, 2),
            "rows": rows,
        }
        log.info("planted validation, %s: true %.3f, wrong %.3f, empty %.3f -> %s", name, per_scorer[name]["true"],
                 per_scorer[name]["wrong"], per_scorer[name]["empty"], verdict)

    result = {
        "model": sae.cfg.metadata.model_name,
        "hook_name": HOOK_NAME,
        "latents": latent_rows,
        "rules": sae.describe(),
        "skipped": skipped,
        "criterion": {"min_separation": MIN_SEPARATION, "min_win_rate": MIN_WIN_RATE,
                      "text": f"separates: mean(true - wrong) >= {MIN_SEPARATION} and true > wrong on >= {MIN_WIN_RATE:.0%} of latents"},
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

