"""Scoring the ``[DOMAIN]`` part of a FIND interpretation (an extension: FIND asks for it but
never scores it).

- numeric ``corruption`` functions: :func:`parse_intervals` reads the interval(s) an
  interpreter named, :func:`corrupted_interval` gives a row's true one, :func:`interval_iou`
  compares them; :func:`score_domain` does all three over a list.
- relation neurons with an ``exception``: :func:`domain_unit_tests` picks the unit tests inside
  the excepted subdomain, for a judge to judge the ``[DOMAIN]`` text on.

:func:`in_corrupted_subdomain` tells, per input, whether an experiment probed that part.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from findbench import _checks
from findbench.find.numeric import _CORRUPTED, _check_boundary, _is_num
from findbench.find.synthetic_neurons.prompts import UNDEFINED, parse_relation_answer
from findbench.stats import bootstrap_ci

#: The columns of a numeric row that :func:`corrupted_interval` reads (the ``references`` of
#: the ``find_domain`` metric).
REFERENCE_COLUMNS = ("domain_low", "domain_high", "corruption_type", "corruption_params")
#: Per-item status of :func:`score_domain`.
STATUSES = ("ok", "unparseable")

_CORRUPTION_TYPES = ("below", "above", "inside")
_INF = math.inf


# "[DOMAIN]:", "[DOMAIN]", "**[DOMAIN]**:", "[ DOMAIN ] :"; at a line start also "Domain:"
_DOMAIN_LABEL = re.compile(r"\[\s*domain\s*\][\s*_]*:?|(?im:^[\s*#_]*domain[\s*_]*:)", re.IGNORECASE)
_OTHER_LABEL = re.compile(
    r"\[\s*(?:description|code|domain)\s*\]|(?im:^[\s*#_]*(?:description|code)[\s*_]*:)", re.IGNORECASE
)


def domain_text(text: str) -> str:
    """The text after the ``[DOMAIN]`` label up to the next ``[CODE]`` / ``[DESCRIPTION]`` label,
    stripped; a text without labels is taken whole, one with only other labels gives ``""``.
    """
    _checks.instance("text", text, str, "a str")
    m = _DOMAIN_LABEL.search(text)
    if m is None:
        return "" if _OTHER_LABEL.search(text) else text.strip()
    rest = text[m.end() :]
    nxt = _OTHER_LABEL.search(rest)
    return (rest[: nxt.start()] if nxt else rest).strip()


# A number: signed decimal / scientific notation or an infinity (after normalisation). It may
# not continue a word or another number ("f00042", "x2" hold no number).
_NUM = r"(?<![\w.])[-+]?(?:inf(?:inity)?\b|\d+(?:\.\d+)?(?:e[-+]?\d+)?|\.\d+(?:e[-+]?\d+)?)(?![\w])"
_N = rf"(?:x\s*=\s*)?({_NUM})"  # a number, optionally written "x = 3"
_X = r"(?:x|inputs?|input\s+values?|values?\s+of\s+x)"
_LT = r"(?:<=|=<|<)"
_GT = r"(?:>=|=>|>)"

# (regex, kind): "two" gives (min, max) of its two numbers; "lower" gives (a, inf) [x above a];
# "upper" (-inf, a); "neg" / "pos" the negative / positive half-line.
_PATTERNS: list[tuple[re.Pattern, str]] = [
    (re.compile(rf"[\[(]\s*({_NUM})\s*[,;]\s*({_NUM})\s*[\])]"), "two"),
    (re.compile(rf"({_NUM})\s*{_LT}\s*{_X}\s*{_LT}\s*({_NUM})"), "two"),
    (re.compile(rf"({_NUM})\s*{_GT}\s*{_X}\s*{_GT}\s*({_NUM})"), "two"),
    (re.compile(rf"\bbetween\s+{_N}\s*(?:and|&|,)\s*{_N}"), "two"),
    (
        re.compile(rf"(?:\bfrom\s+)?{_N}\s*(?:\bto\b|\bthrough\b|\buntil\b|\btill\b|\bup\s+to\b|–|—|\.\.\.?)\s*{_N}"),
        "two",
    ),
    # "20-30": a hyphen between two unsigned numbers written together
    (re.compile(r"(?<![\w.\-])(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)(?![\w.])"), "two"),
    (re.compile(rf"\b{_X}\s*{_LT}\s*({_NUM})"), "upper"),
    (re.compile(rf"\b{_X}\s*{_GT}\s*({_NUM})"), "lower"),
    (re.compile(rf"({_NUM})\s*{_GT}\s*{_X}\b"), "upper"),
    (re.compile(rf"({_NUM})\s*{_LT}\s*{_X}\b"), "lower"),
    (re.compile(rf"\b(?:less|smaller|lower|fewer)\s+than\s+(?:or\s+equal\s+to\s+)?{_N}"), "upper"),
    (re.compile(rf"\b(?:below|under|before|at\s+most|up\s+to)\s+{_N}"), "upper"),
    (re.compile(rf"\b(?:greater|larger|bigger|higher|more)\s+than\s+(?:or\s+equal\s+to\s+)?{_N}"), "lower"),
    (re.compile(rf"\b(?:above|over|beyond|after|past|exceeding|at\s+least)\s+{_N}"), "lower"),
    (re.compile(rf"({_NUM})\s+(?:and|or)\s+(?:above|higher|greater|larger|beyond|up|more)\b"), "lower"),
    (re.compile(rf"({_NUM})\s+(?:and|or)\s+(?:below|lower|less|smaller|under|down)\b"), "upper"),
    (re.compile(r"\b(?:negative|non-positive)\s+(?:x|inputs?|input\s+values?|numbers|values\s+of\s+x)\b"), "neg"),
    (re.compile(r"\b(?:positive|non-negative)\s+(?:x|inputs?|input\s+values?|numbers|values\s+of\s+x)\b"), "pos"),
]

# "the domain (of the function) is ...", "defined for/on/over ...": a statement of the
# function's domain, whose interval is not an interval of unexpected behaviour.
_DECLARATION = re.compile(
    r"\b(?:(?:input\s+)?domain(?:\s+of\s+(?:the|this)\s+function)?\s+(?:is|=|:|spans|covers|includes|consists\s+of)"
    r"|(?:is\s+)?defined\s+(?:for|on|over|in))"
    r"\s+(?:the\s+)?(?:whole\s+|entire\s+)?(?:(?:set|interval|range)\s+(?:of\s+)?)?(?:all\s+)?(?:x\s+(?:in|∈)\s+|x\s*:\s*)?",
)
# "the (output) range is [0, 1]": outputs, not inputs
_RANGE_STATEMENT = re.compile(
    r"\b(?:output\s+range|range\s+of\s+(?:the\s+)?(?:function|outputs?)|range)\s+(?:is|=|:)\s+"
)
_WHOLE_DOMAIN = re.compile(
    r"\b(?:(?:whole|entire|full)\s+(?:domain|real\s+line|range)|all\s+(?:real\s+)?(?:numbers|reals|inputs|values|x)\b"
    r"|everywhere|real\s+numbers|ℝ)"
)
# cues that a sentence speaks about the unexpected interval ...
_POSITIVE = re.compile(
    r"unexpect|unusual|strange|\bodd\b|weird|differen|corrupt|nois|random|erratic|anomal|irregular|except|abnormal"
    r"|deviat|inconsisten|chaotic|interval|region|subdomain|part\s+of\s+the\s+domain|outlier|garbage|nonsens"
)
# ... or says there is none
_NEGATIVE = re.compile(
    r"\bno\s+(?:\w+\s+){0,2}?(?:unexpected|unusual|strange|odd|anomal\w*|corrupt\w*|irregular\w*|abnormal\w*|special|such"
    r"|interval|region|subdomain|exceptions?|noise|deviations?|changes?)"
    r"|\bnot\s+corrupted|\bnone\b|\bn/?a\b|\bnothing\s+(?:unexpected|unusual|strange|odd)"
    r"|\b(?:does|do)\s+not\s+(?:show|display|have|exhibit|contain|behave\s+differently)"
    r"|\bwithout\s+(?:any\s+)?(?:unexpected|unusual|anomal|corrupt|irregular|exceptions?)"
    r"|\bbehaves?\s+(?:normally|consistently|as\s+expected|the\s+same|uniformly)"
    r"|\b(?:consistent|uniform|normal|regular)\s+(?:behaviou?r\s+)?(?:everywhere|throughout|across)"
)
#: "neg" / "pos": the negative / positive half-line, read as an upper / a lower bound.
_HALF_LINES = {"neg": ((-_INF, 0.0), "upper"), "pos": ((0.0, _INF), "lower")}
_BUT = re.compile(r"\b(?:except|but|apart\s+from|other\s+than|aside\s+from)\b")
_BARE_NONE = re.compile(r"^\W*(?:none|no|n/?a|nothing|-+|no\s+interval|no\s+corruption|not\s+applicable)\W*$")
_OUTSIDE = re.compile(r"\boutside(?:\s+of)?(?:\s+the)?(?:\s+(?:interval|range|region))?(?:\s+of)?\s*$")
_JOIN = re.compile(r"\s*,?\s*(?:and|but|&&?|while|,)?\s*")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
#: LaTeX and spelled-out comparisons and infinities, as the patterns above read them
_LATEX = [(re.compile(p), repl) for p, repl in (
    (r"\\(?:le|leq)\b", "<="), (r"\\(?:ge|geq)\b", ">="), (r"\\infty\b", "inf"),
    (r"\b(?:negative|minus)\s+inf(?:inity)?\b", "-inf"), (r"\b(?:positive|plus)\s+inf(?:inity)?\b", "inf"),
)]


def _normalise(text: str) -> str:
    t = text.lower()
    for a, b in (("−", "-"), ("≤", "<="), ("⩽", "<="), ("≥", ">="), ("⩾", ">="), ("∞", "inf"), ("`", ""), ("$", "")):
        t = t.replace(a, b)
    for pattern, repl in _LATEX:
        t = pattern.sub(repl, t)
    return t


def _matches(sentence: str) -> list[tuple[int, int, str, tuple[float, float]]]:
    """Non-overlapping interval expressions of a sentence, left to right: (start, end, kind,
    (low, high)); at one position the longest expression wins."""
    found = []
    for pat, kind in _PATTERNS:
        for m in pat.finditer(sentence):
            if kind in _HALF_LINES:
                iv, k = _HALF_LINES[kind]
            elif kind == "two":
                a, b = float(m.group(1)), float(m.group(2))  # _NUM's numbers are float()'s syntax
                iv, k = (min(a, b), max(a, b)), kind
            else:
                v = float(m.group(1))
                iv, k = ((v, _INF) if kind == "lower" else (-_INF, v)), kind
            found.append((m.start(), m.end(), k, iv))
    found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
    out: list[tuple[int, int, str, tuple[float, float]]] = []
    for f in found:
        if not out or f[0] >= out[-1][1]:
            out.append(f)
    return out


def _sentence_intervals(sentence: str) -> tuple[list[tuple[float, float]], bool]:
    """The intervals a sentence names as unexpected ones, and whether it stated the domain."""
    matches = _matches(sentence)
    declared = False
    # drop the interval that directly follows "the domain is" / "defined for" (and "range is")
    for decl in (*_DECLARATION.finditer(sentence), *_RANGE_STATEMENT.finditer(sentence)):
        hit = [m for m in matches if m[0] == decl.end()]
        if hit:
            matches.remove(hit[0])
            declared = True
        elif _WHOLE_DOMAIN.match(sentence, decl.end()) or re.match(
            r"(?:all\s+)?(?:real\s+numbers|reals|ℝ|r\b)", sentence[decl.end() :]
        ):
            declared = True
    out: list[tuple[float, float]] = []
    prev: tuple[int, int, str, tuple[float, float]] | None = None
    for m in matches:
        start, end, kind, iv = m
        # "greater than 2 and less than 7", "x > 2 and x < 7": one interval when it is not empty
        if prev is not None and {prev[2], kind} == {"lower", "upper"} and _JOIN.fullmatch(sentence[prev[1] : start]):
            lo, hi = max(prev[3][0], iv[0]), min(prev[3][1], iv[1])
            if lo < hi:
                out[-1] = (lo, hi)
                prev = None
                continue
        if kind == "two" and _OUTSIDE.search(sentence[max(0, start - 40) : start]):
            out += [(-_INF, iv[0]), (iv[1], _INF)]
        else:
            out.append(iv)
        prev = m
    return out, declared


def parse_intervals(text: str) -> list[tuple[float, float]] | None:
    """The interval(s) of unexpected behaviour named in a ``[DOMAIN]`` answer, as ``(low, high)``
    pairs (``±inf`` for open ends) in the order written; ``[]`` when the answer says there is
    none; ``None`` when nothing can be read.

    ``text`` is the whole interpretation (cut by :func:`domain_text`) or the domain answer alone.
    Read: brackets ``(2, 7)`` / ``[-inf, -2]``; ``between a and b``, ``from a to b``, ``a–b``,
    ``20-30``; ``a < x < b``; one-sided bounds (``x < a``, ``less than a``, ``below a``, ``a and
    above``, ``negative x``, ...); a lower and an upper bound joined by "and" are one interval when
    they overlap; ``outside (2, 7)`` gives the two tails; decimals, ``1e2``, ``inf`` / ``∞``.

    Per sentence: an interval right after "the domain is" / "defined for" / "the range is" is
    dropped; a sentence saying nothing is unexpected (unless it says "except"/"but") adds none;
    if some sentences mention the unexpected part ("corrupted", "noise", "interval", ...) only
    their intervals count. ``[]`` also when the answer says the whole domain behaves alike or
    only states the domain; a single point is no interval. A heuristic: intervals of outputs
    written in a counted sentence are read too.
    """
    _checks.instance("text", text, str, "a str")
    body = _normalise(domain_text(text))
    if not body.strip():
        return None
    if _BARE_NONE.match(body):
        return []
    cue_ivs: list[tuple[float, float]] = []
    other_ivs: list[tuple[float, float]] = []
    says_none = declared = whole = False
    for sentence in (s for s in _SENTENCE.split(body) if s and s.strip()):
        ivs, decl = _sentence_intervals(sentence)
        declared |= decl
        if _NEGATIVE.search(sentence) and not _BUT.search(sentence):
            says_none = True
            continue
        whole |= bool(_WHOLE_DOMAIN.search(sentence))
        (cue_ivs if _POSITIVE.search(sentence) else other_ivs).extend(ivs)
    found = cue_ivs or other_ivs
    if found:
        return [(float(a), float(b)) for a, b in found]
    return [] if says_none or declared or whole else None


def _row_domain(row: Any, where: str) -> tuple[float, float]:
    _checks.instance(where, row, Mapping, "a dict (a numeric dataset row)")
    cat = row.get("category")
    if cat is not None and cat != "numeric":
        raise ValueError(
            f"{where}['category'] is {cat!r}: interval scoring is for numeric functions "
            "(relation neurons: domain_unit_tests)"
        )
    lo, hi = row.get("domain_low"), row.get("domain_high")
    for name, v in (("domain_low", lo), ("domain_high", hi)):
        if not _is_num(v):
            raise ValueError(f"{where}['{name}'] must be a finite number (numeric rows only), got {v!r}")
    lo, hi = float(lo), float(hi)
    if not lo < hi:
        raise ValueError(f"{where}['domain_low'] ({lo}) must be below {where}['domain_high'] ({hi})")
    return lo, hi


def _corruption(row: Mapping[str, Any], where: str) -> tuple[str, list[float]] | None:
    """``(corruption_type, boundary)`` of a numeric row, None for a row without corruption."""
    kind = row.get("corruption_type")
    raw = row.get("corruption_params")
    if kind is None:
        return None
    _checks.one_of(f"{where}['corruption_type']", kind, _CORRUPTION_TYPES)
    if isinstance(raw, str):
        try:
            params = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}['corruption_params'] is not JSON text: {exc}") from None
    else:
        params = raw
    if not isinstance(params, Mapping):
        raise ValueError(
            f"{where}['corruption_params'] must be JSON text (or a dict) with 'boundary', got {raw!r:.100}"
        )
    return kind, _check_boundary(params.get("boundary"), kind, f"{where}['corruption_params'] boundary")


def corrupted_interval(row: Mapping[str, Any], where: str = "row") -> tuple[float, float] | None:
    """The corrupted interval of a numeric row, clipped to ``[domain_low, domain_high]``.

    As served (:func:`findbench.find.numeric.make_function`): ``below`` is ``x <= b0``, ``above``
    ``x >= b0``, ``inside`` ``b0 < x < b1``. None for a row without corruption or whose corrupted
    part misses the domain; a malformed row raises ValueError/TypeError naming the field (``row``,
    or ``where``).
    """
    lo, hi = _row_domain(row, where)
    spec = _corruption(row, where)
    if spec is None:
        return None
    kind, b = spec
    # the served function's masks (findbench.find.numeric.make_function): x <= b0, x >= b0,
    # b0 < x < b1; whether an end point belongs to the set does not change lengths
    a, z = {"below": (-_INF, b[0]), "above": (b[0], _INF)}.get(kind, (b[0], b[-1]))
    a, z = max(a, lo), min(z, hi)
    if a > z:  # the corrupted part misses the domain: nothing served is corrupted
        return None
    return (a, z)


def domain_reference(row: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`REFERENCE_COLUMNS` of a numeric row: what the ``find_domain`` metric takes
    as one reference (``ds.select_columns(list(REFERENCE_COLUMNS))`` does it for a dataset)."""
    _checks.instance("row", row, Mapping, "a dict (a numeric dataset row)")
    missing = [c for c in REFERENCE_COLUMNS if c not in row]
    if missing:
        raise ValueError(f"row is missing column(s) {missing}")
    return {c: row[c] for c in REFERENCE_COLUMNS}


