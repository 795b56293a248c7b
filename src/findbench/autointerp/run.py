"""One AutoInterp run: corpus → latents → evidence → explanations → scores → result files.

Every explanation passes :func:`~findbench.autointerp.explanations.guard_explanations` before it
is scored: cut to ``max_explanation_tokens`` tokens of the model's tokenizer (flagged
``explanation_truncated``) and marked ``degenerate`` when empty, copied from the prompt or
identical to another latent's (still scored).

Resumable: firing counts and evidence are saved in ``out`` and every LM call goes through a
sqlite request cache, so a rerun repeats no finished work (evidence is shared across
:data:`~findbench.autointerp.config.LM_ONLY_FIELDS`).

Outputs (SAEBench's names; ``run_id`` gives each run its own set):

- ``<sae_id>_eval_results[_<run_id>].json``: ``eval_result_metrics`` (``autointerp`` is
  SAEBench's detection score; one block per other scorer, each with :func:`score_summary`'s keys
  and ``n_degenerate`` / ``n_explanation_truncated``), ``eval_result_unstructured`` (per latent),
  ``eval_config``, the skipped latents;
- ``<model>_layer<L>_features_summary[_<run_id>].csv``: ``layer, feature, label, autointerp_score`` (+ one column
  per scorer, then ``degenerate``: the reason or empty, and ``explanation_truncated``: 1 or 0);
- ``latents[_<run_id>].json``: :func:`latent_records`, read by :mod:`findbench.autointerp.report`.

Sharded (``shard="I/N"``): the run explains and scores only the latents at positions ``p`` of the
selected list with ``p % N == I`` and writes the same files (``shard`` in the results JSON records
it). Its evidence is collected for the whole list (the collector's random draws are joint over the
list, so that is what keeps a shard's windows those of the unsharded run) and saved under the
unsharded run's fingerprint. :func:`merge_shards` joins the N folders into the unsharded files.

The model side splits over token ranges instead (:mod:`findbench.autointerp.token_shards`):
``token_shard="I/N"`` saves the activations of the I-th of N ranges of corpus rows and stops (the output's
``files["activations"]``, ``rows`` and ``resumed["activations"]``); ``activations=[the N folders]`` reads them
instead of running the model and the SAE (and may be sharded by latents as above).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from findbench._io import (
    atomic_dir,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    csv_text,
    fingerprint,
    read_untrusted_json,
)
from findbench._version import __version__
from findbench.autointerp.activations import available_device, hook_name_for_layer, load_model, parse_hook_name
from findbench.autointerp.commands import AutoInterpCommand, AutoInterpMergeCommand, parse_shard
from findbench.autointerp.config import LM_ONLY_FIELDS, AutoInterpConfig
from findbench.autointerp.detection import (
    CHANCE,
    detection_floors,
    detection_score,
    parse_explanation,
    score_summary,
    summarize,
)
from findbench.autointerp.evidence import (
    LatentEvidence,
    choose_latents,
    corpus_acts,
    count_firing,
    evidence_of,
)
from findbench.autointerp.explanations import degenerate, guard_explanations
from findbench.autointerp.prompts import TokenRenderer, explanation_constraint, explanation_messages
from findbench.autointerp.results import (
    METRIC_KEYS,
    READ_MAX_BYTES,
    AutoInterpResults,
    EvalMetrics,
    ScorerMetrics,
    Shard,
    latents_name,
)
from findbench.autointerp.scorers import make_scorer
from findbench.autointerp.token_shards import SavedActivations, save_shard, shard_path, shard_rows
from findbench.constants import UsageError, resumable
from findbench.lm.base import use_structured_outputs

#: Version of the ``latents.json`` layout (:func:`latent_records`).
LATENTS_FORMAT = 1

log = logging.getLogger(__name__)


def explain(
    lm,
    evidence: list[LatentEvidence],
    renderer: TokenRenderer,
    cfg: AutoInterpConfig,
    progress: bool,
    structured: bool,
) -> list[dict]:
    """One explanation per latent: the explainer's raw answer and the parsed label
    (``structured``: the answer is generated under :func:`explanation_constraint`)."""
    convs = [
        explanation_messages(
            ev.generation, renderer, cfg.act_threshold_frac * ev.top_max_act, demos=cfg.use_demos_in_explanation
        )
        for ev in evidence
    ]
    kwargs = {"constraint": explanation_constraint()} if structured else {}
    return [{"raw": a, "explanation": parse_explanation(a)} for a in (
        lm.generate(convs, max_new_tokens=cfg.max_tokens_in_explanation,
                    progress=progress and "explainer: explanations", **kwargs) if convs else []
    )]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "sae"


def _resolve_hook(sae, layer: int | None, hook: str | None) -> tuple[str, int | None]:
    own = getattr(getattr(sae.cfg, "metadata", None), "hook_name", None)
    if layer is None and hook is None:
        if not own:
            raise ValueError("the SAE records no hook_name: give --layer (and --hook)")
        return own, parse_hook_name(own)[1]
    asked = hook if hook == "hook_embed" or layer is None else hook_name_for_layer(layer, hook)
    if own and own != asked:
        raise ValueError(f"layer/hook give {asked!r} but the SAE was trained on {own!r}")
    return asked, parse_hook_name(asked)[1]


@dataclass
class AutoInterpOutput:
    """One run, filled in by :func:`run_autointerp`'s steps in turn and returned: its resolved names, this
    shard's latents' evidence, explanations and scores, the results written and ``files``, the paths written
    (``results``, ``summary``, ``latents``, ``report``; a token shard's ``activations``); ``resumed``: what was
    read back (``firing_counts``, ``evidence``, ``lm_cache`` with its ``hits`` and ``misses``; a token shard's
    ``activations``: True when its file was there)."""

    model_name: str
    sae_name: str
    hook_name: str
    layer: int | None
    renderer: TokenRenderer
    resumed: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)
    #: A token shard's corpus rows ``(start, stop)``.
    rows: tuple[int, int] | None = None
    #: This shard's latents, the skipped ones too.
    evidence: list[LatentEvidence] = field(default_factory=list)
    counts: dict[int, int] = field(default_factory=dict)
    planted: dict[int, dict] | None = None
    n_positions: int = 0
    #: Per scored latent: the explainer's ``raw`` answer, the ``explanation`` scored and its flags.
    explained: list[dict] = field(default_factory=list)
    #: Per scorer, per scored latent: its score and answer.
    scores: dict[str, list[dict]] = field(default_factory=dict)
    #: Whether the explainer's and the scorer's answers ran under their grammars.
    applied: dict[str, bool] = field(default_factory=dict)
    #: :func:`latent_records` (``latents.json``).
    records: list[dict] = field(default_factory=list)
    results: AutoInterpResults | None = None

    @property
    def usable(self) -> list[LatentEvidence]:
        """The latents explained and scored (not skipped)."""
        return [ev for ev in self.evidence if ev.skipped is None]


def run_autointerp(cmd: AutoInterpCommand) -> AutoInterpOutput:
    """Explain and score SAE latents (the files written: see the module docstring) in three steps: load the
    model, SAE and corpus and collect the latents' evidence; explain and score them; write the results.

    ``cmd``: ``findbench autointerp``'s config (:class:`~findbench.autointerp.commands.AutoInterpCommand`):
    ``sae``/``sae_id`` as :func:`~findbench.autointerp.sae.load_sae` takes them (from Python also an SAE),
    ``layer``/``hook`` default to the SAE's own ``hook_name``, ``explainer``/``scorer`` LM specs (from Python
    also LMs; ``scorer`` defaults to the explainer), ``cache`` to ``<out>/lm_cache.sqlite``, ``shard``
    ``"I/N"``: only this shard's latents (see the module docstring), ``report``: also the dashboard;
    ``cmd.config`` decides the result (:class:`~findbench.autointerp.config.AutoInterpConfig`).
    """
    run = _collect(cmd)
    if cmd.token_shard is None:
        _explain_and_score(run, cmd)
        _write(run, cmd)
    return run


def _collect(cmd: AutoInterpCommand) -> AutoInterpOutput:
    """Step 1: the model, SAE and corpus; a token shard's activations (then stop), else the latents (firing
    counts saved) and their evidence (saved; shared across :data:`LM_ONLY_FIELDS`), this shard's part."""
    from findbench.autointerp.corpus import corpus_tokens, special_token_ids
    from findbench.autointerp.sae import load_sae
    from findbench.autointerp.synthetic import SyntheticSAE

    cfg, out, where = cmd.config, Path(cmd.out), parse_shard(cmd.shard)
    out.mkdir(parents=True, exist_ok=True)
    model, tokenizer, model_name = load_model(cmd.model, device=available_device(cmd.device))
    sae = load_sae(cmd.sae, sae_id=cmd.sae_id, model=model, tokenizer=tokenizer, device=cmd.device)
    hook_name, layer = _resolve_hook(sae, cmd.layer, cmd.hook)
    given = cmd.sae if isinstance(cmd.sae, (str, os.PathLike)) else None
    sae_name = _safe(cmd.sae_id or getattr(sae, "name", None) or (Path(os.fspath(given)).name if given else "sae"))
    tokens = corpus_tokens(tokenizer, cfg.corpus)
    specials = sorted(special_token_ids(tokenizer))
    setting = {"model": model_name, "sae": sae_name, "hook_name": hook_name, "config": cfg.to_dict(),
               "rows": len(tokens)}
    run = AutoInterpOutput(model_name, sae_name, hook_name, layer, TokenRenderer(tokenizer),
                           resumed={"firing_counts": None, "evidence": None},
                           planted={d["latent"]: {k: d[k] for k in ("rule", "explanation", "n_tokens")}
                                    for d in sae.describe()} if isinstance(sae, SyntheticSAE) else None,
                           n_positions=int(tokens.size - np.isin(tokens, specials).sum()))
    corpus_key = {k: v for k, v in setting.items() if k != "config"} | {
        "tokens": [cfg.dataset, cfg.total_tokens, cfg.llm_context_size]}
    d_sae = int(sae.cfg.d_sae)
    acts_key = fingerprint(corpus_key | {"batch_size": cmd.batch_size, "d_sae": d_sae})
    hook = {"hook_name": hook_name, "special_ids": specials, "batch_size": cmd.batch_size, "progress": cmd.progress}
    if cmd.token_shard is not None:
        shard = parse_shard(cmd.token_shard, "--token-shard")
        run.rows, path = shard_rows(len(tokens), cmd.batch_size, shard), shard_path(out, acts_key, shard)
        run.files["activations"], run.resumed = str(path), {"activations": path.exists()}
        if not path.exists():
            desc = f"activations of shard {shard[0]}/{shard[1]}"
            save_shard(corpus_acts(model, sae, tokens, rows=run.rows, desc=desc, **hook), path, key=acts_key,
                       shard=shard, rows=run.rows, n_rows=len(tokens), d_sae=d_sae, context=cfg.llm_context_size)
        return run
    # the token shards' activations, read where the firing counts or the evidence are not saved yet
    saved = None if cmd.activations is None else functools.cache(lambda: SavedActivations(
        cmd.activations, key=acts_key, n_rows=len(tokens), d_sae=d_sae, context=cfg.llm_context_size))

    # latents: the override, or a seeded draw among alive latents (firing counts saved)
    if cfg.override_latents is not None:
        latents = list(cfg.override_latents)
        if bad := [x for x in latents if x >= d_sae]:
            raise ValueError(f"override_latents {bad} are outside [0, {d_sae}) (the SAE's d_sae)")
    else:
        counts_path = out / f"firing_counts_{fingerprint(corpus_key)}.npy"
        if counts_path.exists():
            counts = np.load(counts_path)
            run.resumed["firing_counts"] = str(counts_path)
        else:
            counts = saved().counts() if saved is not None else count_firing(
                corpus_acts(model, sae, tokens, desc="latent firing counts", **hook), d_sae)
            buf = io.BytesIO()
            np.save(buf, counts)
            atomic_write_bytes(counts_path, buf.getvalue())
            log.info("counted the firings of %d latents over %d tokens", len(counts), tokens.size)
        latents = choose_latents(counts, cfg)
        run.counts = {x: int(counts[x]) for x in latents}

    # evidence, saved once computed
    kept = {k: v for k, v in cfg.to_dict().items() if k not in LM_ONLY_FIELDS}  # what decides the evidence
    ev_path = out / f"evidence_{fingerprint(setting | {'config': kept, 'latents': latents})}.json"
    if ev_path.exists():
        evidence = [LatentEvidence.from_dict(d) for d in json.loads(ev_path.read_text())]
        run.resumed["evidence"] = str(ev_path)
        log.info("resumed from %s: evidence of %d latents", ev_path, len(evidence))
    else:
        t0 = time.perf_counter()
        evidence = evidence_of(saved().batches(latents, cmd.batch_size) if saved is not None else corpus_acts(
            model, sae, tokens, latents=latents, desc="evidence", **hook), tokens, latents, cfg)
        log.info("evidence for %d latents over %d tokens in %.1f s", len(latents), tokens.size,
                 time.perf_counter() - t0)
        atomic_write_json(ev_path, [dataclasses.asdict(e) for e in evidence])
    run.evidence = evidence if where is None else evidence[where[0] :: where[1]]
    if where is not None:
        log.info("shard %d/%d: %d of %d latents", *where, len(run.evidence), len(latents))
    if skipped := sorted(ev.latent for ev in run.evidence if ev.skipped is not None):
        log.warning("%d latents skipped (too few activations): %s", len(skipped), ", ".join(map(str, skipped[:10])))
    return run


