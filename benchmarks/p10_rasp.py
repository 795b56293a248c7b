"""P10: the white-box ``rasp`` config: build from the shipped weights, ``load_model``, a batch of
256 sequences through the torch module against tracr's own jax forward on the same batch, and one
tracr compile (needs ``findbench[rasp]``). Goals: build <= 60 s, load <= 0.2 s, batch <= 50 ms,
compile <= 15 s. Writes benchmarks/results/p10_rasp.json.

    python benchmarks/p10_rasp.py [--program reverse]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", default="reverse", help="library program to time (default: reverse)")
    ap.add_argument("--skip-build", action="store_true", help="do not time the build of the config")
    args = ap.parse_args()
    from findbench.find.rasp import catalog, compile, store
    from findbench.find.rasp import programs as P

    out: dict = {}
    if not args.skip_build:
        from findbench.builders.config import BuildConfig
        from findbench.builders.find import build

        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            build(BuildConfig(out=str(Path(tmp) / "find"), configs="rasp"), progress=False)
            out["build_seconds"] = time.perf_counter() - start
    rec = next(r for r in store.read_store(0)["programs"].values() if r["name"] == args.program)
    start = time.perf_counter()
    model = store.load_model(rec["function_id"])
    out["load_model_seconds"] = time.perf_counter() - start
    xs = P.domain_inputs({**rec["domain"], "min_len": rec["domain"]["max_len"]}, 256, np.random.default_rng(0))
    model.run_batch(xs)
    start = time.perf_counter()
    torch_out = model.run_batch(xs)
    out["batch_256_torch_seconds"] = time.perf_counter() - start
    item = next(i for i in catalog.library() if i["name"] == args.program)
    start = time.perf_counter()
    made = compile.compile_program(item["program"], item["domain"])
    out["compile_seconds"] = time.perf_counter() - start
    import jax.numpy as jnp

    tracr_model = made["tracr_model"]
    ids = jnp.array([tracr_model.input_encoder.encode([rec["domain"]["bos"], *x]) for x in xs])
    tracr_model.forward(tracr_model.params, ids)
    start = time.perf_counter()
    res = np.asarray(tracr_model.forward(tracr_model.params, ids).unembedded_output)
    out["batch_256_tracr_jax_seconds"] = time.perf_counter() - start
    tracr_out = [tracr_model.output_encoder.decode(row.tolist())[1:] for row in res]
    out["torch_equals_tracr"] = tracr_out == torch_out
    out["program"] = args.program
    print(json.dumps(out, indent=1))
    path = Path(__file__).resolve().parent / "results" / "p10_rasp.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
