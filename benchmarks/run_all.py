"""Run every findbench benchmark in turn (each writes benchmarks/results/<name>.json).

    python benchmarks/run_all.py [--only p1,p3] [--quick]

Each benchmark measures findbench against the reference procedure in the same run and
prints its ratios; run them on an otherwise idle machine (they share its cores).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: name -> (script, extra arguments for --quick)
BENCHMARKS = {
    "p1": ("p1_numeric_build.py", ["--sample", "2", "--reference-epochs", "2000"]),
    "p2": ("p2_sandbox.py", ["--n", "300", "--repeats", "1"]),
    "p3": ("p3_judge.py", ["--functions", "2"]),
    "p4": ("p4_entities.py", ["--neurons", "5"]),
    "p5": ("p5_evidence.py", ["--total-tokens", "20000", "--n-latents", "50"]),
    "p6": ("p6_iia.py", ["--n-pairs", "32"]),
    "p7": ("p7_interpret_vllm.py", ["--limit", "2", "--rounds", "2"]),
    "p8": ("p8_autointerp_vllm.py", ["--n-latents", "8", "--total-tokens", "20000"]),
    "p9": ("p9_protocol_parse.py", ["--sizes", "500,1000", "--repeats", "1"]),
    "p10": ("p10_rasp.py", ["--skip-build"]),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated subset of " + ",".join(BENCHMARKS))
    ap.add_argument("--quick", action="store_true", help="smaller workloads (smoke run; ratios are noisier)")
    args = ap.parse_args(argv)
    chosen = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = [b for b in chosen if b not in BENCHMARKS]
    if unknown:
        ap.error(f"--only: unknown benchmark(s) {unknown}")
    failed = []
    for name in chosen:
        script, quick = BENCHMARKS[name]
        cmd = [sys.executable, str(HERE / script)] + (quick if args.quick else [])
        print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
        if subprocess.run(cmd).returncode != 0:
            failed.append(name)
    summary = {}
    for path in sorted((HERE / "results").glob("*.json")):
        summary[path.stem] = json.loads(path.read_text())
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if "goal" in kk or "ratio" in kk or "speedup" in kk}
                      for k, v in summary.items() if isinstance(v, dict)}, indent=1))
    if failed:
        print(f"failed: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
