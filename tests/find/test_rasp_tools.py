"""White-box tools over one variant of a compiled program, the rotated truth, and ``attribution``."""

from __future__ import annotations

import json
import pickle
import re

import numpy as np
import pytest
import torch

from findbench.find.rasp import attribution, circuit, store, tools, truth
from findbench.find.rasp import programs as P

RECORDS = {r["name"]: r for r in store.read_store(0)["programs"].values()}
VARIANTS = ("aligned", "rotated")


def _row(name: str) -> dict:
    rec = RECORDS[name]
    xs = P.domain_inputs(rec["domain"], 10, np.random.default_rng(5))
    return {"function_id": rec["function_id"], "domain": json.dumps(rec["domain"]),
            "test_inputs": [json.dumps(x) for x in xs],
            "components": truth.components(rec["program"], store.load_arrays(rec["function_id"]), rec["meta"])}


@pytest.fixture(scope="module", params=VARIANTS)
def sort_tools(request):
    return request.param, tools.RaspTools.for_row(_row("sort"), request.param, budget=1000)


def test_run_and_cache_have_the_model_shapes_and_are_counted(sort_tools):
    variant, t = sort_tools
    x = [3, 1, 2]
    before = t.calls
    assert t.run(x)["output"] == t.model.run(x) == sorted(x)
    assert t.run(["3", "1", "2"])["output"] == sorted(x)  # a text command's strings match by text
    arch = t.architecture()
    got = t.run_with_cache(x, ["blocks.0.attn.hook_pattern", "blocks.0.mlp.hook_post"])
    pattern = got["blocks.0.attn.hook_pattern"]
    assert pattern["shape"] == [arch["n_heads"], 4, 4] and pattern["kept"] == pattern["shape"]
    assert np.allclose(np.sum(pattern["values"], axis=-1), 1, atol=2e-3)
    assert got["blocks.0.mlp.hook_post"]["shape"] == [4, arch["d_mlp"]]
    assert t.calls == before + 3
    assert "blocks.1.attn.head0" in arch["components"] and "blocks.0.mlp" in arch["components"]


def test_replies_are_bounded_and_the_budget_is_enforced():
    t = tools.RaspTools.for_row(_row("sort"), "rotated", budget=3, max_values=40, max_chars=900)
    x = [3, 1, 2, 0]
    got = t.run_with_cache(x, ["blocks.0.hook_resid_post", "blocks.0.mlp.hook_post"])
    for h in got.values():
        assert int(np.prod(h["kept"])) <= 20 and np.array(h["values"]).shape == tuple(h["kept"])
        assert h["kept"] != h["shape"]
    w = t.weights("blocks.0.attn.head0")
    assert w["W_Q"]["summary"] and len(w["W_Q"]["largest"]) <= 16
    assert np.allclose(w["W_Q"]["singular_values"][:3], np.linalg.svd(t.model.blocks[0].attn.W_Q[0].numpy(),
                                                                      compute_uv=False)[:3], atol=1e-3)
    assert len(t.call("run", {"tokens": x})) <= 900
    with pytest.raises(tools.ToolError, match="budget: all 3 tool calls are used"):
        t.run(x)


@pytest.mark.parametrize("name, args, message", [
    ("run", {"tokens": ["zz"]}, r"^tokens: 'zz' is not in the vocabulary"),
    ("run", {"tokens": []}, r"^tokens: empty"),
    ("run", {"tokenz": [1]}, r"unknown argument 'tokenz'"),
    ("ablate", {"component": "blocks.1.mlp"}, r"missing 'tokens'"),
    ("run_with_cache", {"tokens": [1], "hooks": ["blocks.0.attn.hook_secret"]}, r"^hooks: 'blocks.0.attn.hook_secret'"),
    ("weights", {"component": "blocks.7.mlp"}, r"^component: 'blocks.7.mlp' is not a component"),
    ("weights", {"component": "blocks.0.attn.head9"}, r"^component: .*heads"),
    ("ablate", {"component": "blocks.0.mlp.unit9999", "tokens": [1], "mode": "zero"}, r"^component: .*units"),
    ("ablate", {"component": "blocks.0.mlp", "tokens": [1], "mode": "half"}, r"^mode: 'half'"),
    ("patch", {"component": "blocks.0.mlp", "source_tokens": [1, 2], "target_tokens": [1]}, r"^source_tokens: 2"),
    ("patch", {"component": "blocks.0.mlp", "source_tokens": [1], "target_tokens": ["q"]}, r"^target_tokens: 'q'"),
    ("explain", {}, r"^tool: 'explain'"),
])
def test_bad_calls_are_refused_in_one_line_naming_the_argument(sort_tools, name, args, message):
    _, t = sort_tools
    with pytest.raises(tools.ToolError, match=message) as err:
        t.call(name, args)
    assert "\n" not in str(err.value)