def _explain_and_score(run: AutoInterpOutput, cmd: AutoInterpCommand) -> None:
    """Step 2: each usable latent explained (or given ``cmd.explanations``), guarded
    (:func:`~findbench.autointerp.explanations.guard_explanations`) and scored by each of ``cmd.config.scorers``."""
    cfg, usable = cmd.config, run.usable
    cache_path = Path(cmd.cache) if cmd.cache is not None else Path(cmd.out) / "lm_cache.sqlite"
    needs_lm = cmd.explanations is None or any(s in cfg.scorers for s in ("detection", "fuzz", "likelihood"))
    explainer_lm = _lm(cmd.explainer, cache_path, cmd) if needs_lm else None
    scorer_lm = explainer_lm if cmd.scorer is None or cmd.scorer == cmd.explainer else _lm(cmd.scorer, cache_path, cmd)
    lms = list({id(x): x for x in (explainer_lm, scorer_lm) if x is not None}.values())
    run.applied = {
        "explainer": cmd.explanations is None and use_structured_outputs(explainer_lm, cfg.structured_outputs),
        "scorer": scorer_lm is not None and use_structured_outputs(scorer_lm, cfg.structured_outputs),
    }
    if cmd.explanations is None:
        asked = _answered(explainer_lm)
        with resumable(lambda: f"{len(usable) - _answered(explainer_lm) + asked} of {len(usable)} latents left to "
                               f"explain, then to score: {', '.join(cfg.scorers)}"):
            run.explained = explain(explainer_lm, usable, run.renderer, cfg, cmd.progress, run.applied["explainer"])
    else:
        if missing := [ev.latent for ev in usable if ev.latent not in cmd.explanations]:
            raise ValueError(f"explanations has no entry for latents {missing[:10]}")
        run.explained = [{"raw": cmd.explanations[ev.latent], "explanation": cmd.explanations[ev.latent]}
                         for ev in usable]
    log.info("explained %d latents", len(run.explained))
    guarded = guard_explanations([m["explanation"] for m in run.explained], run.renderer.tokenizer,
                                 cfg.max_explanation_tokens)
    for m, g in zip(run.explained, guarded):
        m.update(g)
    n_degenerate, n_cut = sum(g["degenerate"] for g in guarded), sum(g["explanation_truncated"] for g in guarded)
    if n_degenerate or n_cut:
        log.warning("explanations: %d of %d degenerate (empty, copied from the prompt or identical across latents), "
                    "%d cut to %d tokens", n_degenerate, len(guarded), n_cut, cfg.max_explanation_tokens)

    items = [(ev, m["explanation"]) for ev, m in zip(usable, run.explained)]
    for k, name in enumerate(cfg.scorers):
        scorer = make_scorer(name, cfg, lm=scorer_lm, renderer=run.renderer, progress=cmd.progress,
                             structured=run.applied["scorer"])
        with resumable(lambda k=k: f"{len(items)} latents left to score: {', '.join(cfg.scorers[k:])}"):
            run.scores[name] = scorer.score(items)
        log.info("scored %d latents with %s (%d of %d scorers)", len(items), name, k + 1, len(cfg.scorers))
    run.resumed["lm_cache"] = {"path": str(cache_path), "hits": sum(getattr(x, "hits", 0) for x in lms),
                               "misses": sum(getattr(x, "misses", 0) for x in lms)}
    for lm in lms:
        if hasattr(lm, "close"):
            lm.close()


