"""Judge fine-tuning on a tiny random Llama: loss goes down, the adapter loads as a judge,
resuming continues the step count, the report runs end to end."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest
import torch

from findbench.constants import TRAINED_MARKER
from findbench.judge.train import TrainArgs, make_parser, parse_train_args, tokenize_judge_row, train_judge
from tests._paths import REPO


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
    from findbench.judge.data import build_judge_data

    out = tmp_path_factory.mktemp("data") / "judge-data"
    return str(build_judge_data(out, n=24, n_heldout=6, seed=0, rows_by_category={"strings": strings_rows}))


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
    enc = tokenize_judge_row(tok, msgs, "[ANSWER]: 2")
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
    with pytest.raises(ValueError, match="learning_rate"):
        TrainArgs(learning_rate=0).validate()
    with pytest.raises(ValueError, match="hub_model_id"):
        TrainArgs(push_to_hub=True).validate()
    cfg = tmp_path / "c.yaml"
    cfg.write_text("learning_rate: 3.0e-4\nlora_r: 4\n")
    args = parse_train_args(["--config", str(cfg), "--lora_r", "2"])
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
    args = parse_train_args(["--config", str(embedded), "--lora_r", "4"])
    assert args.lora_r == 4 and args.to_dict() == {**TrainArgs().to_dict(), **recipe, "lora_r": 4}


def test_flags_are_the_fields_in_both_spellings_and_override_the_yaml(tmp_path, capsys):
    """Every TrainArgs field is a flag spelled --field_name and --field-name (as HfArgumentParser
    made them) with the field's default and help; --config YAML sets fields, flags override them."""
    from findbench.judge.train import make_parser

    actions: dict = {}
    for action in make_parser()._actions:  # --no_hub_private shares hub_private's dest; the first holds the default
        actions.setdefault(action.dest, action)
    for f in dataclasses.fields(TrainArgs):
        assert actions[f.name].default == f.default and actions[f.name].help == f.metadata["help"], f.name
        assert {f"--{f.name}", f"--{f.name.replace('_', '-')}"} <= set(actions[f.name].option_strings), f.name
    assert sorted(actions) == sorted(["help", "config", *(f.name for f in dataclasses.fields(TrainArgs))])
    assert parse_train_args([]) == TrainArgs()

    cfg = tmp_path / "c.yaml"
    cfg.write_text("learning_rate: 3.0e-4\nlora_r: 4\nmerge: true\nhub_private: false\nmodel: some/model\n")
    expected = TrainArgs(learning_rate=3e-4, lora_r=2, merge=False, hub_private=False, model="some/model", data_seed=5)
    for spelled in (["--lora_r", "2", "--merge", "false", "--data_seed", "5"],
                    ["--lora-r=2", "--merge=no", "--data-seed", "5"]):
        assert parse_train_args(["--config", str(cfg), *spelled]) == expected
    assert parse_train_args(["--config", str(cfg)]) == TrainArgs(learning_rate=3e-4, lora_r=4, merge=True,
                                                                 hub_private=False, model="some/model")
    assert parse_train_args(["--no_hub_private"]).hub_private is False
    assert parse_train_args(["--no-hub-private", "--hub-private"]).hub_private is True  # the last one wins
    switched = parse_train_args(["--full_finetune", "--push-to-hub", "--hub_model_id", "o/j",
                                 "--mixed-precision", "bf16"])
    assert (switched.full_finetune, switched.push_to_hub, switched.hub_model_id, switched.mixed_precision) == (
        True, True, "o/j", "bf16")
    # a value argparse cannot read: its one-line error naming the flag, exit 2
    for argv, message in ((["--lora-r", "x"], "argument --lora_r/--lora-r: invalid int value: 'x'"),
                          (["--merge", "maybe"], "argument --merge: expected a truth value"),
                          (["--lora_r", "2", "--bogus"], "unrecognized arguments: --bogus")):
        with pytest.raises(SystemExit) as exc:
            parse_train_args(argv, prog="findbench train-judge")
        assert exc.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1].startswith(f"findbench train-judge: error: {message}")


def test_train_args_groups():
    from findbench.judge.train import DataArgs, ModelArgs, OptimArgs, OutputArgs

    args = TrainArgs(lora_r=3, output_dir="out", data_seed=2, model="m")
    assert (args.model, args.lora_r, args.output_dir, args.data_seed) == ("m", 3, "out", 2)  # flat access
    assert set(args.to_dict()) == {
        f for cls in (DataArgs, ModelArgs, OptimArgs, OutputArgs) for f in cls.__dataclass_fields__
    }
    assert TrainArgs(**args.to_dict()) == args
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
    with pytest.raises(ValueError, match="resume_from_checkpoint"):
        train_judge(_args(smol_base, judge_data, out, resume_from_checkpoint=str(tmp_path)))


