"""The AutoInterp dashboard: one self-contained ``report.html`` per run (``report_<run_id>.html``
for a named run), from its results JSON and ``latents.json``: the settings, each scorer's score,
a sortable index of latents and a panel per latent (``#latent-<id>``) with its explanation,
scores, activation histogram and windows shaded by activation. Degenerate explanations (empty,
copied from the prompt, identical across latents) and those cut to the length cap are flagged in
the summary, the index and their panel. The page is ``templates/autointerp_report.html.j2`` in
the one page shell of findbench's reports, everything inline, run text escaped by Jinja2's autoescape.
Both files are read as untrusted, inside the run's folder only: regular files (no symbolic link or FIFO) of at
most :data:`~findbench.autointerp.results.READ_MAX_BYTES`, the latents file named ``latents[_<run_id>].json``.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from findbench._io import atomic_write_text, read_untrusted_json
from findbench.autointerp.results import METRIC_KEYS, READ_MAX_BYTES, AutoInterpResults
from findbench.resources import render_page

log = logging.getLogger(__name__)

#: The report's file name (``report_<run_id>.html`` for a run written with a run id).
REPORT_FILE = "report.html"
#: Results files of an AutoInterp run (SAEBench's name).
RESULTS_GLOB = "*_eval_results*.json"
#: How a results file is named in errors (it is read as untrusted: a regular file of at most READ_MAX_BYTES).
_RESULTS_FILE = "AutoInterp results file"

_KIND_TITLES = {
    "top": ("Top-activating windows", "the latent's strongest windows; labelled active for the scorers"),
    "iw": (
        "Importance-weighted windows",
        "sampled with probability ∝ activation² below the top windows; labelled active",
    ),
    "random": (
        "Random windows",
        "drawn from the whole corpus; labelled inactive, as in SAEBench, even where the latent fires",
    ),
}
_SCORER_HEADS = {
    "detection": "detection",
    "fuzz": "fuzz (Yes/No)",
    "embedding": "embedding sim.",
    "likelihood": "likelihood PMI",
}


def autointerp_results(folder: str | os.PathLike) -> list[Path]:
    """The AutoInterp results files in ``folder`` (``eval_type_id`` ``autointerp``), sorted by
    name; [] when it holds none (an interpret run folder, say). One that cannot be read (a symbolic
    link, a FIFO, over the cap, not JSON) is left out with a warning."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob(RESULTS_GLOB)):
        try:
            if read_untrusted_json(path, READ_MAX_BYTES, _RESULTS_FILE).get("eval_type_id") == "autointerp":
                found.append(path)
        except ValueError as exc:
            log.warning("%s", exc)
    return found


def _resolve_results(path: str | os.PathLike) -> Path:
    path = Path(path)
    if path.is_dir():
        if len(found := autointerp_results(path)) != 1:
            raise ValueError(f"{path} must hold exactly one AutoInterp results file ({RESULTS_GLOB}); found "
                             f"{', '.join(p.name for p in found) or 'none'}: pass one")
        return found[0]
    if not path.is_file():
        raise FileNotFoundError(f"no AutoInterp results at {path}")
    return path


def load_run(path: str | os.PathLike) -> tuple[AutoInterpResults, list[dict]]:
    """The results file at ``path`` (a file, or a folder holding one), typed, and its latent records
    (the ``latents_file`` sidecar); ValueError naming the key of a file that does not fit."""
    path = _resolve_results(path)
    if (data := read_untrusted_json(path, READ_MAX_BYTES, _RESULTS_FILE)).get("eval_type_id") != "autointerp":
        raise ValueError(f"{path} is not an AutoInterp results file (eval_type_id 'autointerp')")
    results = AutoInterpResults.from_json(data, str(path))  # its latents_file: a name beside it, never a path
    rerun = "rerun findbench autointerp with the same arguments (its evidence and LM answers come from the cache)"
    try:
        side = read_untrusted_json(path.parent / results.latents_file, READ_MAX_BYTES, f"{path}: its latents file")
    except ValueError as exc:
        raise ValueError(f"{exc}; {rerun}") from None
    if not isinstance(side.get("latents"), list):
        raise ValueError(f"{path}: its latents file {results.latents_file!r} holds no latents list; {rerun}")
    return results, side["latents"]