def _write(run: AutoInterpOutput, cmd: AutoInterpCommand) -> None:
    """Step 3: the latents file, the results JSON and the features summary CSV (the module docstring), then
    the dashboard when ``cmd.report``."""
    out = Path(cmd.out)
    run.records = latent_records(run.evidence, run.usable, run.explained, run.scores, run.renderer,
                                 planted=run.planted, n_positions=run.n_positions, counts=run.counts)
    names = result_names(run.sae_name, run.model_name, run.layer, cmd.run_id)
    run.results = _results(run, cmd, latents_file=names[2])
    run.files = _write_files(out, out, names, run.results, run.records)
    if cmd.report:
        from findbench.autointerp.report import write_report

        run.files["report"] = str(write_report(run.files["results"]))


def _answered(lm) -> int:
    """Requests a cached LM has answered so far (from its cache or its model)."""
    return getattr(lm, "hits", 0) + getattr(lm, "misses", 0)


def _lm(spec, cache_path: Path, cmd: AutoInterpCommand):
    """An LM from a spec or an LM object, behind the request cache."""
    from findbench.lm import load_lm

    if not isinstance(spec, (str, os.PathLike)):
        return load_lm(spec, cache=cache_path)
    if os.fspath(spec).startswith(("http://", "https://")):
        return load_lm(spec, model=cmd.lm_model, cache=cache_path, max_workers=cmd.max_connections)
    if cmd.lm_model is not None:
        raise ValueError("lm_model (the served model name) applies only to server-URL explainer / scorer specs")
    return load_lm(spec, cache=cache_path, batch_size=cmd.config.llm_batch_size)