def test_ablate_and_patch_are_the_interventions_they_say(sort_tools):
    _, t = sort_tools
    x, y = [3, 1, 2, 0], [0, 2, 1, 3]
    heads = [c for c in t.components() if ".attn." in c]
    for comp in heads:
        layer, head, _ = t.component(comp)
        W_O = t.model.blocks[layer].attn.W_O
        saved = W_O[head].clone()
        W_O[head] = 0
        try:
            by_hand = t.model.run(x)
        finally:
            W_O[head] = saved
        assert t.ablate(comp, x, "zero")["output"] == by_hand
    assert t.patch("blocks.0.mlp", y, y)["output"] == t.model.run(y)
    everything = t.patch("blocks.0.mlp", x, y)  # patching every first-layer MLP unit from x
    assert everything["source_output"] == sorted(x) and everything["target_output"] == sorted(y)
    for mode in tools.MODES:
        got = t.ablate("blocks.0.mlp", x, mode)
        assert len(got["output"]) == 4 and got["clean"] == sorted(x)
        assert got["changed_positions"] == [i for i in range(4) if got["output"][i] != got["clean"][i]]
    assert t.ablate("blocks.0.mlp", x, "zero")["changed_positions"]  # sort needs its first MLP


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_ground_truth_in_any_reply(variant):
    rec = RECORDS["sort_freq"]
    row = _row("sort_freq")
    t = tools.RaspTools.for_row(row, variant, budget=10_000)
    x = rec["domain"]["vocab"][:3]
    replies = [json.dumps(t.architecture()), t.call("run", {"tokens": x}),
               t.call("run_with_cache", {"tokens": x, "hooks": t.hooks})]
    for comp in t.components() + ["embed", "pos_embed", "unembed", "blocks.0.mlp.unit0"]:
        replies.append(t.call("weights", {"component": comp}))
        if comp.startswith("blocks"):
            replies += [t.call("ablate", {"component": comp, "tokens": x, "mode": m}) for m in tools.MODES]
            replies.append(t.call("patch", {"component": comp, "source_tokens": x, "target_tokens": x[::-1]}))
    text = "\n".join(replies)
    held = pickle.dumps(t).decode("latin-1")  # what the tools object holds (weights as raw bytes)
    labels = [label for label in rec["meta"]["labels"] if ":" in label]
    assert labels and not [label for label in labels if label in text + held]
    variables = {op["name"] for op in rec["program"]["ops"]}
    assert not [v for v in variables if re.search(rf"\b{re.escape(v)}\b", text)]
    assert not [r for r in truth.ROLES if re.search(rf"\b{r}\b", text)]
    assert "aggregate" not in text and "select" not in text and json.dumps(rec["program"]) not in text


@torch.no_grad()
def _zeroed_logits(model, xs, layer, units):
    """Logits at the real non-BOS positions with MLP ``units`` of ``layer`` zeroed (by hand)."""
    def hook(mod, inp, out):
        out = out.clone()
        out[:, :, units] = 0
        return out

    handle = model.blocks[layer].mlp.hook_post.register_forward_hook(hook)
    try:
        ids, mask = model.encode(xs)
        logits = model(ids, mask)
    finally:
        handle.remove()
    mask[:, 0] = False
    return logits[mask]


