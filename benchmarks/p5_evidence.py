"""P5: AutoInterp evidence collection, findbench's streaming path vs SAEBench's dense path.

Same model (embedded SmolLM2), SAE (the shipped one unless --sae), corpus tokens and
latents, in one run:

- ours: :func:`findbench.autointerp.evidence.collect_evidence` — a plain transformers
  forward pass stopped at the SAE's layer, only the chosen latents encoded (for TopK SAEs
  every pre-activation is needed for the top-k, only the chosen columns are kept), streaming
  top-k / importance-weighted statistics, nothing dense kept;
- reference (SAEBench's procedure): TransformerLens' ``TransformerBridge`` (the local-model
  path of TransformerLens 3) ``run_with_cache(..., stop_at_layer=L + 1, names_filter=[hook])``,
  the full ``sae.encode``, a dense ``[rows, context, latents]`` activation tensor, then the
  greedy non-overlapping top-k windows and ``torch.multinomial`` importance-weighted
  samples per latent on that tensor.

Each path runs in its own subprocess; both run at ``--total-tokens`` and at twice that, to
show which memory grows with the corpus: the resident memory the timed pass adds is sampled
during the pass (the process's lifetime peak, also reported, is often set while the model
loads). The
top-window sets of the two paths are compared latent by latent, on the latents the streaming
path has evidence for.

The roofline says how much faster any float32 path could be here. Both paths run the same
forward pass (SAEBench stops at the hooked layer too), so its FLOPs, at this machine's
measured matmul throughput, bound the speedup over the reference whatever happens after the
hooked layer is read.

    python benchmarks/p5_evidence.py [--total-tokens 100000] [--n-latents 200] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

RESULTS = Path(__file__).resolve().parent / "results" / "p5_evidence.json"


def _setup(args):
    import numpy as np
    import torch

    from findbench.autointerp.activations import load_model
    from findbench.autointerp.config import AutoInterpConfig
    from findbench.autointerp.corpus import corpus_tokens, special_token_ids
    from findbench.autointerp.sae import load_sae

    torch.set_num_threads(args.threads)
    model, tokenizer, _ = load_model(args.model, device="cpu")
    sae = load_sae(args.sae, device="cpu")
    hook = sae.cfg.metadata.hook_name
    rng = np.random.default_rng(0)
    latents = sorted(int(x) for x in rng.choice(int(sae.cfg.d_sae), size=args.n_latents, replace=False))
    cfg = AutoInterpConfig(total_tokens=args.total_tokens, override_latents=latents)
    tokens = corpus_tokens(tokenizer, cfg.corpus)
    return model, tokenizer, sae, hook, tokens, latents, cfg, sorted(special_token_ids(tokenizer))


class _PassMemory:
    """Resident memory the timed pass adds: /proc/self/statm sampled every 5 ms from a thread
    between :meth:`start` and :meth:`stop`, peak minus the value at the start (the process's
    lifetime peak can be set earlier, while the model loads, and hide the pass)."""

    def start(self) -> None:
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._start = self._peak = self._rss()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self._page

    def _sample(self) -> None:
        while not self._done.wait(0.005):
            self._peak = max(self._peak, self._rss())

    def stop(self) -> float:
        """The growth in MiB."""
        self._done.set()
        self._thread.join()
        return (max(self._peak, self._rss()) - self._start) / 2**20


def child_ours(args) -> dict:
    from findbench.autointerp.evidence import collect_evidence

    model, _, sae, hook, tokens, latents, cfg, specials = _setup(args)
    memory = _PassMemory()
    memory.start()
    t0 = time.perf_counter()
    evidence = collect_evidence(
        model,
        sae,
        tokens,
        latents,
        cfg,
        hook_name=hook,
        special_ids=specials,
        batch_size=args.batch_size,
        progress=False,
    )
    seconds = time.perf_counter() - t0
    growth = memory.stop()
    tops = {
        ev.latent: sorted((w.row, w.centre, w.acts[cfg.buffer]) for w in ev.generation + ev.scoring if w.kind == "top")
        for ev in evidence
    }
    return {
        "seconds": seconds,
        "pass_rss_mb": growth,
        "tops": tops,
        "skipped": sorted(ev.latent for ev in evidence if ev.skipped),
    }


def dense_top_windows(acts: torch.Tensor, k: int, buffer: int) -> list[tuple[int, int]]:
    """The reference greedy top-window choice on a dense ``[rows, context]`` tensor of one latent: SAEBench's
    procedure, this benchmark's dense path (``tests/autointerp/test_evidence.py`` checks
    :class:`findbench.autointerp.evidence.EvidenceCollector` against it)."""
    import torch

    rows, context = acts.shape
    centre = acts[:, buffer : context - buffer]
    flat = centre.reshape(-1)
    r_idx = torch.arange(rows).repeat_interleave(centre.shape[1])
    c_idx = torch.arange(centre.shape[1]).repeat(rows) + buffer
    order = torch.argsort(c_idx, stable=True)
    order = order[torch.argsort(r_idx[order], stable=True)]
    order = order[torch.argsort(-flat[order], stable=True)]
    chosen: list[tuple[int, int]] = []
    taken: dict[int, list[int]] = {}
    for o in order.tolist():
        r, c = int(r_idx[o]), int(c_idx[o])
        if any(abs(c - c2) <= buffer for c2 in taken.get(r, ())):
            continue
        chosen.append((r, c))
        taken.setdefault(r, []).append(c)
        if len(chosen) == k:
            break
    return chosen


def child_reference(args) -> dict:
    import torch
    from transformer_lens.model_bridge import TransformerBridge

    from findbench.autointerp.activations import parse_hook_name
    from findbench.models import resolve

    _, _, sae, hook, tokens, latents, cfg, specials = _setup(args)
    _, layer = parse_hook_name(hook)
    bridge = TransformerBridge.boot_transformers(resolve(args.model), device="cpu")
    idx = torch.as_tensor(latents)
    memory = _PassMemory()
    memory.start()
    t0 = time.perf_counter()
    dense = torch.zeros((len(tokens), tokens.shape[1], len(latents)))
    special = torch.as_tensor(specials)
    with torch.inference_mode():
        for s in range(0, len(tokens), args.batch_size):
            ids = torch.as_tensor(tokens[s : s + args.batch_size], dtype=torch.long)
            _, cache = bridge.run_with_cache(ids, names_filter=[hook], stop_at_layer=layer + 1)
            acts = sae.encode(cache[hook])[..., idx]
            acts[torch.isin(ids, special)] = 0
            dense[s : s + len(ids)] = acts
        tops = {}
        for j, latent in enumerate(latents):
            a = dense[..., j]
            chosen = dense_top_windows(a, cfg.n_top_ex, cfg.buffer)
            tops[latent] = sorted((r, c, float(a[r, c])) for r, c in chosen)
            threshold = min(float(a[r, c]) for r, c in chosen)
            w = torch.where(a >= threshold, 0.0, a)[:, cfg.buffer : -cfg.buffer].reshape(-1) ** 2
            if (w > 0).sum() >= cfg.n_iw_sampled_ex:
                torch.multinomial(w, cfg.n_iw_sampled_ex, replacement=False)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "pass_rss_mb": memory.stop(), "tops": tops}


def _agreement(ours: dict, ref: dict, skipped: list) -> dict:
    """Top-window sets of the two paths per latent with evidence, and the largest gap between
    their centre activations (the two forward implementations differ by float rounding).
    Latents the streaming path skips (fewer than ``n_top_ex`` active windows or
    ``n_iw_sampled_ex`` positions to sample from; reported, never explained) are counted apart:
    the dense pass fills their top windows with inactive ones."""
    skip = {str(k) for k in skipped}
    kept = [k for k in ours if k not in skip]
    same = sum([w[:2] for w in ours[k]] == [w[:2] for w in ref[k]] for k in kept)
    gap = max(
        (abs(a - b) for k in kept for a, b in zip(sorted(w[2] for w in ours[k]), sorted(w[2] for w in ref[k]))),
        default=0.0,
    )
    return {
        "identical_top_windows": f"{same}/{len(kept)}",
        "max_centre_activation_gap": gap,
        "latents_skipped_for_too_little_evidence": len(skip),
    }


def _forward_flops_per_token(cfg: dict, layer: int, d_sae: int, context: int) -> float:
    """Multiply-adds x 2 per token of both paths' shared work: blocks 0..layer of a
    Llama-style decoder (``cfg``: its config.json; projections, MLP, causal attention over
    ``context / 2`` positions on average) and one SAE encode (a TopK SAE needs every
    pre-activation)."""
    d, ff = cfg["hidden_size"], cfg["intermediate_size"]
    head = cfg.get("head_dim") or d // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * head, cfg.get("num_key_value_heads", cfg["num_attention_heads"]) * head
    per_layer = 2 * (d * q + 2 * d * kv + q * d + 3 * d * ff) + 2 * 2 * (context / 2) * q
    return (layer + 1) * per_layer + 2 * d * d_sae


def _matmul_gflops(tokens: int, d: int, ff: int, threads: int, repeats: int = 20) -> float:
    """This machine's float32 matmul throughput on the shape of the MLP's projections."""
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(tokens, d), torch.randn(d, ff)
    for _ in range(3):
        a @ b
    t0 = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * tokens * d * ff * repeats / (time.perf_counter() - t0) / 1e9


def _roofline(args, seconds: dict[str, float], total_tokens: int) -> dict:
    """How fast any float32 path could be here: the shared forward's FLOPs at this machine's
    matmul throughput, against what each path achieved."""
    from findbench.autointerp.activations import parse_hook_name
    from findbench.autointerp.sae import load_sae
    from findbench.models import resolve

    sae = load_sae(args.sae, device="cpu")
    _, layer = parse_hook_name(sae.cfg.metadata.hook_name)
    cfg = json.loads((Path(resolve(args.model)) / "config.json").read_text())
    flops = _forward_flops_per_token(cfg, layer, int(sae.cfg.d_sae), 128)
    peak = _matmul_gflops(args.batch_size * 128, cfg["hidden_size"], cfg["intermediate_size"], args.threads)
    floor = total_tokens * flops / (peak * 1e9)
    return {
        "forward_gflop_per_token": round(flops / 1e9, 5),
        "matmul_gflops": round(peak, 1),
        "achieved_gflops": {p: round(total_tokens * flops / s / 1e9, 1) for p, s in seconds.items()},
        "seconds_at_matmul_peak": round(floor, 2),
        "max_speedup_over_reference_at_peak": round(seconds["reference"] / floor, 2),
    }


def _child_main(args) -> int:
    out = child_ours(args) if args.child == "ours" else child_reference(args)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["tops"] = {str(k): v for k, v in out["tops"].items()}
    print("P5JSON " + json.dumps(out))
    return 0


def _spawn(path: str, args, total_tokens: int) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        path,
        "--total-tokens",
        str(total_tokens),
        "--n-latents",
        str(args.n_latents),
        "--threads",
        str(args.threads),
        "--batch-size",
        str(args.batch_size),
        "--model",
        args.model,
        "--sae",
        args.sae,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("P5JSON ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{path} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("P5JSON ") :])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--total-tokens", type=int, default=100_000)
    ap.add_argument("--n-latents", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--sae", default="embedded")
    ap.add_argument("--child", choices=["ours", "reference"], default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return _child_main(args)
    runs = {}
    for n in (args.total_tokens, 2 * args.total_tokens):
        for path in ("ours", "reference"):
            print(f"{path} at {n} tokens ...", flush=True)
            runs[(path, n)] = _spawn(path, args, n)
    n1, n2 = args.total_tokens, 2 * args.total_tokens
    ours, ref = runs[("ours", n1)], runs[("reference", n1)]
    agreement = _agreement(ours["tops"], ref["tops"], ours["skipped"])
    roofline = _roofline(args, {"ours": ours["seconds"], "reference": ref["seconds"]}, n1)
    result = {
        "benchmark": "p5_evidence",
        "model": args.model,
        "sae": args.sae,
        "n_latents": args.n_latents,
        "total_tokens": n1,
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "threads": args.threads},
        "ours_tokens_per_s": n1 / ours["seconds"],
        "reference_tokens_per_s": n1 / ref["seconds"],
        "speedup_tokens_per_s": ref["seconds"] / ours["seconds"],
        "goal_speedup": 3.0,
        **agreement,
        "roofline": roofline,
        "peak_rss_mb": {f"{p}@{n}": round(runs[(p, n)]["peak_rss_mb"], 1) for (p, n) in runs},
        "pass_rss_mb": {f"{p}@{n}": round(runs[(p, n)]["pass_rss_mb"], 1) for (p, n) in runs},
        "pass_rss_growth_mb_when_tokens_double": {
            p: round(runs[(p, n2)]["pass_rss_mb"] - runs[(p, n1)]["pass_rss_mb"], 1) for p in ("ours", "reference")
        },
        "seconds": {f"{p}@{n}": round(runs[(p, n)]["seconds"], 2) for (p, n) in runs},
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
