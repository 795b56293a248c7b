"""``findbench evaluate``'s scores written into the run's Inspect logs, so that ``inspect view`` shows
them beside each episode and ``inspect_ai.log.read_eval_log`` reads them.

Each scored episode's sample gets one Inspect score per metric that applies to it, named as the
task's scorers name them (``nmse_success`` with ``nmse`` in its metadata, ``domain_iou``,
``exact_match``, ``unit_test_accuracy``, ``unit_test_accuracy_near``): the value ``per_function.csv``
holds, the answer scored, and metadata with the floor of the agent's own observations and the margin
over it (``<metric>_observed``, ``<metric>_margin``), ``degenerate``, ``code_error`` and ``damage``;
a judged score also ``judge`` (the judge's name), ``judge_identity`` (``scores.json``'s ``judge``:
shipped adapter and version, or a local one with its path, steps and date), ``judge_mode`` and the
judge's ``decisions`` (the rows of ``unit_tests.csv``), which its explanation lists. Each edit is recorded by Inspect's
:func:`~inspect_ai.log.edit_score` with its provenance (author ``findbench evaluate``, the judge), so a
score the task's own scorers wrote keeps its history; the log's results are recomputed.

Logs are read as :mod:`findbench.interpret.logs` reads them (untrusted, capped; one that cannot be
read is left as it is) and each episode goes to the log ``evaluate`` read it from (its record's
``source_log``). A log is rewritten only when a score changed, through a temporary file and a
rename; a log still being written (status ``started``) or one that cannot be edited or written is
left with a warning."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from findbench.interpret.logs import log_episodes, read_log

logger = logging.getLogger(__name__)

#: The author of the scores in Inspect's edit provenance.
AUTHOR = "findbench evaluate"
#: The judged metrics and the ``tests`` of their rows in ``unit_tests.csv``.
_JUDGED = {"unit_test_accuracy": "find", "unit_test_accuracy_near": "near"}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def episode_scores(record: dict[str, Any], judge: Any, mode: str) -> dict[str, Any]:
    """The Inspect scores (``ScoreEdit``s, by name) of one scored record of ``findbench evaluate``;
    ``judge``: the judge's :class:`~findbench.models.JudgeIdentity` (None: no judge ran)."""
    from inspect_ai.scorer import ScoreEdit

    from findbench.find.code_scoring import NMSE_THRESHOLD

    common = {k: record.get(k) for k in ("degenerate", "code_error", "damage")}

    def floor(metric: str) -> dict[str, float | None]:
        return {f"{metric}_{kind}": _number(record.get(f"{metric}_{kind}")) for kind in ("observed", "margin")}

    scores = {}
    if (nmse := record.get("nmse")) is not None:
        scores["nmse_success"] = ScoreEdit(
            value=float(nmse < NMSE_THRESHOLD), answer=record["code"], explanation=f"NMSE {nmse}",
            metadata={"nmse": _number(nmse), **floor("nmse"), **common})
    for metric, part, floors in (("domain_iou", "domain", {}), ("exact_match", "code", floor("exact_match"))):
        if record.get(metric) is not None:
            scores[metric] = ScoreEdit(value=record[metric], answer=record[part], explanation=None,
                                       metadata={**floors, **common})
    for metric, tests in _JUDGED.items():
        if record.get(metric) is None:
            continue
        rows = [r for r in record.get("unit_test_rows") or [] if r["tests"] == tests]
        scores[metric] = ScoreEdit(
            value=record[metric], answer=record["description"],
            explanation=judge_explanation(rows, mode, judge.name if judge else None),
            metadata={"judge": judge.name if judge else None, "judge_mode": mode,
                      "judge_identity": judge.to_json() if judge else None, **floor(metric), **common,
                      "truncated": any(r["truncated"] for r in rows), "decisions": rows})
    return scores


