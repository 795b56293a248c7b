"""The AutoInterp dashboard: one self-contained ``report.html`` per run (``report_<run_id>.html``
for a named run), from its results JSON and ``latents.json``: the settings, each scorer's score,
a sortable index of latents and a panel per latent (``#latent-<id>``) with its explanation,
scores, activation histogram and windows shaded by activation. Degenerate explanations (empty,
copied from the prompt, identical across latents) and those cut to the length cap are flagged in
the summary, the index and their panel. Everything is inline and escaped.
"""

from __future__ import annotations

import html
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from findbench._io import atomic_write_text
from findbench.autointerp.results import METRIC_KEYS, AutoInterpResults

log = logging.getLogger(__name__)

#: The report's file name (``report_<run_id>.html`` for a run written with a run id).
REPORT_FILE = "report.html"
#: Results files of an AutoInterp run (SAEBench's name).
RESULTS_GLOB = "*_eval_results*.json"

_KIND_TITLES = {
    "top": ("Top-activating windows", "the latent's strongest windows; labelled active for the scorers"),
    "iw": ("Importance-weighted windows", "sampled with probability ∝ activation² below the top windows; labelled active"),
    "random": ("Random windows", "drawn from the whole corpus; labelled inactive, as in SAEBench, even where the latent fires"),
}
_SCORER_HEADS = {"detection": "detection", "fuzz": "fuzz (Yes/No)", "embedding": "embedding sim.", "likelihood": "likelihood PMI"}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def autointerp_results(folder: str | os.PathLike) -> list[Path]:
    """The AutoInterp results files in ``folder`` (``eval_type_id`` ``autointerp``), sorted by
    name; [] when it holds none (an interpret run folder, say)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob(RESULTS_GLOB)):
        data = _read_json(path)
        if isinstance(data, dict) and data.get("eval_type_id") == "autointerp":
            found.append(path)
    return found


def _resolve_results(path: str | os.PathLike) -> Path:
    path = Path(path)
    if path.is_dir():
        found = autointerp_results(path)
        if len(found) != 1:
            which = ", ".join(p.name for p in found) or "none"
            raise ValueError(f"{path} must hold exactly one AutoInterp results file ({RESULTS_GLOB}); found {which}: pass one")
        return found[0]
    if not path.is_file():
        raise FileNotFoundError(f"no AutoInterp results at {path}")
    return path


def load_run(path: str | os.PathLike) -> tuple[AutoInterpResults, list[dict]]:
    """The results file at ``path`` (a file, or a folder holding one), typed, and its latent records
    (the ``latents_file`` sidecar); ValueError naming the key of a file that does not fit."""
    path = _resolve_results(path)
    data = _read_json(path)
    if not isinstance(data, dict) or data.get("eval_type_id") != "autointerp":
        raise ValueError(f"{path} is not an AutoInterp results file (eval_type_id 'autointerp')")
    results = AutoInterpResults.from_json(data, str(path))
    side = _read_json(path.parent / results.latents_file)
    if not isinstance(side, dict) or not isinstance(side.get("latents"), list):
        raise ValueError(f"{path}: its latents file {results.latents_file!r} is missing or unreadable; rerun "
                         "findbench autointerp with the same arguments (its evidence and LM answers come from the cache)")
    return results, side["latents"]


def report_path(results_path: str | os.PathLike, results: AutoInterpResults | None = None) -> Path:
    """Where :func:`write_report` puts the report of ``results_path``: ``report.html`` beside
    it, or ``report_<run_id>.html`` for a named run."""
    results_path = Path(results_path)
    run_id = results.run_id if results is not None else None
    if run_id is None and "_eval_results_" in results_path.stem:
        run_id = results_path.stem.rsplit("_eval_results_", 1)[1]
    return results_path.parent / (f"report_{run_id}.html" if run_id else REPORT_FILE)


_e = html.escape
_DASH = "<span class='muted'>—</span>"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _fmt(value: Any, digits: int = 3) -> str:
    x = _num(value)
    return "—" if x is None else f"{x:.{digits}f}"


def _rate(value: Any) -> str:
    x = _num(value)
    if x is None:
        return "—"
    return f"{100 * x:.2f}%" if x >= 1e-3 or x == 0 else f"{100 * x:.2g}%"


def _scorers(results: AutoInterpResults, records: Sequence[Mapping[str, Any]]) -> list[str]:
    names = results.scorers
    for r in records:
        names += [n for n in r.get("scores", {}) if n not in names]
    return names


def _summary_html(results: AutoInterpResults, scorers: Sequence[str]) -> str:
    rows = []
    for name in scorers:
        m = results.eval_result_metrics.get(METRIC_KEYS.get(name, name))
        if m is None:
            continue
        interval = "—" if m.ci is None else f"[{_fmt(m.ci[0])}, {_fmt(m.ci[1])}]"
        floors = ", ".join(f"{_e(str(k))} {_fmt(v)}" for k, v in (m.floors or {}).items()) or "—"
        margin = _num(m.margin)
        margin_html = "—" if margin is None else f'<span class="{"good" if margin > 0 else "bad"}">{margin:+.3f}</span>'
        label = f"{name} (SAEBench's autointerp_score)" if name == "detection" else name
        rows.append(f"<tr><td>{_e(label)}</td><td class='num'>{_fmt(m.score)}</td><td class='num'>{interval}</td>"
                    f"<td class='num'>{'—' if m.n is None else m.n}</td><td>{floors}</td>"
                    f"<td class='num'>{margin_html} <span class='muted'>over {_e(m.best_floor or '—')}</span></td>"
                    f"<td class='num'>{'' if m.n_unparsed is None else m.n_unparsed}</td>"
                    f"<td class='num'>{m.n_degenerate}</td></tr>")
    if not rows:
        return ""
    return ("<table class='summary'><thead><tr><th>scorer</th><th>mean</th><th>95% interval</th><th>n</th><th>floors</th>"
            "<th>margin</th><th>unparsed</th><th>degenerate</th></tr></thead><tbody>" + "".join(rows)
            + "</tbody></table>"
            "<p class='note'>Interval: seeded percentile bootstrap over latents. Floors: the score of answers that need no "
            "explanation (detection: “None” for every latent, or every window; the other scorers: chance). "
            "Degenerate: latents whose explanation is empty, copied from the explainer's prompt or identical to "
            "another latent's (still scored).</p>")


_REASONS = {"empty": "empty", "prompt_text": "copied from the prompt", "identical": "identical to another latent's"}


def _flags(rec: Mapping[str, Any]) -> list[str]:
    """The warnings on a latent's explanation: degenerate (and why), cut to the length cap."""
    out = []
    if rec.get("degenerate"):
        out.append(f"degenerate: {_REASONS.get(rec.get('degenerate_reason'), rec.get('degenerate_reason'))}")
    if rec.get("explanation_truncated"):
        out.append("cut to the length cap")
    return out


