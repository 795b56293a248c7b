"""A whole AutoInterp run on the embedded encoder with the planted-rule SAE and scripted LMs:
result files, their schema, and resuming without repeating work."""

from __future__ import annotations

import csv
import json
import re

import pytest

from findbench.autointerp import run as run_mod
from findbench.autointerp.commands import AutoInterpCommand
from findbench.autointerp.config import AutoInterpConfig
from findbench.autointerp.run import run_autointerp

SENTENCES = [
    "The blue heron stood in 3 inches of water while the robin sang (twice) near the red barn.",
    "In 1999 she was painting the green fence and singing about yellow birds [again].",
    "A sparrow and an eagle flew over 42 houses; the owl was sleeping in the black oak.",
    "They were running to the white gate at 7 o'clock, chasing the crow (a big one).",
]


class ScriptedLM:
    """Explains every latent as 'digits'; the detection answer lists the windows with a digit."""

    name = "scripted"

    def __init__(self):
        self.calls = 0

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        self.calls += len(conversations)
        out = []
        for conv in conversations:
            user = conv[-1]["content"]
            if user.startswith("Texts:"):
                out.append("This neuron activates on digits and numbers.")
            else:
                hits = [m.group(1) for m in re.finditer(r"^(\d+)\. (.*)$", user, re.M) if re.search(r"\d", m.group(2))]
                out.append(", ".join(hits) or "None")
        return out

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        self.calls += len(conversations)
        return [[0.0] + [-1.0] * (len(candidates) - 1) for _ in conversations]


def _cfg(**kw):
    base = dict(
        llm_context_size=32,
        total_tokens=32 * 60,
        buffer=4,
        n_top_ex=4,
        n_top_ex_for_generation=3,
        n_iw_sampled_ex=2,
        n_iw_sampled_ex_for_generation=1,
        n_random_ex=4,
        dataset=None,
        n_latents=3,
        dead_latent_threshold=5,
        scorers=["detection", "embedding"],
    )
    base.update(kw)
    return base