def judge_explanation(decisions: list[dict], mode: str, judge: str | None = None) -> str:
    """The judge's decisions on a function's unit tests (rows of ``unit_tests.csv``) as text, one line per
    test, after one naming the judge (``judge``: its name) and its mode."""
    right = sum(bool(d["right"]) for d in decisions)
    lines = [
        f"judge{' ' + judge if judge else ''} ({mode}): {right}/{len(decisions)} unit tests right; margin = "
        "score of the correct option "
        "minus the best wrong one"
    ]
    for k, d in enumerate(decisions, 1):
        options = " | ".join(f"{c}: {d[f'option_{c}']}" for c in range(1, 10) if f"option_{c}" in d)
        how = (f", margin {d['margin']:+.3g}" if d["margin"] is not None
               else f", answer {d['answer'][:80]!r}" if d["answer"] is not None
               else ", not judged (empty description)" if d["chosen"] is None else "")
        lines.append(
            f"{k}. {'right' if d['right'] else 'WRONG'}: chose {d['chosen']}, correct {d['correct']}{how} — {options}"
        )
    return "\n".join(lines)


def _same(score: Any, edit: Any) -> bool:
    """Whether ``score`` (read from a log) already says what ``edit`` does, as the log stores them (JSON)."""
    keys = {"value", "answer", "explanation", "metadata"}
    return score is not None and score.model_dump(mode="json", include=keys) == edit.model_dump(mode="json",
                                                                                                 include=keys)


def _write(log: Any, path: Path) -> None:
    """``log`` over ``path`` through a temporary file beside it and a rename (the file's mode kept)."""
    from inspect_ai.log import write_eval_log

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", suffix=".eval", dir=path.parent)
    os.close(fd)
    try:
        write_eval_log(log, tmp, format="eval")
        os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _edit(log: Any, episodes: list[Any], wanted: dict[tuple[str, str], dict], judge: Any, mode: str) -> int:
    """Edit the scores of ``episodes`` (of ``log``) to their records' :func:`episode_scores`; the number
    changed (results recomputed when any did)."""
    from inspect_ai.log import ProvenanceData, edit_score, recompute_metrics

    provenance = ProvenanceData(author=AUTHOR, reason="findbench evaluate scored the episode",
                                metadata={"judge": judge.to_json() if judge else None, "judge_mode": mode})
    changed = 0
    for episode in episodes:
        sample = next(s for s in log.samples if str(s.id) == episode.function_id and s.error is None)
        for name, edit in episode_scores(wanted[(episode.method, episode.function_id)], judge, mode).items():
            if not _same((sample.scores or {}).get(name), edit):
                edit.provenance = provenance
                edit_score(log, sample.id, name, edit, recompute_metrics=False, epoch=sample.epoch)
                changed += 1
    if changed:
        recompute_metrics(log)
    return changed


def write_log_scores(run_dir: str | os.PathLike, records: list[dict[str, Any]], *, judge: Any, mode: str) -> int:
    """Write each scored record's :func:`episode_scores` into its sample of the log it was read from
    (its ``source_log``; module docstring); ``judge``: the judge's identity (None: no judge ran). Returns
    the episodes whose log holds their scores."""
    by_log: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for rec in records:
        if rec.get("source_log"):
            by_log.setdefault(rec["source_log"], {})[(rec["method"], rec["function_id"])] = rec
    written = 0
    for name, wanted in sorted(by_log.items()):
        path = Path(run_dir) / name
        try:
            log = read_log(path)
            if log.status == "started":
                raise ValueError("it is still being written")
            mine = [e for e in log_episodes(log, str(path)) if (e.method, e.function_id) in wanted]
            if mine and _edit(log, mine, wanted, judge, mode):
                _write(log, path)
        except Exception as exc:  # noqa: BLE001 - a log Inspect cannot edit or write (damaged, read-only) is left
            logger.warning("log %s: the scores are not written into it (%s: %s)", path, type(exc).__name__, exc)
            continue
        written += len(mine)
    logger.info("scores of %d episode(s) written into the run's Inspect logs", written)
    return written
