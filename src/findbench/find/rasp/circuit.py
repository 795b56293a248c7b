"""``find_circuit``: a component map of a compiled program scored against the row's ``components``.

A prediction is a list of components, each ``{"hook", "head"}`` (an attention head) or
``{"hook", "units"}`` (MLP hidden units of ``blocks.{l}.mlp.hook_post``) with a ``role``
(:data:`~findbench.find.rasp.truth.ROLES`), optionally ``reads`` (variables, or ``tokens`` /
``indices``), ``score`` (how much it matters) and ``code`` (``def f(tokens)`` computing the
component's variable at every position). A head matches the true head of the same hook and
index; MLP units match the true unit group holding most of them. Per function:

- ``role_accuracy``: share of active true components whose matched prediction has their role;
- ``role_f1``: macro F1 over roles on the active true components (unmatched: no role);
- ``node_precision`` / ``node_recall``: predicted components whose role is not ``inactive``
  against the active true components (an inactive one marked active costs precision);
- ``node_auroc``: when every prediction has a ``score``: AUROC of the scores (0 where not
  predicted) over all true components, active as positives;
- ``reads_f1``: F1 of the predicted reads on active matched components that give ``reads``;
- ``component_code_accuracy``: share of (active component, test input) pairs on which the
  component's ``code``, run in the sandbox, gives its variable's values (``variable_values``).

Inactive components earn nothing for being described. Every figure comes with ``n`` (functions
where it is defined) and a 95 % bootstrap interval over functions.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from findbench.find.rasp.truth import ROLES
from findbench.stats import auroc, bootstrap_ci

#: The metrics that need no code: which components matter and what each one does.
NODE_ROLE_METRICS = ("role_accuracy", "role_f1", "node_precision", "node_recall", "node_auroc")
METRICS = (*NODE_ROLE_METRICS, "reads_f1", "component_code_accuracy")


def _check_prediction(pred: Any, where: str) -> list[dict]:
    if not isinstance(pred, list):
        raise TypeError(f"{where}: a list of components, got {type(pred).__name__}")
    for k, comp in enumerate(pred):
        if not isinstance(comp, dict) or not isinstance(comp.get("hook"), str):
            raise ValueError(f"{where}[{k}]: a component needs a 'hook' (str)")
        if comp.get("role") not in ROLES:
            raise ValueError(f"{where}[{k}].role: {comp.get('role')!r} is not one of {ROLES}")
        if comp.get("head") is None and not comp.get("units"):
            raise ValueError(f"{where}[{k}]: give 'head' (attention) or 'units' (MLP)")
    return pred


def match(pred: list[dict], truth: list[dict]) -> dict[int, int]:
    """Prediction index → true component index."""
    out = {}
    for k, comp in enumerate(pred):
        if comp.get("head") is not None:
            for i, t in enumerate(truth):
                if t["hook"] == comp["hook"] and t["head"] == comp["head"]:
                    out[k] = i
        elif comp.get("units"):
            units = set(comp["units"])
            overlaps = [(len(units & set(t["units"])), i) for i, t in enumerate(truth) if t["hook"] == comp["hook"]]
            best = max(overlaps, default=(0, None))
            if best[0] * 2 > len(units):
                out[k] = best[1]
    return out


def _f1(tp: int, fp: int, fn: int) -> float:
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0


def score_function(pred: list[dict], truth: list[dict]) -> dict[str, float]:
    """Every metric but the code accuracy for one function (NaN where undefined)."""
    matched = match(pred, truth)
    by_truth: dict[int, dict] = {}
    for k, i in matched.items():
        by_truth.setdefault(i, pred[k])
    active = [i for i, t in enumerate(truth) if t["role"] != "inactive"]
    roles_true = [truth[i]["role"] for i in active]
    roles_pred = [by_truth.get(i, {}).get("role") for i in active]
    f1s = []
    for role in sorted(set(roles_true)):
        tp = sum(t == role and p == role for t, p in zip(roles_true, roles_pred))
        fp = sum(t != role and p == role for t, p in zip(roles_true, roles_pred))
        fn = sum(t == role and p != role for t, p in zip(roles_true, roles_pred))
        f1s.append(_f1(tp, fp, fn))
    marked = [k for k, comp in enumerate(pred) if comp["role"] != "inactive"]
    hits = {matched[k] for k in marked if k in matched and truth[matched[k]]["role"] != "inactive"}
    out = {
        "role_accuracy": float(np.mean([t == p for t, p in zip(roles_true, roles_pred)])) if active else math.nan,
        "role_f1": float(np.mean(f1s)) if f1s else math.nan,
        "node_precision": (sum(k in matched and truth[matched[k]]["role"] != "inactive" for k in marked) / len(marked)
                           if marked else math.nan),
        "node_recall": len(hits) / len(active) if active else math.nan,
        "node_auroc": math.nan,
        "reads_f1": math.nan,
    }
    if pred and all(isinstance(c.get("score"), (int, float)) for c in pred):
        best: dict[int, float] = {}
        for k, i in matched.items():
            best[i] = max(best.get(i, -math.inf), float(pred[k]["score"]))
        scores = [best.get(i, 0.0) for i in range(len(truth))]
        out["node_auroc"] = auroc([s for s, t in zip(scores, truth) if t["role"] != "inactive"],
                                  [s for s, t in zip(scores, truth) if t["role"] == "inactive"])
    reads = []
    for i in active:
        comp = by_truth.get(i)
        if comp is not None and isinstance(comp.get("reads"), list):
            want, got = set(truth[i]["reads"]), set(comp["reads"])
            reads.append(_f1(len(want & got), len(got - want), len(want - got)))
    if reads:
        out["reads_f1"] = float(np.mean(reads))
    return out


def score_circuit(
    predictions: Sequence[list[dict]],
    references: Sequence[list[dict]],
    *,
    test_inputs: Sequence[Sequence[str]] | None = None,
    variable_values: Sequence[str] | None = None,
    sandbox=None,
    limits=None,
) -> dict:
    """The metrics over functions: ``{name: mean, name + "_ci": [low, high], name + "_n": n}`` and
    ``per_function`` (a dict of the metrics per function). ``test_inputs`` (the rows' JSON token
    lists) and ``variable_values`` (the rows' JSON) are needed only to score components' ``code``, which
    runs in ``sandbox`` (a running :class:`~findbench.sandbox.Sandbox`) or a pool with ``limits``
    (:class:`~findbench.sandbox.SandboxLimits`)."""
    if isinstance(predictions, (str, bytes)) or len(predictions) != len(references):
        raise ValueError("predictions and references must be lists of the same length (one per function)")
    preds = [_check_prediction(p, f"predictions[{i}]") for i, p in enumerate(predictions)]
    per = [score_function(p, list(t)) for p, t in zip(preds, references)]
    code = _code_accuracy(preds, references, test_inputs, variable_values, sandbox=sandbox, limits=limits)
    for row, value in zip(per, code):
        row["component_code_accuracy"] = value
    out: dict[str, Any] = {}
    for name in METRICS:
        values = [row[name] for row in per if not math.isnan(row[name])]
        out[name] = float(np.mean(values)) if values else math.nan
        out[f"{name}_ci"] = list(bootstrap_ci(values)) if values else [math.nan, math.nan]
        out[f"{name}_n"] = len(values)
    out["per_function"] = per
    return out


def _code_accuracy(preds, references, test_inputs, variable_values, *, sandbox, limits) -> list[float]:
    jobs = []  # (function, code, inputs, expected per input)
    for f, (pred, truth) in enumerate(zip(preds, references)):
        matched = match(pred, list(truth))
        for k, comp in enumerate(pred):
            if not isinstance(comp.get("code"), str) or k not in matched:
                continue
            t = truth[matched[k]]
            if t["role"] == "inactive":
                continue
            if test_inputs is None or variable_values is None:
                raise ValueError("test_inputs and variable_values are needed to score components' code")
            values = json.loads(variable_values[f])
            inputs = [json.loads(x) for x in test_inputs[f]]
            jobs.append((f, comp["code"], inputs, [v[t["variable"]] for v in values]))
    scores: dict[int, list[float]] = {}
    if jobs:
        from findbench.sandbox import run_functions

        results = run_functions([j[1] for j in jobs], [j[2] for j in jobs], entry="last_def", sandbox=sandbox,
                                limits=limits)
        for (f, _, inputs, want), res in zip(jobs, results):
            ok = [res.status == "ok" and res.errors[i] is None and _close(res.values[i], want[i])
                  for i in range(len(inputs))]
            scores.setdefault(f, []).extend(ok)
    return [float(np.mean(scores[f])) if f in scores else math.nan for f in range(len(preds))]


def _close(got: Any, want: list) -> bool:
    """Same values position by position (numbers within 1e-3; a bool never equals an int)."""
    if not isinstance(got, list) or len(got) != len(want):
        return False
    return all(type(g) is type(w) and g == w if isinstance(g, bool) or isinstance(w, bool)
               else (isinstance(g, (int, float)) and isinstance(w, (int, float)) and abs(g - w) <= 1e-3) or g == w
               for g, w in zip(got, want))


# ---------------------------------------------------------------- floors and the truth

def truth_prediction(components: Sequence[dict], program: dict | None = None) -> list[dict]:
    """The row's own components as a prediction: score 1 where active, 0 where inactive, and with
    ``program`` (the row's spec) each active component's code (the reference cut at its variable)."""
    from findbench.find.rasp.programs import reference_code

    out = []
    for c in components:
        pred = {k: c[k] for k in ("hook", "head", "units", "role") if c.get(k) not in (None, [])}
        pred |= {"reads": list(c["reads"]), "score": float(c["role"] != "inactive")}
        if program is not None and c["role"] != "inactive":
            pred["code"] = reference_code({"ops": program["ops"], "output": c["variable"]})
        out.append(pred)
    return out


def floor_predictions(components: Sequence[dict], floor: str) -> list[dict]:
    """``majority_role``: every component given the most common active role of this row;
    ``all_matter``: every component marked as mattering, with the role ``map``."""
    active = [c["role"] for c in components if c["role"] != "inactive"] or ["map"]
    role = {"majority_role": Counter(active).most_common(1)[0][0], "all_matter": "map"}[floor]
    return [{k: c[k] for k in ("hook", "head", "units") if c.get(k) not in (None, [])} | {"role": role, "score": 1.0}
            for c in components]


FLOORS = ("majority_role", "all_matter")


def parse_json_list(text: Any, where: str) -> list:
    """A list from JSON text (a list passes through); one line naming ``where`` otherwise."""
    if isinstance(text, list):
        return text
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{where}: not JSON text ({exc})") from None
    if not isinstance(value, list):
        raise ValueError(f"{where}: JSON text of a list of components, got {type(value).__name__}")
    return value


def code_floors(row: dict) -> dict[str, str]:
    """Floor interpretations of a ``rasp`` row's code: ``constant`` (the most common output of its
    test inputs at every position) and ``copy`` (the input itself)."""
    from findbench.find.rasp.programs import run

    program = json.loads(row["program"])
    outputs = [v for x in row["test_inputs"] for v in run(program, json.loads(x))]
    common = Counter(outputs).most_common(1)[0][0]
    return {"constant": f"def function(tokens):\n    return [{common!r}] * len(tokens)\n",
            "copy": "def function(tokens):\n    return list(tokens)\n"}


def description_floors(row: dict, families: Sequence[str]) -> dict[str, str]:
    """Floor descriptions: ``family`` (the family's name alone) and ``hedged`` (several families named)."""
    family = json.loads(row["params"])["family"].replace("_", " ")
    others = [f.replace("_", " ") for f in families if f.replace("_", " ") != family][:3]
    return {"family": family, "hedged": f"Either {family}, {', '.join(others)}, or something similar, per position."}
