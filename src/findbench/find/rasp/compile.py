"""Build-time only: compile a program spec with tracr (the ``findbench[rasp]`` extra) into plain
arrays. Nothing at run time imports this module.

The arrays are tracr's weights as compiled, per layer in TransformerLens's shapes
(``W_Q``/``W_K``/``W_V`` ``[heads, d_model, d_head]``, ``W_O`` ``[heads, d_head, d_model]``,
``W_in`` ``[d_model, d_mlp]``, ``W_out`` ``[d_mlp, d_model]``), the token and position
embeddings, and the unembedding read off the output variable's own residual directions. tracr
labels each expression with a process-wide counter, so the counter is reset before each program
and every label is then rewritten to the spec's variable name (``v3:2``): the same spec gives the
same weights and labels in any process.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import re
import tempfile
import time
from pathlib import Path

import numpy as np

from findbench import _io
from findbench.find.rasp import programs as P


def to_rasp(program: dict):
    """The spec as a tracr RASP expression (the output expression)."""
    from tracr.rasp import rasp

    env = {"tokens": rasp.tokens, "indices": rasp.indices}
    for op in program["ops"]:
        kind, args = op["op"], P._args(op)
        if kind == "map":
            f = P._fn("map", op["fn"])
            expr = rasp.Map(lambda x, f=f, args=args: f(x, *args), env[op["x"]], simplify=False)
        elif kind == "sequence_map":
            f = P._fn("sequence_map", op["fn"])
            expr = rasp.SequenceMap(lambda x, y, f=f, args=args: f(x, y, *args), env[op["x"]], env[op["y"]])
        elif kind == "linear_sequence_map":
            expr = rasp.LinearSequenceMap(env[op["x"]], env[op["y"]], op["a"], op["b"])
        elif kind == "select":
            f = P._fn("select", op["pred"])
            expr = rasp.Select(env[op["keys"]], env[op["queries"]], lambda k, q, f=f, args=args: f(k, q, *args))
        elif kind == "selector_width":
            expr = rasp.SelectorWidth(env[op["sel"]])
        else:
            default = 0 if op.get("enc") == "numerical" else None
            expr = rasp.Aggregate(env[op["sel"]], env[op["x"]], default=default)
        expr = expr.named(op["name"])
        if kind != "select":
            enc = "numerical" if kind == "linear_sequence_map" else op.get("enc", "categorical")
            expr = rasp.numerical(expr) if enc == "numerical" else rasp.categorical(expr)
        env[op["name"]] = expr
    return env[program["output"]]


def _canonical(label: str) -> str:
    """``v3_17:2`` → ``v3:2``; ``v3_17_selector_width_attn_output`` → ``v3:width_attn``."""
    label = re.sub(r"^(v\d+)_\d+_selector_width_attn_output", r"\1:width_attn", label)
    return re.sub(r"^(v\d+)_\d+", r"\1", label)


def compile_program(program: dict, domain: dict) -> dict:
    """Compile one spec; returns ``{"arrays": {name: float32 array}, "meta": {...}}``."""
    from tracr.compiler import compiling
    from tracr.rasp import rasp

    rasp.RASPExpr._ids = itertools.count(1)  # labels from a fresh counter: same spec, same labels
    expr = to_rasp(program)
    model = compiling.compile_rasp_to_model(expr, vocab=set(domain["vocab"]), max_seq_len=domain["max_len"],
                                            compiler_bos=domain["bos"])
    cfg = model.model_config
    params = {k: {p: np.asarray(v, dtype=np.float32) for p, v in d.items()} for k, d in model.params.items()}
    labels = [_canonical(lab) for lab in model.residual_labels]
    H, dk = cfg.num_heads, cfg.key_size
    arrays = {"embed": params["token_embed"]["embeddings"], "pos_embed": params["pos_embed"]["embeddings"]}
    for layer in range(cfg.num_layers):
        pre = f"transformer/layer_{layer}"
        for name in ("query", "key", "value", "linear"):
            assert not params[f"{pre}/attn/{name}"]["b"].any(), "tracr attention biases are zero"
        arrays[f"{layer}.W_Q"] = params[f"{pre}/attn/query"]["w"].reshape(-1, H, dk).transpose(1, 0, 2)
        arrays[f"{layer}.W_K"] = params[f"{pre}/attn/key"]["w"].reshape(-1, H, dk).transpose(1, 0, 2)
        arrays[f"{layer}.W_V"] = params[f"{pre}/attn/value"]["w"].reshape(-1, H, dk).transpose(1, 0, 2)
        arrays[f"{layer}.W_O"] = params[f"{pre}/attn/linear"]["w"].reshape(H, dk, -1)
        arrays[f"{layer}.W_in"] = params[f"{pre}/mlp/linear_1"]["w"]
        arrays[f"{layer}.b_in"] = params[f"{pre}/mlp/linear_1"]["b"]
        arrays[f"{layer}.W_out"] = params[f"{pre}/mlp/linear_2"]["w"]
        arrays[f"{layer}.b_out"] = params[f"{pre}/mlp/linear_2"]["b"]
    out_name = program["output"]
    numerical = P.encoding(program, out_name) == "numerical"
    if numerical:
        out_labels, out_values = [out_name], None
    else:
        encoding_out = model.output_encoder.encoding_map
        out_values = sorted(encoding_out, key=encoding_out.get)
        out_labels = [f"{out_name}:{v}" for v in out_values]
    arrays["W_U"] = np.stack([np.eye(len(labels), dtype=np.float32)[labels.index(lab)] for lab in out_labels], 1)
    encoding = model.input_encoder.encoding_map
    meta = {
        "n_layers": cfg.num_layers, "n_heads": H, "d_head": dk, "d_mlp": cfg.mlp_hidden_size,
        "labels": labels, "input_tokens": sorted(encoding, key=encoding.get),
        "output_values": out_values, "numerical": numerical,
    }
    return {"arrays": arrays, "meta": meta, "tracr_model": model}


def cache_key(program: dict, domain: dict) -> str:
    return hashlib.sha256(json.dumps([program, domain], sort_keys=True).encode()).hexdigest()[:20]


#: Inputs per program on which tracr's own jax forward is recorded beside the weights.
N_TRACR_CHECKS = 8


def tracr_checks(model, domain: dict) -> dict:
    """tracr's own jax forward on ``N_TRACR_CHECKS`` seeded inputs of the longest length, in one
    batch (jax compiles its ops once per shape: one shape keeps this cheap)."""
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    vocab, n = domain["vocab"], domain["max_len"]
    if "distinct" in domain.get("preconditions", []):
        n = min(n, len(vocab))
        inputs = [[vocab[i] for i in rng.permutation(len(vocab))[:n]] for _ in range(N_TRACR_CHECKS)]
    else:
        inputs = [[vocab[i] for i in rng.integers(0, len(vocab), n)] for _ in range(N_TRACR_CHECKS)]
    ids = jnp.array([model.input_encoder.encode([domain["bos"], *x]) for x in inputs])
    out = np.asarray(model.forward(model.params, ids).unembedded_output)
    outputs = [model.output_encoder.decode(row.tolist())[1:] for row in out]
    return {"inputs": inputs, "outputs": outputs}


def _compile_one(item: dict, cache_dir: str) -> tuple[str, str | None]:
    """Compile into ``cache_dir/<key>.npz`` + ``.json`` (with tracr's outputs on a few inputs), or
    record why it failed in ``<key>.failed``."""
    key = cache_key(item["program"], item["domain"])
    base = Path(cache_dir) / key
    base.parent.mkdir(parents=True, exist_ok=True)
    if base.with_suffix(".json").exists() or base.with_suffix(".failed").exists():
        return key, None
    start = time.perf_counter()
    try:
        made = compile_program(item["program"], item["domain"])
        if item["tier"] == "library":  # tracr's jax forward costs as much as the compile: a sample suffices
            made["meta"]["tracr_checks"] = tracr_checks(made["tracr_model"], item["domain"])
    except Exception as e:  # tracr refuses some programs (NotImplementedError, ValueError, …): count them
        _io.atomic_write_text(base.with_suffix(".failed"), f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
        return key, "failed"
    made["meta"]["compile_seconds"] = round(time.perf_counter() - start, 2)
    with tempfile.NamedTemporaryFile(dir=cache_dir, suffix=".npz", delete=False) as f:
        np.savez_compressed(f, **made["arrays"])
    os.replace(f.name, base.with_suffix(".npz"))
    _io.atomic_write_text(base.with_suffix(".json"), json.dumps(made["meta"], default=_plain))
    return key, None


def _plain(x):
    return x.item() if hasattr(x, "item") else str(x)


def compile_all(items: list[dict], cache_dir: str | os.PathLike, jobs: int = 1, progress: bool = True) -> None:
    """Compile every item not yet in ``cache_dir`` (``jobs`` processes, a progress bar)."""
    from tqdm.auto import tqdm

    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    def done(it):
        base = Path(cache_dir) / cache_key(it["program"], it["domain"])
        return base.with_suffix(".json").exists() or base.with_suffix(".failed").exists()

    todo = sorted((it for it in items if not done(it)), key=lambda it: _priority(it, items))
    bar = tqdm(total=len(todo), desc="compiling RASP programs", disable=not progress)
    if jobs <= 1:
        for it in todo:
            _compile_one(it, str(cache_dir))
            bar.update()
    else:
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(jobs) as pool:
            for _ in pool.imap_unordered(functools.partial(_compile_star, cache_dir=str(cache_dir)), todo):
                bar.update()
    bar.close()


def _priority(item: dict, items: list[dict]) -> tuple:
    """Compile order: the library, then families and samples interleaved, so that a partial
    compile still covers every tier and family."""
    rank = {"library": 0, "family": 1, "sampled": 1}[item["tier"]]
    within = [it for it in items if it["tier"] == item["tier"] and it["family"] == item["family"]].index(item)
    return rank, within // 8 if item["tier"] == "sampled" else within, item["tier"] != "family"


def _compile_star(item, cache_dir):
    return _compile_one(item, cache_dir)
