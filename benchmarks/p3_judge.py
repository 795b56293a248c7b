"""P3: judge throughput — log-prob scoring and prefix reuse against the reference procedures.

One run, one model (the embedded judge, in-process), the same unit-test prompts (FIND v1's
unit tests with ground-truth descriptions, from the anchor release or ``--data-dir``):

(a) ``logprob`` (one batched forward per test, argmax over the option tokens after
    "[ANSWER]: ") against ``generate`` (the reference procedure: the judge writes its answer,
    parsed as "[ANSWER]: k"). Goal: >= 5x faster with >= 99% identical choices.
(b) shared-prefix KV reuse (a function's 10 prompts share the system prompt and the
    description: run it once, batch the 10 suffixes on the expanded cache) against the naive
    batched forward. Goal: >= 2x faster with identical choices.

(c) the ``"pmi"`` judge (each option's log-probability given the description minus given no
    description): :meth:`TransformersLM.continuation_logprobs` (a description's prompt runs once
    for all its options; each distinct option's prior once) against the naive batched forward
    of every full ``prompt + option`` sequence, priors included. Goal: >= 2x faster with
    identical choices.

So that the small judge writes answers in the expected format at all, every prompt is
preceded by one demonstration exchange (a user turn and "[ANSWER]: 2"); both modes see the
same conversations.

    python benchmarks/p3_judge.py [--category strings] [--functions 3] [--threads 2]

Writes ``benchmarks/results/p3_judge.json``.
"""

from __future__ import annotations

import argparse
import logging
import platform
import time
from pathlib import Path

import torch

from findbench._io import atomic_write_json
from findbench.find.find_v1 import load_rows
from findbench.judge import ANSWER_PREFIX, parse_answer, render_judge_prompt
from findbench.lm import TransformersLM
from findbench.models import resolve

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "anchors" / "find-v1"
DEMO = {
    "strings": (
        "The function returns the input in upper case.",
        {"inputs": ["abc", "hello", "Tree"], "outputs": ["cba", "HELLO", "Tree!"], "correct": 2},
    ),
    "neurons_entities": (
        "The neuron fires on words related to fruit.",
        {"inputs": ["car", "banana", "river"], "outputs": None, "correct": 2},
    ),
    "neurons_relations": (
        "Maps a country to its capital.",
        {"inputs": ["dog", "France", "blue"], "outputs": ["bark", "Paris", "sky"], "correct": 2},
    ),
}


def conversations(rows, category):
    """One-shot judge conversations for every unit test of ``rows``, grouped by function."""
    demo_desc, demo_test = DEMO[category]
    demo = render_judge_prompt(demo_desc, demo_test, category)
    convs = []
    for r in rows:
        for t in r["unit_tests"]:
            system, user = render_judge_prompt(r["description"], t, category)
            convs.append(
                [system, demo[1], {"role": "assistant", "content": f"{ANSWER_PREFIX}{demo_test['correct']}"}, user]
            )
    return convs