def report_path(results_path: str | os.PathLike, results: AutoInterpResults | None = None) -> Path:
    """Where :func:`write_report` puts the report of ``results_path``: ``report.html`` beside
    it, or ``report_<run_id>.html`` for a named run."""
    results_path = Path(results_path)
    run_id = results.run_id if results is not None else None
    if run_id is None and "_eval_results_" in results_path.stem:
        run_id = results_path.stem.rsplit("_eval_results_", 1)[1]
    return results_path.parent / (f"report_{run_id}.html" if run_id else REPORT_FILE)


def _num(value: Any) -> float | None:
    finite = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    return float(value) if finite else None


def _fmt(value: Any, digits: int = 3, sign: str = "") -> str:
    x = _num(value)
    return "—" if x is None else f"{x:{sign}.{digits}f}"


def _rate(value: Any) -> str:
    x = _num(value)
    return "—" if x is None else f"{100 * x:.2f}%" if x >= 1e-3 or x == 0 else f"{100 * x:.2g}%"


def _sort_key(x: float | None) -> str:
    return "" if x is None else repr(x)


def _scorers(results: AutoInterpResults, records: Sequence[Mapping[str, Any]]) -> list[str]:
    names = results.scorers
    for r in records:
        names += [n for n in r.get("scores", {}) if n not in names]
    return names


def _summary(results: AutoInterpResults, scorers: Sequence[str]) -> list[dict[str, Any]]:
    """A row per scorer with a metric block: mean, interval, n, floors, margin, unparsed and degenerate counts."""
    return [
        {
            "label": f"{name} (SAEBench's autointerp_score)" if name == "detection" else name,
            "mean": _fmt(m.score),
            "interval": "—" if m.ci is None else f"[{_fmt(m.ci[0])}, {_fmt(m.ci[1])}]",
            "n": "—" if m.n is None else str(m.n),
            "margin": _num(m.margin),
            "best_floor": "—" if m.best_floor is None else m.best_floor,
            "floors": ", ".join(f"{k} {_fmt(v)}" for k, v in (m.floors or {}).items()) or "—",
            "unparsed": "" if m.n_unparsed is None else str(m.n_unparsed),
            "degenerate": str(m.n_degenerate),
        }
        for name in scorers
        if (m := results.eval_result_metrics.get(METRIC_KEYS.get(name, name))) is not None
    ]


_REASONS = {"empty": "empty", "prompt_text": "copied from the prompt", "identical": "identical to another latent's"}


def _flags(rec: Mapping[str, Any]) -> list[str]:
    """The warnings on a latent's explanation: degenerate (and why), cut to the length cap."""
    why = rec.get("degenerate_reason")
    return [flag for flag, on in (
        (f"degenerate: {_REASONS.get(why, why)}", rec.get("degenerate")),
        ("cut to the length cap", rec.get("explanation_truncated")),
    ) if on]


def _flags_line(records: Sequence[Mapping[str, Any]]) -> str:
    """One warning line for the run's degenerate and cut explanations ("" when none)."""
    explained = [r for r in records if not r.get("skipped")]
    degenerate = [r for r in explained if r.get("degenerate")]
    cut = [r for r in explained if r.get("explanation_truncated")]
    why = Counter(_REASONS.get(r.get("degenerate_reason"), str(r.get("degenerate_reason"))) for r in degenerate)
    return "; ".join(part for part, on in (
        (f"{len(degenerate)} of {len(explained)} explanations are degenerate ("
         + ", ".join(f"{n} {reason}" for reason, n in why.items()) + "); they are still scored", degenerate),
        (f"{len(cut)} of {len(explained)} explanations were cut to the length cap before scoring", cut),
    ) if on)


