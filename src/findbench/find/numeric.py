"""FIND numeric functions (FIND §2.1, appendix E): procedural generation and release import.

A function ``float -> float`` is *atomic* (16 parametric families) or a *composition* (sum or
product of two), served as ``clean``, ``noise`` (additive normal(0, 1), uniform(-1, 1) or
poisson(1), seeded), ``corruption`` (below/above a boundary or inside an interval of width
5–25 the output is drawn from N(mean of f on its domain, 0.1)) or ``mlp`` (a 1→64→1 ReLU MLP
fitted on 10,000 points, :mod:`findbench.find.mlp`). Rows carry ``params`` (canonical JSON),
runnable ``code`` and a ``description``; :func:`make_function` rebuilds the served function
from ``params`` alone, bit-identical to ``code``. Unlike the reference source writer,
``absolute`` keeps its bias and ``square_wave`` stays a square wave in compositions;
:func:`findbench.find.find_v1.row_from_find_v1` imports release records and by default serves
what the release served (``release_quirks``).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from findbench import _checks, schema
from findbench.find import mlp as _mlp

logger = logging.getLogger(__name__)

#: Atomic families, in FIND's order.
ATOMIC_FAMILIES = (
    "linear", "polynomial", "absolute", "root", "logarithm", "step", "relu", "tanh", "constant",
    "sin", "cos", "reciprocal", "gaussian", "rational", "rectangle", "square_wave",
)  # fmt: skip
#: Families that compositions draw from (``ceil`` and ``floor`` occur only here).
COMPOSABLE_FAMILIES = ("linear", "polynomial", "step", "relu", "constant", "ceil", "floor", "rectangle", "square_wave")
#: Composition operators.
OPS = ("sum", "product")
_OPERATORS = {"sum": operator.add, "product": operator.mul}
NOISE_TYPES = ("normal", "uniform", "poisson")
_CORRUPTION_TYPES = ("below", "above", "inside")
#: noise type -> (the numpy Generator method and its arguments, what the description says).
_NOISE: dict[str, tuple[str, tuple[float, ...], str]] = {
    "normal": ("normal", (0.0, 1.0), "a normal distribution with mean 0 and standard deviation 1"),
    "uniform": ("uniform", (-1.0, 1.0), "a uniform distribution on [-1, 1]"),
    "poisson": ("poisson", (1.0,), "a Poisson distribution with rate 1 (non-negative integers, mean 1)"),
}
VARIANTS = ("clean", "noise", "corruption", "mlp")
#: corruption type -> its corrupted subdomain (as a mask of x), given the boundary b.
_CORRUPTED: dict[str, Callable[[Any, list[float]], Any]] = {
    "below": lambda x, b: x <= b[0],
    "above": lambda x, b: x >= b[0],
    "inside": lambda x, b: (x > b[0]) & (x < b[1]),
}
#: Standard deviation of the values that replace a corrupted subdomain.
_CORRUPTION_STD = 0.1
#: The MLP approximation is fitted on this many evenly spaced points of the domain.
MLP_TRAIN_POINTS = 10_000
#: Points over which the "mean of f on its domain" of a corruption is taken (as in FIND).
_MEAN_POINTS = 100

#: Proportions measured on the FIND v1 release (numeric/data.json + func_name_dict.json,
#: 1000 functions): 150 MLPs (the first ids), 850 atomic / 150 composed; of the 850 others
#: 483 clean, 191 corrupted, 176 noisy; noise types 342 normal / 435 uniform / 223 poisson;
#: corruption types 261 below / 248 above / 491 inside.
_MIX: dict[str, Any] = {
    "mlp": 0.15,
    "atomic": 0.85,
    "served": {"clean": 483, "corruption": 191, "noise": 176},
    "noise_type": {"normal": 342, "uniform": 435, "poisson": 223},
    "corruption_type": {"below": 261, "above": 248, "inside": 491},
}

_DEFAULT_DOMAIN = (-100.0, 100.0)
_DOMAINS = {"root": (0.0, 100.0), "logarithm": (1.0, 100.0)}


class MissingMLPWeightsError(RuntimeError):
    """Raised when an MLP function's weights are not available (FIND v1 publishes 5 of 150)."""


def _r1(v: float) -> float:
    """Round to one decimal as FIND does, normalising -0.0 to 0.0."""
    return round(float(v), 1) + 0.0


def _lit(v: Any) -> str:
    """Python literal of a parameter for generated source (exact: repr round-trips)."""
    s = repr(int(v)) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else repr(float(v))
    return f"({s})" if s.startswith("-") else s


def _num(v: float) -> str:
    """Human-readable number for descriptions (exact for FIND's 1-decimal parameters)."""
    v = float(v)
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    s = repr(v)
    return s if len(s) <= 12 else f"{v:.6g}"


def _times(c: float, expr: str) -> str:
    """'c*expr' with c == 1 / -1 simplified."""
    if c == 1:
        return expr
    if c == -1:
        return f"-{expr}"
    return f"{_num(c)}*{expr}"


def _plus(b: float) -> str:
    """' + b' / ' - |b|' / '' for b == 0."""
    if b == 0:
        return ""
    return f" - {_num(-b)}" if b < 0 else f" + {_num(b)}"


def _minus_shift(c: float) -> str:
    """'(x - c)' with sign handling."""
    if c == 0:
        return "x"
    return f"(x + {_num(-c)})" if c < 0 else f"(x - {_num(c)})"


@dataclass(frozen=True)
class _Family:
    name: str
    params: tuple[str, ...]
    kind: str  # English name used in descriptions
    sample: Callable[[np.random.Generator], dict]
    evaluate: Callable[[dict, np.ndarray], Any]  # numpy, same operations as `source`
    source: Callable[[dict], str]  # numpy expression in x
    formula: Callable[[dict], str]  # human-readable right-hand side
    from_v1: Callable[[Any], dict]  # FIND v1 positional params -> named params


