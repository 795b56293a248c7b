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
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from findbench._guards import derangement
from findbench._io import atomic_write_json
from findbench.autointerp.activations import load_model
from findbench.autointerp.commands import AutoInterpValidateCommand
from findbench.autointerp.config import SCORERS, AutoInterpConfig
from findbench.autointerp.corpus import corpus_tokens, special_token_ids
from findbench.autointerp.detection import CHANCE, detection_floors
from findbench.autointerp.evidence import collect_evidence
from findbench.autointerp.explanations import cap_explanation, degenerate
from findbench.autointerp.probes import probe_explanations
from findbench.autointerp.prompts import TokenRenderer
from findbench.autointerp.scorers import make_scorer
from findbench.autointerp.synthetic import HOOK_NAME, SyntheticSAE
from findbench.constants import UsageError
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
#: Corpus rows per forward pass of the model.
BATCH_SIZE = 32
#: Scorers that need an LM.
_LM_SCORERS = ("detection", "fuzz", "likelihood")


def quick_config(d_sae: int, scorers: Sequence[str] = SCORERS, **overrides: Any) -> AutoInterpConfig:
    """:meth:`AutoInterpConfig.quick` with a corpus of 200k tokens and every latent of the synthetic SAE
    (there are only a few; each fires hundreds of times in 200k tokens of WordNet glosses,
    whose first 150k tokens hold few birds)."""
    return AutoInterpConfig.quick(**{"total_tokens": 200_000, "override_latents": list(range(d_sae)),
                                     "scorers": list(scorers), **overrides})


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