def _settings(results: AutoInterpResults, n_latents: int, n_skipped: int) -> list[tuple[str, str]]:
    cfg = results.eval_config
    applied = cfg.get("structured_outputs_applied") or {}
    structured = cfg.get("structured_outputs", "—")
    if applied:
        structured = (
            f"{structured} (explainer {'on' if applied.get('explainer') else 'off'}, "
            f"scorer {'on' if applied.get('scorer') else 'off'})"
        )
    tokens = f", {cfg['total_tokens']:,} tokens" if isinstance(cfg.get("total_tokens"), int) else ""
    return [(k, str(v)) for k, v in [
        ("model", cfg.get("model_name")),
        ("SAE", cfg.get("sae")),
        ("hook", cfg.get("hook_name")),
        ("explainer", cfg.get("explainer")),
        ("scorer LM", cfg.get("scorer")),
        ("structured outputs", structured),
        ("corpus", f"{cfg.get('dataset')}{tokens}"),
        ("latents", f"{n_latents} explained" + (f", {n_skipped} skipped" if n_skipped else "")),
        (
            "windows",
            f"{cfg.get('n_top_ex_for_generation', '?')} top + {cfg.get('n_iw_sampled_ex_for_generation', '?')} "
            f"importance-weighted to the explainer; scorers see the rest plus {cfg.get('n_random_ex', '?')} random",
        ),
        ("findbench", results.findbench_version),
        ("run id", results.run_id),
    ] if v is not None]


def _index(records: Sequence[Mapping[str, Any]], scorers: Sequence[str]) -> list[dict[str, Any]]:
    """A row of the sortable index per explained latent: its explanation, flags, planted rule and
    ``(sort key, text)`` cells."""
    return [
        {
            "latent": int(r["latent"]),
            "explanation": r.get("explanation") or "",
            "flags": _flags(r),
            "rule": (r.get("planted") or {}).get("rule", ""),
            # each scorer's score, the firing rate and the largest activation
            "cells": [(_sort_key(_num(x)), show(x)) for x, show in (
                *((r.get("scores", {}).get(s), _fmt) for s in scorers),
                (r.get("firing_rate"), _rate),
                (r.get("max_act"), lambda x: _fmt(x, 2)),
            )],
        }
        for r in records
        if not r.get("skipped")
    ]


def _histogram(hist: Mapping[str, Any] | None, n_fired: Any) -> dict[str, Any] | None:
    """The SVG's geometry: a bar per bin up to the last non-empty one (None when nothing was recorded)."""
    counts = list((hist or {}).get("counts") or [])
    width = _num((hist or {}).get("bin_width"))
    if not counts or width is None or not any(counts):
        return None
    last = max(i for i, c in enumerate(counts) if c) + 1
    counts = counts[:last]
    top = max(counts)
    W, H, left, bottom, pad = 340, 120, 44, 22, 8
    plot_w, plot_h = W - left - pad, H - bottom - pad
    bar = plot_w / len(counts)
    return {
        "W": W,
        "H": H,
        "left": left,
        "right": left + plot_w,
        "pad": pad,
        "base": pad + plot_h,
        "top": top,
        "bars": [
            (
                f"{left + i * bar:.1f}",
                f"{pad + plot_h - plot_h * c / top:.1f}",
                f"{max(bar - 1, 0.5):.1f}",
                f"{plot_h * c / top:.1f}",
                f"[{i * width:.3g}, {(i + 1) * width:.3g}): {c}",
            )
            for i, c in enumerate(counts)
        ],
        "xmax": f"{last * width:.3g}",
        "label": f"positive activations over the corpus (n = {n_fired:,})" if isinstance(n_fired, int)
        else "positive activations",
    }


