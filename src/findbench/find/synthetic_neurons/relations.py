"""FIND's synthetic relation neurons (FIND §2.3): 25 relations, each atomic and corrupted twice.

Rows follow FIND's order: 25 atomic relations, then the 25 corrupted by their first exception,
then by their second. Per function: 10 unit-test items (input, output), for a corrupted
relation 8 outside the exception and 2 inside it answering "undefined" (FIND §3.1); 10 probe
inputs (6 held-out own, 4 of other kinds) and 8 exemplars (3 held-out own, 5 of other kinds),
all drawn from each table's well-known core (:attr:`RelationTable.sample_entries`). Core
entries no unit test uses are the held-out entries (:func:`relation_splits`).

``unit_tests_near`` (:func:`near_miss_answers`) keeps each unit test's correct pair and puts the
answers of near misses beside it, on the same input: the relation with its other exception
(or with none, or with one for an atomic relation), then the nearest relations (the other
relations that answer at least half of this one's core inputs, most overlapping first), and,
where those give fewer than two answers that differ from the neuron's, the relation with this
input's answer swapped for another core entry's (a table that differs in one entry), and last
"undefined" (the relation corrupted on a subdomain holding this input).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator, Sequence
from typing import Any

from findbench import _checks, schema
from findbench.find.synthetic_neurons.backbones import DEFAULT_LM, expected_answer, table_answer
from findbench.find.synthetic_neurons.prompts import UNDEFINED, render_prompt
from findbench.find.unit_tests import build_unit_tests, near_miss_tests

log = logging.getLogger(__name__)

CATEGORY = "neurons_relations"
#: Row blocks in FIND's order: atomic, first exception, second exception.
VARIANTS: tuple[int | None, ...] = (None, 0, 1)
N_UNIT, N_UNIT_UNDEFINED = 10, 2
N_PROBES_OWN, N_PROBES = 6, 10
N_EXEMPLARS_OWN, N_EXEMPLARS = 3, 8


def resolve_tables(tables):
    if tables is None:
        from findbench.find.synthetic_neurons.relation_tables import load_relation_tables

        tables = load_relation_tables()
    tables = list(tables)
    if len(tables) < 2:
        raise ValueError("tables: need at least two relation tables")
    return tables


def describe_relation(concept1: str, concept2: str, exception: str | None = None) -> str:
    """Ground-truth description, e.g. 'Maps a country to the capital of that country;
    returns "undefined" when the input is not a country or when the input country is in Asia.'"""
    text = f'Maps {concept1} to {concept2}; returns "{UNDEFINED}" when the input is not {concept1}'
    if exception:
        text += f" or when {exception.strip()}"
    return text + "."


def relation_splits(table, seed: int = 0) -> dict[str, Any]:
    """Core entries of one relation used by its unit tests, and the held-out rest.

    Returns ``{"order": shuffled core entries, "unit": {variant: [entry, ...]}, "held_out": [entry, ...]}``
    where variant ``None`` (atomic) takes the first 10 entries of the order and variant ``k``
    the first 8 outside exception ``k`` plus the first 2 inside it.
    """
    order = list(table.sample_entries)
    random.Random(f"relations:{seed}:{table.key}").shuffle(order)
    unit: dict[int | None, list] = {None: order[:N_UNIT]}
    for k in (0, 1):
        exc = table.exceptions[k]
        inside = [e for e in order if exc.matches(e)][:N_UNIT_UNDEFINED]
        outside = [e for e in order if not exc.matches(e)][: N_UNIT - N_UNIT_UNDEFINED]
        if len(inside) < N_UNIT_UNDEFINED or len(outside) < N_UNIT - N_UNIT_UNDEFINED:
            raise ValueError(
                f"tables: relation {table.key!r} exception {k} leaves too few entries inside/outside its subdomain"
            )
        # keep the shuffled order, then place the undefined items at seeded positions
        rng = random.Random(f"relations:{seed}:{table.key}:{k}")
        for e in inside:
            outside.insert(rng.randrange(len(outside) + 1), e)
        unit[k] = outside
    used = {id(e) for items in unit.values() for e in items}
    return {"order": order, "unit": unit, "held_out": [e for e in order if id(e) not in used]}


def other_kind_inputs(tables: Sequence, i: int) -> list[str]:
    """Core inputs of relations whose input kind differs from table ``i``'s and that table ``i``
    does not know (its out-of-domain inputs)."""
    me = tables[i]
    return list(dict.fromkeys(e.input for t in tables if t.concept1 != me.concept1
                              for e in t.sample_entries if me.lookup(e.input) is None))


#: Another relation is "of the same kind" (a near miss) when it answers at least this share of
#: the relation's core inputs.
NEAR_RELATION_OVERLAP = 0.5


def nearest_relations(tables: Sequence, i: int) -> list[tuple[float, int]]:
    """``(share, index)`` of the relations of the same kind as table ``i``: other keys answering a
    share of at least :data:`NEAR_RELATION_OVERLAP` of its core inputs, the largest first."""
    inputs = [e.input for e in tables[i].sample_entries]
    shares = [
        (sum(t.lookup(x) is not None for x in inputs) / len(inputs), j)
        for j, t in enumerate(tables)
        if t.key != tables[i].key
    ]
    return sorted((s for s in shares if s[0] >= NEAR_RELATION_OVERLAP), key=lambda s: (-s[0], s[1]))