def planted_validation(cmd: AutoInterpValidateCommand) -> dict[str, Any]:
    """Score true, wrong, empty and probe explanations of planted features with each of ``cmd.scorers``.

    ``cmd``: ``findbench autointerp-validate``'s config
    (:class:`~findbench.autointerp.commands.AutoInterpValidateCommand`): ``model`` a spec (from Python also
    a ``(model, tokenizer)`` pair), ``scorer`` the LM of ``detection``, ``fuzz`` and ``likelihood`` (a spec,
    from Python also an LM; None: none), ``max_explanation_tokens`` the cap of every explanation (0: none),
    ``out`` the JSON file written (None: none); from Python also ``config``, the evidence settings (default
    ``total_tokens``, ``seed``, ``scorers`` and ``structured_outputs`` of ``cmd``; its ``random_seed`` seeds
    the derangement and the probes), ``tokens`` (corpus rows ``[rows, llm_context_size]``; default
    ``config.dataset``, tokenized) and ``encoder`` (of the ``embedding`` scorer; default the embedded MiniLM).

    Returns:
        ``{"scorers": {name: {<kind>: mean per kind, "separation", "win_rate", "verdict", "truth",
        "probes": {probe: :func:`probe_verdict`}, "truth_above_every_probe", "n_latents", "floors",
        "unparsed", "seconds", "rows"}}, "kinds", "explanations": {kind: {"n_truncated",
        "n_degenerate", "degenerate_reasons"}}, "latents", "skipped", "criterion", "config", "model",
        "structured_outputs", "corpus_tokens", "seconds"}``.
    """
    t0 = time.perf_counter()
    lm = cmd.scorer
    if (needs_lm := [s for s in cmd.scorers if s in _LM_SCORERS]) and lm is None:
        raise UsageError(f"--scorers {needs_lm} need an LM: give --scorer (e.g. embedded)")
    if isinstance(lm, str):
        from findbench.lm import load_lm

        lm = load_lm(lm, cache=cmd.cache) if needs_lm else None
    model, tokenizer = cmd.model if not isinstance(cmd.model, str) else load_model(cmd.model, device="cpu")[:2]
    sae = SyntheticSAE.for_model(model, tokenizer, cmd.rules)
    cfg = cmd.config or AutoInterpConfig(total_tokens=cmd.total_tokens, random_seed=cmd.seed, scorers=cmd.scorers,
                                         structured_outputs=cmd.structured_outputs)
    latents = list(cfg.override_latents) if cfg.override_latents is not None else list(range(sae.cfg.d_sae))
    if any(j >= sae.cfg.d_sae for j in latents):
        raise ValueError(f"config.override_latents must lie in [0, {sae.cfg.d_sae}) (the synthetic SAE's latents)")
    tokens = np.asarray(corpus_tokens(tokenizer, cfg.corpus) if cmd.tokens is None else cmd.tokens)
    t_ev = time.perf_counter()
    evidence = collect_evidence(model, sae, tokens, latents, cfg, hook_name=HOOK_NAME,
                                special_ids=sorted(special_token_ids(tokenizer)), batch_size=BATCH_SIZE,
                                progress=cmd.progress)
    evidence_seconds = time.perf_counter() - t_ev
    usable = [ev for ev in evidence if ev.skipped is None]
    if skipped := {sae.rules[ev.latent]: ev.skipped for ev in evidence if ev.skipped is not None}:
        log.warning("planted validation: %d latents skipped (too few activations): %s", len(skipped), skipped)
    if len(usable) < 2:
        raise ValueError(
            f"only {len(usable)} planted latents have enough activations on the corpus ({skipped}); use more tokens"
        )
    renderer, kinds = TokenRenderer(tokenizer), [*KINDS, *cmd.probes]
    cap = cmd.max_explanation_tokens or None
    explanations, latent_rows = _explanations(sae, usable, renderer, cfg, cmd.probes, cap)
    structured = lm is not None and use_structured_outputs(lm, cfg.structured_outputs)
    per_scorer = {name: _scored(name, make_scorer(name, cfg, lm=lm, renderer=renderer, encoder=cmd.encoder,
                                                  progress=cmd.progress, structured=structured),
                                usable, explanations, latent_rows, kinds) for name in cmd.scorers}
    result = {
        "model": sae.cfg.metadata.model_name,
        "hook_name": HOOK_NAME,
        "kinds": kinds,
        "latents": latent_rows,
        "rules": sae.describe(),
        "skipped": skipped,
        "explanations": {
            k: {
                "n_truncated": sum(r["explanation_truncated"][k] for r in latent_rows),
                "n_degenerate": sum(r["degenerate"][k] is not None for r in latent_rows),
                "degenerate_reasons": dict(sorted(Counter(r["degenerate"][k] for r in latent_rows
                                                          if r["degenerate"][k]).items())),
            }
            for k in kinds
        },
        "max_explanation_tokens": cap,
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
        "structured_outputs": {"setting": cfg.structured_outputs, "applied": structured},
        "scorers": per_scorer,
        "seconds": {"evidence": round(evidence_seconds, 2), "total": round(time.perf_counter() - t0, 2)},
    }
    if cmd.out is not None:
        atomic_write_json(cmd.out, result)
    return result


def _explanations(sae: SyntheticSAE, usable: list, renderer: TokenRenderer, cfg: AutoInterpConfig,
                  probes: Sequence[str], cap: int | None) -> tuple[dict[str, list[str]], list[dict]]:
    """Per kind, the explanation of each usable latent as the scorers read it (cut to ``cap`` tokens), and one row
    per latent: its rule, the explanations written, which were cut and which are degenerate."""
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
    capped = {kind: [cap_explanation(e, renderer.tokenizer, cap) if cap else (e, False) for e in written[kind]]
              for kind in kinds}
    explanations = {kind: [text for text, _ in capped[kind]] for kind in kinds}
    flagged = {kind: degenerate(explanations[kind]) for kind in kinds}
    return explanations, [
        {
            "latent": ev.latent,
            "rule": sae.rules[ev.latent],
            "true_explanation": true[i],
            "wrong_explanation": explanations["wrong"][i],
            "wrong_from_rule": sae.rules[usable[perm[i]].latent],
            "probe_explanations": {p: written[p][i] for p in probes},
            "explanation_truncated": {k: capped[k][i][1] for k in kinds},
            "degenerate": {k: flagged[k][i] for k in kinds},
            "top_max_act": ev.top_max_act,
            "n_random_with_activity": ev.n_random_with_activity,
        }
        for i, ev in enumerate(usable)
    ]