def _flags_html(records: Sequence[Mapping[str, Any]]) -> str:
    """One warning line for the run's degenerate and cut explanations ("" when none)."""
    explained = [r for r in records if not r.get("skipped")]
    degenerate = [r for r in explained if r.get("degenerate")]
    cut = [r for r in explained if r.get("explanation_truncated")]
    if not degenerate and not cut:
        return ""
    parts = []
    if degenerate:
        why = {}
        for r in degenerate:
            reason = _REASONS.get(r.get("degenerate_reason"), str(r.get("degenerate_reason")))
            why[reason] = why.get(reason, 0) + 1
        parts.append(f"{len(degenerate)} of {len(explained)} explanations are degenerate ("
                     + ", ".join(f"{n} {reason}" for reason, n in why.items()) + "); they are still scored")
    if cut:
        parts.append(f"{len(cut)} of {len(explained)} explanations were cut to the length cap before scoring")
    return f"<p class='warn flags'>⚠ {_e('; '.join(parts))}.</p>"


def _settings_html(results: AutoInterpResults, n_latents: int, n_skipped: int) -> str:
    cfg = results.eval_config
    applied = cfg.get("structured_outputs_applied") or {}
    structured = cfg.get("structured_outputs", "—")
    if applied:
        structured = f"{structured} (explainer {'on' if applied.get('explainer') else 'off'}, scorer {'on' if applied.get('scorer') else 'off'})"
    items = [("model", cfg.get("model_name")), ("SAE", cfg.get("sae")), ("hook", cfg.get("hook_name")),
             ("explainer", cfg.get("explainer")), ("scorer LM", cfg.get("scorer")), ("structured outputs", structured),
             ("corpus", f"{cfg.get('dataset')}" + (f", {cfg['total_tokens']:,} tokens" if isinstance(cfg.get("total_tokens"), int) else "")),
             ("latents", f"{n_latents} explained" + (f", {n_skipped} skipped" if n_skipped else "")),
             ("windows", f"{cfg.get('n_top_ex_for_generation', '?')} top + {cfg.get('n_iw_sampled_ex_for_generation', '?')} "
                         f"importance-weighted to the explainer; scorers see the rest plus {cfg.get('n_random_ex', '?')} random"),
             ("findbench", results.findbench_version), ("run id", results.run_id)]
    cells = "".join(f"<dt>{_e(k)}</dt><dd>{_e(str(v))}</dd>" for k, v in items if v is not None)
    return f"<dl class='settings'>{cells}</dl>"


