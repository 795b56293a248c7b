"""Run folders whose record is a log written here (no eval run): ``findbench evaluate`` and
``report`` read them as they read a ``findbench interpret`` run's ``logs/``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalPlan, EvalSample, EvalSpec, write_eval_log

from findbench.interpret.episode import STORE_PREFIX
from findbench.interpret.truth import json_row
from findbench.lm.inspect_lm import chat_messages


def write_logs(run: Path, episodes: Iterable[Mapping[str, Any]], *, interpreter: str = "t", seed: int = 0,
               source: str = "procedural") -> Path:
    """``run`` with a ``run.json`` and one log per method of ``episodes``, each a mapping of ``row``
    (carried), ``method`` (default ``aia``), the answer's ``description``, ``domain`` and ``code``
    (``""`` when not given), ``calls``, ``messages`` (``{"role", "content"}``; default none) and
    ``store`` (record fields to set as given, e.g. of the wrong type)."""
    run.mkdir(parents=True, exist_ok=True)
    (run / "run.json").write_text(json.dumps({"interpreter": interpreter, "seed": seed, "source": source}))
    by_method: dict[str, list[EvalSample]] = {}
    for ep in episodes:
        method = ep.get("method", "aia")
        answer = {part: ep.get(part, "") for part in ("description", "domain", "code")}
        store = {"answer": answer, "stop_reason": "answer", "calls": list(ep.get("calls") or []), **ep.get("store", {})}
        by_method.setdefault(method, []).append(EvalSample(
            id=ep["row"]["function_id"], epoch=1, input="interpret", target="",
            metadata={"row": json_row(ep["row"]), "method": method},
            store={STORE_PREFIX + k: v for k, v in store.items()},
            messages=chat_messages(ep.get("messages") or []),
        ))
    (run / "logs").mkdir(exist_ok=True)
    for method, samples in by_method.items():
        spec = EvalSpec(created=datetime.now(timezone.utc).isoformat(), task=f"find_interpret_{method}",
                        dataset=EvalDataset(), model="none/t", config=EvalConfig(),
                        metadata={"interpreter": interpreter})
        log = EvalLog(eval=spec, plan=EvalPlan(), samples=samples, status="success")
        write_eval_log(log, str(run / "logs" / f"find-interpret-{method.replace('+', '-')}.eval"), format="eval")
    return run