def timed(fn):
    """(result, wall seconds, CPU seconds of this process). CPU time is the robust measure on a
    shared machine: other processes' load stretches wall time, not this process's CPU time."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def best_of(repeats, fn):
    """Run ``fn`` ``repeats`` times; the result and the minimum wall and CPU seconds."""
    runs = [timed(fn) for _ in range(repeats)]
    return runs[0][0], min(r[1] for r in runs), min(r[2] for r in runs)


def naive_pmi_choices(lm, rows, category, batch_size):
    """Reference "pmi" judge: every ``prompt + option`` sequence (with and without the
    description) in plain left-padded batches; log-probs summed over the option's tokens."""
    from findbench.judge import NULL_DESCRIPTION, render_pmi_option, render_pmi_prompt

    tok, model = lm.tokenizer, lm.model
    seqs, spans = [], []
    null = render_pmi_prompt(NULL_DESCRIPTION, category)
    for r in rows:
        conv = render_pmi_prompt(r["description"], category)
        for t in r["unit_tests"]:
            for k in range(1, len(t["inputs"]) + 1):
                cont = tok(render_pmi_option(t, k, category), add_special_tokens=False)["input_ids"]
                for c in (conv, null):
                    prompt = tok(lm.render(c), add_special_tokens=False)["input_ids"]
                    seqs.append(prompt + cont)
                    spans.append(len(cont))
    values = []
    for start in range(0, len(seqs), batch_size):
        batch, ns = seqs[start : start + batch_size], spans[start : start + batch_size]
        width = max(map(len, batch))
        ids = torch.full((len(batch), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, sq in enumerate(batch):
            ids[i, width - len(sq) :] = torch.tensor(sq)
            mask[i, width - len(sq) :] = 1
        with torch.no_grad():
            logp = torch.log_softmax(
                model(
                    input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0)
                ).logits.float(),
                -1,
            )
        for i, n in enumerate(ns):
            cols = torch.arange(width - n - 1, width - 1)
            values.append(float(logp[i, cols, ids[i, width - n :]].sum()))
    pmi = [values[j] - values[j + 1] for j in range(0, len(values), 2)]
    choices, j = [], 0
    for r in rows:
        for t in r["unit_tests"]:
            n = len(t["inputs"])
            choices.append(max(range(n), key=lambda c: pmi[j + c]) + 1)
            j += n
    return choices


def argmax_choices(rows):
    return [max(range(len(r)), key=r.__getitem__) + 1 for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--category", default="strings", choices=sorted(DEMO))
    ap.add_argument("--functions", type=int, default=3, help="functions (10 unit tests each)")
    ap.add_argument("--data-dir", default=str(DEFAULT_DATA), help="FIND v1 release folder (src/find-dataset)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2, help="runs per procedure; the fastest counts")
    ap.add_argument("--max-new-tokens", type=int, default=16, help="answer length of the generate reference")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "p3_judge.json"))
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.threads)

    rows = load_rows(args.category, args.data_dir)[: args.functions]
    convs = conversations(rows, args.category)
    lm = TransformersLM(resolve("embedded"), device="cpu", batch_size=args.batch_size, name="transformers:embedded")
    cands = ["1", "2", "3"]
    lm.candidate_logprobs(convs[:2], cands, assistant_prefix=ANSWER_PREFIX)  # warm-up

    lm.tokens_forwarded = 0
    naive, w_naive, t_naive = best_of(
        args.repeats, lambda: lm.candidate_logprobs(convs, cands, assistant_prefix=ANSWER_PREFIX)
    )
    tok_naive = lm.tokens_forwarded // args.repeats
    lm.tokens_forwarded = 0
    shared, w_shared, t_shared = best_of(
        args.repeats, lambda: lm.candidate_logprobs(convs, cands, assistant_prefix=ANSWER_PREFIX, shared_prefix=True)
    )
    tok_shared = lm.tokens_forwarded // args.repeats
    texts, w_gen, t_gen = best_of(args.repeats, lambda: lm.generate(convs, max_new_tokens=args.max_new_tokens))

    # (b) again on the judge's own prompts (no demonstration: a shorter shared prefix).
    plain_convs = [render_judge_prompt(r["description"], t, args.category) for r in rows for t in r["unit_tests"]]
    lm.tokens_forwarded = 0
    p_naive, _, tp_naive = best_of(
        args.repeats, lambda: lm.candidate_logprobs(plain_convs, cands, assistant_prefix=ANSWER_PREFIX)
    )
    tokp_naive = lm.tokens_forwarded // args.repeats
    lm.tokens_forwarded = 0
    p_shared, _, tp_shared = best_of(
        args.repeats,
        lambda: lm.candidate_logprobs(plain_convs, cands, assistant_prefix=ANSWER_PREFIX, shared_prefix=True),
    )
    tokp_shared = lm.tokens_forwarded // args.repeats

    # (c) the pmi judge against its naive reference, on the same unit tests.
    from findbench.judge import judge_unit_tests

    descs, tests = [r["description"] for r in rows], [r["unit_tests"] for r in rows]
    lm.tokens_forwarded = 0
    pmi, w_pmi, t_pmi = best_of(args.repeats, lambda: judge_unit_tests(lm, descs, tests, args.category, mode="pmi"))
    tok_pmi = lm.tokens_forwarded // args.repeats
    pmi_naive, w_pmi_naive, t_pmi_naive = best_of(
        args.repeats, lambda: naive_pmi_choices(lm, rows, args.category, args.batch_size)
    )
    pmi_choices = [c for per in pmi["choices"] for c in per]

    c_naive, c_shared = argmax_choices(naive), argmax_choices(shared)
    c_gen = [parse_answer(t) for t in texts]
    n = len(convs)
    agree_gen = sum(a == b for a, b in zip(c_naive, c_gen)) / n
    agree_shared = sum(a == b for a, b in zip(c_naive, c_shared)) / n
    max_diff = max(abs(a - b) for ra, rb in zip(naive, shared) for a, b in zip(ra, rb))
    result = {
        "device": f"cpu ({platform.processor() or platform.machine()}), torch threads {args.threads}",
        "model": lm.name,
        "category": args.category,
        "prompts": n,
        "batch_size": args.batch_size,
        "timing": f"CPU seconds of this process (min of {args.repeats} runs); speedups are CPU-time ratios",
        "a_logprob_vs_generate": {
            "cpu_seconds_per_prompt_logprob": t_naive / n,
            "cpu_seconds_per_prompt_generate": t_gen / n,
            "wall_seconds_per_prompt_logprob": w_naive / n,
            "wall_seconds_per_prompt_generate": w_gen / n,
            "wall_speedup": w_gen / w_naive,
            "speedup": t_gen / t_naive,
            "identical_choices": agree_gen,
            "generate_parse_rate": sum(c is not None for c in c_gen) / n,
            "max_new_tokens": args.max_new_tokens,
            "goal": "speedup >= 5 and identical_choices >= 0.99",
            "goal_met": bool(t_gen / t_naive >= 5 and agree_gen >= 0.99),
        },
        "b_shared_prefix_vs_naive": {
            "cpu_seconds_per_prompt_naive": t_naive / n,
            "cpu_seconds_per_prompt_shared": t_shared / n,
            "wall_seconds_per_prompt_naive": w_naive / n,
            "wall_seconds_per_prompt_shared": w_shared / n,
            "wall_speedup": w_naive / w_shared,
            "speedup": t_naive / t_shared,
            "tokens_naive": tok_naive,
            "tokens_shared": tok_shared,
            "token_ratio": tok_naive / max(tok_shared, 1),
            "identical_choices": agree_shared,
            "max_abs_logprob_diff": max_diff,
            "goal": "speedup >= 2 and identical choices",
            "goal_met": bool(t_naive / t_shared >= 2 and agree_shared == 1.0),
        },
    }
    result["b_judge_prompts_without_demonstration"] = {
        "cpu_seconds_per_prompt_naive": tp_naive / n,
        "cpu_seconds_per_prompt_shared": tp_shared / n,
        "speedup": tp_naive / tp_shared,
        "token_ratio": tokp_naive / max(tokp_shared, 1),
        "identical_choices": sum(a == b for a, b in zip(argmax_choices(p_naive), argmax_choices(p_shared))) / n,
    }
    result["c_pmi_vs_naive"] = {
        "cpu_seconds_per_test_pmi": t_pmi / n,
        "cpu_seconds_per_test_naive": t_pmi_naive / n,
        "cpu_seconds_per_test_logprob": t_naive / n,
        "wall_speedup": w_pmi_naive / w_pmi,
        "speedup": t_pmi_naive / t_pmi,
        "tokens_pmi": tok_pmi,
        "identical_choices": sum(a == b for a, b in zip(pmi_choices, pmi_naive)) / n,
        "goal": "speedup >= 2 and identical choices",
        "goal_met": bool(t_pmi_naive / t_pmi >= 2 and pmi_choices == pmi_naive),
    }
    atomic_write_json(args.out, result)
    a, b = result["a_logprob_vs_generate"], result["b_shared_prefix_vs_naive"]
    print(f"P3 judge throughput, {n} {args.category} unit-test prompts, {lm.name}, {result['device']}")
    print(
        f"(a) logprob {a['cpu_seconds_per_prompt_logprob']:.3f} "
        f"vs generate {a['cpu_seconds_per_prompt_generate']:.3f} CPU s/prompt: "
        f"{a['speedup']:.2f}x (wall {a['wall_speedup']:.2f}x), identical choices {a['identical_choices']:.1%} "
        f"(generate parse rate {a['generate_parse_rate']:.1%})"
    )
    print(
        f"(b) shared prefix {b['cpu_seconds_per_prompt_shared']:.3f} "
        f"vs naive {b['cpu_seconds_per_prompt_naive']:.3f} CPU s/prompt: "
        f"{b['speedup']:.2f}x (wall {b['wall_speedup']:.2f}x; {b['token_ratio']:.2f}x fewer tokens), "
        f"identical choices {b['identical_choices']:.1%}, "
        f"max |dlogp| {b['max_abs_logprob_diff']:.1e}"
    )
    c = result["b_judge_prompts_without_demonstration"]
    print(
        f"(b') judge prompts without the demonstration: {c['speedup']:.2f}x CPU "
        f"({c['token_ratio']:.2f}x fewer tokens), "
        f"identical choices {c['identical_choices']:.1%}"
    )
    d = result["c_pmi_vs_naive"]
    print(
        f"(c) pmi judge {d['cpu_seconds_per_test_pmi']:.3f} vs naive {d['cpu_seconds_per_test_naive']:.3f} CPU s/test: "
        f"{d['speedup']:.2f}x (wall {d['wall_speedup']:.2f}x), identical choices {d['identical_choices']:.1%}; "
        f"logprob mode {d['cpu_seconds_per_test_logprob']:.3f} s/test"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