def _tokens(
    tokens: Sequence[str], acts: Sequence[float], scale: float, token_ids: Sequence[int] | None = None
) -> list[tuple]:
    """The window's text as ``(lead, word, class, alpha, title)``: each active token shaded with
    alpha = activation / ``scale`` (value and id in a tooltip), the centre token outlined; silent
    tokens are plain text (keeps reports small)."""
    centre = len(tokens) // 2
    parts = []
    for j, (piece, act) in enumerate(zip(tokens, acts)):
        piece = piece.replace("\r", "").replace("\n", "⏎")
        word = piece.lstrip()
        lead = piece[: len(piece) - len(word)]
        tid = f" · id {int(token_ids[j])}" if token_ids is not None and j < len(token_ids) else ""
        x = _num(act) or 0.0
        cls = "tok centre" if j == centre else "tok"
        if x > 0 and not word:  # an active whitespace token: shade the space itself
            lead, word = "", lead or "\u200b"
        title = f"activation {x:.4g}{tid}" if x > 0 or j == centre and word else None  # active or the centre
        if x > 0:
            parts.append((lead, word, f"{cls} on", min(1.0, x / scale) if scale > 0 else 1.0, title))
        else:
            parts.append((lead, word, cls, None, title))
    return parts


#: A scorer's verdict on one window as lines of ``(text, correct)`` (None: no mark).
_PICK_LINES = {
    "detection": lambda pick: [("unparsed", False) if pick.get("predicted") is None else
                               ("flagged" if pick["predicted"] else "not flagged", bool(pick.get("correct")))],
    "fuzz": lambda pick: [
        (f"{'true' if a.get('marks') == 'true' else 'decoy'} marks: {'Yes' if a.get('said_yes') else 'No'}",
         bool(a.get("correct")))
        for a in pick
    ] or "not shown",
    "embedding": lambda pick: [(_fmt(pick.get("similarity")), None)],
    "likelihood": lambda pick: [(_fmt(pick.get("pmi"), 2, "+"), None)],
}


def _pick(name: str, pick: Any) -> str | list[tuple[str, bool | None]]:
    """A scorer's verdict on one window: muted text, or lines of ``(text, correct)`` (:data:`_PICK_LINES`)."""
    if pick is None:
        return "—"
    return _PICK_LINES.get(name, lambda pick: [(json.dumps(pick), None)])(pick)


def _windows(windows: Sequence[Mapping[str, Any]], scorers: Sequence[str], scale: float) -> list[dict[str, Any]]:
    """The windows by kind (top, importance-weighted, random): who saw each, its label and the scorers' picks."""
    out = []
    for kind, (title, note) in _KIND_TITLES.items():
        # strongest first; random windows stay in the order the scorers saw them (the sort is stable)
        group = sorted((w for w in windows if w.get("kind") == kind),
                       key=lambda w: 0.0 if kind == "random" else -(_num(w.get("max_act")) or 0.0))
        rows = []
        for w in group:
            scoring, picks = w.get("role") == "scoring", w.get("picks") or {}
            rows.append(
                {
                    "cls": "scoring" if scoring else "generation",
                    "max": _fmt(w.get("max_act"), 2),
                    "seen": f"scorers #{int(w['index'])}" if scoring and w.get("index") is not None else "explainer",
                    "label": ("active" if w.get("label_active") else "inactive") if scoring else "",
                    "fires": scoring and not w.get("label_active") and (_num(w.get("max_act")) or 0.0) > 0,
                    "picks": [_pick(s, picks.get(s)) if scoring else "—" for s in scorers],
                    "tokens": _tokens(w.get("tokens") or [], w.get("acts") or [], scale, w.get("token_ids")),
                }
            )
        if rows:
            out.append({"title": title, "note": note, "rows": rows})
    return out


