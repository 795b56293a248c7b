"""P11: the ``attribution`` reference interpreter (ablation node scores + role heuristics, no LM) on
the ``rasp`` programs, under the ``aligned`` and ``rotated`` variants: ``find_circuit``'s
role_accuracy, role_f1, node_precision, node_recall and node_auroc with n and 95 % bootstrap
intervals, beside the majority-role floor, on the test split (``split`` != dev) and on the library
programs. Writes benchmarks/results/p11_rasp_attribution.json and prints a Markdown table.

    nice -n 5 python benchmarks/p11_rasp_attribution.py [--every 1]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from findbench.interpret.whitebox import CIRCUIT_METRICS as METRICS  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=1, help="score every k-th test program (default: 1, all)")
    ap.add_argument("--out", default="benchmarks/results/p11_rasp_attribution.json", help="result file")
    args = ap.parse_args()
    from tqdm.auto import tqdm

    from findbench import _io
    from findbench.find.rasp import attribution, circuit, rows, truth

    all_rows = rows.generate(0, progress=False)
    splits = {"test": [r for r in all_rows if r["split"] != "dev"][:: args.every],
              "library": [r for r in all_rows if r["subcategory"] == "library"]}
    result: dict = {"programs": {k: len(v) for k, v in splits.items()}}
    table = ["| programs | variant | interpreter | " + " | ".join(METRICS) + " | seconds |",
             "|" + "---|" * (len(METRICS) + 4)]
    for split, sel in splits.items():
        for variant in ("aligned", "rotated"):
            start = time.perf_counter()
            refs = [truth.for_variant(r["components"], r["function_id"], variant) for r in sel]
            preds = {"attribution": [attribution.predict(r, variant)
                                     for r in tqdm(sel, desc=f"attribution {split} {variant}")],
                     "majority_role": [circuit.floor_predictions(c, "majority_role") for c in refs]}
            seconds = time.perf_counter() - start
            for name, pred in preds.items():
                got = circuit.score_circuit(pred, refs)
                got.pop("per_function")
                result[f"{split}/{variant}/{name}"] = got | {"seconds": seconds}
                cells = [f"{got[m]:.3f} [{got[m + '_ci'][0]:.2f}, {got[m + '_ci'][1]:.2f}] n={got[m + '_n']}"
                         for m in METRICS]
                table.append(f"| {split} ({len(sel)}) | {variant} | {name} | " + " | ".join(cells)
                             + f" | {seconds if name == 'attribution' else 0:.0f} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    _io.atomic_write_text(Path(args.out), json.dumps(result, indent=1, sort_keys=True) + "\n")
    print("\n".join(table))


if __name__ == "__main__":
    main()
