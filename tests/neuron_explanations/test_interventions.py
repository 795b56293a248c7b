"""Hooks, interchange interventions and IIA sweeps: oracle checks on tiny random models
(independent hand-written MLP computation) and sanity laws on the embedded model."""

from __future__ import annotations

import math

import pytest
import torch

from findbench import sites as acts
from findbench.constants import UsageError
from findbench.neuron_explanations import interventions as iv
from findbench.neuron_explanations.config import IIAConfig
from findbench.neuron_explanations.iia import iia_score
from findbench.neuron_explanations.intervention_tasks import TASKS, build_task_rows, expected_token_id, filler_positions
from tests.neuron_explanations._tiny import tiny_gpt2, tiny_llama, word_tokenizer

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tok():
    texts = []
    for t in TASKS.values():
        for f, a in zip(t.fillers, t.answers):
            texts.append(t.prompt(f) + a)
    return word_tokenizer(texts)


def _ids(seed, batch=3, seq=7, vocab=50):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(2, vocab, (batch, seq), generator=g)


@torch.no_grad()
def _interchange(model, base_ids, source_ids, *, layer, site, neurons=None, positions=None):
    """One batched interchange intervention through ``record`` and ``patch`` (ids ``[batch, tokens]``,
    ``neurons`` default all, ``positions`` ``[batch, P]`` default all): the patched base's last-token logits."""
    b, t = base_ids.shape
    pos = torch.arange(t).expand(b, t) if positions is None else torch.as_tensor(positions, dtype=torch.long)
    idx = None if neurons is None else [int(i) for i in neurons]
    if idx is not None and not idx:
        return model(input_ids=base_ids, use_cache=False, logits_to_keep=1).logits[:, -1]
    values = acts.record(model, source_ids, layer=layer, site=site, positions=pos, neurons=idx)
    with acts.patch(model, layer=layer, site=site, positions=pos, values=values, neurons=idx):
        return model(input_ids=base_ids, use_cache=False, logits_to_keep=1).logits[:, -1]


# ---------------------------------------------------------------- hooks vs hand computation


def test_llama_mlp_activation_matches_hand_computation():
    model = tiny_llama(60)
    ids = _ids(0)
    layer = 1
    block = model.model.layers[layer]
    resid = acts.record(model, ids, layer=layer, site="block_input")  # residual stream entering block 1
    # the MLP's input (post-attention RMSNorm output), captured independently of our hooks
    captured = {}
    h = block.post_attention_layernorm.register_forward_hook(lambda m, a, o: captured.setdefault("x", o))
    got = acts.record(model, ids, layer=layer, site="mlp_activation", stop_early=False)
    h.remove()
    x = captured["x"]
    mlp = block.mlp
    want = torch.nn.functional.silu(x @ mlp.gate_proj.weight.T) * (x @ mlp.up_proj.weight.T)
    assert got.shape == (3, 7, 48)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # and the MLP output is down_proj of exactly these values
    torch.testing.assert_close(mlp(x), want @ mlp.down_proj.weight.T, rtol=1e-5, atol=1e-6)
    assert resid.shape == (3, 7, 32)


def test_gpt2_mlp_activation_matches_hand_computation():
    model = tiny_gpt2(60)
    ids = _ids(1)
    layer = 2
    block = model.transformer.h[layer]
    captured = {}
    h = block.ln_2.register_forward_hook(lambda m, a, o: captured.setdefault("x", o))
    got = acts.record(
        model, ids, layer=layer, site="mlp_activation", positions=[[0, 3]] * 3, neurons=[5, 0, 39], stop_early=False
    )
    h.remove()
    x = captured["x"]
    pre = x @ block.mlp.c_fc.weight + block.mlp.c_fc.bias  # Conv1D: x W + b
    full = 0.5 * pre * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (pre + 0.044715 * pre**3)))  # gelu_new
    want = full[:, [0, 3]][:, :, [5, 0, 39]]
    assert got.shape == (3, 2, 3)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_site_table_widths_and_errors():
    llama, gpt2 = tiny_llama(30), tiny_gpt2(30)
    assert acts.site_dim(llama, "mlp_activation") == 48 and acts.site_dim(gpt2, "mlp_activation") == 40
    assert acts.site_dim(llama, "block_output") == 32
    with pytest.raises(ValueError, match="site"):
        acts.site_dim(llama, "attention")
    with pytest.raises(ValueError, match="layer"):
        acts.record(llama, _ids(0, vocab=30), layer=3)
    with pytest.raises(ValueError, match="positions"):
        acts.record(llama, _ids(0, vocab=30), layer=0, positions=[[9]] * 3)
    with pytest.raises(ValueError, match="values"):
        with acts.patch(llama, layer=0, positions=[[0]] * 3, values=torch.zeros(3, 1, 2), neurons=[0]):
            pass
    with pytest.raises(ValueError, match="neurons"):
        with acts.patch(llama, layer=0, positions=[[0]] * 3, values=torch.zeros(3, 1, 1), neurons=[48]):
            pass


