"""The ``rasp`` config's rows: one per compiled, validated program of a store (``store.py``).

Common columns as every FIND config (``code`` = the plain-Python reference ``function(tokens)``,
``test_inputs`` as JSON lists of tokens, ``unit_tests`` with distractors from other programs on
the same vocabulary, ``unit_tests_near`` with the outputs of near-miss programs on the same
input), plus ``domain``, ``program``, ``components``, ``variable_values``, ``weights_sha256``,
``split``.
"""

from __future__ import annotations

import itertools
import json
import os
import random

import numpy as np

from findbench import schema
from findbench.find.rasp import programs as P
from findbench.find.rasp import store, truth
from findbench.find.unit_tests import build_unit_tests, near_miss_tests

N_TEST_INPUTS = 10
N_CANDIDATES = 40


def show(values: list) -> str:
    """One output sequence as JSON text (numbers rounded to 4 places)."""
    return json.dumps([round(v, 4) if isinstance(v, float) else v for v in values])


def _inputs(dom: dict, n: int, seed: int, index: int) -> list[list]:
    """``n`` distinct in-domain inputs, lengths taken in turn from the longest down (long inputs show
    more of the program; short ones its edge cases)."""
    pool = P.domain_inputs(dom, 4 * n, np.random.default_rng([seed, 11, index]))
    unique = list(dict.fromkeys(tuple(x) for x in pool))
    random.Random(f"{seed}:{index}").shuffle(unique)
    by_len: dict[int, list] = {}
    for x in unique:
        by_len.setdefault(len(x), []).append(list(x))
    turns = [by_len[k] for k in sorted(by_len, reverse=True)]
    out = [x for group in itertools.zip_longest(*turns) for x in group if x is not None]
    return out[:n]


def generate(seed: int = store.SHIPPED_SEED, progress: bool = True) -> list[dict]:
    """Every row of the config for ``seed`` (the shipped store, or one compiled for that seed)."""
    from tqdm.auto import tqdm

    store.ensure_store(seed, jobs=max(1, (os.cpu_count() or 2) // 2), progress=progress)
    records = list(store.read_store(seed)["programs"].values())
    candidates, rows = [], []
    for index, rec in enumerate(records):
        inputs = _inputs(rec["domain"], N_CANDIDATES, seed, index)
        candidates.append([(json.dumps(x), show(P.run(rec["program"], x))) for x in inputs])
    vocab = [set(rec["domain"]["vocab"]) for rec in records]
    # distractors come from programs whose tokens all lie in this one's vocabulary (else any program)
    fits = [sum(vocab[j] <= vocab[i] for j in range(len(records)) if j != i) >= 2 for i in range(len(records))]

    def is_correct(i: int, item: tuple) -> bool:
        x = json.loads(item[0])
        try:
            x = P.check_input(records[i]["domain"], x)
            return show(P.run(records[i]["program"], x)) == item[1]
        except (ValueError, P.Undefined):
            return False

    tests = build_unit_tests([c[:N_TEST_INPUTS] for c in candidates], seed=seed,
                             allowed=lambda i, j: not fits[i] or vocab[j] <= vocab[i], is_correct=is_correct)
    for index, rec in enumerate(tqdm(records, desc="rasp rows", disable=not progress)):
        program, dom = rec["program"], rec["domain"]
        misses = truth.near_misses(program)

        def near(item, program=program, misses=misses):
            x = json.loads(item[0])
            out = []
            for miss in misses:
                try:
                    shown = show(P.run(miss, x))
                except (P.Undefined, ZeroDivisionError, TypeError, IndexError, ValueError):
                    continue
                if shown != item[1]:
                    out.append((item[0], shown))
            return out

        try:
            near_tests = near_miss_tests(candidates[index], near, rng=random.Random(f"{seed}:near:{index}")).tests
        except ValueError:  # too few near misses differ on this program's inputs: no near-miss tests
            near_tests = []
        test_inputs = [x for x, _ in candidates[index][:N_TEST_INPUTS]]
        values = [{k: v for k, v in P.evaluate(program, json.loads(x)).items()
                   if P.ops_by_name(program)[k]["op"] != "select"} for x in test_inputs]
        arrays = store.load_arrays(rec["function_id"], seed)
        rows.append(schema.empty_row(
            function_id=rec["function_id"], category=schema.RASP, subcategory=rec["tier"], name=rec["name"],
            params=schema.dumps({"seed": seed, "family": rec["family"], "tier": rec["tier"]}),
            code=P.reference_code(program), description=rec["description"], source="procedural",
            test_inputs=test_inputs, unit_tests=tests[index], unit_tests_near=near_tests,
        ) | {
            "domain": schema.dumps(dom), "program": schema.dumps(program),
            "components": truth.components(program, arrays, rec["meta"]),
            "variable_values": json.dumps(values), "weights_sha256": rec["weights_sha256"],
            "split": "dev" if rec["tier"] == "library" else "test",
        })
    return rows