def _index_html(records: Sequence[Mapping[str, Any]], scorers: Sequence[str], planted: bool) -> str:
    heads = ["<th data-type='num'>latent</th>", "<th data-type='text'>explanation</th>"]
    if planted:
        heads.append("<th data-type='text'>planted rule</th>")
    heads += [f"<th data-type='num'>{_e(s)}</th>" for s in scorers]
    heads += ["<th data-type='num'>firing rate</th>", "<th data-type='num'>max act.</th>"]
    rows = []
    for r in records:
        if r.get("skipped"):
            continue
        latent = int(r["latent"])
        flags = "".join(f" <span class='warn'>({_e(f)})</span>" for f in _flags(r))
        cells = [f"<td data-sort='{latent}'><a href='#latent-{latent}'>{latent}</a></td>",
                 f"<td>{_e(r.get('explanation') or '')}{flags}</td>"]
        if planted:
            rule = (r.get("planted") or {}).get("rule", "")
            cells.append(f"<td><code>{_e(rule)}</code></td>")
        for s in scorers:
            x = _num(r.get("scores", {}).get(s))
            cells.append(f"<td class='num' data-sort='{'' if x is None else repr(x)}'>{_fmt(x)}</td>")
        rate, top = _num(r.get("firing_rate")), _num(r.get("max_act"))
        cells.append(f"<td class='num' data-sort='{'' if rate is None else repr(rate)}'>{_rate(rate)}</td>")
        cells.append(f"<td class='num' data-sort='{'' if top is None else repr(top)}'>{_fmt(top, 2)}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return (f"<table id='index' class='sortable'><thead><tr>{''.join(heads)}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            "<p class='note'>Click a column header to sort; click a latent to see its windows.</p>")


