"""RASP programs as JSON specs over a named function registry, and their plain-Python meaning.

A program is ``{"ops": [...], "output": name}``; each op names its variable (``v1``, ``v2``, …)
and reads ``tokens``, ``indices`` or earlier variables:

- ``{"name", "op": "map", "fn", "args", "x", "enc"}``: ``fn(x, *args)`` per position;
- ``{"name", "op": "sequence_map", "fn", "args", "x", "y"}``: ``fn(x, y, *args)`` per position;
- ``{"name", "op": "linear_sequence_map", "x", "y", "a", "b"}``: ``a*x + b*y`` (numerical);
- ``{"name", "op": "select", "keys", "queries", "pred", "args"}``: a selector, query row by key
  column, ``pred(key, query, *args)``;
- ``{"name", "op": "aggregate", "sel", "x", "enc"}``: the mean of the selected values
  (numerical: 0 where nothing is selected; categorical: the one selected value);
- ``{"name", "op": "selector_width", "sel"}``: how many keys each query selects.

``enc`` is ``categorical`` or ``numerical`` (tracr's two encodings). :func:`evaluate` gives every
variable's value on one input; :func:`reference_code` the same program as a self-contained
``function(tokens)``. A categorical aggregate that selects nothing or several different values
has no defined value (tracr compiles it wrongly and silently): it raises :class:`Undefined`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

#: Unary functions ``name -> (source, description template)``; the template reads ``{x}`` and ``{a0}``…
MAPS: dict[str, tuple[str, str]] = {
    "add_mod": ("def m_add_mod(x, k, m):\n    return (x + k) % m", "({x} + {a0}) mod {a1}"),
    "mul_mod": ("def m_mul_mod(x, k, m):\n    return (x * k) % m", "({x} * {a0}) mod {a1}"),
    "eq": ("def m_eq(x, c):\n    return 1 if x == c else 0", "1 if {x} equals {a0}, else 0"),
    "neq": ("def m_neq(x, c):\n    return 1 if x != c else 0", "1 if {x} differs from {a0}, else 0"),
    "lt": ("def m_lt(x, c):\n    return 1 if x < c else 0", "1 if {x} is below {a0}, else 0"),
    "gt": ("def m_gt(x, c):\n    return 1 if x > c else 0", "1 if {x} is above {a0}, else 0"),
    "min_c": ("def m_min_c(x, c):\n    return min(x, c)", "the smaller of {x} and {a0}"),
    "max_c": ("def m_max_c(x, c):\n    return max(x, c)", "the larger of {x} and {a0}"),
    "parity": ("def m_parity(x):\n    return x % 2", "{x} mod 2"),
    "table": ("def m_table(x, table):\n    return table[x % len(table)]", "the entry of table {a0} at {x}"),
    "in_set": ("def m_in_set(x, s):\n    return 1 if x in s else 0", "1 if {x} is one of {a0}, else 0"),
    "affine": ("def m_affine(x, a, b):\n    return a * x + b", "{a0} * {x} + {a1}"),
    "not": ("def m_not(x):\n    return 1 - x", "1 - {x}"),
    "is_neg": ("def m_is_neg(x):\n    return 1 if x < 0 else 0", "1 if {x} is negative, else 0"),
    "is_zero": ("def m_is_zero(x):\n    return 1 if x == 0 else 0", "1 if {x} is 0, else 0"),
    "num": ("def m_num(x):\n    return x", "{x} as a number"),
}

#: Binary functions ``name -> (source, description template)``; ``{x}``, ``{y}``, ``{a0}``…
SEQUENCE_MAPS: dict[str, tuple[str, str]] = {
    "add_mod": ("def s_add_mod(x, y, m):\n    return (x + y) % m", "({x} + {y}) mod {a0}"),
    "sub_mod": ("def s_sub_mod(x, y, m):\n    return (x - y) % m", "({x} - {y}) mod {a0}"),
    "max": ("def s_max(x, y):\n    return max(x, y)", "the larger of {x} and {y}"),
    "min": ("def s_min(x, y):\n    return min(x, y)", "the smaller of {x} and {y}"),
    "eq": ("def s_eq(x, y):\n    return 1 if x == y else 0", "1 if {x} equals {y}, else 0"),
    "lt": ("def s_lt(x, y):\n    return 1 if x < y else 0", "1 if {x} is below {y}, else 0"),
    "gt": ("def s_gt(x, y):\n    return 1 if x > y else 0", "1 if {x} is above {y}, else 0"),
    "and": ("def s_and(x, y):\n    return 1 if x and y else 0", "1 if {x} and {y} are both non-zero, else 0"),
    "or": ("def s_or(x, y):\n    return 1 if x or y else 0", "1 if {x} or {y} is non-zero, else 0"),
    "sub": ("def s_sub(x, y):\n    return x - y", "{x} - {y}"),
    "key_index": ("def s_key_index(x, i, n):\n    return x * n + i", "{x} * {a0} + {y} (a key unique per position)"),
}

#: Selector predicates ``name -> (source, description template)``; ``{k}`` key, ``{q}`` query.
PREDICATES: dict[str, tuple[str, str]] = {
    "EQ": ("def p_eq(k, q):\n    return k == q", "{k} equals {q}"),
    "NEQ": ("def p_neq(k, q):\n    return k != q", "{k} differs from {q}"),
    "LT": ("def p_lt(k, q):\n    return k < q", "{k} is below {q}"),
    "LEQ": ("def p_leq(k, q):\n    return k <= q", "{k} is at most {q}"),
    "GT": ("def p_gt(k, q):\n    return k > q", "{k} is above {q}"),
    "GEQ": ("def p_geq(k, q):\n    return k >= q", "{k} is at least {q}"),
    "TRUE": ("def p_true(k, q):\n    return True", "always"),
    "offset": ("def p_offset(k, q, d):\n    return q == k + d", "{q} is {k} + {a0}"),
    "offset_clamp": (
        "def p_offset_clamp(k, q, d):\n    return q == k + d or (q < d and k == 0)",
        "{q} is {k} + {a0} (key 0 where {q} is below {a0})",
    ),
    "key_is": ("def p_key_is(k, q, c):\n    return k == c", "{k} equals {a0}"),
    "same_parity": ("def p_same_parity(k, q):\n    return k % 2 == q % 2", "{k} and {q} have the same parity"),
}

ENCODINGS = ("categorical", "numerical")
OPS = ("map", "sequence_map", "linear_sequence_map", "select", "aggregate", "selector_width")
INPUTS = ("tokens", "indices")


class Undefined(ValueError):
    """A program has no defined value on an input (an empty or ambiguous categorical aggregate)."""


def _namespace() -> dict[str, Any]:
    ns: dict[str, Any] = {}
    for prefix, table in (("m_", MAPS), ("s_", SEQUENCE_MAPS), ("p_", PREDICATES)):
        for name, (source, _) in table.items():
            exec(source, ns)  # the registry's own trusted source, the same text the reference code carries
            ns[prefix + name] = ns[source.split("(")[0][4:]]
    return ns


_NS = _namespace()


def _fn(kind: str, name: str):
    return _NS[{"map": "m_", "sequence_map": "s_", "select": "p_"}[kind] + name]


def _args(op: dict) -> list:
    return [tuple(a) if isinstance(a, list) else a for a in op.get("args", [])]


def encoding(program: dict, name: str) -> str:
    """``categorical`` or ``numerical`` for one variable (selector widths and maps default to categorical)."""
    if name in INPUTS:
        return "categorical"
    op = ops_by_name(program)[name]
    return "numerical" if op["op"] == "linear_sequence_map" else op.get("enc", "categorical")


def ops_by_name(program: dict) -> dict[str, dict]:
    return {op["name"]: op for op in program["ops"]}


def evaluate(program: dict, tokens: Sequence) -> dict[str, list]:
    """Every variable's value on ``tokens`` (selectors as query-by-key lists of booleans)."""
    n = len(tokens)
    env: dict[str, Any] = {"tokens": list(tokens), "indices": list(range(n))}
    for op in program["ops"]:
        kind, args = op["op"], _args(op)
        if kind == "map":
            f = _fn("map", op["fn"])
            value = [f(x, *args) for x in env[op["x"]]]
        elif kind == "sequence_map":
            f = _fn("sequence_map", op["fn"])
            value = [f(x, y, *args) for x, y in zip(env[op["x"]], env[op["y"]])]
        elif kind == "linear_sequence_map":
            value = [op["a"] * x + op["b"] * y for x, y in zip(env[op["x"]], env[op["y"]])]
        elif kind == "select":
            f = _fn("select", op["pred"])
            value = [[bool(f(k, q, *args)) for k in env[op["keys"]]] for q in env[op["queries"]]]
        elif kind == "selector_width":
            value = [sum(row) for row in env[op["sel"]]]
        elif kind == "aggregate":
            value = _aggregate(env[op["sel"]], env[op["x"]], op.get("enc", "categorical"), op["name"])
        else:
            raise ValueError(f"program op: unknown {kind!r}; one of {OPS}")
        env[op["name"]] = value
    return {k: v for k, v in env.items() if k not in INPUTS}