def test_run_writes_saebench_files_and_resumes_without_repeating_work(corpus, tmp_path, monkeypatch):
    lm = ScriptedLM()
    cfg = AutoInterpConfig(**_cfg(dataset=str(corpus)))
    out = tmp_path / "out"
    result = run_autointerp(AutoInterpCommand(model="minilm", sae="synthetic", explainer=lm, config=cfg, out=out,
                                              progress=False))

    results = json.loads((out / "synthetic_eval_results.json").read_text())
    metrics = results["eval_result_metrics"]
    summary = {"n", "ci", "floors", "best_floor", "margin", "n_degenerate", "n_explanation_truncated"}
    assert set(metrics["autointerp"]) == {"autointerp_score", "autointerp_std_dev", "n_unparsed"} | summary
    assert set(metrics["embedding"]) == {"embedding_score", "embedding_std_dev"} | summary
    det = metrics["autointerp"]
    # 2 active of 6 scoring windows per latent: "None" scores 4/6, listing every window 2/6
    assert det["floors"] == pytest.approx({"none": 4 / 6, "all": 2 / 6}) and det["best_floor"] == "none"
    assert det["margin"] == pytest.approx(det["autointerp_score"] - 4 / 6)
    assert det["ci"][0] <= det["autointerp_score"] <= det["ci"][1]
    assert metrics["embedding"]["floors"] == {"chance": 0.5} and metrics["embedding"]["n"] == det["n"]
    assert results["eval_config"]["structured_outputs"] == "auto"
    assert results["eval_config"]["structured_outputs_applied"] == {
        "explainer": False,
        "scorer": False,
    }  # no grammar support
    assert result.resumed["evidence"] is None and result.resumed["lm_cache"]["hits"] == 0
    latents = results["eval_result_unstructured"]
    assert 1 <= len(latents) <= 3
    # the scripted explainer writes one line for every latent: each is flagged, all are still scored
    assert det["n_degenerate"] == metrics["embedding"]["n_degenerate"] == len(latents) >= 2
    assert det["n_explanation_truncated"] == 0
    for entry in latents.values():
        assert {"explanation", "score", "predictions", "correct seqs"} <= set(entry)
        assert entry["explanation"] == "digits and numbers"
        assert entry["degenerate"] is True and entry["degenerate_reason"] == "identical"
        assert entry["explanation_truncated"] is False
        assert len(entry["correct seqs"]) == 2  # the top and the importance-weighted window left for scoring
    assert results["eval_config"]["n_top_ex"] == 4 and results["eval_config"]["hook_name"] == "hook_embed"
    (csv_path,) = out.glob("*_layerembed_features_summary*.csv")
    assert csv_path.name.endswith("_layerembed_features_summary.csv")
    rows = list(csv.DictReader(csv_path.open()))
    assert list(rows[0]) == [
        "layer",
        "feature",
        "label",
        "autointerp_score",
        "embedding_score",
        "degenerate",
        "explanation_truncated",
    ]
    assert {(r["degenerate"], r["explanation_truncated"]) for r in rows} == {("identical", "0")}
    assert {r["feature"] for r in rows} == set(latents)
    assert result.results.eval_result_metrics.to_json() == metrics

    # a second run with the same arguments: evidence from disk, every LM answer from the cache
    calls = lm.calls
    monkeypatch.setattr(run_mod, "evidence_of", lambda *a, **k: pytest.fail("evidence recomputed"))
    monkeypatch.setattr(run_mod, "count_firing", lambda *a, **k: pytest.fail("firing counts recomputed"))
    again = run_autointerp(AutoInterpCommand(model="minilm", sae="synthetic", explainer=lm, config=cfg, out=out,
                                             progress=False))
    assert lm.calls == calls
    assert again.results.eval_result_unstructured == result.results.eval_result_unstructured
    assert again.resumed["evidence"] == str(next(out.glob("evidence_*.json")))
    assert again.resumed["lm_cache"]["misses"] == 0 and again.resumed["lm_cache"]["hits"] > 0
    assert [p.name for p in out.glob("*.csv")] == [csv_path.name]  # overwritten, not a second file

    # other scorers reuse the evidence (settings of the LM calls only); a run id names its own files
    other = AutoInterpConfig(**_cfg(dataset=str(corpus), scorers=["detection"], structured_outputs="off"))
    named = run_autointerp(AutoInterpCommand(
        model="minilm", sae="synthetic", explainer=lm, config=other, out=out, run_id="try-2", progress=False
    ))
    assert named.files["summary"].endswith("_layerembed_features_summary_try-2.csv")
    assert named.files["results"].endswith("synthetic_eval_results_try-2.json")
    assert sorted(p.name for p in out.glob("*.csv")) == [csv_path.name, csv_path.name.replace(".csv", "_try-2.csv")]
    with pytest.raises(ValueError, match="--run-id"):
        run_autointerp(AutoInterpCommand(
            model="minilm", sae="synthetic", explainer=lm, config=other, out=out, run_id="a/b", progress=False
        ))


class GrammarLM(ScriptedLM):
    """A ScriptedLM that takes grammars and records them."""

    supports_constraints = True
    in_process = True

    def __init__(self):
        super().__init__()
        self.constraints = []

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False, constraint=None):
        self.constraints.append(constraint)
        return super().generate(conversations, max_new_tokens=max_new_tokens)


@pytest.mark.parametrize("setting", ["auto", "off"])
def test_structured_outputs_reach_the_lm_and_are_recorded(corpus, tmp_path, setting):
    from findbench.autointerp.prompts import detection_constraint, explanation_constraint

    lm = GrammarLM()
    cfg = AutoInterpConfig(**_cfg(dataset=str(corpus), scorers=["detection"], structured_outputs=setting))
    result = run_autointerp(AutoInterpCommand(
        model="minilm", sae="synthetic", explainer=lm, config=cfg, out=tmp_path / setting, progress=False
    ))
    on = setting == "auto"
    assert result.results.eval_config["structured_outputs_applied"] == {"explainer": on, "scorer": on}
    explain_c, detect_c = lm.constraints
    if on:
        assert explain_c == explanation_constraint()
        assert detect_c == detection_constraint(6)  # the cache hands each distinct grammar on whole
    else:
        assert explain_c is None and detect_c is None