def _histogram_svg(hist: Mapping[str, Any] | None, n_fired: Any) -> str:
    counts = list((hist or {}).get("counts") or [])
    width = _num((hist or {}).get("bin_width"))
    if not counts or width is None or not any(counts):
        return "<p class='muted'>activation histogram not recorded</p>"
    last = max(i for i, c in enumerate(counts) if c) + 1
    counts = counts[:last]
    top = max(counts)
    W, H, left, bottom, pad = 340, 120, 44, 22, 8
    plot_w, plot_h = W - left - pad, H - bottom - pad
    bar = plot_w / len(counts)
    bars = []
    for i, c in enumerate(counts):
        h = plot_h * c / top
        lo, hi = i * width, (i + 1) * width
        bars.append(f"<rect x='{left + i * bar:.1f}' y='{pad + plot_h - h:.1f}' width='{max(bar - 1, 0.5):.1f}' height='{h:.1f}'>"
                    f"<title>[{lo:.3g}, {hi:.3g}): {c}</title></rect>")
    xmax = last * width
    axis = (f"<line x1='{left}' y1='{pad + plot_h}' x2='{left + plot_w}' y2='{pad + plot_h}' class='axis'/>"
            f"<line x1='{left}' y1='{pad}' x2='{left}' y2='{pad + plot_h}' class='axis'/>"
            f"<text x='{left}' y='{H - 6}' text-anchor='middle'>0</text>"
            f"<text x='{left + plot_w}' y='{H - 6}' text-anchor='end'>{xmax:.3g}</text>"
            f"<text x='{left + plot_w / 2}' y='{H - 6}' text-anchor='middle'>activation</text>"
            f"<text x='{left - 4}' y='{pad + 8}' text-anchor='end'>{top}</text>"
            f"<text x='{left - 4}' y='{pad + plot_h}' text-anchor='end'>0</text>")
    label = f"positive activations over the corpus (n = {n_fired:,})" if isinstance(n_fired, int) else "positive activations"
    return (f"<figure class='hist'><svg width='{W}' height='{H}' viewBox='0 0 {W} {H}' role='img' aria-label='{_e(label)}'>"
            f"{''.join(bars)}{axis}</svg><figcaption>{_e(label)}</figcaption></figure>")


def _tokens_html(tokens: Sequence[str], acts: Sequence[float], scale: float, token_ids: Sequence[int] | None = None) -> str:
    """The window's text, each active token shaded with alpha = activation / ``scale`` (value and id
    in a tooltip), the centre token outlined; silent tokens are plain text (keeps reports small)."""
    centre = len(tokens) // 2
    parts = []
    for j, (piece, act) in enumerate(zip(tokens, acts)):
        piece = piece.replace("\r", "").replace("\n", "⏎")
        word = piece.lstrip()
        lead, word = _e(piece[: len(piece) - len(word)]), _e(word)
        tid = f" · id {int(token_ids[j])}" if token_ids is not None and j < len(token_ids) else ""
        x = _num(act) or 0.0
        cls = "tok centre" if j == centre else "tok"
        if x > 0 and not word:  # an active whitespace token: shade the space itself
            lead, word = "", lead or "&#8203;"
        if x > 0:
            alpha = min(1.0, x / scale) if scale > 0 else 1.0
            parts.append(f"{lead}<span class='{cls} on' style='background-color: rgba(255, 140, 0, {alpha:.3f})' "
                         f"title='activation {x:.4g}{tid}'>{word}</span>")
        elif j == centre and word:
            parts.append(f"{lead}<span class='{cls}' title='activation {x:.4g}{tid}'>{word}</span>")
        else:
            parts.append(lead + word)
    return "".join(parts)


def _mark(ok: bool) -> str:
    return "<span class='ok'>✓</span>" if ok else "<span class='no'>✗</span>"


def _pick_html(name: str, pick: Any) -> str:
    if pick is None:
        return _DASH
    if name == "detection":
        if pick.get("predicted") is None:
            return f"unparsed {_mark(False)}"
        return f"{'flagged' if pick['predicted'] else 'not flagged'} {_mark(bool(pick.get('correct')))}"
    if name == "fuzz":
        if not pick:
            return "<span class='muted'>not shown</span>"
        parts = [f"{'true' if a.get('marks') == 'true' else 'decoy'} marks: {'Yes' if a.get('said_yes') else 'No'} "
                 f"{_mark(bool(a.get('correct')))}" for a in pick]
        return "<br>".join(parts)
    if name == "embedding":
        return _fmt(pick.get("similarity"))
    if name == "likelihood":
        x = _num(pick.get("pmi"))
        return "—" if x is None else f"{x:+.2f}"
    return _e(json.dumps(pick))


