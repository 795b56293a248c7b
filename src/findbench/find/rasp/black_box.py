"""The ``rasp`` config as a black box for interpreter agents: how an agent writes an input sequence,
the ``observed`` reference's plan of calls and the lookup-table floor of the observed pairs. The
harness (``findbench.interpret``) calls these; the compiled model answers through
:func:`~findbench.find.rasp.store.compiled_function`, so the program never reaches an agent."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from findbench.find.rasp import programs as P


def parse_input(text: str) -> list:
    """One input sequence as an agent writes it: tokens separated by spaces or commas (``"1 2 3"``), or
    a JSON list (``"[1, 2, 3]"``); the domain check (:func:`~findbench.find.rasp.programs.check_input`)
    maps each token onto the vocabulary."""
    text = text.strip()
    if text.startswith("["):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, list):
            return value
    return [t for t in re.split(r"[\s,\[\]]+", text) if t]


def call_text(function: Callable, text: str) -> tuple[str, str]:
    """``(input, output)`` as JSON text (:func:`~findbench.find.rasp.rows.show`) for one input an agent
    wrote; ValueError naming the problem (outside the vocabulary, too long, empty, a precondition)."""
    from findbench.find.rasp.rows import show

    tokens = function.check(parse_input(text))
    return show(tokens), show(function(tokens))


def _key(tokens: Sequence) -> str:
    return " ".join(str(t) for t in tokens)


def plan_inputs(row: Mapping[str, Any], calls: int, seed: int) -> list[str]:
    """The ``observed`` reference's ``calls`` inputs for a rasp ``row``: in-domain sequences drawn
    (seeded by ``seed`` and the function id) from the row's stated domain, none of the row's own test or
    unit-test inputs (which would give answers away); each as its tokens separated by spaces."""
    domain = row["domain"] if isinstance(row["domain"], dict) else json.loads(row["domain"])
    shown = {str(x) for x in row.get("test_inputs") or []}
    for test in row.get("unit_tests") or []:
        shown |= {str(x) for x in test.get("inputs") or []}
    shown = {_key(json.loads(x)) for x in shown if x.startswith("[")}
    rng = np.random.default_rng(list(f"{seed}:{row.get('function_id')}".encode()))
    pool = sorted({_key(x) for x in P.domain_inputs(domain, 4 * calls, rng)} - shown)
    return random.Random(f"{seed}:{row.get('function_id')}:observed").sample(pool, min(calls, len(pool)))


def lookup_code(pairs: Sequence[tuple[str, Any]]) -> str:
    """``function(x)`` answering each observed input (as written; tokens compared by their text) with its
    observed output, and any other input with the input itself (the copy floor)."""
    table = {}
    for x, y in pairs:
        try:
            table[_key(parse_input(str(x)))] = json.loads(y)
        except (TypeError, ValueError):
            continue
    return (f"_TABLE = {table!r}\n\n\ndef function(x):\n"
            "    return list(_TABLE.get(' '.join(str(t) for t in x), x))\n")


def domain_text(domain: Any) -> str:
    """What an agent is told of a row's input domain (JSON text or a dict): the vocabulary, the lengths
    and the preconditions."""
    dom = domain if isinstance(domain, dict) else json.loads(domain)
    vocab = " ".join(str(t) for t in dom["vocab"])
    text = f"Its tokens are {vocab}; a sequence has {dom['min_len']} to {dom['max_len']} tokens."
    if "distinct" in dom.get("preconditions", []):
        text += " No token may repeat within a sequence."
    return text