def _describe(spec) -> str:
    return os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else (
        "same as explainer" if spec is None else getattr(spec, "name", type(spec).__name__))


def _window_record(w, renderer: TokenRenderer, role: str, index: int | None) -> dict:
    return {
        "kind": w.kind,
        "role": role,
        "index": index,
        "row": w.row,
        "centre": w.centre,
        "label_active": w.active,
        "max_act": w.max_act,
        "text": renderer.text(w.tokens),
        "token_ids": list(w.tokens),
        "tokens": renderer.pieces(w.tokens),
        "acts": list(w.acts),
    }


#: What each scorer said about scoring window ``k`` (1-based), from its per-latent ``row``.
_PICKS = {
    "detection": lambda row, k: {
        "predicted": None if row["predictions"] is None else k in row["predictions"],
        "correct": row["predictions"] is not None and (k in row["predictions"]) == (k in row["correct seqs"]),
    },
    "fuzz": lambda row, k: [a for a in row.get("answers", []) if a["window"] == k],
    "embedding": lambda row, k: {"similarity": row["similarities"][k - 1]},
    "likelihood": lambda row, k: {"pmi": row["pmi"][k - 1]},
}


def latent_records(
    evidence: list[LatentEvidence],
    usable: list[LatentEvidence],
    made: list[dict],
    per_scorer: dict[str, list[dict]],
    renderer: TokenRenderer,
    *,
    planted: dict[int, dict] | None = None,
    n_positions: int | None = None,
    counts: dict[int, int] | None = None,
) -> list[dict]:
    """One record per latent of ``evidence`` (skipped ones too) for ``latents.json``: explanation,
    firing statistics, each scorer's score and answer, and ``windows``: the explainer's, then the
    scoring windows in the order the scorers saw them, each with ``picks`` (each scorer's verdict).
    """
    position = {ev.latent: i for i, ev in enumerate(usable)}
    out = []
    for ev in evidence:
        n_fired = ev.extra.get("n_fired", (counts or {}).get(ev.latent))
        rec: dict[str, Any] = {
            "latent": ev.latent,
            "skipped": ev.skipped,
            "explanation": None,
            "explainer_answer": None,
            "degenerate": None,
            "degenerate_reason": None,
            "explanation_truncated": None,
            "planted": (planted or {}).get(ev.latent),
            "n_fired": n_fired,
            "n_positions": n_positions,
            "firing_rate": n_fired / n_positions if n_fired is not None and n_positions else None,
            "max_act": ev.top_max_act,
            "histogram": ev.extra.get("histogram"),
            "scores": {},
            "scorers": {},
            "windows": [],
        }
        if (i := position.get(ev.latent)) is not None:
            rows = {name: per[i] for name, per in per_scorer.items()}  # each scorer's row of this latent
            rec.update(
                explanation=made[i]["explanation"],
                explainer_answer=made[i]["raw"],
                **{k: made[i][k] for k in ("degenerate", "degenerate_reason", "explanation_truncated")},
                scores={name: row["score"] for name, row in rows.items()},
                scorers={name: {
                    "answer": row["answer"],
                    "parsed": row["parsed"],
                    "predictions": row["predictions"],
                    "active": row["correct seqs"],
                } if name == "detection" else {
                    k: v for k, v in row.items() if k not in ("score", "answers", "similarities", "pmi")
                } for name, row in rows.items()},
                windows=[_window_record(w, renderer, "generation", None) for w in ev.generation] + [
                    _window_record(w, renderer, "scoring", k) | {
                        "picks": {name: _PICKS[name](row, k) for name, row in rows.items()}}
                    for k, w in enumerate(ev.scoring, start=1)
                ],
            )
        out.append(rec)
    return out