def _scored(name: str, scorer: Any, usable: list, explanations: dict[str, list[str]], latent_rows: list[dict],
            kinds: list[str]) -> dict[str, Any]:
    """Scorer ``name``'s part of the result: each kind's mean, the separation verdict, the probes' paired verdicts,
    the floors and one row per latent."""
    t_s, n = time.perf_counter(), len(usable)
    results = scorer.score([(ev, explanations[kind][i]) for kind in kinds for i, ev in enumerate(usable)])
    by_kind = {kind: results[k * n : (k + 1) * n] for k, kind in enumerate(kinds)}
    scores = {kind: [float(r["score"]) for r in by_kind[kind]] for kind in kinds}
    diff = np.asarray(scores["true"], dtype=float) - np.asarray(scores["wrong"], dtype=float)
    separation, win_rate = float(diff.mean()), float((diff > 0).mean())
    verdict = "separates" if separation >= MIN_SEPARATION and win_rate >= MIN_WIN_RATE else "does not separate"
    against = {p: probe_verdict(scores["true"], scores[p]) for p in kinds[len(KINDS):]}
    out = {
        **{kind: float(np.mean(scores[kind])) for kind in kinds},
        "separation": separation,
        "win_rate": win_rate,
        "verdict": verdict,
        "truth": mean_ci(scores["true"]),
        "probes": against,
        "truth_above_every_probe": all(v["truth_above_probe"] for v in against.values()),
        "n_latents": n,
        "floors": detection_floors([[i for i, w in enumerate(ev.scoring, start=1) if w.active] for ev in usable],
                                   [len(ev.scoring) for ev in usable]) if name == "detection" else {"chance": CHANCE},
        "unparsed": {kind: sum(not r.get("parsed", True) for r in by_kind[kind]) for kind in kinds},
        "seconds": round(time.perf_counter() - t_s, 2),
        "rows": [
            {
                **latent_rows[i],
                **{kind: scores[kind][i] for kind in kinds},
                "details": {kind: {k: v for k, v in by_kind[kind][i].items() if k != "score"} for kind in kinds},
            }
            for i in range(n)
        ],
    }
    log.info("planted validation, %s: true %.3f, wrong %.3f, empty %.3f -> %s; %s", name, out["true"], out["wrong"],
             out["empty"], verdict, ", ".join(f"{p} {v['mean']:.3f} ({v['verdict']})" for p, v in against.items()))
    return out


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
        *(f"| {name} | {s['true']:.3f} | {s['wrong']:.3f} | {s['empty']:.3f} | {s['separation']:+.3f} | "
          f"{round(s['win_rate'] * s['n_latents'])} of {s['n_latents']} | {s['verdict']} |"
          for name, s in scorers.items()),
        "",
        "| scorer | explanation | score [95% CI] | inflation over truth [95% CI] | verdict | degenerate | cut to cap |",
        "|---|---|---|---|---|---|---|",
    ]
    flags = result.get("explanations", {})
    for name, s in scorers.items():
        n = s["n_latents"]
        for kind, row in [("true", {**s["truth"], "verdict": "(the truth)"}), *s["probes"].items()]:
            f = flags.get(kind, {})
            lines.append(
                f"| {name} | {kind} | {_interval(row['mean'], row['ci'])} | "
                f"{'' if kind == 'true' else _interval(row['inflation'], row['inflation_ci'], signed=True)} | "
                f"{row['verdict']} | "
                f"{f.get('n_degenerate', 0)} of {n} | {f.get('n_truncated', 0)} of {n} |"
            )
    every = [name for name, s in scorers.items() if s["probes"] and s["truth_above_every_probe"]]
    lines += [
        "",
        f"Truth above every probe: {', '.join(every) if every else 'no scorer'} "
        f"(of {', '.join(scorers)}; paired bootstrap over latents, 95%).",
    ]
    return "\n".join(lines)
