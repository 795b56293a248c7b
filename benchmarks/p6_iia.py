"""P6: IIA@K sweep, findbench vs pyvene, on the same model, pairs and neurons in one run.

Ours: :func:`findbench.neuron_explanations.interventions.iia_sweep` (one clean pass per input, shared
prefix KV cache, early blocks skipped, all K of a ranking in one batched forward).
Reference: pyvene (PyPI) ``IntervenableModel`` with a ``VanillaIntervention`` on the MLP
activation (input of ``mlp.down_proj``, registered as a pyvene component since pyvene's own
Llama ``mlp_activation`` is the ``act_fn`` output, before the ``up_proj`` product), one
model per K, the pairs in batches of the same size, source and base runs per batch (its
standard usage).

Checks that both give identical IIA values (and per-intervention predictions), prints the
interventions-per-second ratio and writes ``benchmarks/results/p6_iia.json``.

    python benchmarks/p6_iia.py [--model embedded] [--task numbers/comparison] [--layer 0]
                                [--n-pairs 256] [--rankings random,correlation]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import torch

from findbench.models import load_causal_lm
from findbench.neuron_explanations import interventions as iv
from findbench.neuron_explanations.config import IIAConfig
from findbench.neuron_explanations.intervention_tasks import build_task_rows

RESULTS = Path(__file__).resolve().parent / "results" / "p6_iia.json"


def pyvene_sweep(model, tokenizer, rows, res, *, layer, batch_size):
    """The same sweep with pyvene; returns (curves, predictions, seconds)."""
    import pyvene as pv
    from pyvene.models.constants import CONST_INPUT_HOOK

    mtype = type(model)
    if mtype not in pv.type_to_module_mapping:
        raise SystemExit(f"pyvene has no mapping for {mtype.__name__}")
    prefix = "model.layers" if model.config.model_type != "gpt2" else "transformer.h"
    module = f"{prefix}[%s].mlp.down_proj" if prefix == "model.layers" else f"{prefix}[%s].mlp.c_proj"
    pv.type_to_module_mapping[mtype]["findbench_mlp_activation"] = (module, CONST_INPUT_HOOK)
    pv.type_to_dimension_mapping[mtype]["findbench_mlp_activation"] = (
        ("intermediate_size",) if prefix == "model.layers" else ("n_inner",)
    )
    pairs = [tuple(p) for p in res["pair_indices"]]
    tokens = {i: tokenizer(rows[i]["prompt"])["input_ids"] for i in {x for p in pairs for x in p}}

    def positions(b):
        if res["position"] == "concept":
            return list(rows[b]["filler_positions"])
        return [len(tokens[b]) - 1]

    groups = {}
    for p_i, (b, s) in enumerate(pairs):
        groups.setdefault(len(tokens[b]), []).append(p_i)
    curves, preds = {}, {}
    t0 = time.perf_counter()
    for name, order in res["rankings"].items():
        curves[name], preds[name] = [], []
        for n in res["n_neurons"]:
            neurons = list(order[:n])
            out = [0] * len(pairs)
            if n == 0:
                cfg_model = None
            else:
                config = pv.IntervenableConfig(
                    [{"layer": layer, "component": "findbench_mlp_activation", "unit": "pos",
                      "intervention_type": pv.VanillaIntervention}]
                )
                cfg_model = pv.IntervenableModel(config, model)
                cfg_model.disable_model_gradients()
            for _, pidx in sorted(groups.items()):
                for s0 in range(0, len(pidx), batch_size):
                    chunk = pidx[s0 : s0 + batch_size]
                    base = torch.tensor([tokens[pairs[p][0]] for p in chunk])
                    src = torch.tensor([tokens[pairs[p][1]] for p in chunk])
                    with torch.no_grad():
                        if cfg_model is None:
                            logits = model(input_ids=base).logits[:, -1]
                        else:
                            locs = [positions(pairs[p][0]) for p in chunk]
                            _, cf = cfg_model(
                                {"input_ids": base},
                                [{"input_ids": src}],
                                unit_locations={"sources->base": ([locs], [locs])},
                                subspaces=[[neurons] * len(chunk)],
                            )
                            logits = cf.logits[:, -1]
                    for j, p in enumerate(chunk):
                        out[p] = int(logits[j].argmax())
            want = res["expected"]
            curves[name].append(sum(int(a == b) for a, b in zip(out, want)) / len(pairs))
            preds[name].append(out)
    return curves, preds, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--task", default="numbers/comparison")
    ap.add_argument("--layer", type=int, default=0)
    ap.add_argument("--n-pairs", type=int, default=256)
    ap.add_argument("--rankings", default="random,correlation")
    ap.add_argument("--position", default="auto")
    ap.add_argument(
        "--batch-size", type=int, default=64, help="rows per forward pass (ours); pyvene gets batch-size/len(ks) pairs"
    )
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    model, tok = load_causal_lm(args.model)  # float32, eval mode
    rows = build_task_rows(model, tok, [args.task])
    cfg = IIAConfig(task=args.task, layer=str(args.layer), model=args.model, n_pairs=args.n_pairs,
                    rankings=args.rankings, position=args.position, batch_size=args.batch_size)
    ours = iv.iia_sweep(cfg, model, tok, args.task, args.layer, rows=rows)
    per_batch = max(1, args.batch_size // len(ours["ks"]))
    ref_curves, ref_preds, ref_seconds = pyvene_sweep(model, tok, rows, ours, layer=args.layer, batch_size=per_batch)
    ref_ips = ours["interventions"] / ref_seconds
    mismatched = sum(
        int(a != b)
        for name in ours["rankings"]
        for k_i in range(len(ours["ks"]))
        for a, b in zip(ours["predictions"][name][k_i], ref_preds[name][k_i])
    )
    result = {
        "benchmark": "p6_iia",
        "model": args.model,
        "task": args.task,
        "layer": args.layer,
        "position": ours["position"],
        "n_pairs": ours["n_pairs"],
        "ks": ours["ks"],
        "rankings": list(ours["rankings"]),
        "interventions": ours["interventions"],
        "ours": {
            "seconds": ours["seconds"],
            "interventions_per_second": ours["interventions_per_second"],
            "curves": ours["curves"],
        },
        "pyvene": {"seconds": ref_seconds, "interventions_per_second": ref_ips, "curves": ref_curves},
        "speedup": ours["interventions_per_second"] / ref_ips,
        "identical_iia": ours["curves"] == ref_curves,
        "mismatched_predictions": mismatched,
        "machine": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "threads": args.threads,
            "platform": platform.platform(),
        },
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    from findbench._io import atomic_write_json

    atomic_write_json(args.out, result)
    print(
        f"{args.task} layer {args.layer} ({ours['position']}), {ours['n_pairs']} pairs, "
        f"{ours['interventions']} interventions"
    )
    print(f"ours:   {ours['seconds']:.1f} s  {ours['interventions_per_second']:.1f} interventions/s  {ours['curves']}")
    print(f"pyvene: {ref_seconds:.1f} s  {ref_ips:.1f} interventions/s  {ref_curves}")
    print(
        f"speedup {result['speedup']:.2f}x; identical IIA: {result['identical_iia']}; "
        f"mismatched predictions: {mismatched}"
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