def _u(rng: np.random.Generator, lo: float, hi: float) -> float:
    return _r1(rng.uniform(lo, hi))


def _v1_list(p: Any, n: int, fam: str) -> list:
    if not isinstance(p, (list, tuple)) or len(p) != n:
        raise ValueError(f"FIND v1 params of {fam} must be a list of {n} numbers, got {p!r}")
    return list(p)


def _v1_named(names: tuple[str, ...], fam: str) -> Callable[[Any], dict]:
    """FIND v1 positional params -> ``names`` as floats."""
    return lambda v: dict(zip(names, map(float, _v1_list(v, len(names), fam))))


# --- polynomial (coefficients from the highest power down, as in FIND); rational (ascending) ---
def _poly_terms(coeffs: Sequence[float]) -> list[tuple[float, int]]:
    d = len(coeffs) - 1
    return [(float(c), d - i) for i, c in enumerate(coeffs)]


def _asc_terms(coeffs: Sequence[float]) -> list[tuple[float, int]]:
    return [(float(c), k) for k, c in enumerate(coeffs)]


def _terms_eval(terms: list[tuple[float, int]], x: np.ndarray) -> Any:
    """The terms summed left to right, as :func:`_terms_source` writes them."""
    return functools.reduce(operator.add, (c if k == 0 else (c * x if k == 1 else c * x**k) for c, k in terms))


def _terms_source(terms: list[tuple[float, int]]) -> str:
    return " + ".join(_lit(c) if k == 0 else (f"{_lit(c)} * x" if k == 1 else f"{_lit(c)} * x**{k}") for c, k in terms)


def _poly_formula(p: dict) -> str:
    out = ""
    for c, k in _poly_terms(p["coeffs"]):
        mono = "" if k == 0 else ("x" if k == 1 else f"x^{k}")
        term = f"{_num(abs(c))}*{mono}" if mono else _num(abs(c))
        sign = (" - " if c < 0 else " + ") if out else ("-" if c < 0 else "")
        out += sign + term
    return out


def _poly_sample(r: np.random.Generator) -> dict:
    degree = int(r.integers(2, 6))
    coeffs = [_u(r, -5, 5) for _ in range(degree + 1)]
    while coeffs[0] == 0:  # keep the stated degree
        coeffs[0] = _u(r, -5, 5)
    return {"coeffs": coeffs}


def _poly_v1(v: Any) -> dict:
    if not isinstance(v, (list, tuple)) or len(v) < 2:
        raise ValueError(f"FIND v1 params of polynomial must be a list of coefficients, got {v!r}")
    return {"coeffs": [float(c) for c in v]}


def _rational_sample(r: np.random.Generator) -> dict:
    num_order = int(r.integers(0, 5))
    den_order = int(r.integers(num_order + 1, 6))
    return {
        "numerator": [_u(r, -10, 10) for _ in range(num_order + 1)],
        "denominator": [_u(r, -10, 10) for _ in range(den_order + 1)],
    }


def _rational_v1(v: Any) -> dict:
    if not isinstance(v, (list, tuple)) or len(v) != 2 or not all(isinstance(c, (list, tuple)) for c in v):
        raise ValueError(f"FIND v1 params of rational must be [numerator coeffs, denominator coeffs], got {v!r}")
    return {"numerator": [float(c) for c in v[0]], "denominator": [float(c) for c in v[1]]}


# --- root, logarithm, constant, reciprocal ----------------------------------------------
def _root_formula(p: dict) -> str:
    n = int(p["n"])
    core = "x" if n == 1 else ("sqrt(x)" if n == 2 else f"x^(1/{n})")
    return f"{_times(p['scale'], core)}{_plus(p['bias'])}"


def _root_v1(v: Any) -> dict:
    a, b, n = _v1_list(v, 3, "root")
    return {"scale": float(a), "bias": float(b), "n": int(n)}


def _log_sample(r: np.random.Generator) -> dict:
    scale, bias = _u(r, -30, 30), _u(r, -30, 30)
    base = 1.0
    while base == 1.0:  # log base 1 is undefined
        base = _u(r, 1, 10)
    return {"scale": scale, "bias": bias, "base": base}


def _const_v1(v: Any) -> dict:
    if isinstance(v, (list, tuple)) and len(v) == 1:
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"FIND v1 params of constant must be a number, got {v!r}")
    return {"value": float(v)}


def _recip_sample(r: np.random.Generator) -> dict:
    a = 0.0
    while a == 0.0:
        a = _u(r, -10, 10)
    return {"scale": a}


# --- periodic: tanh / sin / cos: amplitude * g((2*pi/period) * (x - shift)) + offset ---
def _periodic(name: str, kind: str) -> _Family:
    names = ("amplitude", "period", "shift", "offset")
    ufunc = getattr(np, name)
    return _Family(
        name, names, kind,
        sample=lambda r: {
            "amplitude": _u(r, -10, 10),
            "period": _u(r, 0.1, 2 * math.pi),
            "shift": _u(r, 0.1, 2 * math.pi),
            "offset": _u(r, -30, 30),
        },
        evaluate=lambda p, x: p["amplitude"] * ufunc((2 * np.pi / p["period"]) * (x - p["shift"])) + p["offset"],
        source=lambda p: (
            f"{_lit(p['amplitude'])} * np.{name}((2 * np.pi / {_lit(p['period'])})"
            f" * (x - {_lit(p['shift'])})) + {_lit(p['offset'])}"
        ),
        formula=lambda p: (
            _times(p["amplitude"], f"{name}(2*pi*{_minus_shift(p['shift'])}/{_num(p['period'])})") + _plus(p["offset"])
        ),
        from_v1=_v1_named(names, name),
    )  # fmt: skip