def _aggregate(selector: list, values: list, enc: str, name: str) -> list:
    out = []
    for row in selector:
        chosen = [v for s, v in zip(row, values) if s]
        if enc == "numerical":
            out.append(sum(chosen) / len(chosen) if chosen else 0)
        elif len(set(chosen)) != 1:
            raise Undefined(f"{name}: a categorical aggregate selects {len(set(chosen))} different values")
        else:
            out.append(chosen[0])
    return out


def run(program: dict, tokens: Sequence) -> list:
    """The program's output on ``tokens``."""
    return evaluate(program, tokens)[program["output"]]


_AGGREGATE_SOURCE = '''\
def aggregate(selector, values, numerical):
    """Mean of the selected values per query (numerical: 0 where none; categorical: the one selected value)."""
    out = []
    for row in selector:
        chosen = [v for s, v in zip(row, values) if s]
        if numerical:
            out.append(sum(chosen) / len(chosen) if chosen else 0)
        elif len(set(chosen)) != 1:
            raise ValueError("undefined: a categorical aggregate selects nothing or several values")
        else:
            out.append(chosen[0])
    return out'''


def reference_code(program: dict) -> str:
    """The program as self-contained Python: ``function(tokens)`` returning one output per token."""
    helpers, body = [], ["def function(tokens):", "    indices = list(range(len(tokens)))"]

    def use(table: dict, name: str) -> str:
        source = table[name][0]
        if source not in helpers:
            helpers.append(source)
        return source.split("(")[0][4:]

    for op in program["ops"]:
        kind, name = op["op"], op["name"]
        extra = "".join(f", {a!r}" for a in _args(op))
        if kind == "map":
            line = f"[{use(MAPS, op['fn'])}(x{extra}) for x in {op['x']}]"
        elif kind == "sequence_map":
            line = f"[{use(SEQUENCE_MAPS, op['fn'])}(x, y{extra}) for x, y in zip({op['x']}, {op['y']})]"
        elif kind == "linear_sequence_map":
            line = f"[{op['a']!r} * x + {op['b']!r} * y for x, y in zip({op['x']}, {op['y']})]"
        elif kind == "select":
            f = use(PREDICATES, op["pred"])
            line = f"[[{f}(k, q{extra}) for k in {op['keys']}] for q in {op['queries']}]"
        elif kind == "selector_width":
            line = f"[sum(row) for row in {op['sel']}]"
        else:
            if _AGGREGATE_SOURCE not in helpers:
                helpers.append(_AGGREGATE_SOURCE)
            line = f"aggregate({op['sel']}, {op['x']}, {op.get('enc') == 'numerical'})"
        body.append(f"    {name} = {line}")
    body.append(f"    return {program['output']}")
    return "\n\n".join([*helpers, "\n".join(body)]) + "\n"