def _windows_html(windows: Sequence[Mapping[str, Any]], scorers: Sequence[str], scale: float) -> str:
    out = []
    for kind, (title, note) in _KIND_TITLES.items():
        group = [w for w in windows if w.get("kind") == kind]
        if not group:
            continue
        if kind != "random":  # strongest first; random windows stay in the order the scorers saw them
            group = sorted(group, key=lambda w: -(_num(w.get("max_act")) or 0.0))
        heads = "".join(f"<th>{_e(_SCORER_HEADS.get(s, s))}</th>" for s in scorers)
        rows = []
        for w in group:
            scoring = w.get("role") == "scoring"
            seen = f"scorers #{int(w['index'])}" if scoring and w.get("index") is not None else "explainer"
            label = ("active" if w.get("label_active") else "inactive") if scoring else ""
            fires = (_num(w.get("max_act")) or 0.0) > 0
            if scoring and not w.get("label_active") and fires:
                label += " <span class='warn' title='the latent fires in this window, but it is labelled inactive'>(fires)</span>"
            picks = w.get("picks") or {}
            cells = "".join(f"<td class='pick'>{_pick_html(s, picks.get(s)) if scoring else _DASH}</td>" for s in scorers)
            text = _tokens_html(w.get("tokens") or [], w.get("acts") or [], scale, w.get("token_ids"))
            rows.append(f"<tr class='{'scoring' if scoring else 'generation'}'><td class='seen'>{_e(seen)}</td><td>{label}</td>"
                        f"<td class='num'>{_fmt(w.get('max_act'), 2)}</td>{cells}<td class='win'>{text}</td></tr>")
        out.append(f"<h3>{_e(title)} <span class='muted'>({len(group)}; {_e(note)})</span></h3>"
                   f"<table class='windows'><thead><tr><th>shown to</th><th>label</th><th>max</th>{heads}<th>text</th></tr></thead>"
                   f"<tbody>{''.join(rows)}</tbody></table>")
    return "".join(out)


def _scorer_lines(rec: Mapping[str, Any], scorers: Sequence[str]) -> str:
    lines = []
    for s in scorers:
        score = rec.get("scores", {}).get(s)
        if score is None:
            continue
        detail = rec.get("scorers", {}).get(s) or {}
        extra = ""
        if s == "detection" and detail:
            n = len([w for w in rec.get("windows") or [] if w.get("role") == "scoring"])
            right = round(score * n) if n else None
            extra = f" — answered “{_e(str(detail.get('answer', '')))}”"
            extra += "" if detail.get("parsed", True) else " (unparsed: every window counts as wrong)"
            if right is not None:
                extra += f"; {right} of {n} windows right; active: {_e(', '.join(map(str, detail.get('active', []))) or 'none')}"
        elif s == "fuzz" and detail:
            shown = detail.get("n_shown", 0) // 2
            extra = (f" — Yes to {detail.get('said_yes_correct', 0)} of {shown} truly marked and "
                     f"{detail.get('said_yes_wrong', 0)} of {shown} decoy-marked windows")
        lines.append(f"<li><b>{_e(s)}</b> {_fmt(score)}{extra}</li>")
    return f"<ul class='scores'>{''.join(lines)}</ul>" if lines else ""