# --- ceil / floor (compositions only) --------------------------------------------------
def _rounding(name: str, kind: str, text: str) -> _Family:
    ufunc = getattr(np, name)

    def from_v1(v: Any) -> dict:
        if v not in (None, [], ()):
            raise ValueError(f"FIND v1 params of {name} must be None, got {v!r}")
        return {}

    return _Family(
        name, (), kind, sample=lambda r: {},
        evaluate=lambda p, x: ufunc(x),
        source=lambda p: f"np.{name}(x)",
        formula=lambda p: text,
        from_v1=from_v1,
    )  # fmt: skip


_FAMILIES: dict[str, _Family] = {
    f.name: f
    for f in (
        _Family(
            "linear", ("slope", "intercept"), "linear function",
            sample=lambda r: {"slope": _u(r, -10, 10), "intercept": _u(r, -10, 10)},
            evaluate=lambda p, x: p["slope"] * x + p["intercept"],
            source=lambda p: f"{_lit(p['slope'])} * x + {_lit(p['intercept'])}",
            formula=lambda p: f"{_times(p['slope'], 'x')}{_plus(p['intercept'])}",
            from_v1=_v1_named(("slope", "intercept"), "linear"),
        ),
        _Family(
            "polynomial", ("coeffs",), "polynomial", _poly_sample,
            evaluate=lambda p, x: _terms_eval(_poly_terms(p["coeffs"]), x),
            source=lambda p: _terms_source(_poly_terms(p["coeffs"])),
            formula=_poly_formula, from_v1=_poly_v1,
        ),
        _Family(
            "absolute", ("scale", "bias"), "scaled absolute value",
            sample=lambda r: {"scale": _u(r, -30, 30), "bias": _u(r, -30, 30)},
            evaluate=lambda p, x: p["scale"] * np.abs(x) + p["bias"],
            source=lambda p: f"{_lit(p['scale'])} * np.abs(x) + {_lit(p['bias'])}",
            formula=lambda p: f"{_times(p['scale'], '|x|')}{_plus(p['bias'])}",
            from_v1=_v1_named(("scale", "bias"), "absolute"),
        ),
        _Family(
            "root", ("scale", "bias", "n"), "scaled n-th root",
            sample=lambda r: {"scale": _u(r, -30, 30), "bias": _u(r, -30, 30), "n": int(r.integers(1, 3))},
            evaluate=lambda p, x: p["scale"] * x ** (1.0 / p["n"]) + p["bias"],
            source=lambda p: f"{_lit(p['scale'])} * x ** (1.0 / {_lit(p['n'])}) + {_lit(p['bias'])}",
            formula=_root_formula, from_v1=_root_v1,
        ),
        _Family(
            "logarithm", ("scale", "bias", "base"), "scaled logarithm",
            sample=_log_sample,
            evaluate=lambda p, x: p["scale"] * (np.log(x) / np.log(p["base"])) + p["bias"],
            source=lambda p: f"{_lit(p['scale'])} * (np.log(x) / np.log({_lit(p['base'])})) + {_lit(p['bias'])}",
            formula=lambda p: _times(p["scale"], "log_" + _num(p["base"]) + "(x)") + _plus(p["bias"]),
            from_v1=_v1_named(("scale", "bias", "base"), "logarithm"),
        ),
        # Heaviside; `value_at_zero` is H(0), as numpy.heaviside's second argument
        _Family(
            "step", ("scale", "bias", "value_at_zero"), "scaled step function",
            sample=lambda r: {"scale": _u(r, -30, 30), "bias": _u(r, -30, 30), "value_at_zero": _u(r, -100, 100)},
            evaluate=lambda p, x: p["scale"] * np.heaviside(x, p["value_at_zero"]) + p["bias"],
            source=lambda p: f"{_lit(p['scale'])} * np.heaviside(x, {_lit(p['value_at_zero'])}) + {_lit(p['bias'])}",
            formula=lambda p: (
                f"{_times(p['scale'], 'H(x)')}{_plus(p['bias'])}, where H is the Heaviside step "
                f"(H(x) = 0 for x < 0, H(x) = 1 for x > 0 and H(0) = {_num(p['value_at_zero'])})"
            ),
            from_v1=_v1_named(("scale", "bias", "value_at_zero"), "step"),
        ),
        # leaky
        _Family(
            "relu", ("scale", "bias", "leak"), "scaled leaky ReLU",
            sample=lambda r: {"scale": _u(r, -30, 30), "bias": _u(r, -30, 30), "leak": _u(r, 0, 1)},
            evaluate=lambda p, x: p["scale"] * np.where(x > 0, x, x * p["leak"]) + p["bias"],
            source=lambda p: f"{_lit(p['scale'])} * np.where(x > 0, x, x * {_lit(p['leak'])}) + {_lit(p['bias'])}",
            formula=lambda p: (
                f"{_times(p['scale'], 'g(x)')}{_plus(p['bias'])}, "
                f"where g(x) = x for x > 0 and g(x) = {_times(p['leak'], 'x')} otherwise"
            ),
            from_v1=_v1_named(("scale", "bias", "leak"), "relu"),
        ),
        _periodic("tanh", "scaled hyperbolic tangent"),
        _Family(
            "constant", ("value",), "constant function",
            sample=lambda r: {"value": float(r.integers(-100, 100))},
            evaluate=lambda p, x: p["value"] * np.ones_like(x),
            source=lambda p: f"{_lit(p['value'])} * np.ones_like(x)",
            formula=lambda p: _num(p["value"]),
            from_v1=_const_v1,
        ),
        _periodic("sin", "sine wave"),
        _periodic("cos", "cosine wave"),
        _Family(
            "reciprocal", ("scale",), "scaled reciprocal",
            sample=_recip_sample,
            evaluate=lambda p, x: 1 / (p["scale"] * x),
            source=lambda p: f"1 / ({_lit(p['scale'])} * x)",
            formula=lambda p: f"1 / ({_times(p['scale'], 'x')}) (undefined, served as ±inf or nan, at x = 0)",
            from_v1=_v1_named(("scale",), "reciprocal"),
        ),
        # the normal density
        _Family(
            "gaussian", ("mean", "std"), "Gaussian density",
            sample=lambda r: {"mean": _u(r, -50, 50), "std": _u(r, 1, 10)},
            evaluate=lambda p, x: (
                (1 / (p["std"] * np.sqrt(2 * np.pi))) * np.exp(-0.5 * ((x - p["mean"]) / p["std"]) ** 2)
            ),
            source=lambda p: (
                f"(1 / ({_lit(p['std'])} * np.sqrt(2 * np.pi)))"
                f" * np.exp(-0.5 * ((x - {_lit(p['mean'])}) / {_lit(p['std'])}) ** 2)"
            ),
            formula=lambda p: (
                f"exp(-0.5*({_minus_shift(p['mean'])}/{_num(p['std'])})^2) / ({_num(p['std'])}*sqrt(2*pi))"
                f" (the density of a normal distribution with mean {_num(p['mean'])}"
                f" and standard deviation {_num(p['std'])})"
            ),
            from_v1=_v1_named(("mean", "std"), "gaussian"),
        ),
        _Family(
            "rational", ("numerator", "denominator"), "rational function",
            sample=_rational_sample,
            evaluate=lambda p, x: (
                _terms_eval(_asc_terms(p["numerator"]), x) / _terms_eval(_asc_terms(p["denominator"]), x)
            ),
            source=lambda p: (
                f"({_terms_source(_asc_terms(p['numerator']))})"
                f" / ({_terms_source(_asc_terms(p['denominator']))})"
            ),
            formula=lambda p: (
                f"({_poly_formula({'coeffs': p['numerator'][::-1]})})"
                f" / ({_poly_formula({'coeffs': p['denominator'][::-1]})})"
            ),
            from_v1=_rational_v1,
        ),
        # the boxcar
        _Family(
            "rectangle", ("width",), "rectangle (boxcar) function",
            sample=lambda r: {"width": _u(r, 1, 10)},
            evaluate=lambda p, x: np.where(np.abs(x) <= p["width"] / 2, 1.0, 0.0),
            source=lambda p: f"np.where(np.abs(x) <= {_lit(p['width'])} / 2, 1.0, 0.0)",
            formula=lambda p: f"1 if |x| <= {_num(p['width'])}/2 else 0",
            from_v1=_v1_named(("width",), "rectangle"),
        ),
        _Family(
            "square_wave", ("period", "shift"), "square wave",
            sample=lambda r: {"period": _u(r, 1, 10), "shift": _u(r, -5, 5)},
            evaluate=lambda p, x: np.where(np.sin((x - p["shift"]) * (2 * np.pi / p["period"])) > 0, 1.0, -1.0),
            source=lambda p: (
                f"np.where(np.sin((x - {_lit(p['shift'])}) * (2 * np.pi / {_lit(p['period'])})) > 0, 1.0, -1.0)"
            ),
            formula=lambda p: (
                f"1 if sin(2*pi*{_minus_shift(p['shift'])}/{_num(p['period'])}) > 0 else -1"
                f" (a square wave of period {_num(p['period'])} between -1 and 1)"
            ),
            from_v1=_v1_named(("period", "shift"), "square_wave"),
        ),
        _rounding("ceil", "ceiling function", "ceil(x) (the smallest integer >= x)"),
        _rounding("floor", "floor function", "floor(x) (the largest integer <= x)"),
    )
}  # fmt: skip