def describe(program: dict) -> str:
    """A step-by-step English rendering of the program (the sampled tier's description)."""
    lines = []
    for op in program["ops"]:
        kind, name, args = op["op"], op["name"], [str(list(a) if isinstance(a, tuple) else a) for a in _args(op)]
        fmt = {f"a{i}": a for i, a in enumerate(args)}
        if kind == "map":
            text = MAPS[op["fn"]][1].format(x=op["x"], **fmt)
        elif kind == "sequence_map":
            text = SEQUENCE_MAPS[op["fn"]][1].format(x=op["x"], y=op["y"], **fmt)
        elif kind == "linear_sequence_map":
            text = f"{op['a']} * {op['x']} + {op['b']} * {op['y']}"
        elif kind == "select":
            cond = PREDICATES[op["pred"]][1].format(k=f"{op['keys']}[key]", q=f"{op['queries']}[query]", **fmt)
            text = f"each query position selects the key positions where {cond}"
        elif kind == "selector_width":
            text = f"how many positions {op['sel']} selects"
        else:
            text = (f"the mean of {op['x']} over the positions {op['sel']} selects (0 where none)"
                    if op.get("enc") == "numerical"
                    else f"the value of {op['x']} at the one position {op['sel']} selects")
        lines.append(f"{name} = {text}")
    return "; ".join(lines) + f"; the output is {program['output']} at every position."