def near_miss_answers(
    tables: Sequence, ti: int, v: int | None, entry, near: Sequence[tuple[float, int]], rng: random.Random
) -> Iterator[tuple[str, bool]]:
    """``(answer, fallback)`` of the near misses of relation ``ti`` with exception ``v`` on core
    ``entry``, best first (see the module doc; ``near``: :func:`nearest_relations`, equally near
    ones in a random order): never the neuron's answer nor one it accepts. ``fallback`` marks the
    one-entry swaps and "undefined", reached only when the others run short."""
    t = tables[ti]
    answer = expected_answer(t, v, entry)

    def wrong(out: str) -> bool:
        return out != UNDEFINED if answer == UNDEFINED else out != answer and not entry.accepts(out)

    for out in [expected_answer(t, w, entry) for w in ((0, 1) if v is None else (1 - v, None))]:
        if wrong(out):
            yield out, False
    for _share, j in sorted(near, key=lambda s: (-s[0], rng.random())):
        other = tables[j].lookup(entry.input)
        if other is not None and wrong(other.output):
            yield other.output, False
    pool = [e for e in t.sample_entries if e is not entry]
    rng.shuffle(pool)
    yield from ((e.output, True) for e in pool if wrong(e.output))
    if wrong(UNDEFINED):  # a relation of two answers (name -> gender) has one other: add a corruption's
        yield UNDEFINED, True


def generate_relations(seed: int = 0, *, tables=None, lm_model: str = DEFAULT_LM) -> list[dict[str, Any]]:
    """The ``neurons_relations`` rows in FIND's order (25 atomic, then 25 + 25 corrupted).

    Args:
        seed: drives entry splits, probes, exemplars and unit tests.
        tables: relation tables to use instead of the packaged ones (tests).
        lm_model: model recorded for the ``lm`` backbone.
    """
    _checks.integer("seed", seed)
    tables = resolve_tables(tables)
    splits = [relation_splits(t, seed) for t in tables]
    others = [other_kind_inputs(tables, i) for i in range(len(tables))]
    specs = [(ti, v) for v in VARIANTS for ti in range(len(tables))]
    rows, correct_items = [], []
    for index, (ti, v) in enumerate(specs):
        t, split = tables[ti], splits[ti]
        rng = random.Random(f"relations:{seed}:{index}")
        unit = split["unit"][v]
        correct_items.append([(e.input, expected_answer(t, v, e)) for e in unit])
        need = N_PROBES_OWN + N_EXEMPLARS_OWN
        # a corruption's probes show its exception subdomain too
        first = [] if v is None else [e for e in split["held_out"] if t.exceptions[v].matches(e)][:2]
        held = [e for e in split["held_out"] if e not in first]
        own = [e.input for e in first] + [e.input for e in rng.sample(held, min(need - len(first), len(held)))]
        n_other = (N_PROBES - N_PROBES_OWN) + (N_EXEMPLARS - N_EXEMPLARS_OWN)
        other = rng.sample(others[ti], min(n_other, len(others[ti])))  # fewer only with tiny table sets
        probes = own[:N_PROBES_OWN] + other[: N_PROBES - N_PROBES_OWN]
        exemplars = own[N_PROBES_OWN:] + other[N_PROBES - N_PROBES_OWN :]
        rng.shuffle(probes)
        rng.shuffle(exemplars)
        exc = None if v is None else t.exceptions[v]
        params = {
            "relation": t.key,
            "exception_index": v,
            "exception": None if exc is None else exc.to_dict(),
            "unit_inputs": [e.input for e in unit],
            "seed": seed,
            "backbones": {
                "table": {
                    "undefined": UNDEFINED,
                    "outside": "input not in the table",
                    "inside_exception": exc is not None,
                },
                "lm": {"model": lm_model, "decoding": "greedy", "max_new_tokens": 24},
            },
        }
        rows.append(
            schema.empty_row(
                function_id=schema.function_id(CATEGORY, index),
                category=CATEGORY,
                subcategory="atomic" if v is None else "corruption",
                name=t.key if v is None else f"{t.key}~except{v + 1}",
                params=schema.dumps(params),
                code="",
                description=describe_relation(t.concept1, t.concept2, None if exc is None else exc.text),
                source="procedural",
                concept1=t.concept1,
                concept2=t.concept2,
                exception=None if exc is None else exc.text,
                backbone="table",
                prompt=render_prompt(CATEGORY, t.concept1, t.concept2, None if exc is None else exc.text),
                test_inputs=probes,
                exemplars=exemplars,
            )
        )

    def is_correct(i: int, item) -> bool:
        (ti, v), (x, y) = specs[i], item
        if table_answer(tables[ti], v, x) == UNDEFINED:  # not in the table, or in the exception
            return y == UNDEFINED
        return tables[ti].lookup(x).accepts(y)

    tests = build_unit_tests(
        correct_items,
        seed=seed,
        allowed=lambda i, j: tables[specs[i][0]].key != tables[specs[j][0]].key,
        is_correct=is_correct,
    )
    for row, tst in zip(rows, tests):
        row["unit_tests"] = tst
    # near misses draw from a stream per function of their own: the draws above stay as they were
    near = [nearest_relations(tables, i) for i in range(len(tables))]
    n_fallback = 0
    for index, ((ti, v), row) in enumerate(zip(specs, rows)):
        rng = random.Random(f"relations-near:{seed}:{index}")
        entries = {x: e for x, e in zip(correct_items[index], splits[ti]["unit"][v])}
        fallback: set[str] = set()

        def answers(item, ti=ti, v=v, rng=rng, entries=entries, fallback=fallback):
            for out, swapped in near_miss_answers(tables, ti, v, entries[item], near[ti], rng):
                if swapped:
                    fallback.add(item[0])
                yield item[0], out

        row["unit_tests_near"] = near_miss_tests(correct_items[index], answers, rng=rng).tests
        n_fallback += len(fallback)
    log.info(
        "generated %d relation neurons (%d near-miss tests needed a one-entry swap or 'undefined')",
        len(rows),
        n_fallback,
    )
    return rows