def family_domain(family: str) -> tuple[float, float]:
    """FIND's domain of an atomic family: [0, 100] for root, [1, 100] for logarithm, else [-100, 100]."""
    _checks.one_of("family", family, _FAMILIES)
    return _DOMAINS.get(family, _DEFAULT_DOMAIN)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(float(v))


def _is_num_list(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and bool(v) and all(_is_num(c) for c in v)


#: parameter -> (valid?, what a valid value is), beyond a finite number
_PARAM_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    **dict.fromkeys(("coeffs", "numerator", "denominator"), (_is_num_list, "a non-empty list of finite numbers")),
    "n": (lambda v: not isinstance(v, bool) and isinstance(v, (int, np.integer)) and v >= 1, "a positive int"),
}
_PARAM_RULES: dict[str, tuple[str, Callable[[Mapping], bool]]] = {
    **{
        f: ("period must be non-zero", lambda p: float(p["period"]) != 0) for f in ("tanh", "sin", "cos", "square_wave")
    },
    "gaussian": ("std must be > 0", lambda p: float(p["std"]) > 0),
    "logarithm": ("base must be > 0 and != 1", lambda p: float(p["base"]) > 0 and float(p["base"]) != 1),
    "reciprocal": ("scale must be non-zero", lambda p: float(p["scale"]) != 0),
}


def _check_term(term: Any, where: str) -> dict:
    _checks.instance(where, term, Mapping, "an object with 'family' and 'params'")
    fam = _checks.one_of(f"{where}.family", term.get("family"), _FAMILIES)
    p = _checks.instance(f"{where}.params", term.get("params"), Mapping, "an object")
    spec = _FAMILIES[fam]
    missing = [k for k in spec.params if k not in p]
    extra = [k for k in p if k not in spec.params]
    if missing or extra:
        raise ValueError(
            f"{where}.params of {fam} must have exactly {list(spec.params)}; missing {missing}, unknown {extra}"
        )
    for k in spec.params:
        valid, what = _PARAM_TYPES.get(k, (_is_num, "a finite number"))
        if not valid(p[k]):
            raise ValueError(f"{where}.params.{k} must be {what}, got {p[k]!r}")
    rule = _PARAM_RULES.get(fam)
    if rule is not None and not rule[1](p):
        raise ValueError(f"{where}.params of {fam}: {rule[0]}, got {dict(p)!r}")
    return {"family": fam, "params": dict(p)}


def _parse_params(obj: Any) -> dict:
    """Accept a row (mapping with a JSON 'params' column), a params dict or JSON text."""
    import json

    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except json.JSONDecodeError as exc:
            raise ValueError(f"params is not valid JSON: {exc}") from None
    _checks.instance("row_or_params", obj, Mapping, "a row, a params dict or JSON text")
    if "structure" not in obj and "params" in obj:  # a dataset row
        return _parse_params(obj["params"])
    return _check_params(dict(obj))