def _scorer_lines(rec: Mapping[str, Any], scorers: Sequence[str]) -> list[tuple[str, str, str]]:
    lines = []
    for s in scorers:
        score = rec.get("scores", {}).get(s)
        if score is None:
            continue
        detail = rec.get("scorers", {}).get(s) or {}
        extra = ""
        if s == "detection" and detail:
            n = len([w for w in rec.get("windows") or [] if w.get("role") == "scoring"])
            extra = f" — answered “{detail.get('answer', '')}”" + (
                "" if detail.get("parsed", True) else " (unparsed: every window counts as wrong)")
            if n:
                extra += (f"; {round(score * n)} of {n} windows right; active: "
                          f"{', '.join(map(str, detail.get('active', []))) or 'none'}")
        elif s == "fuzz" and detail:
            shown = detail.get("n_shown", 0) // 2
            extra = (
                f" — Yes to {detail.get('said_yes_correct', 0)} of {shown} truly marked and "
                f"{detail.get('said_yes_wrong', 0)} of {shown} decoy-marked windows"
            )
        lines.append((s, _fmt(score), extra))
    return lines


def _panel(rec: Mapping[str, Any], scorers: Sequence[str]) -> dict[str, Any]:
    """A latent's panel: explanation, flags, planted rule, firing, scores, histogram and windows."""
    expl, raw, planted = rec.get("explanation"), rec.get("explainer_answer"), rec.get("planted")
    shown_raw = (
        raw
        and expl is not None
        and raw.strip() not in (expl, f"This neuron activates on {expl}", f"This neuron activates on {expl}.")
    )
    fires = (
        f"fires on {int(rec['n_fired']):,} of {int(rec['n_positions']):,} corpus tokens "
        f"({_rate(rec['firing_rate'])}); largest activation {_fmt(rec.get('max_act'), 3)}"
    ) if rec.get("firing_rate") is not None else None
    windows = rec.get("windows") or []
    scale = (
        max([_num(rec.get("max_act")) or 0.0, *(_num(a) or 0.0 for w in windows for a in (w.get("acts") or []))]) or 1.0
    )
    if planted:
        n_tokens = planted.get("n_tokens")
        planted = {
            "rule": str(planted.get("rule", "")),
            "explanation": str(planted.get("explanation", "")),
            "n_tokens": f"{n_tokens:,}" if isinstance(n_tokens, int) else "",
        }
    return {
        "latent": int(rec["latent"]),
        "explanation": expl,
        "flags": _flags(rec),
        "raw": raw if shown_raw else None,
        "planted": planted,
        "fires": fires,
        "scores": _scorer_lines(rec, scorers),
        "skipped": str(rec["skipped"]) if rec.get("skipped") else None,
        "histogram": _histogram(rec.get("histogram"), rec.get("n_fired")),
        "windows": [] if rec.get("skipped") else _windows(windows, scorers, scale),
    }


def render_report(results: AutoInterpResults, latents: Sequence[Mapping[str, Any]]) -> str:
    """The report page of one run: ``results`` (:func:`load_run`) and ``latents`` (the sidecar's records)."""
    records = sorted(latents, key=lambda r: int(r["latent"]))
    scorers = _scorers(results, records)
    skipped = [r for r in records if r.get("skipped")]
    cfg = results.eval_config
    return render_page(
        "autointerp_report.html.j2",
        title=f"AutoInterp: {cfg.get('sae', 'SAE')} on {cfg.get('model_name', 'model')}",
        settings=_settings(results, len(records) - len(skipped), len(skipped)),
        summary=_summary(results, scorers),
        flags=_flags_line(records),
        scorers=scorers,
        heads=[_SCORER_HEADS.get(s, s) for s in scorers],
        planted=any(r.get("planted") for r in records),
        index=_index(records, scorers),
        skipped=[(int(r["latent"]), str(r["skipped"])) for r in skipped],
        panels=[_panel(r, scorers) for r in records],
    )


def write_report(path: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Write the report of the run at ``path`` (a results JSON, or a run folder holding one)
    and return its path: :func:`report_path` (``report.html`` beside the results), or that
    file name inside ``out``."""
    results_path = _resolve_results(path)
    results, latents = load_run(results_path)
    target = report_path(results_path, results)
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        target = Path(out) / target.name
    atomic_write_text(target, render_report(results, latents))
    log.debug("wrote %s (%d latents)", target, len(latents))
    return target