def _panel_html(rec: Mapping[str, Any], scorers: Sequence[str]) -> str:
    latent = int(rec["latent"])
    head = f"<h2>Latent {latent} <a class='up' href='#top'>↑ index</a></h2>"
    expl = rec.get("explanation")
    facts = [f"<div class='expl'><span class='lbl'>Explanation</span> “{_e(expl)}”</div>" if expl is not None else
             "<div class='expl'><span class='lbl'>Explanation</span> <span class='muted'>none</span></div>"]
    facts += [f"<div class='warn'>⚠ {_e(f)}</div>" for f in _flags(rec)]
    raw = rec.get("explainer_answer")
    if raw and expl is not None and raw.strip() not in (expl, f"This neuron activates on {expl}", f"This neuron activates on {expl}."):
        facts.append(f"<div class='muted raw'>explainer's answer: {_e(raw)}</div>")
    planted = rec.get("planted")
    if planted:
        facts.append(f"<div class='planted'><span class='lbl'>Planted rule</span> <code>{_e(str(planted.get('rule', '')))}</code> "
                     f"“{_e(str(planted.get('explanation', '')))}”"
                     + (f" <span class='muted'>({int(planted['n_tokens']):,} vocabulary tokens)</span>"
                        if isinstance(planted.get("n_tokens"), int) else "") + "</div>")
    if rec.get("firing_rate") is not None:
        facts.append(f"<div>fires on {int(rec['n_fired']):,} of {int(rec['n_positions']):,} corpus tokens ({_rate(rec['firing_rate'])}); "
                     f"largest activation {_fmt(rec.get('max_act'), 3)}</div>")
    body = f"<div class='facts'>{''.join(facts)}{_scorer_lines(rec, scorers)}</div>"
    if rec.get("skipped"):
        return (f"<section class='latent skipped' id='latent-{latent}'>{head}{body}"
                f"<p class='warn'>skipped: {_e(str(rec['skipped']))}</p>{_histogram_svg(rec.get('histogram'), rec.get('n_fired'))}</section>")
    windows = rec.get("windows") or []
    scale = max([_num(rec.get("max_act")) or 0.0, *(_num(a) or 0.0 for w in windows for a in (w.get("acts") or []))]) or 1.0
    wins = _windows_html(windows, scorers, scale)
    return (f"<section class='latent' id='latent-{latent}'>{head}<div class='top'>{body}"
            f"{_histogram_svg(rec.get('histogram'), rec.get('n_fired'))}</div>{wins}</section>")


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1400px; padding: 1em 2em;
       color: #1d1d1f; background: #fff; line-height: 1.4; }