def aggregate_metrics(records: list[dict], scorers: list[str]) -> EvalMetrics:
    """``eval_result_metrics`` from the per-latent :func:`latent_records` (skipped latents left
    out): per scorer its mean, std, :func:`score_summary` (floors from each latent's scoring
    windows) and the degenerate / cut explanation counts. A run and :func:`merge_shards` both call it."""
    scored = [r for r in records if r["skipped"] is None]
    blocks: dict[str, ScorerMetrics] = {}
    for name in scorers:
        scores = [r["scores"][name] for r in scored]
        mean, std = summarize(scores) if scores else (float("nan"), float("nan"))
        summary: dict[str, Any] = {}
        if scores:
            windows = [[w for w in r["windows"] if w["role"] == "scoring"] for r in scored]
            floors = (
                detection_floors(
                    [[w["index"] for w in ws if w["label_active"]] for ws in windows], [len(ws) for ws in windows]
                )
                if name == "detection"
                else {"chance": CHANCE}
            )
            summary = {k: tuple(v) if k == "ci" else v for k, v in score_summary(scores, floors).items() if k != "mean"}
        blocks[METRIC_KEYS[name]] = ScorerMetrics(
            score=mean,
            std_dev=std,
            n_degenerate=sum(r["degenerate"] for r in scored),
            n_unparsed=sum(not r["scorers"][name]["parsed"] for r in scored) if name == "detection" else None,
            n_explanation_truncated=sum(r["explanation_truncated"] for r in scored),
            **summary,
        )
    return EvalMetrics(blocks)


