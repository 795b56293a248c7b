"""Structured outputs on the embedded SmolLM2-135M: parse rates and scores before (free
answers, ``structured_outputs="off"``) and after (grammar-constrained, ``"on"``), on the same
prompts, greedy, with no request cache.

- ``planted``: the planted-feature validation (:func:`findbench.autointerp.validation.planted_validation`,
  eight rules on SmolLM2's input embeddings, 200,000 WordNet tokens, SAEBench's window counts):
  detection answers parsed, and the true / wrong / empty explanations' scores against the
  floors; the fuzz scorer once (its Yes/No answer is a two-way log-probability comparison that
  a grammar does not change) with how often it said Yes.
- ``explanations``: the explainer on the planted latents' evidence: answers in the
  "This neuron activates on ..." form, distinct labels, copies of the last demonstration.
- ``judge``: the judge's ``generate`` mode on FIND's procedural strings and relation
  functions with their ground-truth descriptions: answers parsed and accuracy (chance 1/3).
- ``interpreter``: one aia episode per category (3 rounds, 128 tokens a turn, as ``make
  main``): turns that hold a command or an answer, episodes that answer.

    .venv/bin/python benchmarks/structured_outputs.py [--parts planted,explanations,judge,interpreter]

Writes ``benchmarks/results/structured_outputs.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "structured_outputs.json"
SETTINGS = ("off", "on")
#: The explainer's demonstrations' labels, quotes removed (a copy may quote differently).
DEMO_LABELS = ("units of measurement following a number", "the word and joining two words or phrases")


def planted(lm, model, tok, tokens) -> dict:
    from findbench.autointerp.commands import AutoInterpValidateCommand
    from findbench.autointerp.validation import planted_validation, quick_config

    out = {}
    for setting in SETTINGS:
        scorers = ["detection", "fuzz"] if setting == "off" else ["detection"]
        cfg = quick_config(8, scorers, structured_outputs=setting)
        t0 = time.perf_counter()
        res = planted_validation(AutoInterpValidateCommand(model=(model, tok), scorer=lm, scorers=scorers, config=cfg,
                                                           tokens=tokens, out=None, progress=False))
        det = res["scorers"]["detection"]
        n = det["n_latents"]
        out[setting] = {
            "seconds": round(time.perf_counter() - t0, 1),
            "detection": {"parsed": {k: n - det["unparsed"][k] for k in det["unparsed"]}, "answers_per_kind": n,
                          **{k: round(det[k], 4) for k in ("true", "wrong", "empty", "separation", "win_rate")},
                          "verdict": det["verdict"], "floors": {k: round(v, 4) for k, v in det["floors"].items()},
                          "example_answers": [r["details"]["true"]["answer"] for r in det["rows"][:3]]},
        }
        if "fuzz" in res["scorers"]:
            fz = res["scorers"]["fuzz"]
            shown = sum(r["details"][k]["n_shown"] for r in fz["rows"] for k in ("true", "wrong", "empty"))
            yes = sum(r["details"][k]["said_yes_correct"] + r["details"][k]["said_yes_wrong"] for r in fz["rows"]
                      for k in ("true", "wrong", "empty"))
            out["fuzz"] = {
                "answers": shown,
                "said_yes": yes,
                **{k: round(fz[k], 4) for k in ("true", "wrong", "empty")},
                "verdict": fz["verdict"],
            }
    return out


def explanations(lm, model, tok, tokens) -> dict:
    from findbench.autointerp.corpus import special_token_ids
    from findbench.autointerp.evidence import collect_evidence
    from findbench.autointerp.prompts import EXPLANATION_PREFIX, TokenRenderer
    from findbench.autointerp.run import explain
    from findbench.autointerp.synthetic import HOOK_NAME, SyntheticSAE
    from findbench.autointerp.validation import quick_config

    sae = SyntheticSAE.for_model(model, tok)
    cfg = quick_config(sae.cfg.d_sae, ["detection"])
    evidence = collect_evidence(
        model,
        sae,
        tokens,
        list(range(sae.cfg.d_sae)),
        cfg,
        hook_name=HOOK_NAME,
        special_ids=sorted(special_token_ids(tok)),
        batch_size=32,
        progress=False,
    )
    usable = [ev for ev in evidence if ev.skipped is None]
    renderer = TokenRenderer(tok)
    out = {}
    for setting in SETTINGS:
        t0 = time.perf_counter()
        made = explain(lm, usable, renderer, cfg, progress=False, structured=setting == "on")
        labels = [m["explanation"] for m in made]
        out[setting] = {
            "seconds": round(time.perf_counter() - t0, 1),
            "latents": len(made),
            "in_form": sum(m["raw"].startswith(EXPLANATION_PREFIX) for m in made),
            "distinct_labels": len(set(labels)),
            "copies_a_demonstration": sum(
                any(d in re.sub("[\"'`]", "", label) for d in DEMO_LABELS) for label in labels
            ),
            "labels": {sae.rules[ev.latent]: label for ev, label in zip(usable, labels)},
        }
    return out


def judge(lm, n_functions: int) -> dict:
    from findbench.find import load_rows
    from findbench.judge import judge_unit_tests

    out = {}
    for setting in SETTINGS:
        per_cat = {}
        t0 = time.perf_counter()
        for category in ("strings", "neurons_relations"):
            rows = load_rows(category, seed=0)[:n_functions]
            res = judge_unit_tests(
                lm,
                [r["description"] for r in rows],
                [r["unit_tests"] for r in rows],
                category,
                mode="generate",
                structured_outputs=setting,
            )
            choices = [c for row in res["choices"] for c in row]
            per_cat[category] = {
                "answers": len(choices),
                "parsed": sum(c is not None for c in choices),
                "accuracy": round(res["unit_test_accuracy"], 4),
            }
        out[setting] = {"seconds": round(time.perf_counter() - t0, 1), **per_cat}
    return out


def interpreter(lm, data: str) -> dict:
    from findbench.interpret.config import InterpretConfig
    from findbench.interpret.protocol import parse_answer, parse_commands
    from findbench.interpret.run import run_interpretations

    out = {}
    for setting in SETTINGS:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            cfg = InterpretConfig(data=data, interpreter=lm, limit=1, rounds=3, max_tokens=128,
                                  out=str(Path(tmp) / "run"), structured_outputs=setting)
            run = run_interpretations(cfg, progress=False)
            turns, ok, answered, episodes = 0, 0, 0, 0
            from findbench.interpret.logs import read_run_logs

            for episode in read_run_logs(run).episodes.values():
                record = episode.record or {"answer": None, "messages": []}
                episodes += 1
                answered += record["answer"] is not None
                for m in record["messages"]:
                    if m["role"] == "assistant":
                        turns += 1
                        ok += bool(parse_commands(m["content"])) or parse_answer(m["content"]) is not None
            out[setting] = {
                "seconds": round(time.perf_counter() - t0, 1),
                "episodes": episodes,
                "answered": answered,
                "turns": turns,
                "command_or_answer": ok,
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="planted,explanations,judge,interpreter")
    parser.add_argument(
        "--judge-functions", type=int, default=5, help="functions per category for the judge (10 tests each)"
    )
    parser.add_argument(
        "--data", default=None, help="dataset folder for the interpreter part (default: procedural rows)"
    )
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]

    import torch
    from transformers import AutoModel, AutoTokenizer

    from findbench.autointerp.config import Corpus
    from findbench.autointerp.corpus import corpus_tokens
    from findbench.lm import TransformersLM
    from findbench.models import resolve

    path = resolve("embedded")
    lm = TransformersLM(path, device="cpu", batch_size=8, name="transformers:embedded")
    result: dict = {"model": "embedded (SmolLM2-135M-Instruct)", "device": "cpu", "threads": torch.get_num_threads()}
    if Path(args.out).is_file():
        result = {**json.loads(Path(args.out).read_text()), **result}
    if {"planted", "explanations"} & set(parts):
        model, tok = AutoModel.from_pretrained(path, dtype=torch.float32).eval(), AutoTokenizer.from_pretrained(path)
        tokens = corpus_tokens(tok, Corpus("wordnet", 128, 200_000, "train", "text"))
    for part in parts:
        t0 = time.perf_counter()
        if part == "planted":
            result[part] = planted(lm, model, tok, tokens)
        elif part == "explanations":
            result[part] = explanations(lm, model, tok, tokens)
        elif part == "judge":
            result[part] = judge(lm, args.judge_functions)
        elif part == "interpreter":
            result[part] = interpreter(lm, args.data)
        else:
            raise SystemExit(f"unknown part {part!r}")
        print(f"{part} ({time.perf_counter() - t0:.0f} s):", json.dumps(result[part], indent=1)[:3000], flush=True)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
