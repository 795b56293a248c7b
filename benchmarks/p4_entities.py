"""P4: entity-neuron queries, batched vs one query per call (the reference procedure: FIND
queries its neurons one input at a time).

Both modes run the same embedded entity neurons (``embedding`` backbone: probes on MiniLM
beside SmolLM2's layer-24 state) on held-out words. Reference: one word per call, nothing
reused (the features' caches are cleared before each call). Ours: one batched call per neuron
over all words, length-sorted batches, the caches starting empty and reused across neurons. Prints
words/s and the ratio; writes benchmarks/results/p4_entities.json.

    python benchmarks/p4_entities.py [--neurons 10] [--single-words 300]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from findbench._io import atomic_write_json
from findbench.find.synthetic_neurons import generate_entities, make_function
from findbench.find.synthetic_neurons.entities import entity_splits
from findbench.find.synthetic_neurons.features import load_features


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--neurons", type=int, default=20, help="entity neurons queried")
    ap.add_argument("--single-words", type=int, default=100, help="words queried one per call (per neuron pool)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "p4_entities.json"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    rows = generate_entities(0)[: args.neurons]
    fns = [make_function(r) for r in rows]
    words = [w for _c, (_u, held) in entity_splits(0).items() for w in held]
    # what the rows' probes read (MiniLM beside SmolLM2's state by default): its caches are cleared below
    features = json.loads(rows[0]["params"])["backbones"]["embedding"]["encoder"]
    encoder = load_features(features)

    # reference procedure: one query per call, nothing reused (each call encodes its word)
    single = words[: args.single_words]
    t0 = time.perf_counter()
    single_scores = []
    for fn in fns:
        scores = []
        for w in single:
            encoder.clear_cache()
            scores.append(fn(w))
        single_scores.append(scores)
    t_single = time.perf_counter() - t0
    single_rate = args.neurons * len(single) / t_single

    # ours without the cache: one batched call per neuron, cache cleared before each neuron
    t0 = time.perf_counter()
    for fn in fns:
        encoder.clear_cache()
        fn(words)
    cold_rate = args.neurons * len(words) / (time.perf_counter() - t0)

    # ours: one batched call per neuron over every word; the encoder's cache starts empty and
    # serves later neurons (a word is embedded once per process)
    encoder.clear_cache()
    t0 = time.perf_counter()
    batched_scores = []
    for fn in fns:
        batched_scores.append(fn(words))
    t_batched = time.perf_counter() - t0
    batched_rate = args.neurons * len(words) / t_batched

    max_diff = float(np.max(np.abs(np.array([b[: len(single)] for b in batched_scores]) - np.array(single_scores))))
    result = {
        "benchmark": "p4_entities",
        "neurons": args.neurons,
        "words_single": len(single),
        "words_batched": len(words),
        "single_words_per_s": round(single_rate, 1),
        "batched_words_per_s": round(batched_rate, 1),
        "speedup": round(batched_rate / single_rate, 2),
        "batched_cold_words_per_s": round(cold_rate, 1),
        "speedup_batching_only": round(cold_rate / single_rate, 2),
        "max_abs_score_diff": max_diff,
        "threads": args.threads,
        "features": features,
        "machine": platform.platform(),
        "torch": torch.__version__,
    }
    print(f"one query per call: {single_rate:10.1f} words/s")
    print(f"batched:            {batched_rate:10.1f} words/s")
    print(f"batched, no cache:  {cold_rate:10.1f} words/s  ({result['speedup_batching_only']:.2f}x: batching alone)")
    print(f"speedup:            {result['speedup']:10.2f}x  (max |score diff| {max_diff:.2e})")
    atomic_write_json(args.out, result)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