def _check_params(p: dict) -> dict:
    structure = p.get("structure")
    if structure not in ("atomic", "composition"):
        raise ValueError(f"params.structure must be 'atomic' or 'composition', got {structure!r}")
    terms = _checks.instance("params.terms", p.get("terms"), (list, tuple), "a list")
    n_terms = 1 if structure == "atomic" else 2
    if len(terms) != n_terms:
        raise ValueError(f"params.terms must hold {n_terms} term(s) for a {structure} function, got {len(terms)}")
    p["terms"] = [_check_term(t, f"params.terms[{i}]") for i, t in enumerate(terms)]
    op = p.get("op")
    if structure == "atomic" and op is not None:
        raise ValueError(f"params.op must be null for an atomic function, got {op!r}")
    if structure == "composition" and op not in OPS:
        raise ValueError(f"params.op must be one of {OPS}, got {op!r}")
    dom = p.get("domain")
    if not (isinstance(dom, (list, tuple)) and len(dom) == 2 and all(_is_num(d) for d in dom) and dom[0] < dom[1]):
        raise ValueError(f"params.domain must be [low, high] with low < high, got {dom!r}")
    variant = _checks.one_of("params.variant", p.get("variant"), VARIANTS)
    if variant in ("noise", "corruption"):
        c = p.get(variant)
        types = NOISE_TYPES if variant == "noise" else _CORRUPTION_TYPES
        if not isinstance(c, Mapping) or c.get("type") not in types:
            raise ValueError(f"params.{variant}.type must be one of {types}, got {c!r}")
        seed = c.get("seed")  # JSON or numpy: a numpy integer passes
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"params.{variant}.seed must be a non-negative int, got {seed!r}")
    if variant == "corruption":
        _check_boundary(c.get("boundary"), c["type"], "params.corruption.boundary")
        for k in ("mean", "std"):
            if not _is_num(c.get(k)):
                raise ValueError(f"params.corruption.{k} must be a finite number, got {c.get(k)!r}")
        if float(c["std"]) < 0:
            raise ValueError(f"params.corruption.std must be >= 0, got {c['std']!r}")
    if variant == "mlp" and not p.get("mlp_weights_missing"):
        w = _checks.instance("params.mlp", p.get("mlp"), Mapping, "an object of the MLP weights w1, b1, w2, b2")
        for k in ("w1", "b1", "w2"):
            if not _is_num_list(w.get(k)):
                raise ValueError(f"params.mlp.{k} must be a non-empty list of finite numbers")
        if not len(w["w1"]) == len(w["b1"]) == len(w["w2"]):
            raise ValueError("params.mlp.w1, b1 and w2 must have the same length (the hidden width)")
        if not _is_num(w.get("b2")):
            raise ValueError(f"params.mlp.b2 must be a finite number, got {w.get('b2')!r}")
    return p


def _check_boundary(b: Any, kind: str, field: str) -> list[float]:
    """The corruption boundary ``b`` of type ``kind`` as floats: one number, two increasing for "inside"."""
    n = 2 if kind == "inside" else 1
    if not (isinstance(b, (list, tuple)) and len(b) == n and all(_is_num(v) for v in b)):
        raise ValueError(f"{field} must be a list of {n} finite number(s) for type {kind!r}, got {b!r}")
    if n == 2 and not b[0] < b[1]:
        raise ValueError(f"{field} must be increasing, got {b!r}")
    return [float(v) for v in b]


def _term_fn(term: Mapping) -> Callable[[np.ndarray], Any]:
    return functools.partial(_FAMILIES[term["family"]].evaluate, dict(term["params"]))


def _clean_fn(p: Mapping) -> Callable[[np.ndarray], Any]:
    fns = [_term_fn(t) for t in p["terms"]]
    if p["structure"] == "atomic":
        return fns[0]
    g, h, op = *fns, _OPERATORS[p["op"]]
    return lambda x: op(g(x), h(x))