h1 { font-size: 1.5em; margin-bottom: .2em; } h2 { font-size: 1.25em; margin: 0 0 .4em; } h3 { font-size: 1em; margin: 1.1em 0 .3em; }
table { border-collapse: collapse; font-size: 13px; } th, td { padding: 3px 8px; border-bottom: 1px solid #e3e3e8; vertical-align: top; }
th { text-align: left; background: #f5f5f7; font-weight: 600; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.sortable th { cursor: pointer; user-select: none; white-space: nowrap; } table.sortable th:hover { background: #e8e8ed; }
table.sortable th[data-dir=asc]::after { content: " ▲"; } table.sortable th[data-dir=desc]::after { content: " ▼"; }
table.sortable tbody tr:hover { background: #fafafa; }
dl.settings { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; font-size: 13px; margin: .5em 0 1em; }
dl.settings dt { color: #6e6e73; } dl.settings dd { margin: 0; }
.note, .muted { color: #6e6e73; font-size: 12px; } .good { color: #1a7f37; } .bad { color: #c62828; } .warn { color: #b45309; }
section.latent { border: 1px solid #d2d2d7; border-radius: 8px; padding: 12px 16px; margin: 18px 0; scroll-margin-top: 8px; }
section.latent:target { box-shadow: 0 0 0 3px #ffb347; }
.top { display: flex; gap: 24px; justify-content: space-between; align-items: flex-start; flex-wrap: wrap; }
.facts { flex: 1 1 520px; font-size: 14px; } .facts > div { margin: 2px 0; }
.lbl { display: inline-block; min-width: 7.5em; color: #6e6e73; font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
.expl { font-size: 15px; } .planted { background: #eef6ee; border-left: 3px solid #1a7f37; padding: 2px 6px; }
.raw { margin-left: 7.7em; } ul.scores { margin: 6px 0 0; padding-left: 1.2em; font-size: 13px; }
figure.hist { margin: 0; font-size: 11px; color: #6e6e73; } figure.hist rect { fill: #ff8c00; } figure.hist rect:hover { fill: #c06000; }
figure.hist text { font-size: 10px; fill: #6e6e73; } figure.hist .axis { stroke: #999; stroke-width: 1; }
table.windows { width: 100%; } table.windows td.win { font-family: ui-monospace, "SF Mono", Menlo, Consolas, monospace;
  font-size: 12.5px; white-space: pre-wrap; word-break: break-word; width: 62%; }
table.windows td.seen { white-space: nowrap; } table.windows td.pick { white-space: nowrap; font-size: 12px; }
tr.generation td.seen { color: #6e6e73; }
.tok { border-radius: 2px; } .tok.on { border-bottom: 2px solid #e07000; } .tok.centre { outline: 1px dotted #888; }
.ok { color: #1a7f37; font-weight: 700; } .no { color: #c62828; font-weight: 700; }
.swatch { padding: 0 4px; margin-right: 4px; border-bottom: 2px solid #e07000; border-radius: 2px; }
a.up { font-size: 12px; font-weight: 400; margin-left: 10px; }
"""

_SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, col) {
    th.addEventListener("click", function () {
      var num = th.dataset.type === "num", dir = th.dataset.dir === "desc" ? 1 : -1;
      if (!th.dataset.dir && !num) dir = 1;
      table.querySelectorAll("th").forEach(function (h) { delete h.dataset.dir; });
      th.dataset.dir = dir === 1 ? "asc" : "desc";
      var key = function (row) { var c = row.cells[col]; var v = c.dataset.sort !== undefined ? c.dataset.sort : c.textContent;
                                 return num ? (v === "" ? NaN : parseFloat(v)) : v.toLowerCase(); };
      var body = table.tBodies[0];
      Array.from(body.rows).sort(function (a, b) {
        var x = key(a), y = key(b);
        if (num && isNaN(x)) return isNaN(y) ? 0 : 1;
        if (num && isNaN(y)) return -1;
        return (x < y ? -1 : x > y ? 1 : 0) * dir;
      }).forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


def render_report(results: AutoInterpResults, latents: Sequence[Mapping[str, Any]]) -> str:
    """The report page of one run: ``results`` (:func:`load_run`) and ``latents`` (the sidecar's records)."""
    records = sorted(latents, key=lambda r: int(r["latent"]))
    scorers = _scorers(results, records)
    planted = any(r.get("planted") for r in records)
    explained = [r for r in records if not r.get("skipped")]
    skipped = [r for r in records if r.get("skipped")]
    cfg = results.eval_config
    title = f"AutoInterp: {cfg.get('sae', 'SAE')} on {cfg.get('model_name', 'model')}"
    legend = ("<p class='legend note'>Tokens are shaded by the latent's activation (opacity = activation / the latent's "
              "largest; hover a token for its value and id): "
              "<span class='swatch' style='background-color: rgba(255, 140, 0, 0.150)'>weak</span>"
              "<span class='swatch' style='background-color: rgba(255, 140, 0, 0.500)'>medium</span>"
              "<span class='swatch' style='background-color: rgba(255, 140, 0, 1.000)'>strongest</span> "
              "the dotted box is the window's centre. ✓/✗: the scorer's verdict on a window against its label.</p>")
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1 id='top'>{_e(title)}</h1>",
        _settings_html(results, len(explained), len(skipped)),
        _summary_html(results, scorers),
        _flags_html(records),
        "<h2>Latents</h2>", legend,
        _index_html(records, scorers, planted),
    ]
    if skipped:
        items = "".join(f"<li><a href='#latent-{int(r['latent'])}'>{int(r['latent'])}</a>: {_e(str(r['skipped']))}</li>" for r in skipped)
        parts.append(f"<h3>Skipped latents</h3><ul class='note'>{items}</ul>")
    parts += [_panel_html(r, scorers) for r in records]
    parts.append(f"<script>{_SCRIPT}</script></body></html>\n")
    return "\n".join(parts)


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