def test_digit_latent_scored_by_a_digit_detector_misses_only_random_windows_with_digits(corpus, tmp_path):
    from findbench.autointerp.activations import load_model
    from findbench.autointerp.synthetic import SyntheticSAE

    model, tokenizer, _ = load_model("minilm", device="cpu")
    sae = SyntheticSAE.for_model(model, tokenizer)
    digits = sae.rules.index("digits") if isinstance(sae.rules[0], str) else [r.name for r in sae.rules].index("digits")
    cfg = AutoInterpConfig(**_cfg(dataset=str(corpus), override_latents=[digits], scorers=["detection"]))
    result = run_autointerp(AutoInterpCommand(
        model="minilm", sae=sae, explainer=ScriptedLM(), config=cfg, out=tmp_path / "o", progress=False
    ))
    (entry,) = result.results.eval_result_unstructured.values()
    # right on every window but the random ones that happen to hold a digit (labelled inactive, as in SAEBench)
    assert entry["score"] == 1 - entry["random_windows_with_activity"] / 6
    assert entry["predictions"][: len(entry["correct seqs"])] != [] and set(entry["correct seqs"]) <= set(
        entry["predictions"]
    )


def test_long_empty_and_copied_explanations_are_cut_flagged_and_still_scored(corpus, tmp_path):
    from findbench.autointerp.activations import load_model

    _, tokenizer, _ = load_model("minilm", device="cpu")
    cfg = AutoInterpConfig(
        **_cfg(dataset=str(corpus), override_latents=[0, 1, 2, 3], scorers=["embedding"], max_explanation_tokens=8)
    )
    texts = {
        0: "numbers written with digits " * 10,
        1: "",
        2: "Units of measurement following a number.",
        3: "brackets",
    }
    result = run_autointerp(AutoInterpCommand(
        model="minilm", sae="synthetic", config=cfg, out=tmp_path / "o", explanations=texts, progress=False
    ))
    u = result.results.eval_result_unstructured
    assert set(u) == {"0", "1", "2", "3"}
    assert u["0"]["explanation_truncated"] is True and u["0"]["explainer_answer"] == texts[0]
    assert u["0"]["explanation"] == "numbers written with digits numbers written with digits"
    assert len(tokenizer(u["0"]["explanation"], add_special_tokens=False)["input_ids"]) == 8
    assert [u[k]["degenerate_reason"] for k in "0123"] == [None, "empty", "prompt_text", None]
    assert [u[k]["degenerate"] for k in "0123"] == [False, True, True, False]
    assert all(0 <= u[k]["embedding_score"] <= 1 for k in "0123")  # still scored
    m = result.results.eval_result_metrics.to_json()["embedding"]
    assert m["n_degenerate"] == 2 and m["n_explanation_truncated"] == 1 and m["n"] == 4
    records = {r["latent"]: r for r in json.loads((tmp_path / "o" / "latents.json").read_text())["latents"]}
    assert records[0]["explanation_truncated"] is True and records[2]["degenerate_reason"] == "prompt_text"
    rows = {r["feature"]: r for r in csv.DictReader(open(result.files["summary"]))}
    assert (rows["0"]["explanation_truncated"], rows["1"]["degenerate"], rows["3"]["degenerate"]) == ("1", "empty", "")


def test_bad_arguments_are_named(corpus, tmp_path):
    with pytest.raises(ValueError, match="override_latents"):
        run_autointerp(AutoInterpCommand(
            model="minilm",
            sae="synthetic",
            explainer=ScriptedLM(),
            out=tmp_path,
            config=AutoInterpConfig(**_cfg(dataset=str(corpus), override_latents=[999])),
            progress=False,
        ))
    with pytest.raises(ValueError, match="--batch-size"):
        run_autointerp(AutoInterpCommand(
            model="minilm",
            sae="synthetic",
            config=AutoInterpConfig(**_cfg(dataset=str(corpus))),
            out=tmp_path,
            batch_size=0,
        ))
    with pytest.raises(ValueError, match="trained on 'hook_embed'"):
        run_autointerp(AutoInterpCommand(
            model="minilm",
            sae="synthetic",
            layer=2,
            explainer=ScriptedLM(),
            config=AutoInterpConfig(**_cfg(dataset=str(corpus))),
            out=tmp_path,
            progress=False,
        ))


def test_the_config_is_checked_before_any_work(tmp_path):
    out = tmp_path / "never"
    for bad, match in ((dict(run_id="a b"), "--run-id"), (dict(shard="2/2"), "--shard must be I/N"),
                       (dict(max_connections=0), "--max-connections"),
                       (dict(config={"n_latents": 3}), "config must be")):
        with pytest.raises(ValueError, match=match):
            run_autointerp(AutoInterpCommand(sae="synthetic", model="minilm", out=out, **bad))
    assert not out.exists()
    # the config holds the SAE and LM objects a Python caller gives, and its default is the command line's preset
    assert AutoInterpCommand(sae=object(), explainer=object()).config == AutoInterpConfig.quick()
