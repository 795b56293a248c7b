"""P2: NMSE of 1000 interpretations, sandboxed vs unsandboxed in-process exec (goal: <= 3x).

Both procedures score the same (ground truth, interpretation) pairs on FIND's 256-point grid with
the same rules (last top-level ``def``, per-point exceptions, ``random``/``numpy.random`` seeded 0
before each program) and must give identical NMSE values.

* reference: ``exec`` of both programs in this process, no isolation (what FIND's own scripts
  and most notebooks do);
* ours: ``findbench.find.code_scoring.score_nmse``, every program in its own confined child of a
  fork server (pool start-up included: "cold"), and the same on an already running ``Sandbox``
  ("warm").

It also reports the sandbox's fixed cost per program: the wall time of 400 trivial programs
(``def f(x): return x`` on one input) on one warm fork server, divided by 400; and a service
call's round trip (what each white-box tool call from the code tool adds): one program making
1,000 calls of a host function, its wall time less one program's cost, divided by 1,000.

Functions: ``findbench.find.numeric.generate(1000, seed=0)``. Interpretations are
perturbations of the ground truth: exact copies, scaled/shifted copies behind a helper, and a
few that raise on part of the grid or return NaN.

    python benchmarks/p2_sandbox.py [--n 1000] [--repeats 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import platform
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from findbench._io import atomic_write_json  # noqa: E402
from findbench.find import numeric  # noqa: E402
from findbench.find.code_scoring import NMSE_GRID, nmse, score_nmse  # noqa: E402
from findbench.sandbox import Sandbox, SandboxLimits  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "p2_sandbox.json"


def load_ground_truths(n: int, seed: int) -> tuple[list[str], str]:
    rows = numeric.generate(n, seed=seed, progress=False)
    return [row["code"] for row in rows], f"findbench.find.numeric.generate({n}, seed={seed})"


def make_interpretations(codes: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i, code in enumerate(codes):
        kind = i % 10
        if kind < 4:  # the ground truth itself (a perfect interpretation)
            out.append(code)
        elif kind < 9:  # a scaled / shifted copy behind helpers: the last def is the interpretation
            a, b = round(rng.uniform(0.8, 1.2), 3), round(rng.uniform(-3, 3), 3)
            out.append(
                f"{code}\n\ndef scale(y):\n    return {a} * y\n\ndef interpretation(x):\n"
                f"    return scale(function(x)) + {b}\n"
            )
        elif i % 20 == 9:  # raises on half the grid
            out.append(
                f"{code}\n\ndef interpretation(x):\n    if x < 0:\n        raise ValueError(x)\n"
                "    return function(x)\n"
            )
        else:  # returns NaN
            out.append("def interpretation(x):\n    return float('nan')\n")
    return out


# ----------------------------------------------------------------------------- reference


def _last_def(code: str) -> str | None:
    name = None
    for node in ast.parse(code).body:
        if isinstance(node, ast.FunctionDef):
            name = node.name
    return name


def _values_in_process(code: str, entry: str | None, grid: list[float]) -> list | None:
    random.seed(0)
    np.random.seed(0)
    ns: dict = {"__name__": "__findbench_program__"}
    try:
        name = entry or _last_def(code)
        exec(compile(code, "<program>", "exec"), ns)  # noqa: S102 - the unsandboxed reference
        fn = ns[name]
    except Exception:
        return None
    values = []
    for x in grid:
        try:
            v = fn(x)
            values.append(
                float(v) if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) else None
            )
        except Exception:
            values.append(None)
    return values


def nmse_in_process(preds: list[str], refs: list[str]) -> list[float]:
    grid = list(NMSE_GRID)
    scores = []
    for pred, ref in zip(preds, refs):
        gt = _values_in_process(ref, "function", grid)
        p = _values_in_process(pred, None, grid)
        scores.append(math.inf if p is None else nmse(gt, p))
    return scores


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    refs, source = load_ground_truths(args.n, args.seed)
    preds = make_interpretations(refs, args.seed)

    t_ref, t_cold, t_warm = [], [], []
    ref_scores = sandbox_scores = None
    for _ in range(args.repeats):
        start = time.perf_counter()
        ref_scores = nmse_in_process(preds, refs)
        t_ref.append(time.perf_counter() - start)

        start = time.perf_counter()
        out = score_nmse(preds, refs, limits=SandboxLimits(workers=args.workers))
        t_cold.append(time.perf_counter() - start)
        sandbox_scores = out["nmse"]

    # Overhead per CPU: the same with a single worker (once).
    start = time.perf_counter()
    one = score_nmse(preds, refs, limits=SandboxLimits(workers=1))
    t_one = time.perf_counter() - start

    with Sandbox(SandboxLimits(workers=1)) as box:
        box.run(["def f(x):\n    return x\n"], [[0]])  # start the fork server
        start = time.perf_counter()
        box.run(["def f(x):\n    return x\n"] * 400, [[0]] * 400)
        per_program_ms = (time.perf_counter() - start) / 400 * 1000
        start = time.perf_counter()  # a service call's round trip (program -> fork server -> here and back)
        [calls] = box.run(["for i in range(1000):\n    echo([i] * 8)\n"], [[]], entry=None, services={"echo": list})
        per_call_ms = ((time.perf_counter() - start) * 1000 - per_program_ms) / 1000

    with Sandbox(SandboxLimits(workers=args.workers)) as box:
        score_nmse(preds[:8], refs[:8], sandbox=box)  # start the workers
        isolation = box.isolation
        isolation_level = box.isolation_level
        for _ in range(args.repeats):
            start = time.perf_counter()
            warm = score_nmse(preds, refs, sandbox=box)
            t_warm.append(time.perf_counter() - start)
    same = (
        all(
            (a == b) or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
            for a, b in zip(ref_scores, sandbox_scores)
        )
        and warm["nmse"] == sandbox_scores
        and one["nmse"] == sandbox_scores
    )

    ref_t, cold_t, warm_t = min(t_ref), min(t_cold), min(t_warm)
    result = {
        "benchmark": "p2_sandbox",
        "n_pairs": args.n,
        "programs_run": 2 * args.n,
        "grid_points": len(NMSE_GRID),
        "functions_source": source,
        "workers": args.workers,
        "repeats": args.repeats,
        "timing": "min over repeats, seconds",
        "unsandboxed_in_process_s": round(ref_t, 4),
        "sandboxed_cold_s": round(cold_t, 4),
        "sandboxed_warm_s": round(warm_t, 4),
        "ratio_cold": round(cold_t / ref_t, 3),
        "ratio_warm": round(warm_t / ref_t, 3),
        "sandboxed_cold_1_worker_s": round(t_one, 4),
        "ratio_cold_1_worker": round(t_one / ref_t, 3),
        "goal_ratio": 3.0,
        "meets_goal": cold_t / ref_t <= 3.0,
        "identical_nmse": bool(same),
        "success_rate": out["success_rate"],
        "n_failed": out["n_failed"],
        "per_program_overhead_ms": round(per_program_ms, 3),
        "service_call_ms": round(per_call_ms, 4) if calls.ok else None,
        "isolation_level": isolation_level,
        "isolation": isolation,
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()},
        "all_timings_s": {"unsandboxed": t_ref, "sandboxed_cold": t_cold, "sandboxed_warm": t_warm},
    }
    atomic_write_json(args.out, result)
    print(f"functions: {source}")
    print(f"unsandboxed in-process: {ref_t:.3f} s for {args.n} pairs ({2 * args.n} programs x {len(NMSE_GRID)} points)")
    print(f"sandboxed (cold pool):  {cold_t:.3f} s  -> ratio {cold_t / ref_t:.2f}x (goal <= 3x)")
    print(f"sandboxed (warm pool):  {warm_t:.3f} s  -> ratio {warm_t / ref_t:.2f}x")
    print(f"sandboxed, 1 worker:    {t_one:.3f} s  -> ratio {t_one / ref_t:.2f}x (single run)")
    print(f"fixed cost per program (1 warm fork server): {per_program_ms:.2f} ms; isolation {isolation_level}")
    print(f"one service call (the code tool's round trip): {per_call_ms:.3f} ms")
    print(f"identical NMSE values: {same}; success_rate {out['success_rate']:.3f}, n_failed {out['n_failed']}")
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
