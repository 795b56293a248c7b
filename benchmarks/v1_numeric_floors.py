"""How much of FIND's numeric code metric needs no understanding: the share of numeric functions
whose code built only from observed outputs passes NMSE < 0.1.

    python benchmarks/v1_numeric_floors.py [--limit N] [--seed 0]

For each function (seed-0 procedural rows): call it on K evenly spaced inputs over [-128, 128]
(as the ``observed`` interpreter does), fit each floor of :mod:`findbench.interpret.floors`
(a constant, a least-squares line, linear interpolation) and score it with the sandboxed NMSE
against the ground truth, as ``findbench evaluate`` does. Writes
``benchmarks/results/v1_numeric_floors.json`` (pass rates overall and per subcategory)."""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from findbench.find.code_scoring import NMSE_THRESHOLD, score_nmse
from findbench.find.rows import load_rows
from findbench.interpret.calls import FunctionRunner
from findbench.interpret.floors import NUMERIC_FLOORS, numeric_floor_codes, observed_plan
from findbench.interpret.protocol import Command

OUT = Path(__file__).resolve().parent / "results" / "v1_numeric_floors.json"
#: (floor, calls): the measurements of the issue that asked for floors, and the observed interpreter's default.
PLANS = (("constant", 20), ("line", 20), ("interpolation", 40), ("best", 40))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="first N numeric functions (default: all 1000)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    start = time.perf_counter()
    rows = load_rows("numeric", seed=args.seed)[: args.limit]
    results: dict[str, dict] = {}
    for floor, k in PLANS:
        codes, refs, owners = [], [], []
        for i, row in enumerate(rows):
            plan = observed_plan(row, [], calls=k)
            _, record = FunctionRunner(row, seed=args.seed).run(Command(text="plan", inputs=tuple(plan)))
            fitted = numeric_floor_codes(list(zip(record["inputs"], record["outputs"])))
            for name in (NUMERIC_FLOORS if floor == "best" else (floor,)):
                if name in fitted:
                    codes.append(fitted[name])
                    refs.append(row["code"])
                    owners.append(i)
        nmse = score_nmse(codes, refs, progress=True)["nmse"]
        best: dict[int, float] = {}
        for i, value in zip(owners, nmse):
            best[i] = min(best.get(i, float("inf")), value)
        passed = {i for i, v in best.items() if v < NMSE_THRESHOLD}
        by_sub = Counter(rows[i]["subcategory"] for i in range(len(rows)))
        passed_sub = Counter(rows[i]["subcategory"] for i in passed)
        results[f"{floor}@{k}"] = {
            "calls": k, "pass_rate": len(passed) / len(rows), "n": len(rows),
            "by_subcategory": {s: {"pass_rate": passed_sub[s] / n, "n": n} for s, n in sorted(by_sub.items())},
        }
        print(f"{floor} of {k} calls: {len(passed) / len(rows):.1%} pass NMSE < {NMSE_THRESHOLD}", flush=True)
    out = {"benchmark": "v1_numeric_floors", "seed": args.seed, "functions": len(rows), "results": results,
           "paper_gpt4_nmse_success": 0.33, "seconds": round(time.perf_counter() - start, 1)}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
