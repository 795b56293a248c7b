"""Judge fine-tuning on a tiny random Llama: loss goes down, the adapter loads as a judge,
resuming continues the step count, the report runs end to end."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from findbench.constants import TRAINED_MARKER
from findbench.judge.config import TrainArgs, make_parser, parse_train_args
from findbench.judge.train import tokenize_judge_row, train_judge
from tests._paths import REPO


def comparison_logprobs(model, batch):
    """The reference: the summed log-probabilities of a collated batch's pairwise sequences, in
    encode_comparison's order, with a graph (train.comparative_backward recomputes them chunk by chunk)."""
    from findbench.judge.train import sequence_logprobs

    by_length = torch.cat([sequence_logprobs(model, chunk) for chunk in batch["cmp_chunks"]])
    return by_length[torch.argsort(batch["cmp_order"])]


def comparative_loss(model, batch, margin):
    """The reference pairwise loss: pairwise_hinge of comparison_logprobs, in one graph."""
    from findbench.judge.train import pairwise_hinge

    return pairwise_hinge(comparison_logprobs(model, batch), batch["cmp_layout"], margin)


def _save_tiny_base(path: Path, tok) -> str:
    """A 2-layer random Llama (seeded) over ``tok``'s vocabulary, saved with ``tok`` at ``path``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    LlamaForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory, tiny_chat_tokenizer) -> str:
    """The tiny random Llama with the tiny stand-in chat tokenizer (tests/conftest.py): no
    embedded model needed."""
    return _save_tiny_base(tmp_path_factory.mktemp("tiny-base"), tiny_chat_tokenizer)


@pytest.fixture(scope="module")
def smol_base(tmp_path_factory, embedded_model_dir) -> str:
    """The tiny random Llama with the embedded model's tokenizer and chat template (slow tests
    only: the loss thresholds below were measured over its 49152-token vocabulary)."""
    from transformers import AutoTokenizer

    return _save_tiny_base(tmp_path_factory.mktemp("smol-base"), AutoTokenizer.from_pretrained(embedded_model_dir))


#: The fast tiny base, and the same tests over the embedded tokenizer under -m slow.
BASES = ["tiny_base", pytest.param("smol_base", marks=pytest.mark.slow)]


@pytest.fixture(scope="module")
def strings_rows():
    from findbench.find import load_rows

    return load_rows("strings", seed=0)[:40]


@pytest.fixture(scope="module")
def judge_data(tmp_path_factory, strings_rows) -> str:
    from findbench.judge.config import JudgeDataConfig
    from findbench.judge.data import build_judge_data

    out = tmp_path_factory.mktemp("data") / "judge-data"
    return str(build_judge_data(JudgeDataConfig(out=str(out), n=24, n_heldout=6, seed=0),
                                rows_by_category={"strings": strings_rows}))


def _args(base: str, data: str, out: Path, **kw) -> TrainArgs:
    values = dict(model=base, data=data, output_dir=str(out), max_train_rows=0, eval_rows=0, lora_r=8, lora_alpha=16,
                  lora_top_layers=0, lora_dropout=0.0, learning_rate=1e-2, warmup_ratio=0.0,
                  per_device_train_batch_size=2, gradient_accumulation_steps=2, logging_steps=1, save_steps=0,
                  max_steps=12, num_threads=1, seed=0, loss_reduction="token")
    values.update(kw)
    return TrainArgs(**values)


@pytest.mark.parametrize("base", BASES)
def test_tokenize_masks_the_prompt(base, request):
    from transformers import AutoTokenizer

    from findbench.judge import render_judge_prompt
    from findbench.lm.transformers_lm import TransformersLM

    tiny_base = request.getfixturevalue(base)
    tok = AutoTokenizer.from_pretrained(tiny_base)
    ut = {"inputs": ["a", "b", "c"], "outputs": ["A", "B", "C"], "correct": 2}
    msgs = render_judge_prompt("Uppercases the input.", ut, "strings")
    enc = tokenize_judge_row(tok, msgs, "[ANSWER]: 2", max_length=1024)
    n_prompt = sum(label == -100 for label in enc["labels"])
    answer = tok.decode(enc["input_ids"][n_prompt:])
    assert answer.startswith("[ANSWER]: 2") and tok.eos_token in answer
    # the prompt tokens are the judge's rendering, token for token
    lm = TransformersLM(tiny_base, device="cpu")
    assert enc["input_ids"][:n_prompt] == tok(lm.render(msgs), add_special_tokens=False)["input_ids"]
    assert enc["labels"][n_prompt:] == enc["input_ids"][n_prompt:]
    short = tokenize_judge_row(tok, msgs, "[ANSWER]: 2", max_length=20)
    n_answer = len(enc["input_ids"]) - n_prompt
    assert len(short["input_ids"]) == 20  # the prompt is cut from the left, the answer kept whole
    assert short["input_ids"][-n_answer:] == enc["input_ids"][n_prompt:] == short["labels"][-n_answer:]
    assert short["input_ids"][: 20 - n_answer] == enc["input_ids"][n_prompt - (20 - n_answer) : n_prompt]


def test_loss_reductions():
    from findbench.judge.train import _cross_entropy

    logits = torch.log(torch.tensor([[[0.5, 0.5], [0.25, 0.75]], [[1.0, 1e-9], [0.5, 0.5]]]))
    labels = torch.tensor([[0, 1], [-100, 0]])  # row 0: two answer tokens, row 1: one
    nll = [-torch.log(torch.tensor(v)).item() for v in (0.5, 0.75, 0.5)]
    assert float(_cross_entropy(logits, labels, "token")) == pytest.approx(sum(nll) / 3, rel=1e-5)
    assert float(_cross_entropy(logits, labels, "row")) == pytest.approx((nll[0] + nll[1] + nll[2]) / 2, rel=1e-5)


def test_args_validation_and_yaml(tmp_path):
    with pytest.raises(ValueError, match="--learning-rate must be > 0"):
        TrainArgs(learning_rate=0).validate()
    with pytest.raises(ValueError, match="--hub-model-id"):
        TrainArgs(push_to_hub=True).validate()
    cfg = tmp_path / "c.yaml"
    cfg.write_text("learning_rate: 3.0e-4\nlora_r: 4\n")
    args = parse_train_args(["--config", str(cfg), "--lora-r", "2"])
    assert args.learning_rate == 3e-4 and args.lora_r == 2  # flags win over the YAML
    cfg.write_text("learning_rat: 1\n")
    with pytest.raises(ValueError, match="unknown fields"):
        parse_train_args(["--config", str(cfg)])
    # the shipped configs parse
    for name in ("embedded.yaml", "vicuna.yaml"):
        parse_train_args(["--config", str(REPO / "training" / "configs" / name)])
    # a flag overrides one YAML value and keeps the others
    embedded = REPO / "training" / "configs" / "embedded.yaml"
    import yaml

    recipe = yaml.safe_load(embedded.read_text())
    args = parse_train_args(["--config", str(embedded), "--lora-r", "4"])
    assert args.lora_r == 4 and dataclasses.asdict(args) == {**dataclasses.asdict(TrainArgs()), **recipe, "lora_r": 4}


def test_flags_are_the_fields_and_override_the_yaml(tmp_path, capsys):
    """Every TrainArgs field is a flag --field-name (as every findbench command spells them; the
    underscore spellings of HfArgumentParser are gone) with the field's default and help; --config
    YAML sets fields, flags override them."""
    from findbench.judge.config import make_parser

    actions: dict = {}
    for action in make_parser()._actions:  # --no-hub-private shares hub_private's dest; the first holds the default
        actions.setdefault(action.dest, action)
    for f in dataclasses.fields(TrainArgs):
        assert actions[f.name].default == f.default and actions[f.name].help == f.metadata["help"], f.name
        assert actions[f.name].option_strings == [f"--{f.name.replace('_', '-')}"], f.name
    assert sorted(actions) == sorted(["help", "config", *(f.name for f in dataclasses.fields(TrainArgs))])
    assert parse_train_args([]) == TrainArgs()

    cfg = tmp_path / "c.yaml"
    cfg.write_text("learning_rate: 3.0e-4\nlora_r: 4\nmerge: true\nhub_private: false\nmodel: some/model\n")
    expected = TrainArgs(learning_rate=3e-4, lora_r=2, merge=True, hub_private=False, model="some/model", data_seed=5)
    for spelled in (["--lora-r", "2", "--data-seed", "5"], ["--lora-r=2", "--data-seed=5", "--merge"]):
        assert parse_train_args(["--config", str(cfg), *spelled]) == expected
    assert parse_train_args(["--config", str(cfg)]) == TrainArgs(learning_rate=3e-4, lora_r=4, merge=True,
                                                                 hub_private=False, model="some/model")
    assert parse_train_args(["--no-hub-private"]).hub_private is False
    assert parse_train_args(["--hub-private", "no"]).hub_private is False
    assert parse_train_args(["--no-hub-private", "--hub-private"]).hub_private is True  # the last one wins
    switched = parse_train_args(["--full-finetune", "--push-to-hub", "--hub-model-id", "o/j",
                                 "--mixed-precision", "bf16"])
    assert (switched.full_finetune, switched.push_to_hub, switched.hub_model_id, switched.mixed_precision) == (
        True, True, "o/j", "bf16")
    # a value argparse cannot read, or a flag it does not know: its one-line error naming the flag, exit 2
    for argv, message in ((["--lora-r", "x"], "argument --lora-r: invalid int value: 'x'"),
                          (["--hub-private", "maybe"], "argument --hub-private: expected a truth value"),
                          (["--lora_r", "2"], "unrecognized arguments: --lora_r 2"),
                          (["--merge", "false"], "unrecognized arguments: false")):
        with pytest.raises(SystemExit) as exc:
            parse_train_args(argv, prog="findbench train-judge")
        assert exc.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1].startswith(f"findbench train-judge: error: {message}")


def test_train_args_groups():
    from findbench.judge.config import ComparativeArgs, DataArgs, ModelArgs, OptimArgs, OutputArgs

    args = TrainArgs(lora_r=3, output_dir="out", data_seed=2, model="m")
    assert (args.model, args.lora_r, args.output_dir, args.data_seed) == ("m", 3, "out", 2)  # flat access
    assert set(dataclasses.asdict(args)) == {
        f for cls in (DataArgs, ModelArgs, OptimArgs, ComparativeArgs, OutputArgs) for f in cls.__dataclass_fields__
    }
    assert TrainArgs(**dataclasses.asdict(args)) == args
    with pytest.raises(TypeError, match="lora_rank"):
        TrainArgs(lora_rank=3)
    with pytest.raises(ValueError, match="merge"):
        TrainArgs(full_finetune=True, merge=True).validate()


@pytest.mark.slow
def test_training_lowers_loss_and_writes_a_loadable_judge(tmp_path, smol_base, judge_data):
    out = tmp_path / "judge"
    path = train_judge(_args(smol_base, judge_data, out, eval_rows=4, merge=True, judge_mode="logprob"))
    assert Path(path) == out.resolve()
    summary = json.loads((out / "findbench_evaluator.json").read_text())
    losses = [e["loss"] for e in summary["log_history"]]
    assert summary["steps"] == 12 and len(losses) == 12
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.3  # measured: 10.75 -> 10.35
    assert all(b <= a + 0.05 for a, b in zip(losses, losses[1:]))
    assert 0.0 <= summary["eval"]["eval_answer_accuracy"] <= 1.0 and summary["eval"]["eval_rows"] == 4
    cfg = json.loads((out / "adapter_config.json").read_text())
    assert cfg["base_model_name_or_path"] == smol_base
    assert (out / "README.md").read_text().startswith("---\n")
    assert (out / "merged" / "config.json").is_file()
    from findbench.judge import judge_mode_of

    assert judge_mode_of(str(out)) == judge_mode_of(str(out / "merged")) == "logprob"
    assert not list(tmp_path.glob(".judge*"))  # checkpoints and temporary folders are gone

    import evaluate

    from findbench.lm import load_lm

    lm = load_lm(str(out), device="cpu")
    ut = {"inputs": ["ab", "cd", "ef"], "outputs": ["AB", "x", "y"], "correct": 1}
    res = evaluate.load(str(REPO / "metrics" / "find_unit_test")).compute(
        predictions=["Uppercases the input."], references=[[ut]], category="strings", judge=str(out)
    )
    assert 0.0 <= res["unit_test_accuracy"] <= 1.0
    # the adapter folder and the merged weights give the same judge
    merged = load_lm(str(out / "merged"), device="cpu")
    from findbench.judge import render_judge_prompt

    conv = [render_judge_prompt("Uppercases the input.", ut, "strings")]
    a = lm.candidate_logprobs(conv, ["1", "2", "3"], assistant_prefix="[ANSWER]: ")
    b = merged.candidate_logprobs(conv, ["1", "2", "3"], assistant_prefix="[ANSWER]: ")
    assert a[0] == pytest.approx(b[0], abs=1e-4)


@pytest.mark.parametrize("base", BASES)
def test_pmi_training_lowers_loss_and_the_metric_scores_in_pmi_mode(tmp_path, base, request, judge_data):
    from findbench.judge import judge_mode_of, judge_unit_tests, render_pmi_option
    from findbench.judge.train import judge_training_pair
    from findbench.lm import load_lm

    out = tmp_path / "pmi-judge"
    train_judge(_args(request.getfixturevalue(base), judge_data, out, eval_rows=6))  # judge_mode defaults to pmi
    summary = json.loads((out / "findbench_evaluator.json").read_text())
    assert summary["judge_mode"] == "pmi" and judge_mode_of(str(out)) == "pmi"
    losses = [e["loss"] for e in summary["log_history"]]
    # measured: tiny tokenizer 6.35 -> 6.24, embedded tokenizer 10.78 -> 10.63
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - {"tiny_base": 0.05, "smol_base": 0.1}[base]
    ev = summary["eval"]
    assert (
        ev["eval_rows"] == 6
        and 0.0 <= ev["eval_judge_accuracy"] <= 1.0
        and set(ev["eval_judge_accuracy_per_category"]) == {"strings"}
    )
    # a training pair is the correct option written as an example of the description
    from findbench.judge.data import load_judge_data

    row = load_judge_data(judge_data)["train"][0]
    msgs, target = judge_training_pair(row, "pmi")
    ut = json.loads(row["unit_test"])
    assert (
        target == render_pmi_option(ut, ut["correct"], "strings")
        and row["description"].split(".")[0] in msgs[1]["content"]
    )
    with pytest.raises(ValueError, match="description"):
        judge_training_pair({k: v for k, v in row.items() if k != "description"}, "pmi")

    import evaluate

    descs = ["Uppercases the input.", "Reverses the input.", "Deletes every vowel."]
    tests = [[{"inputs": ["ab", "cd", "ef"], "outputs": ["AB", "dc", "f"], "correct": c}] * 2 for c in (1, 2, 3)]
    res = evaluate.load(str(REPO / "metrics" / "find_unit_test")).compute(
        predictions=descs, references=tests, category="strings", judge=str(out)
    )
    want = judge_unit_tests(load_lm(str(out), device="cpu"), descs, tests, "strings", mode="pmi")
    assert res["per_function"] == want["per_function"]


@pytest.mark.slow
def test_resume_continues_from_the_checkpoint(tmp_path, smol_base, judge_data, monkeypatch):
    import findbench.judge.train as train_mod

    full = train_judge(_args(smol_base, judge_data, tmp_path / "full", max_steps=6))
    full_log = json.loads((Path(full) / "findbench_evaluator.json").read_text())["log_history"]

    real_save = train_mod._save_checkpoint

    def save_then_crash(accelerator, root, step, history, args):
        real_save(accelerator, root, step, history, args)
        if step == 4:
            raise KeyboardInterrupt("simulated crash")

    monkeypatch.setattr(train_mod, "_save_checkpoint", save_then_crash)
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        train_judge(_args(smol_base, judge_data, out, max_steps=6, save_steps=2))
    assert not out.exists()
    ckpts = sorted(p.name for p in (tmp_path / ".resumed.checkpoints").iterdir())
    assert ckpts == ["step-2", "step-4"]
    monkeypatch.setattr(train_mod, "_save_checkpoint", real_save)
    train_judge(_args(smol_base, judge_data, out, max_steps=6, save_steps=2, resume_from_checkpoint="latest"))
    summary = json.loads((out / "findbench_evaluator.json").read_text())
    assert summary["steps"] == 6
    assert [e["step"] for e in summary["log_history"]] == [1, 2, 3, 4, 5, 6]
    # same batches, optimizer and schedule as the unbroken run
    assert [e["loss"] for e in summary["log_history"]] == pytest.approx([e["loss"] for e in full_log], rel=1e-3)
    with pytest.raises(ValueError, match="--resume-from-checkpoint"):
        train_judge(_args(smol_base, judge_data, out, resume_from_checkpoint=str(tmp_path)))


def test_cli_train_judge_options(tmp_path, monkeypatch, capsys):
    """`findbench train-judge` parses TrainArgs as every command parses its config, and checks them first."""
    import findbench.judge.train as train_mod
    from findbench.cli import main

    seen: list[TrainArgs] = []
    monkeypatch.setattr(train_mod, "train_judge", lambda args: seen.append(args) or "judge-folder")
    assert main(["train-judge", "--learning-rate", "3e-4", "--lora-r", "2", "--full-finetune", "--model",
                 "some/model"]) == 0
    args = seen[-1]
    assert (args.learning_rate, args.lora_r, args.full_finetune, args.model) == (3e-4, 2, True, "some/model")
    assert "wrote judge-folder" in capsys.readouterr().out
    assert main(["train-judge", "--no-hub-private"]) == 0
    assert seen[-1].hub_private is False and seen[-1].learning_rate == TrainArgs().learning_rate
    with pytest.raises(ValueError, match="--lora-r must be"):
        parse_train_args(["--lora-r", "0"])
    assert main(["train-judge", "--lora-r", "0"]) == 2
    assert capsys.readouterr().err.strip() == "findbench train-judge: error: --lora-r must be ≥ 1, got 0"
    assert len(seen) == 2


def test_train_judge_writes_a_new_folder_and_installs_only_when_asked(tmp_path, tiny_base, judge_data, monkeypatch):
    """Without --output_dir train-judge writes ./judge-<UTC date-time>, never the default judge's folder
    (a smoke test cannot replace the judge every later score uses); --install-as-default copies it
    there. Its files are 0644 under umask 022, no FutureWarning is raised, and the judge names itself
    (path, steps, date)."""
    import os
    import stat
    import warnings

    import findbench.models as models

    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    default = Path(models.embedded_judge_dir(must_exist=False))
    shipped = models.shipped_judge_dir()
    assert models.judge_identity("embedded-evaluator").source == "shipped"
    old = os.umask(0o022)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            first = Path(train_judge(_args(tiny_base, judge_data, tmp_path, output_dir=None, max_steps=2)))
            second = Path(train_judge(_args(tiny_base, judge_data, tmp_path, output_dir=None, max_steps=1)))
            models.load_causal_lm(str(first), tokenizer=False)  # loading the adapter as a judge: no warning either
    finally:
        os.umask(old)
    for out in (first, second):
        assert out.parent == tmp_path / "work" and out.name.startswith("judge-") and (out / TRAINED_MARKER).is_file()
    assert first != second and not default.exists() and models.resolve("embedded-evaluator") == shipped
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in first.rglob("*") if p.is_file()} == {"0o644"}
    assert stat.S_IMODE((first / "adapter_model.safetensors").stat().st_mode) == 0o644
    identity = models.judge_identity(str(first), mode="pmi")
    assert (identity.source, identity.path, identity.steps, identity.mode) == ("local", str(first), 2, "pmi")
    assert identity.trained.startswith(first.name[len("judge-"):len("judge-") + 4])  # the year, in both
    assert str(first) in identity.describe() and "2 steps" in identity.describe()

    installed = Path(train_judge(_args(tiny_base, judge_data, tmp_path, output_dir=str(tmp_path / "mine"),
                                       max_steps=1, install_as_default=True)))
    assert installed == tmp_path / "mine" and (installed / TRAINED_MARKER).is_file()  # kept where it was asked
    assert models.resolve("embedded-evaluator") == str(default)
    identity = models.judge_identity("embedded-evaluator")
    assert (identity.source, identity.name, identity.path, identity.steps) == (
        "local", "embedded-evaluator", str(default), 1)
    shown = " ".join(make_parser().format_help().split())
    assert "--install-as-default then install the judge as the default" in shown


def _comparison_row() -> dict:
    ut = {"inputs": ["abc", "abc", "abc"], "outputs": ["cba", "ABC", "abc!"], "correct": 2}
    negatives = [{"kind": k, "description": d} for k, d in (
        ("near_miss", "The function takes a string and reverses it."),
        ("examples_only", 'Function input - output pairs: (dog, DOG) (cat, CAT)'),
        ("hedged_near", "The function takes a string and reverses it or uppercases every letter."),
        ("constant", "f(s) returns a string"))]
    return {"description": "The function takes a string and uppercases every letter.", "category": "strings",
            "unit_test": json.dumps(ut), "negatives": json.dumps(negatives)}


@pytest.mark.parametrize("mode", ["pmi", "logprob"])
def test_the_pairwise_term_scores_as_the_judge_and_is_zero_only_past_the_margin(tiny_base, mode, monkeypatch):
    """The sequences' log-probabilities give the judge's own decision scores (judge_unit_tests in the same
    mode); the hinge is zero when the truth wins every comparison by the margin and positive otherwise."""
    import random

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from findbench.judge import judge_unit_tests
    from findbench.judge.train import _collate, encode_comparison, pairwise_hinge
    from findbench.lm.transformers_lm import TransformersLM

    tok = AutoTokenizer.from_pretrained(tiny_base)
    model = AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32).eval()
    row = _comparison_row()
    enc = encode_comparison(tok, row, mode, 3, random.Random(0), max_length=1024)
    assert enc["layout"] == [3, 1, 3, int(mode == "pmi")] and len(enc["seqs"]) == 3 * (1 + (mode == "pmi")) + 3
    batch = _collate(tok.pad_token_id)([{**enc["seqs"][0], "pairwise": enc}])
    with torch.no_grad():
        lp = comparison_logprobs(model, batch)
    monkeypatch.setattr("findbench.judge.train._CMP_CHUNK_TOKENS", 1)  # a forward pass per sequence, shortest first
    one_by_one = _collate(tok.pad_token_id)([{**enc["seqs"][0], "pairwise": enc}])
    assert len(one_by_one["cmp_chunks"]) == len(enc["seqs"])
    assert mode == "logprob" or set(one_by_one["cmp_order"].tolist()[:3]) == {3, 4, 5}  # the null prompts: shortest
    with torch.no_grad():
        assert comparison_logprobs(model, one_by_one).tolist() == pytest.approx(lp.tolist(), abs=1e-4)
    lm = TransformersLM(model, tokenizer=tok, device="cpu", name="tiny")
    ut = json.loads(row["unit_test"])
    score = lp[:3] - lp[3:6] if mode == "pmi" else lp[:3]
    judged = judge_unit_tests(lm, [row["description"]], [[ut]], "strings", mode=mode)["decisions"][0][0]["scores"]
    assert score.tolist() == pytest.approx(judged, abs=1e-3)
    chosen = [n["description"] for n in random.Random(0).sample(json.loads(row["negatives"]), 3)]
    losing = [judge_unit_tests(lm, [d], [[ut]], "strings", mode=mode)["decisions"][0][0]["scores"][1] for d in chosen]
    diffs_desc = score[1] - torch.tensor(losing)
    diffs_opt = score[1] - score[[0, 2]]
    assert (lp[:3][1] - lp[-3:]).tolist() == pytest.approx(diffs_desc.tolist(), abs=1e-3)
    layout = batch["cmp_layout"]
    low = float(min(diffs_desc.min(), diffs_opt.min())) - 0.01
    assert float(pairwise_hinge(lp, layout, low)) == 0.0  # the truth wins every comparison by the margin
    margin = float(max(diffs_desc.max(), diffs_opt.max())) + 0.5
    want = float((margin - diffs_opt).mean() + (margin - diffs_desc).mean())
    assert float(pairwise_hinge(lp, layout, margin)) == pytest.approx(want, rel=1e-4) and want > 0
    # the truth and a losing description swapped: the comparisons flip sign
    swapped = {**row, "description": chosen[0],
               "negatives": json.dumps([{"kind": "x", "description": row["description"]}])}
    enc2 = encode_comparison(tok, swapped, mode, 1, random.Random(0), max_length=1024)
    b2 = _collate(tok.pad_token_id)([{**enc2["seqs"][0], "pairwise": enc2}])
    with torch.no_grad():
        lp2 = comparison_logprobs(model, b2)
    assert float(lp2[1] - lp2[-1]) == pytest.approx(-float(diffs_desc[0]), abs=1e-3)
    assert encode_comparison(tok, {**row, "negatives": "[]"}, mode, 3, random.Random(0), max_length=1024) is None

    # chunk by chunk, the gradient of the one-block loss (here one sequence per chunk)
    from findbench.judge.train import comparative_backward

    model.train()  # no dropout in the tiny model: both passes are one function
    comparative_loss(model, batch, margin).backward()
    whole = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    value = comparative_backward(model, one_by_one, margin, 2.0, lambda x: x.backward())
    assert float(value) == pytest.approx(want, rel=1e-4)
    for g, p in zip(whole, model.parameters()):
        assert torch.allclose(2.0 * g, p.grad, rtol=1e-3, atol=1e-4)  # measured: at most 1.5e-5 apart


def test_a_short_pairwise_run_lowers_the_pairwise_loss(tmp_path, tiny_base, judge_data):
    """The comparative term alone, 8 steps on the tiny model: its loss on the training rows falls, and the
    run logs it; without negatives in the data the pairwise term is refused."""
    import random

    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from findbench.judge.data import load_judge_data
    from findbench.judge.train import _collate, encode_comparison
    from findbench.models import peft_wrapping

    out = tmp_path / "pairwise"
    args = _args(tiny_base, judge_data, out, pairwise_weight=1.0, likelihood_weight=0.0, pairwise_margin=2.0,
                 negatives_per_example=2, max_steps=8, gradient_accumulation_steps=1, learning_rate=2e-2,
                 max_length=384)
    train_judge(args)
    summary = json.loads((out / "findbench_evaluator.json").read_text())
    assert all("pairwise_loss" in e for e in summary["log_history"]) and summary["final_pairwise_loss"] is not None
    assert summary["args"]["pairwise_weight"] == 1.0

    tok = AutoTokenizer.from_pretrained(tiny_base)
    rows = load_judge_data(judge_data)["train"].to_list()[:12]
    encs = [encode_comparison(tok, r, "pmi", 3, random.Random(f"0:{i}"), max_length=1024) for i, r in enumerate(rows)]
    batch = _collate(tok.pad_token_id)([{"input_ids": [1], "labels": [1], "pairwise": e} for e in encs])
    base = AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32).eval()
    with torch.no_grad(), peft_wrapping():
        before = float(comparative_loss(base, batch, 2.0))
        after = float(comparative_loss(PeftModel.from_pretrained(base, str(out)).eval(), batch, 2.0))
    print(f"pairwise loss on 12 training rows: {before:.3f} -> {after:.3f}")
    assert after < before - 0.3, (before, after)  # measured: 3.93 -> 3.22

    from findbench.find import load_rows
    from findbench.judge.config import JudgeDataConfig
    from findbench.judge.data import build_judge_data

    plain = tmp_path / "plain-data"
    build_judge_data(JudgeDataConfig(out=str(plain), n=6, n_heldout=0, negatives=False, n_near=0),
                     rows_by_category={"strings": load_rows("strings", seed=0)[:20]})
    with pytest.raises(ValueError, match="negatives"):
        train_judge(_args(tiny_base, str(plain), tmp_path / "x", pairwise_weight=1.0, max_steps=1))