def _results(run: AutoInterpOutput, cmd: AutoInterpCommand, *, latents_file: str) -> AutoInterpResults:
    """The results file's content (SAEBench's keys): the run's config with what it resolved, the aggregates
    (:func:`aggregate_metrics`) and one entry per scored latent."""
    where = parse_shard(cmd.shard)
    unstructured = {}
    for i, (ev, m) in enumerate(zip(run.usable, run.explained)):
        entry: dict[str, Any] = {
            "explanation": m["explanation"],
            "explainer_answer": m["raw"],
            **{k: m[k] for k in ("degenerate", "degenerate_reason", "explanation_truncated")},
        }
        if "detection" in run.scores:
            d = run.scores["detection"][i]
            entry.update({"score": d["score"], "predictions": d["predictions"], "correct seqs": d["correct seqs"],
                          "scorer_answer": d["answer"]})
        for name, rows in run.scores.items():
            if name != "detection":
                entry.update({f"{name}_score": rows[i]["score"],
                              name: {k: v for k, v in rows[i].items() if k != "score"}})
        entry["random_windows_with_activity"] = ev.n_random_with_activity
        if run.planted is not None and ev.latent in run.planted:
            entry["planted"] = {k: run.planted[ev.latent][k] for k in ("rule", "explanation")}
        unstructured[str(ev.latent)] = entry
    return AutoInterpResults(
        eval_type_id="autointerp",
        eval_config={
            **cmd.config.to_dict(),
            "model_name": run.model_name,
            "sae": run.sae_name,
            "hook_name": run.hook_name,
            "layer": run.layer,
            "explainer": _describe(cmd.explainer),
            "scorer": _describe(cmd.scorer),
            "structured_outputs_applied": run.applied,
        },
        datetime_epoch_millis=int(time.time() * 1000),
        findbench_version=__version__,
        eval_result_metrics=aggregate_metrics(run.records, cmd.config.scorers),
        eval_result_details=[],
        eval_result_unstructured=unstructured,
        skipped_latents={str(ev.latent): ev.skipped for ev in run.evidence if ev.skipped is not None},
        latents_file=latents_file,
        run_id=cmd.run_id,
        shard=None if where is None else Shard(*where),
    )


def _summary_csv(layer, records: list[dict], scorers: list[str]) -> str:
    extra = [s for s in scorers if s != "detection"]
    return csv_text(
        ["layer", "feature", "label", "autointerp_score", *[f"{s}_score" for s in extra], "degenerate",
         "explanation_truncated"],
        (
            [
                layer if layer is not None else "embed",
                r["latent"],
                r["explanation"],
                r["scores"]["detection"] if "detection" in scorers else "",
                *[r["scores"][s] for s in extra],
                r["degenerate_reason"] or "",
                int(r["explanation_truncated"]),
            ]
            for r in records
            if r["skipped"] is None
        ),
    )


def result_names(sae: str, model: str, layer: int | None, run_id: str | None) -> tuple[str, str, str]:
    """The file names of a run (the module docstring's): its results JSON, features summary CSV and latents file."""
    suffix = f"_{run_id}" if run_id else ""
    return (f"{_safe(sae)}_eval_results{suffix}.json",
            f"{_safe(model)}_layer{'embed' if layer is None else layer}_features_summary{suffix}.csv",
            latents_name(run_id))