# ---------------------------------------------------------------- sanity laws (tiny models)


@pytest.mark.parametrize("make", [tiny_llama, tiny_gpt2])
def test_patching_own_values_or_nothing_leaves_base_unchanged(make):
    model = make(60)
    base = _ids(2)
    clean = model(input_ids=base).logits[:, -1]
    own = _interchange(model, base, base, layer=1, neurons=list(range(10)), positions=[[1, 4, 6]] * 3,
                         site="mlp_activation")
    torch.testing.assert_close(own, clean, rtol=0, atol=1e-5)
    # An empty patch is a plain forward pass. It is compared with a tolerance, not bit for bit:
    # interchange computes only the last position's logits, and a BLAS may round that
    # one-row matmul differently from the full one (CI's CPU did, by ~1e-7).
    nothing = _interchange(model, base, _ids(3), layer=1, neurons=[], site="mlp_activation")
    torch.testing.assert_close(nothing, clean, rtol=0, atol=1e-6)


@pytest.mark.parametrize("make", [tiny_llama, tiny_gpt2])
def test_patching_whole_residual_stream_reproduces_source(make):
    model = make(60)
    base, source = _ids(4), _ids(5)
    want = model(input_ids=source).logits[:, -1]
    for layer in (0, 2):
        got = _interchange(model, base, source, layer=layer, site="block_output")
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    # patching every MLP neuron at every position is not enough (the residual keeps the base)
    mlp_only = _interchange(model, base, source, layer=0, site="mlp_activation")
    assert not torch.allclose(mlp_only, want, atol=1e-3)


def test_skip_to_layer_is_exact():
    model = tiny_llama(60)
    ids = _ids(6)
    full = model(input_ids=ids).logits
    hidden = acts.record(model, ids, layer=2, site="block_input")
    with acts.skip_to_layer(model, 2, hidden):
        skipped = model(input_ids=ids).logits
    torch.testing.assert_close(skipped, full, rtol=0, atol=1e-5)
    # the blocks are restored afterwards
    assert "forward" not in vars(model.model.layers[0])


def test_patch_mask_rows():
    model = tiny_llama(60)
    base, source = _ids(7, batch=2), _ids(8, batch=2)
    vals = acts.record(model, source, layer=1, positions=[[-1]] * 2, neurons=[0, 1, 2])
    mask = torch.tensor([[True, True, True], [False, False, False]])
    with acts.patch(model, layer=1, positions=[[-1]] * 2, values=vals, neurons=[0, 1, 2], mask=mask):
        got = model(input_ids=base).logits[:, -1]
    clean = model(input_ids=base).logits[:, -1]
    torch.testing.assert_close(got[1], clean[1], rtol=0, atol=1e-6)
    # the unmasked row did change: a patch that does nothing would pass the other checks
    assert not torch.allclose(got[0], clean[0], rtol=0, atol=1e-4)
    with acts.patch(model, layer=1, positions=[[-1]] * 2, values=vals, neurons=[0, 1, 2]):
        all_rows = model(input_ids=base).logits[:, -1]
    torch.testing.assert_close(got[0], all_rows[0], rtol=0, atol=1e-6)


# ---------------------------------------------------------------- pairs, rankings, sweeps


def _self_consistent_rows(model, tok, task):
    """Task rows where the 'expected' token is the tiny model's own prediction."""
    rows = build_task_rows(model, tok, [task])
    for r in rows:
        r["expected_token_id"] = r["predicted_token_id"]
        r["correct"] = True
    return rows


