"""The white-box ``rasp`` config: programs, compiled models, ground truth, refusals, find_circuit."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from findbench.find.rasp import catalog, circuit, store, truth
from findbench.find.rasp import programs as P
from findbench.find.rasp.model import digest

SHIPPED = store.read_store(0)["programs"]
RECORDS = list(SHIPPED.values())


@pytest.fixture(scope="module")
def items():
    return catalog.catalog(0)[0]


def test_tiers_are_large_enough_and_no_two_programs_share_an_output_table(items):
    tiers = {t: [i for i in items if i["tier"] == t] for t in ("library", "family", "sampled")}
    assert len(tiers["library"]) >= 20 and len(tiers["sampled"]) >= 150
    families = {i["family"] for i in tiers["family"]}
    assert len(families) >= 12 and all(sum(i["family"] == f for i in tiers["family"]) == 10 for f in families)
    assert all(3 <= len(i["program"]["ops"]) <= 8 for i in tiers["sampled"])
    tables = [(json.dumps(i["domain"]), catalog.output_table(i["program"], catalog.probes(i["domain"])))
              for i in items]
    assert None not in [t for _, t in tables] and len(set(tables)) == len(tables)


def test_catalog_is_seeded():
    first, again, other = (catalog.families(seed, set())[0] for seed in (0, 0, 1))
    assert [i["program"] for i in first] == [i["program"] for i in again]
    assert [i["program"] for i in first] != [i["program"] for i in other]


def test_reference_code_is_the_interpreter(items):
    rng = np.random.default_rng(0)
    for item in items[::7]:
        ns: dict = {}
        exec(P.reference_code(item["program"]), ns)
        for x in P.domain_inputs(item["domain"], 20, rng):
            assert ns["function"](x) == P.run(item["program"], x), item["name"]


def test_compiled_equals_reference_on_every_shipped_program():
    assert len(SHIPPED) >= 50
    rng = np.random.default_rng(1)
    for rec in RECORDS:
        model = store.load_model(rec["function_id"])
        xs = P.domain_inputs(rec["domain"], 40, rng)
        for x, got in zip(xs, model.run_batch(xs)):
            assert store.matches(got, P.run(rec["program"], x), model.numerical, rec["domain"]["tolerance"]), (
                rec["function_id"], x)


def test_rotated_gives_the_same_logits_in_another_basis():
    for rec in RECORDS[::5]:
        aligned = store.load_model(rec["function_id"])
        rotated = store.load_model(rec["function_id"], variant="rotated")
        xs = P.domain_inputs(rec["domain"], 16, np.random.default_rng(2))
        ids, mask = aligned.encode(xs)
        a, r = aligned(ids, mask), rotated(ids, mask)
        assert torch.allclose(a[:, 1:][mask[:, 1:]], r[:, 1:][mask[:, 1:]], atol=1e-5)
        assert not torch.allclose(aligned.W_E, rotated.W_E)  # the residual basis moved


def test_run_with_cache_has_transformer_lens_hook_names():
    model = store.load_model(RECORDS[0]["function_id"])
    logits, cache = model.run_with_cache(RECORDS[0]["domain"]["vocab"][:2])
    assert logits.shape[:2] == (1, 3)
    for name in ("hook_embed", "hook_pos_embed", "blocks.0.hook_resid_pre", "blocks.0.hook_resid_post",
                 "blocks.0.attn.hook_pattern", "blocks.0.attn.hook_z", "blocks.0.attn.hook_result",
                 "blocks.0.mlp.hook_post"):
        assert name in cache


def test_every_nonzero_weight_block_belongs_to_a_listed_component():
    for rec in RECORDS:
        arrays = store.load_arrays(rec["function_id"])
        comps = truth.components(rec["program"], arrays, rec["meta"])
        active_heads = {(c["layer"], c["head"]) for c in comps if c["head"] is not None and c["role"] != "inactive"}
        active_units = {(c["layer"], u) for c in comps for u in c["units"] if c["role"] != "inactive"}
        for layer in range(rec["meta"]["n_layers"]):
            for head in np.nonzero(np.abs(arrays[f"{layer}.W_O"]).sum((1, 2)))[0]:
                assert (layer, head) in active_heads
            used = np.abs(arrays[f"{layer}.W_out"]).sum(1) + np.abs(arrays[f"{layer}.W_in"]).sum(0)
            for unit in np.nonzero(used)[0]:
                assert (layer, unit) in active_units
        assert {c["variable"] for c in comps if c["role"] != "inactive"} <= {op["name"] for op in rec["program"]["ops"]}


def test_find_circuit_truth_scores_one_and_floors_score_below():
    recs = RECORDS[:12]
    comps = [truth.components(r["program"], store.load_arrays(r["function_id"]), r["meta"]) for r in recs]
    full = circuit.score_circuit([circuit.truth_prediction(c) for c in comps], comps)
    for name in ("role_accuracy", "role_f1", "node_precision", "node_recall", "node_auroc", "reads_f1"):
        assert full[name] == 1.0 and full[f"{name}_n"] > 0
    for floor in circuit.FLOORS:
        got = circuit.score_circuit([circuit.floor_predictions(c, floor) for c in comps], comps)
        assert got["role_accuracy"] < 1 and got["node_precision"] < 1


def test_find_circuit_refuses_bad_predictions_in_one_line():
    with pytest.raises(ValueError, match=r"predictions\[0\]\[0\]\.role"):
        circuit.score_circuit([[{"hook": "blocks.0.attn.hook_result", "head": 0, "role": "wizard"}]], [[]])
    with pytest.raises(ValueError, match=r"predictions\[0\]: not JSON"):
        circuit.parse_json_list("{", "predictions[0]")


@pytest.mark.parametrize("tokens, message", [
    (["9"], "not in the vocabulary"), ([], "empty"), (["1"] * 40, "at most"),
])
def test_call_refuses_bad_tokens_in_one_line(tokens, message):
    from findbench import load_function

    fn = load_function(RECORDS[0]["function_id"])
    with pytest.raises(ValueError, match=message):
        fn(tokens)


def test_refusals_name_the_problem(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="unknown rasp function"):
        store.load_model("rasp/f99999")
    with pytest.raises(ValueError, match="variant"):
        store.load_model(RECORDS[0]["function_id"], variant="sideways")
    distinct = {"vocab": [0, 1, 2], "min_len": 1, "max_len": 3, "preconditions": ["distinct"]}
    with pytest.raises(ValueError, match="precondition 'distinct'"):
        P.check_input(distinct, [1, 1])
    copy = tmp_path / "seed0"
    shutil.copytree(store.store_dir(0), copy)
    fid = RECORDS[0]["function_id"]
    with np.load(copy / "weights.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays[f"{fid}/embed"] = arrays[f"{fid}/embed"] + 1
    np.savez_compressed(copy / "weights.npz", **arrays)
    monkeypatch.setattr(store, "store_dir", lambda seed: copy)
    store.read_store.cache_clear()
    try:
        with pytest.raises(ValueError, match="sha256 does not match"):
            store.load_model(fid)
    finally:
        store.read_store.cache_clear()


def test_findbench_call_runs_the_compiled_model():
    rec = next(r for r in RECORDS if r["name"] == "reverse")
    out = subprocess.run([sys.executable, "-m", "findbench.cli", "call", rec["function_id"], "1", "2", "3"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "[3, 2, 1]" in out.stdout.replace("'", "")


_COMPILE = """
import json, sys
from findbench.find.rasp import catalog, compile
from findbench.find.rasp.model import digest
item = next(i for i in catalog.library() if i["name"] == "length")
made = compile.compile_program(item["program"], item["domain"])
checks = compile.tracr_checks(made["tracr_model"], item["domain"])
print(json.dumps({"digest": digest(made["arrays"], made["meta"]["labels"]), "checks": checks}))
"""


def test_two_processes_compile_the_shipped_digest_and_torch_equals_tracr():
    pytest.importorskip("tracr")
    procs = [subprocess.Popen([sys.executable, "-c", _COMPILE], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [json.loads(p.communicate(timeout=600)[0].strip().splitlines()[-1]) for p in procs]
    rec = next(r for r in RECORDS if r["name"] == "length")
    assert outs[0]["digest"] == outs[1]["digest"] == rec["weights_sha256"]
    model = store.load_model(rec["function_id"])
    for x, want in zip(outs[0]["checks"]["inputs"], outs[0]["checks"]["outputs"]):
        assert model.run(x) == want


def test_rows_have_the_rasp_columns():
    from findbench.find.rasp import rows

    got = rows.generate(0, progress=False)
    assert len(got) == len(SHIPPED)
    row = got[0]
    assert row["function_id"] == "rasp/f00000" and row["category"] == "rasp" and row["split"] == "dev"
    assert {r["split"] for r in got if r["subcategory"] != "library"} <= {"test"}
    values = json.loads(row["variable_values"])
    program = json.loads(row["program"])
    assert len(values) == len(row["test_inputs"]) == 10
    assert values[0][program["output"]] == P.run(program, json.loads(row["test_inputs"][0]))
    for test in row["unit_tests"] + row["unit_tests_near"]:
        assert len(test["inputs"]) == 3
    assert Path(store.store_dir(0) / "weights.npz").stat().st_size < 25 * 2**20
    assert row["weights_sha256"] == digest(store.load_arrays(row["function_id"]), SHIPPED[row["function_id"]]
                                           ["meta"]["labels"])


def test_find_exact_match_scores_code_against_the_compiled_model():
    from findbench.find.code_scoring import score_rasp
    from findbench.find.rasp import rows

    recs = [r for r in RECORDS if r["name"] in ("reverse", "hist")]
    row = {"program": json.dumps(recs[0]["program"]), "test_inputs": [json.dumps(recs[0]["domain"]["vocab"])]}
    floors = circuit.code_floors(row)
    codes = [P.reference_code(r["program"]) for r in recs]
    ids = [r["function_id"] for r in recs]
    got = score_rasp(codes + [floors["copy"], floors["constant"]], ids + [ids[0], ids[0]], n_inputs=30)
    assert got["per_function"][:2] == [1.0, 1.0] and got["per_function_positions"][:2] == [1.0, 1.0]
    assert max(got["per_function"][2:]) < 1 and max(got["per_function_positions"][2:]) < 1
    assert got["errors"][:2] == [None, None] and got["n"] == 4
    assert rows.show([0.123456, 2]) == "[0.1235, 2]"


def test_component_code_of_the_truth_scores_one():
    from findbench.find.rasp import rows

    row = next(r for r in rows.generate(0, progress=False) if r["name"] == "frac_prevs_0")
    comps, program = row["components"], json.loads(row["program"])
    got = circuit.score_circuit([circuit.truth_prediction(comps, program)], [comps], test_inputs=[row["test_inputs"]],
                                variable_values=[row["variable_values"]])
    assert got["component_code_accuracy"] == 1.0
    wrong = [dict(p, code="def f(tokens):\n    return [0] * len(tokens)\n") if "code" in p else p
             for p in circuit.truth_prediction(comps, program)]
    got = circuit.score_circuit([wrong], [comps], test_inputs=[row["test_inputs"]],
                                variable_values=[row["variable_values"]])
    assert got["component_code_accuracy"] < 1