def _shard_files(folder: Path, run_id: str | None) -> tuple[tuple[str, str, str], AutoInterpResults, list[dict]]:
    """A shard folder's file names (:func:`result_names` of its settings and ``run_id``), results and latent
    records, read as untrusted: regular files of at most :data:`READ_MAX_BYTES`, named as its settings name them,
    their latents each once and as the results say (:func:`_check_records`)."""
    if not folder.is_dir():
        raise FileNotFoundError(f"shard folder {folder} does not exist")
    read = [(path, read_untrusted_json(path, READ_MAX_BYTES, f"shard folder {folder}: results file"))
            for path in sorted(folder.glob(f"*_eval_results{f'_{run_id}' if run_id else ''}.json"))]
    found = [(path, data) for path, data in read
             if data.get("eval_type_id") == "autointerp" and data.get("run_id") == run_id]
    if len(found) != 1:
        raise ValueError(
            f"shard folder {folder}: {len(found)} AutoInterp results files with run_id {run_id!r}, needs one"
        )
    path, data = found[0]
    results = AutoInterpResults.from_json(data, f"shard folder {folder}: {path.name}")
    if results.shard is None:
        raise ValueError(f"shard folder {folder}: {path.name} is not a sharded run (made without --shard)")
    config = results.eval_config
    if config.get("layer") is not None and type(config.get("layer")) is not int:
        raise ValueError(f"shard folder {folder}: {path.name}: eval_config.layer is not a layer number or null")
    names = result_names(str(config.get("sae")), str(config.get("model_name")), config.get("layer"), run_id)
    if path.name != names[0]:
        raise ValueError(f"shard folder {folder}: {path.name} records the settings of {names[0]}")
    side = read_untrusted_json(folder / names[2], READ_MAX_BYTES, f"shard folder {folder}: latents file")
    if side.get("format") != LATENTS_FORMAT or side.get("results") != path.name or not isinstance(
            side.get("latents"), list):
        raise ValueError(f"shard folder {folder}: {names[2]} is not the latents file of {path.name}")
    _check_records(side["latents"], results, f"shard folder {folder}: {names[2]}")
    return names, results, side["latents"]


def _check_records(records: list, results: AutoInterpResults, where: str) -> None:
    """ValueError naming ``where`` unless each record is one latent's, once, skipped or scored as ``results`` say
    (each scorer's score the same, detection's also recomputed from the record's predictions and windows), and
    the records go through what a merge does with them (aggregates, summary CSV, degenerate flags)."""
    try:
        ids = [r["latent"] for r in records]
        if any(type(x) is not int for x in ids) or len(set(ids)) != len(ids):
            raise ValueError(f"latents {ids[:20]} are not distinct latent numbers")
        skipped = {str(r["latent"]): r["skipped"] for r in records if r["skipped"] is not None}
        scored = [r for r in records if r["skipped"] is None]
        if skipped != results.skipped_latents or {str(r["latent"]) for r in scored} != set(
                results.eval_result_unstructured):
            raise ValueError("its latents, scored and skipped, are not those of the results file")
        for r in scored:
            entry, windows = results.eval_result_unstructured[str(r["latent"])], r["windows"]
            for name in results.scorers:
                given = [r["scores"][name], entry["score"] if name == "detection" else entry[f"{name}_score"]]
                if name == "detection":
                    shown = [w for w in windows if w["role"] == "scoring"]
                    given.append(detection_score(r["scorers"][name]["predictions"],
                                                 [w["index"] for w in shown if w["label_active"]], len(shown)))
                if len({json.dumps(x) for x in given}) != 1:
                    raise ValueError(f"latent {r['latent']}'s {name} scores {given} disagree (record, results"
                                     f"{', recomputed' if name == 'detection' else ''})")
        aggregate_metrics(records, results.scorers)
        _summary_csv(None, records, results.scorers)
        degenerate([r["explanation"] for r in scored])
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
        raise ValueError(f"{where}: " + (str(exc) if type(exc) is ValueError else
                                         f"malformed ({type(exc).__name__}: {exc})")) from None