def test_make_pairs_rules():
    rows = [
        {"correct": True, "n_tokens": 5, "filler_positions": [2], "expected_token_id": 1},
        {"correct": True, "n_tokens": 5, "filler_positions": [2], "expected_token_id": 2},
        {"correct": True, "n_tokens": 5, "filler_positions": [2], "expected_token_id": 2},
        {"correct": False, "n_tokens": 5, "filler_positions": [2], "expected_token_id": 3},
        {"correct": True, "n_tokens": 6, "filler_positions": [2], "expected_token_id": 4},
    ]
    assert iv.make_pairs(rows, 256) == [(0, 1), (0, 2), (1, 0), (2, 0)]
    assert iv.make_pairs(rows, 2, seed=0) == iv.make_pairs(rows, 2, seed=0)
    assert len(iv.make_pairs(rows, 2)) == 2
    with pytest.raises(ValueError, match="n_pairs"):
        iv.make_pairs(rows, 0)


def test_rankings_and_k():
    assert [iv.neurons_for_k(k, 1536) for k in iv.DEFAULT_KS] == [15, 92, 184, 384, 768, 1152, 1536]
    assert iv.neurons_for_k(1, 40) == 1 and iv.neurons_for_k(0, 40) == 0
    with pytest.raises(ValueError, match="ks"):
        iv.neurons_for_k(101, 40)
    assert sorted(iv.random_ranking(10, 3)) == list(range(10)) and iv.random_ranking(10, 3) == iv.random_ranking(10, 3)
    # neuron 1 tracks the concept tokens, neuron 0 is anti-correlated weakly, neuron 2 constant
    v = torch.tensor([[0.1, 0.0, 1.0], [0.0, 5.0, 1.0], [0.2, 0.1, 1.0], [0.0, 4.0, 1.0]])
    order = iv.correlation_ranking([v], [[False, True, False, True]])
    assert order == [1, 0, 2]


def test_sweep_laws_on_tiny_model(tok):
    model = tiny_llama(len(tok), layers=4)
    task = "numbers/unit_conversion"
    rows = _self_consistent_rows(model, tok, task)
    common = dict(n_pairs=12, ks=(0, 50, 100), rankings=("random", "correlation"), batch_size=8)

    def sweep(layer, *, skip_early_layers=True, prefix_cache=True, **settings):
        cfg = IIAConfig(task=task, layer=str(layer), **{**common, **settings})
        return iv.iia_sweep(cfg, model, tok, task, layer, rows=rows, skip_early_layers=skip_early_layers,
                            prefix_cache=prefix_cache)

    # whole residual stream at the last position of the last layer: the source output exactly
    res = sweep(3, site="block_output", position="last")
    assert res["n_pairs"] == len(iv.make_pairs(rows, 12))
    for curve in res["curves"].values():
        assert curve[0] == 0.0 and curve[2] == 1.0
    # skipping early layers gives the same predictions as full forwards
    a = sweep(2, position="concept")
    b = sweep(2, position="concept", skip_early_layers=False, prefix_cache=False)
    assert a["predictions"] == b["predictions"] and a["curves"] == b["curves"]
    last = sweep(1, position="last")
    last_full = sweep(1, position="last", skip_early_layers=False, prefix_cache=False)
    assert last["predictions"] == last_full["predictions"]
    assert a["interventions"] == a["n_pairs"] * 3 * 2
    # a user ranking is used as given
    c = sweep(2, position="concept", rankings={"mine": [5, 4]})
    assert c["rankings"]["mine"][:3] == [5, 4, 0]
    with pytest.raises(ValueError, match="rankings"):
        sweep(2, rankings={"mine": [5, 5]})
    with pytest.raises(UsageError, match="--position: unknown value 'middle'"):
        IIAConfig(task=task, layer="2", position="middle")


def test_sweep_fast_path_exact_on_gpt2(tok):
    model = tiny_gpt2(len(tok), layers=3)
    task = "locations/capital"
    rows = _self_consistent_rows(model, tok, task)
    for i, r in enumerate(rows):  # every pair valid, whatever the random model predicts
        r["expected_token_id"] = i
    for layer, position in ((1, "concept"), (2, "last")):
        cfg = IIAConfig(task=task, layer=str(layer), n_pairs=10, ks=(25, 100), rankings="random", batch_size=8,
                        position=position)
        fast = iv.iia_sweep(cfg, model, tok, task, layer, rows=rows)
        slow = iv.iia_sweep(cfg, model, tok, task, layer, rows=rows, skip_early_layers=False, prefix_cache=False)
        assert fast["predictions"] == slow["predictions"]