def domain_inputs(domain: dict, limit: int, rng) -> list[list]:
    """The whole input domain when it has at most ``limit`` sequences, else ``limit`` seeded samples
    (every length present); a ``distinct`` precondition keeps sequences without repeated tokens."""
    vocab, lo, hi = domain["vocab"], domain["min_len"], domain["max_len"]
    distinct = "distinct" in domain.get("preconditions", [])
    size = sum(len(vocab) ** n for n in range(lo, hi + 1))
    if size <= limit:
        seqs = [list(s) for n in range(lo, hi + 1) for s in itertools.product(vocab, repeat=n)]
        return [s for s in seqs if not distinct or len(set(s)) == len(s)]
    out, seen, tries = [], set(), 0
    while len(out) < limit:
        n = lo + tries % (hi - lo + 1)
        tries += 1
        if distinct:
            n = min(n, len(vocab))
            s = [vocab[i] for i in rng.permutation(len(vocab))[:n]]
        else:
            s = [vocab[i] for i in rng.integers(0, len(vocab), n)]
        if tuple(s) not in seen or tries > 50 * limit:
            seen.add(tuple(s))
            out.append(s)
    return out


def check_input(domain: dict, tokens: Sequence) -> list:
    """``tokens`` mapped onto the domain's vocabulary (a command line's strings match by text);
    one-line errors for an empty, too long, out-of-vocabulary or precondition-breaking input."""
    vocab = domain["vocab"]
    by_text = {str(v): v for v in vocab}
    if not tokens:
        raise ValueError(f"tokens: empty; give {domain['min_len']} to {domain['max_len']} tokens")
    if len(tokens) > domain["max_len"]:
        raise ValueError(f"tokens: {len(tokens)} given, at most {domain['max_len']}")
    out = []
    for t in tokens:
        if t in vocab and type(t) is type(vocab[0]):
            out.append(t)
        elif str(t) in by_text:
            out.append(by_text[str(t)])
        else:
            raise ValueError(f"tokens: {t!r} is not in the vocabulary {vocab}")
    if "distinct" in domain.get("preconditions", []) and len(set(out)) != len(out):
        raise ValueError("tokens: precondition 'distinct' violated (a token repeats)")
    return out