def merge_shards(cfg: AutoInterpMergeCommand) -> dict:
    """Join the output folders ``cfg.dirs`` of ``shard="I/N"`` runs named ``cfg.run_id`` (each I of 0..N-1 once,
    the same settings) into ``cfg.out`` (replaced atomically): the files one unsharded run writes, latents in its
    order, explanations' ``identical`` flags and the aggregates recomputed over all of them
    (:func:`aggregate_metrics`). The results JSON records ``merged_from``. Returns its content and ``files``."""
    folders, out, run_id = [Path(d) for d in cfg.dirs], cfg.out, cfg.run_id
    if not folders:
        raise UsageError("merge needs at least one shard folder")
    if Path(out).resolve() in {f.resolve() for f in folders}:
        raise UsageError(f"--out must not be one of the shard folders, got {os.fspath(out)!r}")
    if os.path.islink(out) or os.path.lexists(out) and not os.path.isdir(out):
        raise UsageError(f"--out: {os.fspath(out)} is a symbolic link or not a folder "
                         "(merge replaces the folder whole)")
    shards = [_shard_files(f, run_id) for f in folders]
    first, (names, res0, _) = folders[0], shards[0]
    settings, count = res0.eval_config, res0.shard.count  # the run's whole config; the shard is recorded beside it
    by_index: dict[int, tuple[Path, list[dict]]] = {}
    for folder, (_, res, lat) in zip(folders, shards):
        if fingerprint(mine := res.eval_config) != fingerprint(settings):
            raise ValueError(f"shard folder {folder}: settings differ from {first}'s (" + ", ".join(
                sorted(k for k in settings.keys() | mine.keys() if settings.get(k) != mine.get(k))) + ")")
        index, n = res.shard.index, res.shard.count
        if n != count:
            raise ValueError(f"shard folder {folder}: shard {index}/{n}, but {first} is one of {count}")
        if index in by_index:
            raise ValueError(f"shard folder {folder}: shard {index}/{n} again (also {by_index[index][0]})")
        by_index[index] = (folder, lat)
    if missing := [f"{i}/{count}" for i in range(count) if i not in by_index]:
        raise ValueError(f"shard {', '.join(missing)} missing from the folders given")
    total = sum(len(lat) for _, lat in by_index.values())
    for i, (folder, lat) in by_index.items():
        if len(lat) != len(range(i, total, count)):
            raise ValueError(
                f"shard folder {folder}: {len(lat)} latents, but shard {i}/{count} of {total} has "
                f"{len(range(i, total, count))}"
            )
    records = [by_index[j % count][1][j // count] for j in range(total)]  # the unsharded order
    _check_selection([r["latent"] for r in records], settings)
    entries = {k: v for _, res, _ in shards for k, v in res.eval_result_unstructured.items()}
    scored = [r for r in records if r["skipped"] is None]
    for r, reason in zip(scored, degenerate([r["explanation"] for r in scored])):
        for target in (r, entries[str(r["latent"])]):
            target.update(degenerate=reason is not None, degenerate_reason=reason)
    merged = dataclasses.replace(
        res0,
        datetime_epoch_millis=int(time.time() * 1000),
        eval_result_metrics=aggregate_metrics(records, res0.scorers),
        eval_result_unstructured={str(r["latent"]): entries[str(r["latent"])] for r in scored},
        skipped_latents={str(r["latent"]): r["skipped"] for r in records if r["skipped"] is not None},
        shard=None,
        merged_from=[os.fspath(f) for f in folders],
    )
    with atomic_dir(out) as tmp:
        files = _write_files(tmp, Path(out), names, merged, records)
    return merged.to_json() | {"files": files}


def _write_files(folder: Path, out: Path, names: tuple[str, str, str], results: AutoInterpResults,
                 records: list[dict]) -> dict[str, str]:
    """Write a run's results JSON, features summary CSV and latents file (:func:`result_names`) in ``folder``;
    their paths in ``out`` (where ``folder`` will be), by key."""
    atomic_write_json(folder / names[2], {"format": LATENTS_FORMAT, "results": names[0], "latents": records})
    results.write(folder / names[0])
    atomic_write_text(folder / names[1], _summary_csv(results.eval_config.get("layer"), records, results.scorers))
    return {key: str(out / name) for key, name in zip(("results", "summary", "latents"), names)}


def _check_selection(latents: list[int], settings: dict[str, Any]) -> None:
    """ValueError unless the merged ``latents`` are the run's selection: its ``override_latents``, or a draw of
    at most ``n_latents`` (:func:`choose_latents` returns them in increasing order), each once."""
    drawn, n = settings.get("override_latents"), settings.get("n_latents")
    if len(set(latents)) != len(latents):
        raise ValueError(f"the shards hold latents {sorted(x for x in set(latents) if latents.count(x) > 1)[:10]} "
                         "more than once")
    wrong = (latents != drawn) if drawn is not None else (
        latents != sorted(latents) or type(n) is not int or len(latents) > n)
    if wrong:
        raise ValueError(f"the shards' latents {latents[:20]} are not the run's selection (" + (
            f"override_latents {drawn!r:.200})" if drawn is not None else f"at most n_latents={n!r}, increasing)"))