def test_iia_score():
    assert iia_score([1, 2, 3], [1, 0, 3]) == {"iia": 2 / 3, "iia_ci": [0.0, 1.0], "n": 3, "n_success": 2, "n_total": 3}
    with pytest.raises(ValueError, match="references"):
        iia_score([1], [1, 2])
    with pytest.raises(ValueError, match="predictions"):
        iia_score([None], [1])


def test_task_tokenisation(tok):
    task = TASKS["locations/capital"]
    exp = expected_token_id(tok, task.prompt("France"), " Paris")
    assert tok.convert_ids_to_tokens([exp]) == ["Paris"]
    ids, pos = filler_positions(tok, task, "France")
    assert tok.convert_ids_to_tokens([ids[p] for p in pos]) == ["France"]


# ---------------------------------------------------------------- embedded model


@pytest.fixture(scope="module")
def embedded():
    # only the slow tests below use it; a broken embedded install fails them rather than skipping
    return iv.load_causal_lm("embedded")


@pytest.mark.slow
def test_embedded_sanity_laws(embedded):
    model, tk = embedded
    enc = [tk(TASKS["numbers/unit_conversion"].prompt(x))["input_ids"] for x in ("3", "7")]
    base, source = torch.tensor([enc[0]]), torch.tensor([enc[1]])
    clean = model(input_ids=base).logits[:, -1]
    own = _interchange(model, base, base, layer=5, neurons=list(range(0, 1536, 3)), site="mlp_activation")
    torch.testing.assert_close(own, clean, rtol=0, atol=1e-4)
    none = _interchange(model, base, source, layer=5, neurons=[], site="mlp_activation")
    torch.testing.assert_close(none, clean, rtol=0, atol=1e-4)  # logits_to_keep=1 vs full matmul
    full = _interchange(model, base, source, layer=10, site="block_output")
    torch.testing.assert_close(full, model(input_ids=source).logits[:, -1], rtol=0, atol=1e-4)
    assert tk.decode([int(clean.argmax())]) == "3" and tk.decode([int(full.argmax())]) == "7"


@pytest.mark.slow
def test_embedded_unit_conversion_layer0(embedded):
    model, tk = embedded
    rows = build_task_rows(model, tk, ["numbers/unit_conversion"])
    assert sum(r["correct"] for r in rows) == 9  # the model converts all nine
    cfg = IIAConfig(task="numbers/unit_conversion", layer="0", n_pairs=8, ks=(0, 100), rankings="random")
    res = iv.iia_sweep(cfg, model, tk, "numbers/unit_conversion", 0, rows=rows)
    assert res["position"] == "concept"
    # all layer-0 MLP neurons at the number's token carry the number; none: base answer stays
    assert res["curves"]["random"] == [0.0, 1.0]


def test_run_iia_takes_its_config(tok, tmp_path, monkeypatch):
    import json

    model, loaded = tiny_llama(len(tok), layers=4), []
    monkeypatch.setattr(iv, "load_causal_lm", lambda name: loaded.append(name) or (model, tok))
    monkeypatch.setattr(iv, "build_task_rows",
                        lambda lm, tok, tasks, **kw: _self_consistent_rows(lm, tok, tasks[0]))
    ranking = tmp_path / "mine.json"
    ranking.write_text(json.dumps({"mine": [5, 4]}))
    settings = dict(task="numbers/unit_conversion", layer="1,2", ks=[50, 100], n_pairs=6, position="last", seed=2,
                    batch_size=4)
    by_file = iv.run_iia(IIAConfig(rankings="random", ranking_file=str(ranking), out=str(tmp_path / "cfg"),
                                   **settings), progress=False)
    by_mapping = iv.run_iia(IIAConfig(rankings={"random": None, "mine": [5, 4]}, **settings), progress=False)

    def timeless(results):
        return [{k: v for k, v in r.items() if k not in ("seconds", "interventions_per_second")} for r in results]

    assert timeless(by_file) == timeless(by_mapping) and loaded == ["embedded", "embedded"]
    assert [(r["layer"], r["ks"], sorted(r["curves"])) for r in by_file] == [
        (1, [50, 100], ["mine", "random"]), (2, [50, 100], ["mine", "random"])]
    assert timeless(json.loads((tmp_path / "cfg/iia.json").read_text())) == timeless(by_file)
    with pytest.raises(UsageError, match="--layer"):
        IIAConfig(task="numbers/unit_conversion", layer=[])
    with pytest.raises(UsageError, match="--rankings: unknown value 'best'"):
        IIAConfig(task="numbers/unit_conversion", layer="1", rankings="random,best")