@pytest.mark.slow
def test_report_end_to_end_on_tiny_judges(tmp_path, smol_base, judge_data):
    from findbench.judge.config import JudgeReportConfig
    from findbench.judge.report import format_table, judge_report

    judge = train_judge(_args(smol_base, judge_data, tmp_path / "judge", max_steps=2))
    report = judge_report(
        JudgeReportConfig(
            judge=judge,
            baseline=smol_base,
            out=tmp_path / "report",
            limit=2,
            categories=["strings"],
            evaluator_data=judge_data,
        ),
        progress=False,
    )
    with open(tmp_path / "report" / "evaluator_report.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["label"], r["descriptions"]) for r in rows] == [
        ("before", "true"),
        ("before", "wrong"),
        ("after", "true"),
        ("after", "wrong"),
    ]
    assert all(r["n_functions"] == "2" and 0 <= float(r["unit_test_accuracy"]) <= 1 for r in rows)
    assert all(
        float(r["unit_test_accuracy_low"]) <= float(r["unit_test_accuracy"]) <= float(r["unit_test_accuracy_high"])
        for r in rows
    )
    assert (tmp_path / "report" / "evaluator_report.png").stat().st_size > 1000
    # only held-out functions of the judge data are judged
    held = set(json.loads((Path(judge_data) / "function_splits.json").read_text())["functions"].items())
    for r in report["results"]:
        assert all((f, "heldout") in held for f in r["function_ids"])
    table = format_table(report)
    assert table.splitlines()[0].startswith("| category | n | before (true)") and "| strings | 2 |" in table
    # each judge in its own mode: the tiny base in FIND's format, the trained judge in pmi
    assert [r["mode"] for r in rows] == ["logprob", "logprob", "pmi", "pmi"]
    with pytest.raises(ValueError, match="limit"):
        JudgeReportConfig(judge=judge, limit=1)
    # the baseline in several modes, labelled by mode
    multi = judge_report(
        JudgeReportConfig(
            judge=judge,
            baseline=smol_base,
            baseline_mode=["logprob", "pmi"],
            limit=2,
            categories=["strings"],
            evaluator_data=judge_data,
            out=None,
        ),
        progress=False,
    )
    assert [(r["label"], r["mode"]) for r in multi["results"] if r["descriptions"] == "true"] == [
        ("before (logprob)", "logprob"),
        ("before (pmi)", "pmi"),
        ("after", "pmi"),
    ]
    with pytest.raises(ValueError, match="mode"):
        JudgeReportConfig(
            judge=judge,
            baseline=smol_base,
            baseline_mode="vote",
            limit=2,
            categories=["strings"],
            evaluator_data=judge_data,
        )


def test_cli_train_judge_options(tmp_path, monkeypatch, capsys):
    """`findbench train-judge` reads its flags with the training parser (make_parser)."""
    import findbench.judge.train as train_mod
    from findbench.cli import main

    seen: list[TrainArgs] = []
    monkeypatch.setattr(train_mod, "train_judge", lambda args: seen.append(args) or "judge-folder")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("learning_rate: 3.0e-4\nlora_r: 4\nmodel: some/model\n")
    assert main(["train-judge", "--config", str(cfg), "--lora_r", "2", "--full_finetune"]) == 0
    args = seen[-1]
    assert (args.learning_rate, args.lora_r, args.full_finetune, args.model) == (3e-4, 2, True, "some/model")
    assert main(["train-judge", "--merge", "false"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "wrote judge-folder"
    assert seen[-1].merge is False and seen[-1].learning_rate == TrainArgs().learning_rate
    with pytest.raises(ValueError, match="lora_r"):
        parse_train_args(["--lora_r", "0"])
    capsys.readouterr()
    assert main(["train-judge", "--lora_r", "0"]) == 2
    assert "findbench train-judge: error: lora_r" in capsys.readouterr().err
    assert len(seen) == 2


def test_judge_report_table_shows_intervals_and_n():
    from findbench.judge.report import format_table
    from findbench.stats import SMALL_N_LEGEND, bootstrap_ci

    per_function = [1.0, 0.5, 0.0, 1.0]
    result = {
        "judge": "j",
        "label": "after",
        "mode": "pmi",
        "category": "strings",
        "descriptions": "true",
        "n_functions": 4,
        "unit_test_accuracy": 0.625,
        "unit_test_accuracy_ci": list(bootstrap_ci(per_function)),
        "per_function": per_function,
    }
    table = format_table({"results": [result]})
    low, high = result["unit_test_accuracy_ci"]
    assert f"| strings | 4 | 0.625 [{low:.3f}, {high:.3f}] (n=4)† |" in table
    assert SMALL_N_LEGEND in table


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
    assert "--install-as-default [INSTALL_AS_DEFAULT] then install the judge as the default" in shown