def _clip_union(intervals: Sequence[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    """Disjoint, sorted intervals of positive length covering the union of ``intervals``
    clipped to ``[lo, hi]``."""
    merged: list[list[float]] = []
    for a, b in sorted((max(a, lo), min(b, hi)) for a, b in intervals):
        if b <= a:
            continue
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def _check_pair(v: Any, where: str) -> tuple[float, float]:
    if isinstance(v, (str, Mapping)) or not isinstance(v, Sequence) or len(v) != 2:
        raise TypeError(f"{where} must be a (low, high) pair, got {v!r:.100}")
    a, b = v
    for x in (a, b):
        if isinstance(x, bool) or not isinstance(x, numbers.Real) or math.isnan(float(x)):
            raise ValueError(f"{where} must hold two numbers (±inf allowed), got {v!r}")
    a, b = float(a), float(b)
    if a > b:
        raise ValueError(f"{where} must have low <= high, got {v!r}")
    return a, b


def interval_iou(
    pred: Sequence[tuple[float, float]], truth: tuple[float, float] | None, domain: tuple[float, float]
) -> float:
    """Intersection over union (of lengths) of the predicted intervals and the true one, in [0, 1].

    ``pred`` (:func:`parse_intervals`; overlaps count once, ``[]`` = no interval) and ``truth``
    (:func:`corrupted_interval`, None = no corruption) are clipped to the finite ``domain``
    first; what has no length left is dropped, and a prediction covering the whole domain counts
    as no interval (unless the truth does too). Neither side with an interval scores 1.0,
    exactly one 0.0.
    """
    _checks.instance("pred", pred, Sequence, "a list of (low, high) pairs (an unparseable answer, None, is scored 0 by "
                     "score_domain)", exclude=(str, Mapping))
    lo, hi = _check_pair(domain, "domain")
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"domain must be finite with low < high, got {domain!r}")
    p = _clip_union([_check_pair(v, f"pred[{k}]") for k, v in enumerate(pred)], lo, hi)
    t = _clip_union([] if truth is None else [_check_pair(truth, "truth")], lo, hi)
    if p == [(lo, hi)] and t != [(lo, hi)]:
        # covering the whole domain names no part of it: a statement of the domain itself
        p = []
    if not p and not t:
        return 1.0
    if not p or not t:
        return 0.0
    inter = sum(max(0.0, min(b, d) - max(a, c)) for a, b in p for c, d in t)
    union = sum(b - a for a, b in p) + sum(d - c for c, d in t) - inter
    return float(min(1.0, max(0.0, inter / union)))


def score_domain(
    predictions: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    *,
    argument: str = "rows",
) -> dict[str, Any]:
    """Score the ``[DOMAIN]`` answers of interpretations of numeric functions.

    ``rows`` are dataset rows or dicts with :data:`REFERENCE_COLUMNS`; ``argument`` is their name
    in error messages. Returns ``{"domain_iou", "domain_iou_ci" (95 % bootstrap, seed 0), "n",
    "parse_rate", "iou": [per item], "status": [per item "ok" | "unparseable"]}``; an
    unparseable answer scores 0. Bad input raises ValueError/TypeError naming the field.
    """
    for name, seq in (("predictions", predictions), (argument, rows)):
        _checks.instance(name, seq, Sequence, "a list", exclude=(str, Mapping))
    if len(predictions) != len(rows):
        raise ValueError(f"predictions ({len(predictions)}) and {argument} ({len(rows)}) differ in length")
    if not predictions:
        raise ValueError("predictions is empty: need at least one function to score")
    for i, p in enumerate(predictions):
        _checks.instance(f"predictions[{i}]", p, str, "a str (the interpretation)")
    truths = [
        (_row_domain(r, f"{argument}[{i}]"), corrupted_interval(r, f"{argument}[{i}]")) for i, r in enumerate(rows)
    ]
    preds = [parse_intervals(p) for p in predictions]
    ious = [0.0 if pred is None else interval_iou(pred, truth, dom) for pred, (dom, truth) in zip(preds, truths)]
    status = ["unparseable" if pred is None else "ok" for pred in preds]
    return {
        "domain_iou": float(sum(ious) / len(ious)),
        "domain_iou_ci": list(bootstrap_ci(ious)),
        "n": len(ious),
        "parse_rate": float(status.count("ok") / len(status)),
        "iou": ious,
        "status": status,
    }


def domain_unit_tests(row: Mapping[str, Any], *, where: str = "row") -> list[dict]:
    """The unit tests of a relation row whose correct item lies in its excepted subdomain.

    Those are the tests whose correct output is "undefined" (compared with
    :func:`findbench.find.synthetic_neurons.parse_relation_answer`; procedural rows have 2 of 10).
    Returns ``{"inputs", "outputs", "correct"}`` copies in row order, ``[]`` for a row without
    exception; ``where`` names ``row`` in error messages.
    """
    _checks.instance(where, row, Mapping, "a dict (a neurons_relations dataset row)")
    cat = row.get("category")
    if cat is not None and cat != "neurons_relations":
        raise ValueError(f"{where}['category'] is {cat!r}: excepted subdomains exist only for neurons_relations")
    exception = row.get("exception")
    _checks.instance(f"{where}['exception']", exception, (str, type(None)), "a str or None")
    tests = row.get("unit_tests")
    if not exception or not exception.strip() or tests is None:
        return []
    _checks.instance(f"{where}['unit_tests']", tests, Iterable, "a list of unit tests", exclude=(str, Mapping))
    out = []
    for k, t in enumerate(tests):
        _checks.instance(f"{where}['unit_tests'][{k}]", t, Mapping, "a dict with inputs/outputs/correct")
        inputs, outputs, correct = t.get("inputs"), t.get("outputs"), t.get("correct")
        if inputs is None or outputs is None or correct is None:
            raise ValueError(f"{where}['unit_tests'][{k}] needs inputs, outputs and correct (relations)")
        inputs, outputs = [str(x) for x in inputs], [str(x) for x in outputs]
        try:
            c = int(correct)
        except (TypeError, ValueError):
            raise ValueError(
                f"{where}['unit_tests'][{k}]['correct'] must be a 1-based index, got {correct!r}"
            ) from None
        if not (1 <= c <= len(outputs) and len(outputs) == len(inputs)):
            raise ValueError(
                f"{where}['unit_tests'][{k}]: correct ({c}) must index the {len(inputs)} input/output pairs"
            )
        if parse_relation_answer(outputs[c - 1]) == UNDEFINED:
            out.append({"inputs": inputs, "outputs": outputs, "correct": c})
    return out


def _as_number(x: Any) -> float | None:
    """A finite float from a number or the text of one (an input as an agent wrote it), else None."""
    if isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def in_corrupted_subdomain(row: Mapping[str, Any], inputs: Sequence[Any]) -> list[bool] | None:
    """Per input, whether the function of ``row`` serves it from its corrupted part; None for a
    row without one.

    Numeric rows use the served masks (:func:`corrupted_interval`) over all x, an input that is
    not a finite number never inside; relation rows look the input up as the neuron does and test
    the exception. A malformed row raises ValueError/TypeError naming the field.
    """
    _checks.instance("row", row, Mapping, "a dict (a dataset row)")
    _checks.instance("inputs", inputs, Sequence, "a list of inputs", exclude=(str, bytes))
    category = row.get("category")
    if category == "numeric":
        spec = _corruption(row, "row")
        if spec is None:
            return None
        kind, b = spec
        return [(v := _as_number(x)) is not None and bool(_CORRUPTED[kind](v, b)) for x in inputs]
    if category == "neurons_relations":
        exception = row.get("exception")
        if not isinstance(exception, str) or not exception.strip():
            return None
        from findbench.find.synthetic_neurons.backbones import relation_for_row, row_params

        table, index = relation_for_row(row, row_params(row))
        if index is None:
            raise ValueError(
                f"row['params'] of {row.get('function_id')} names no exception_index, "
                f"but row['exception'] is {exception!r}"
            )
        excepted = table.exceptions[index]
        return [isinstance(x, str) and (e := table.lookup(x)) is not None and excepted.matches(e) for x in inputs]
    return None