def _noise(p: Mapping, seed: int) -> Callable[[np.ndarray, Any], Any]:
    """What a noisy or corrupted function does to its clean values, drawing from ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    if p["variant"] == "noise":
        method, args, _ = _NOISE[p["noise"]["type"]]
        return lambda x, y: y + getattr(rng, method)(*args, size=x.shape)
    c = p["corruption"]
    mean, std = float(c["mean"]), float(c["std"])
    b = [float(v) for v in c["boundary"]]
    inside = _CORRUPTED[c["type"]]
    return lambda x, y: np.where(inside(x, b), rng.normal(mean, std, size=x.shape), y)


def make_function(row_or_params: Any, *, noise_key: Any = None) -> Callable[[Any], Any]:
    """Build the served function of a row from its ``params`` (no ``exec`` of ``code``).

    Accepts a dataset row, its ``params`` dict or the JSON text; the result maps a float to a float
    and an array-like elementwise to a float64 ndarray. Noise draws from the same
    ``default_rng(seed)`` as the row's ``code``; with ``noise_key`` (a row only) each input value
    draws from its own generator (row id, noise seed, key, value), so the same input always gets
    the same output. Raises :class:`MissingMLPWeightsError` for imported MLPs without public
    weights, ValueError/TypeError naming the bad field otherwise.
    """
    p = _parse_params(row_or_params)
    variant = p["variant"]
    if variant == "mlp":
        if p.get("mlp_weights_missing"):
            raise MissingMLPWeightsError(_missing_weights_message(p))
        w1, b1, w2 = (np.asarray(p["mlp"][k], dtype=np.float32).astype(np.float64) for k in ("w1", "b1", "w2"))
        clean = functools.partial(_mlp.mlp_forward, w1, b1, w2, float(np.float32(p["mlp"]["b2"])))
    else:
        clean = _clean_fn(p)
    post: Callable[[np.ndarray, Any], Any] | None = None
    if variant in ("noise", "corruption") and noise_key is None:
        post = _noise(p, int(p[variant]["seed"]))
    elif variant in ("noise", "corruption"):
        prefix = f"{row_or_params['function_id']}|{p[variant]['seed']}|{noise_key}|"

        def post(x: np.ndarray, y: Any) -> Any:
            def seed(v: float) -> int:
                return int.from_bytes(hashlib.sha256(f"{prefix}{float(v)!r}".encode()).digest()[:4], "big") & 0x7FFFFFFF

            y = np.broadcast_to(y, x.shape)
            return np.asarray([_noise(p, seed(v))(v, w) for v, w in zip(x.reshape(-1), y.reshape(-1))]).reshape(x.shape)

    def function(x: Any) -> Any:
        scalar = np.ndim(x) == 0
        x = np.asarray(x, dtype=np.float64)
        with np.errstate(all="ignore"):
            y = clean(x)
            if post is not None:
                y = post(x, y)
        y = np.asarray(y, dtype=np.float64)
        return float(y) if scalar else y

    function.__doc__ = describe(p)
    return function


def _array_src(values: Sequence[float]) -> str:
    return f"np.array([{', '.join(repr(float(v)) for v in values)}], dtype=np.float32).astype(np.float64)"


def _missing_weights_message(p: Mapping) -> str:
    fid = (p.get("find_v1") or {}).get("dir", "this function")
    return (
        f"the weights of the FIND v1 MLP approximation {fid} are not public (only f00000-f00004 are in the "
        "repository; the others are in the Zenodo archive, record 8039658): pass its mlp_approx_model.pt "
        "state dict to row_from_find_v1(..., mlp_state_dict=...)"
    )


def make_code(params: Any) -> str:
    """Self-contained Python source (numpy only) defining ``function(x)`` for ``params``."""
    p = _parse_params(params)
    variant = p["variant"]
    lines = ['"""FIND numeric function (generated by findbench)."""', "", "import numpy as np", ""]
    if variant == "mlp" and p.get("mlp_weights_missing"):
        lines += ["", "def function(x):", f"    raise RuntimeError({_missing_weights_message(p)!r})", ""]
        return "\n".join(lines)
    if variant in ("noise", "corruption"):
        lines += [f"_rng = np.random.default_rng({int(p[variant]['seed'])})", ""]
    if variant == "mlp":
        w = p["mlp"]
        lines += [
            f"_W1 = {_array_src(w['w1'])}",
            f"_B1 = {_array_src(w['b1'])}",
            f"_W2 = {_array_src(w['w2'])}",
            f"_B2 = float(np.float32({float(w['b2'])!r}))",
            "",
            "",
            "def _clean(x):",
            "    return np.maximum(np.multiply.outer(x, _W1) + _B1, 0.0) @ _W2 + _B2",
        ]
    elif p["structure"] == "atomic":
        t = p["terms"][0]
        lines += ["", "def _clean(x):", f"    return {_FAMILIES[t['family']].source(t['params'])}"]
    else:
        g, h = p["terms"]
        sym = "+" if p["op"] == "sum" else "*"
        lines += [
            "", "def _g(x):", f"    return {_FAMILIES[g['family']].source(g['params'])}", "",
            "", "def _h(x):", f"    return {_FAMILIES[h['family']].source(h['params'])}", "",
            "", "def _clean(x):", f"    return _g(x) {sym} _h(x)",
        ]  # fmt: skip
    body = ["        y = _clean(x)"]
    if variant == "noise":
        method, args, _ = _NOISE[p["noise"]["type"]]
        body.append(f"        y = y + _rng.{method}({', '.join(map(repr, args))}, size=x.shape)")
    elif variant == "corruption":
        c = p["corruption"]
        b = [float(v) for v in c["boundary"]]
        mask = {
            "below": f"x <= {_lit(b[0])}",
            "above": f"x >= {_lit(b[0])}",
            "inside": f"(x > {_lit(b[0])}) & (x < {_lit(b[-1])})",
        }[c["type"]]
        body += [f"        noise = _rng.normal({_lit(c['mean'])}, {_lit(c['std'])}, size=x.shape)",
                 f"        y = np.where({mask}, noise, y)"]
    lines += [
        "",
        "",
        "def function(x):",
        '    """Evaluate at a float (returns a float) or a numpy array (elementwise)."""',
        "    scalar = np.ndim(x) == 0",
        "    x = np.asarray(x, dtype=np.float64)",
        '    with np.errstate(all="ignore"):',
        *body,
        "    y = np.asarray(y, dtype=np.float64)",
        "    return float(y) if scalar else y",
        "",
    ]
    return "\n".join(lines)


def _term_text(term: Mapping) -> str:
    fam = _FAMILIES[term["family"]]
    text = fam.formula(term["params"])
    return text if text.endswith(")") else f"{text} (a {fam.kind})"


def describe(params: Any) -> str:
    """English description of the served function, precise enough to re-implement it."""
    p = _parse_params(params)
    lo, hi = p["domain"]
    if p["structure"] == "atomic":
        t = p["terms"][0]
        fam = _FAMILIES[t["family"]]
        base = f"f(x) = {fam.formula(t['params'])}, a {fam.kind}"
    else:
        g, h = p["terms"]
        word, sym = ("sum", "+") if p["op"] == "sum" else ("product", "*")
        base = f"f(x) = g(x) {sym} h(x), the {word} of g(x) = {_term_text(g)} and h(x) = {_term_text(h)}"
    base += f", on the domain [{_num(lo)}, {_num(hi)}]"
    quirks = (p.get("find_v1") or {}).get("quirks") or []
    quirk_text = " As served by the FIND v1 release: " + "; ".join(quirks) + "." if quirks else ""
    v = p["variant"]
    if v == "clean":
        return base + "." + quirk_text
    if v == "noise":
        return (f"{base}, plus additive noise drawn independently for every input from {_NOISE[p['noise']['type']][2]}."
                + quirk_text)
    if v == "corruption":
        c = p["corruption"]
        b = c["boundary"]
        where = {
            "below": f"for x <= {_num(b[0])}",
            "above": f"for x >= {_num(b[0])}",
            "inside": f"for {_num(b[0])} < x < {_num(b[-1])}",
        }[c["type"]]
        return (
            f"{base}, except that {where} (the corrupted subdomain) the output is replaced by random values "
            f"drawn from a normal distribution with mean {_num(c['mean'])} (the mean of f on its domain) "
            f"and standard deviation {_num(c['std'])}." + quirk_text
        )
    # mlp
    w = p.get("mlp") or {}
    err = w.get("mse")
    err_text = (
        f" (mean squared error {float(err):.4g} on {MLP_TRAIN_POINTS:,} evenly spaced points)"
        if err is not None
        else ""
    )
    hidden = len(w.get("w1", [])) or _mlp.HIDDEN
    return (
        f"The output of a 1-{hidden}-1 ReLU MLP trained to approximate {base}{err_text}; "
        "the MLP, not the formula, is served." + quirk_text
    )


def _test_inputs(p: Mapping) -> list[str]:
    lo, hi = (float(v) for v in p["domain"])
    xs = list(np.linspace(lo, hi, 9))
    if lo < 0 < hi:
        xs += [-1.0, 0.0, 1.0]
    if p["variant"] == "corruption" and p.get("corruption"):
        xs += [float(b) + d for b in p["corruption"]["boundary"] for d in (-1.0, 1.0)]
    return [_num(v) for v in sorted({_r1(v) for v in xs if lo <= v <= hi})]


def row_from_params(params: Any, index: int, *, source: str = "procedural") -> dict[str, Any]:
    """The schema row (``findbench.schema.empty_row``) of a validated params dict."""
    p = _parse_params(params)
    c = p.get("corruption") if p["variant"] == "corruption" else None
    return schema.empty_row(
        function_id=schema.function_id("numeric", int(index)),
        category="numeric",
        subcategory=p["structure"] if p["variant"] == "clean" else p["variant"],
        name=("+" if p["op"] == "sum" else "*").join(t["family"] for t in p["terms"]),
        params=schema.dumps(p),
        code=make_code(p),
        description=describe(p),
        source=source,
        domain_low=float(p["domain"][0]),
        domain_high=float(p["domain"][1]),
        noise_type=p["noise"]["type"] if p["variant"] == "noise" else None,
        corruption_type=c["type"] if c else None,
        corruption_params=schema.dumps({"boundary": list(c["boundary"]), "mean": c["mean"], "std": c["std"]})
        if c
        else None,
        test_inputs=_test_inputs(p),
        unit_tests=[],
    )


def _apportion(total: int, weights: Mapping[str, int]) -> dict[str, int]:
    """Integer counts summing to ``total`` proportional to ``weights`` (largest remainder)."""
    s = sum(weights.values())
    raw = {k: total * w / s for k, w in weights.items()}
    out = {k: int(math.floor(v)) for k, v in raw.items()}
    rest = total - sum(out.values())
    for k in sorted(raw, key=lambda k: (-(raw[k] - out[k]), list(weights).index(k)))[:rest]:
        out[k] += 1
    return out


def _plan(n: int, seed: int) -> list[tuple[str, str]]:
    """(structure, variant) per index: the first 15 % are MLPs (as in FIND's ids), the
    composed ones and the served variants of the rest are exact counts, shuffled by seed."""
    rng = np.random.default_rng([seed, 0])
    n_mlp, n_atomic = (math.floor(n * _MIX[k] + 0.5) for k in ("mlp", "atomic"))  # rounded half up
    structures = np.array(["atomic"] * n_atomic + ["composition"] * (n - n_atomic))
    structures = list(structures[rng.permutation(n)]) if n else []
    counts = _apportion(n - n_mlp, _MIX["served"])
    rest = np.array([k for k, c in counts.items() for _ in range(c)])
    rest = list(rest[rng.permutation(len(rest))]) if len(rest) else []
    variants = ["mlp"] * n_mlp + rest
    return [(str(s), str(v)) for s, v in zip(structures, variants)]


def _choice(rng: np.random.Generator, options: Sequence[str], weights: Mapping[str, int] | None = None) -> str:
    if weights is None:
        return str(options[int(rng.integers(len(options)))])
    w = np.array([weights[o] for o in options], dtype=np.float64)
    return str(options[int(rng.choice(len(options), p=w / w.sum()))])


def _domain_grid(p: Mapping, n_points: int) -> np.ndarray:
    return np.linspace(float(p["domain"][0]), float(p["domain"][1]), n_points)


#: FIND's evaluation grid (the NMSE grid): x = -127.5, ..., 127.5, one apart.
_EVAL_GRID = np.arange(-127.5, 128.0, 1.0)
#: A wave whose period is shorter than two grid steps aliases there (Nyquist): on the grid it
#: looks like another, slower wave, so the description would not say what the scores see.
_MIN_PERIOD = 2.0
_WAVES = ("sin", "cos", "square_wave")


def _flat(values: Any) -> bool:
    y = np.asarray(values, dtype=np.float64)
    y = y[np.isfinite(y)]
    return y.size == 0 or float(np.ptp(y)) <= 1e-9 * max(1.0, float(np.max(np.abs(y))))


def degenerate(params: Mapping) -> str | None:
    """Why a function's description would not say what it does on FIND's evaluation grid
    (``None`` when it does): a wave whose period aliases there, a term that is constant there
    although its family is not (zero amplitude, slope or scale), or a whole function that is
    constant there although it is not described as one (a product with a zero constant)."""
    with np.errstate(all="ignore"):
        for term in params["terms"]:
            fam, p = term["family"], term["params"]
            if fam in _WAVES and abs(float(p["period"])) < _MIN_PERIOD:
                return f"{fam} of period {p['period']} aliases on the unit-spaced grid"
            if fam != "constant" and _flat(_term_fn(term)(_EVAL_GRID)):
                return f"{fam} with {dict(p)} is constant on the grid"
        if params["structure"] != "atomic" and _flat(_clean_fn(params)(_EVAL_GRID)):
            return f"the {params['op']} of its terms is constant on the grid"
    return None


def _draw_term(rng: np.random.Generator, families: Sequence[str]) -> dict:
    fam = _choice(rng, families)
    return {"family": fam, "params": _FAMILIES[fam].sample(rng)}


def _sample_params(seed: int, index: int, structure: str, variant: str) -> dict:
    rng = np.random.default_rng([seed, 1, index])
    for _attempt in range(1000):
        if structure == "atomic":
            op, terms = None, [_draw_term(rng, ATOMIC_FAMILIES)]
            domain = list(family_domain(terms[0]["family"]))
        else:
            op = _choice(rng, OPS)
            terms = [_draw_term(rng, COMPOSABLE_FAMILIES) for _ in range(2)]
            domain = list(_DEFAULT_DOMAIN)
        p: dict[str, Any] = {"structure": structure, "op": op, "terms": terms, "domain": domain, "variant": variant}
        clean = _clean_fn(p)
        with np.errstate(all="ignore"):
            y_mean = np.asarray(clean(_domain_grid(p, _MEAN_POINTS)), dtype=np.float64)
            y_fit = np.asarray(clean(_domain_grid(p, MLP_TRAIN_POINTS)), dtype=np.float64)
        # a pole (reciprocal, rational) sitting on a grid point would make the corruption
        # mean or the MLP targets non-finite, and a degenerate draw would be described as what
        # it is not: redraw, deterministically
        if (
            np.all(np.isfinite(y_mean))
            and np.all(np.isfinite(y_fit))
            and np.all(np.abs(y_fit) < 1e30)
            and degenerate(p) is None
        ):
            break
    else:  # pragma: no cover - needs 1000 consecutive poles
        raise RuntimeError(f"could not draw a finite function for index {index}")
    p.update(noise=None, corruption=None, mlp=None)
    if variant == "noise":
        p["noise"] = {"type": _choice(rng, NOISE_TYPES, _MIX["noise_type"]), "seed": int(rng.integers(2**31))}
    elif variant == "corruption":
        kind = _choice(rng, _CORRUPTION_TYPES, _MIX["corruption_type"])
        a = _u(rng, max(float(domain[0]), -100.0), 100.0)
        boundary = [a] if kind != "inside" else [a, _u(rng, a + 5, a + 25)]
        p["corruption"] = {
            "type": kind,
            "boundary": boundary,
            "mean": float(np.mean(y_mean)),
            "std": _CORRUPTION_STD,
            "seed": int(rng.integers(2**31)),
        }
    return p


def generate(n: int = 1000, seed: int = 0, *, progress: bool = True) -> list[dict]:
    """Generate ``n`` FIND numeric functions as schema rows (``source`` "procedural").

    The mix follows the FIND release (see ``_MIX``): the first 15 % of ids are MLP
    approximations, 85 % of all functions are atomic and 15 % compositions, and the others
    are served clean (≈57 %), corrupted (≈22 %) or noisy (≈21 %). All MLPs are fitted at
    once with :func:`findbench.find.mlp.fit_mlps`. Every draw is seeded: the same
    ``n`` and ``seed`` give identical rows.
    """
    from tqdm.auto import tqdm

    _checks.integer("seed", seed, 0)  # numpy's generators take non-negative seeds only
    plan = _plan(n, seed)
    params = [
        _sample_params(seed, i, s, v)
        for i, (s, v) in enumerate(tqdm(plan, desc="sampling numeric functions", disable=not progress, leave=False))
    ]
    mlp_idx = [i for i, p in enumerate(params) if p["variant"] == "mlp"]
    if mlp_idx:
        xs = np.stack([_domain_grid(params[i], MLP_TRAIN_POINTS) for i in mlp_idx])
        with np.errstate(all="ignore"):
            ys = np.stack([np.asarray(_clean_fn(params[i])(xs[k]), dtype=np.float64) for k, i in enumerate(mlp_idx)])
        logger.info("fitting %d MLP approximations", len(mlp_idx))
        fit = _mlp.fit_mlps(xs, ys, seed=seed, progress=progress)
        for k, i in enumerate(mlp_idx):
            params[i]["mlp"] = {
                "hidden": int(fit["w1"].shape[1]),
                "w1": _mlp.float32_list(fit["w1"][k]),
                "b1": _mlp.float32_list(fit["b1"][k]),
                "w2": _mlp.float32_list(fit["w2"][k]),
                "b2": _mlp.float32_list(fit["b2"][k])[0],
                "mse": float(f"{fit['mse'][k]:.6g}"),
                "train_points": MLP_TRAIN_POINTS,
            }
    # the build-time check: every description says what its function does on the grid
    bad = [(i, why) for i, p in enumerate(params) if (why := degenerate(p))]
    if bad:  # pragma: no cover - _sample_params redraws these
        raise RuntimeError(
            f"numeric generator made {len(bad)} degenerate function(s), e.g. f{bad[0][0]:05d}: {bad[0][1]}"
        )
    return [
        row_from_params(p, i)
        for i, p in enumerate(tqdm(params, desc="writing numeric rows", disable=not progress, leave=False))
    ]


def generate_row(index: int, n: int = 1000, seed: int = 0) -> dict | None:
    """Row ``index`` of :func:`generate` ``(n, seed)`` without making the others (every draw is
    seeded per index), or None for an MLP approximation: the MLPs are fitted all at once."""
    _checks.integer("seed", seed, 0)
    _checks.integer("index", index, 0)
    if index >= n:
        raise ValueError(f"index must be below n={n}, got {index}")
    structure, variant = _plan(n, seed)[index]
    if variant == "mlp":
        return None
    return row_from_params(_sample_params(seed, index, structure, variant), index)
