"""P1: building the 1000 FIND numeric functions, and our batched MLP fit vs FIND's recipe.

In one run:
1. time ``findbench.find.numeric.generate(1000)`` (150 MLP approximations fitted at once);
2. on the first ``--sample`` MLP functions of that build, run FIND's reference recipe (one
   MLP at a time, Adam lr 0.01, 10,000 full-batch epochs on the same 10,000 points) and
   compare time and mean squared error with the weights our build served.

Prints the ratios and writes ``benchmarks/results/p1_numeric_build.json``.
Usage: ``python benchmarks/p1_numeric_build.py [--sample 5] [--reference-epochs 10000] [--seed 0]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "p1_numeric_build.json"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="functions to build (FIND: 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sample", type=int, default=5, help="MLP functions to refit with the reference recipe")
    parser.add_argument("--reference-epochs", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    import torch

    from findbench._io import atomic_write_json
    from findbench.find import mlp, numeric

    torch.set_num_threads(1)

    t0 = time.perf_counter()
    rows = numeric.generate(args.n, seed=args.seed, progress=False)
    build_s = time.perf_counter() - t0
    mlp_rows = [r for r in rows if r["subcategory"] == "mlp"]
    print(f"build: {len(rows)} functions ({len(mlp_rows)} MLPs) in {build_s:.1f} s")

    sample = mlp_rows[: args.sample]
    per_function = []
    ref_total = 0.0
    for r in sample:
        p = json.loads(r["params"])
        x = np.linspace(r["domain_low"], r["domain_high"], numeric.MLP_TRAIN_POINTS)
        y = numeric.make_function({**p, "variant": "clean", "mlp": None})(x)
        served = numeric.make_function(r)(x)
        ours_mse = float(np.mean((served - y) ** 2))
        t1 = time.perf_counter()
        ref = mlp.reference_fit(x, y, seed=args.seed, epochs=args.reference_epochs)
        ref_s = time.perf_counter() - t1
        ref_total += ref_s
        item = {
            "function_id": r["function_id"],
            "name": r["name"],
            "variance": float(np.var(y)),
            "ours_mse": ours_mse,
            "reference_mse": ref["mse"],
            "reference_s": ref_s,
            "ours_le_reference": ours_mse <= ref["mse"],
        }
        per_function.append(item)
        print(
            f"  {r['function_id']} {r['name']:<22} ours mse {ours_mse:.4g}  reference mse {ref['mse']:.4g}"
            f"  ({ref_s:.1f} s)  {'ok' if item['ours_le_reference'] else 'WORSE'}"
        )

    # our fit on the sample alone (same recipe as the build, only these functions)
    if sample:
        xs = np.stack([np.linspace(r["domain_low"], r["domain_high"], numeric.MLP_TRAIN_POINTS) for r in sample])
        ys = np.stack(
            [
                numeric.make_function({**json.loads(r["params"]), "variant": "clean", "mlp": None})(xs[k])
                for k, r in enumerate(sample)
            ]
        )
        t2 = time.perf_counter()
        mlp.fit_mlps(xs, ys, seed=args.seed)
        ours_sample_s = time.perf_counter() - t2
    else:
        ours_sample_s = 0.0

    ref_per_mlp = ref_total / max(len(sample), 1)
    est_ref_all = ref_per_mlp * len(mlp_rows)
    result = {
        "benchmark": "p1_numeric_build",
        "n_functions": len(rows),
        "n_mlp": len(mlp_rows),
        "seed": args.seed,
        "build_s": build_s,
        "reference_epochs": args.reference_epochs,
        "reference_s_per_mlp": ref_per_mlp,
        "reference_s_all_mlps_estimated": est_ref_all,
        "speedup_build_vs_reference_mlps": est_ref_all / build_s if build_s else None,
        "sample": len(sample),
        "ours_sample_fit_s": ours_sample_s,
        "speedup_sample_fit": ref_total / ours_sample_s if ours_sample_s else None,
        "all_ours_le_reference": all(i["ours_le_reference"] for i in per_function),
        "mse_ratio_ours_over_reference": [
            i["ours_mse"] / i["reference_mse"] if i["reference_mse"] else None for i in per_function
        ],
        "per_function": per_function,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads()},
    }
    print(
        f"reference recipe: {ref_per_mlp:.1f} s per MLP -> ~{est_ref_all / 60:.1f} min for {len(mlp_rows)} MLPs; "
        f"our whole build: {build_s:.1f} s (x{result['speedup_build_vs_reference_mlps']:.0f}); "
        f"sample fit: {ours_sample_s:.2f} s vs {ref_total:.1f} s (x{(result['speedup_sample_fit'] or 0):.0f})"
    )
    print(f"our MSE <= reference MSE on all {len(sample)} sampled functions: {result['all_ours_le_reference']}")
    atomic_write_json(args.out, result)
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