@pytest.mark.parametrize("name", ["sort", "sort_freq", "frac_prevs_0"])
def test_rotated_truth_is_the_aligned_truth_through_the_unit_permutation(name):
    row = _row(name)
    aligned, rotated = (tools.RaspTools.for_row(row, v) for v in VARIANTS)
    mapped = truth.for_variant(row["components"], row["function_id"], "rotated")
    assert truth.for_variant(row["components"], row["function_id"]) == row["components"]
    xs = [json.loads(x) for x in row["test_inputs"]]
    stale = False
    for c, m in zip(row["components"], mapped):
        assert sorted(m["units"]) == m["units"] and len(m["units"]) == len(c["units"])
        if c["head"] is not None or c["role"] == "inactive":
            continue
        want = _zeroed_logits(aligned.model, xs, c["layer"], c["units"])
        assert torch.allclose(_zeroed_logits(rotated.model, xs, m["layer"], m["units"]), want, atol=1e-5)
        # the aligned indices name other units in the rotated model
        stale |= not torch.allclose(_zeroed_logits(rotated.model, xs, m["layer"], c["units"]), want, atol=1e-5)
        post_a = aligned.activation(xs, (c["layer"], None, c["units"]))
        post_r = rotated.activation(xs, (m["layer"], None, m["units"]))
        # the same units up to a positive rescaling: same firing, same total after normalising
        assert torch.equal((post_a > 1e-6).sum((0, 1)).sort().values, (post_r > 1e-6).sum((0, 1)).sort().values)
    truth_pred = circuit.truth_prediction(mapped)
    got = circuit.score_circuit([truth_pred], [mapped])
    assert got["role_accuracy"] == got["role_f1"] == got["node_precision"] == got["node_recall"] == 1.0
    assert got["node_auroc"] == 1.0 or got["node_auroc_n"] == 0  # defined when some component is inactive
    floor = circuit.score_circuit([circuit.floor_predictions(mapped, "majority_role")], [mapped])
    roles = {c["role"] for c in mapped}
    assert floor["role_accuracy"] < 1 or len(roles - {"inactive"}) == 1
    assert floor["node_precision"] < 1 or "inactive" not in roles
    assert (floor["role_accuracy"], floor["node_precision"]) != (1.0, 1.0)
    assert stale or name == "frac_prevs_0"  # its MLPs have one unit each: nothing to permute


@pytest.mark.parametrize("variant", VARIANTS)
def test_attribution_recovers_the_components_that_matter(variant):
    names = ["hist", "sort", "reverse", "frac_prevs_0"]
    rows_ = [_row(n) for n in names]
    refs = [truth.for_variant(r["components"], r["function_id"], variant) for r in rows_]
    preds = [attribution.predict(r, variant) for r in rows_]
    got = circuit.score_circuit(preds, refs)
    floor = circuit.score_circuit([circuit.floor_predictions(c, "majority_role") for c in refs], refs)
    assert got["node_auroc"] >= 0.9 and got["node_auroc_n"] >= 3
    assert got["node_recall"] >= 0.9 and got["node_precision"] >= 0.9
    assert got["role_accuracy"] > floor["role_accuracy"] + 0.2
    assert all(p["role"] in truth.ROLES and isinstance(p["score"], float) for pred in preds for p in pred)


def test_one_spec_table_matches_the_tools():
    import inspect

    specs = tools.tool_specs()
    assert [s["name"] for s in specs] == ["run", "run_with_cache", "weights", "ablate", "patch"]
    for spec, entry in zip(specs, tools.TOOLS):
        params = list(inspect.signature(getattr(tools.RaspTools, f"_{entry['name']}")).parameters)
        assert params == ["self", *entry["args"], "limit"] and set(entry["required"]) <= set(entry["args"])
        assert spec["parameters"]["required"] == entry["required"] and spec["description"]


def test_mean_ablation_reaches_positions_no_reference_input_has():
    rec = RECORDS["sort"]
    t = tools.RaspTools(store.load_model(rec["function_id"]), rec["domain"], reference_inputs=1)
    x = rec["domain"]["vocab"][: rec["domain"]["max_len"]]
    assert len(t._reference) == 1 and len(t._reference[0]) < len(x)
    assert len(t.ablate("blocks.0.mlp", x, "mean")["output"]) == len(x)
    assert len(t.ablate("blocks.0.mlp", x, "resample")["output"]) == len(x)
