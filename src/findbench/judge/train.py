"""Fine-tune FIND's judge with accelerate + peft (FIND appendix F1: Vicuna-13B, ~30K unit
tests, 3 epochs, cosine schedule).

LoRA (or ``full_finetune``), loss on the answer tokens only, checkpoints with
``Accelerator.save_state``; runs under ``python`` and ``accelerate launch``. The result is a folder
:func:`findbench.lm.load_lm` loads. The flags are the fields of :class:`TrainArgs` (:func:`make_parser`).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import logging
import math
import os
import random
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any

from findbench._checks import integer, one_of, positive_int
from findbench._config import HelpFormatter, add_arguments, arg, from_namespace
from findbench.constants import TRAINED_MARKER, UsageError
from findbench.models import embedded_judge_dir, peft_wrapping

log = logging.getLogger(__name__)

_STATE_FILE = "trainer_state.json"
#: The name of train-judge's default output folders, before the UTC date-time.
_NEW_JUDGE = "judge-"
_CKPT = re.compile(r"^step-(\d+)$")


# -- arguments: four groups, one parser (findbench._config); a field's name is its flag (lora_r: --lora-r)
# and its --config YAML key


@dataclass
class DataArgs:
    """What the judge trains on: the judge data, how much of it, and how rows become tokens."""

    _argument_group_name = "data"

    data: str | None = arg(None, "judge data folder (findbench judge-data); default: build n_data rows in memory")
    n_data: int = arg(30000, "rows to build when --data is not given")
    data_seed: int = arg(0, "seed of the data build (function split, draws)")
    max_train_rows: int | None = arg(3600, "train on the first N (shuffled) rows only; 0: all")
    eval_rows: int = arg(
        150, "validation rows scored at the end (loss, judge accuracy), taken evenly across categories"
    )
    judge_mode: str = arg(
        "pmi",
        "pmi: learn to write a function's example given its description (the judge scores options by "
        "pointwise mutual information, findbench.judge mode 'pmi'); logprob: learn FIND's answer '[ANSWER]: k'",
    )
    max_length: int = arg(1024, "longer rows are truncated from the left of the prompt")

    def validate(self) -> None:
        positive_int("--n-data", self.n_data)
        positive_int("--max-length", self.max_length)
        integer("--eval-rows", self.eval_rows, 0)
        integer("--max-train-rows", self.max_train_rows, 0, optional=True)
        one_of("--judge-mode", self.judge_mode, ("pmi", "logprob"))


@dataclass
class ModelArgs:
    """The base model and what is trained on it: a LoRA adapter (the default) or every weight."""

    _argument_group_name = "model"

    model: str = arg("embedded", "base model: 'embedded', a folder or a Hub id")
    full_finetune: bool = arg(False, "train every weight instead of a LoRA adapter")
    lora_r: int = arg(16, "LoRA rank")
    lora_alpha: int = arg(32, "LoRA alpha")
    lora_dropout: float = arg(0.05, "LoRA dropout")
    lora_top_layers: int = arg(
        12, "LoRA on the top N decoder layers only (0: all); the frozen layers below need no backward pass"
    )
    lora_target_modules: str = arg("all-linear", "peft target_modules: 'all-linear' or comma-separated module names")

    def validate(self) -> None:
        positive_int("--lora-r", self.lora_r)
        positive_int("--lora-alpha", self.lora_alpha)
        if not 0 <= self.lora_dropout < 1:
            raise UsageError(f"--lora-dropout must be in [0, 1), got {self.lora_dropout!r}")
        integer("--lora-top-layers", self.lora_top_layers, 0)


@dataclass
class OptimArgs:
    """Optimizer, schedule, batch shape, seeds and numerics."""

    _argument_group_name = "optimisation"

    learning_rate: float = arg(1e-3, "peak learning rate")
    loss_reduction: str = arg(
        "token", "row: answer-token losses summed per row, mean over rows; token: mean over tokens"
    )
    lr_scheduler_type: str = arg("cosine", "transformers scheduler name")
    warmup_ratio: float = arg(0.05, "fraction of steps of linear warm-up")
    weight_decay: float = arg(0.0, "AdamW weight decay")
    max_grad_norm: float = arg(1.0, "gradient clipping (0: off)")
    num_train_epochs: float = arg(1.0, "epochs over the training rows")
    max_steps: int = arg(-1, "optimizer steps (overrides epochs when > 0)")
    per_device_train_batch_size: int = arg(8, "rows per forward pass and device")
    gradient_accumulation_steps: int = arg(1, "forward passes per optimizer step")
    seed: int = arg(0, "seed of initialisation and data order")
    mixed_precision: str | None = arg(None, "no, fp16 or bf16; default: the accelerate config's (or no)")
    num_threads: int | None = arg(None, "torch CPU threads (default: torch's choice)")

    def validate(self) -> None:
        positive_int("--per-device-train-batch-size", self.per_device_train_batch_size)
        positive_int("--gradient-accumulation-steps", self.gradient_accumulation_steps)
        if not self.learning_rate > 0:
            raise UsageError(f"--learning-rate must be > 0, got {self.learning_rate!r}")
        if not 0 <= self.warmup_ratio < 1:
            raise UsageError(f"--warmup-ratio must be in [0, 1), got {self.warmup_ratio!r}")
        if self.max_steps <= 0 and not self.num_train_epochs > 0:
            raise UsageError(f"--num-train-epochs must be > 0 when --max-steps is not set, "
                             f"got {self.num_train_epochs!r}")
        one_of("--loss-reduction", self.loss_reduction, ("row", "token"))
        one_of("--mixed-precision", self.mixed_precision, (None, "no", "fp16", "bf16"))


@dataclass
class ComparativeArgs:
    """The comparative term beside the likelihood: on a row's unit test, the judge's own decision score
    (judge_mode's: pmi or the option number's log-probability) of the correct option under the true
    description must beat its score under each losing description (the row's `negatives`, from
    findbench judge-data) and the near-miss options' scores under the truth, each by a margin (hinge)."""

    _argument_group_name = "comparative objective"

    likelihood_weight: float = arg(1.0, "weight of the likelihood term (the answer tokens' cross-entropy)")
    pairwise_weight: float = arg(
        0.0, "weight of the pairwise hinge term (0: off, the shipped recipe; training/configs/comparative.yaml: 1)"
    )
    pairwise_margin: float = arg(1.0, "margin in nats the truth's score must win each comparison by")
    negatives_per_example: int = arg(4, "losing descriptions per row, a seeded sample of its negatives")

    def validate(self) -> None:
        for name in ("likelihood_weight", "pairwise_weight"):
            if not getattr(self, name) >= 0:
                raise UsageError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(self, name)!r}")
        if self.likelihood_weight == 0 and self.pairwise_weight == 0:
            raise UsageError("--likelihood-weight and --pairwise-weight are both 0: nothing to train")
        if not self.pairwise_margin >= 0:
            raise UsageError(f"--pairwise-margin must be >= 0, got {self.pairwise_margin!r}")
        positive_int("--negatives-per-example", self.negatives_per_example)


@dataclass
class OutputArgs:
    """Where the judge goes, logging, checkpoints and the optional Hub upload."""

    _argument_group_name = "output"

    output_dir: str | None = arg(
        None, f"where the judge is written; default: a new folder ./{_NEW_JUDGE}<UTC date-time> (with "
        "--resume-from-checkpoint latest: the newest such folder with checkpoints left)"
    )
    install_as_default: bool = arg(
        False, "then install the judge as the default embedded-evaluator (a copy in findbench's cache, which evaluate, "
        "main and judge-card use from then on instead of the shipped one); without it the default judge is untouched"
    )
    logging_steps: int = arg(25, "log every N optimizer steps")
    save_steps: int = arg(50, "checkpoint every N optimizer steps (0: only at the end)")
    save_total_limit: int = arg(2, "checkpoints kept")
    resume_from_checkpoint: str | None = arg(
        None, "a checkpoint folder, or 'latest' for the newest under output_dir/checkpoints"
    )
    merge: bool = arg(False, "also write merged weights to output_dir/merged (LoRA)")
    push_to_hub: bool = arg(False, "upload the judge folder to the Hub at the end")
    hub_model_id: str | None = arg(None, "Hub repo id for --push-to-hub")
    hub_private: bool = arg(True, "create the Hub repo as private", no_help="create the Hub repo as public")

    def validate(self) -> None:
        for name in ("logging_steps", "save_steps", "save_total_limit"):
            integer(name, getattr(self, name), 0)
        if self.push_to_hub and not self.hub_model_id:
            raise UsageError("--hub-model-id is required with --push-to-hub")


#: The argument groups, in parsing order (``--help`` lists the flags by group).
ARG_GROUPS: tuple[type, ...] = (DataArgs, ModelArgs, OptimArgs, ComparativeArgs, OutputArgs)


@dataclass
class TrainArgs(OutputArgs, ComparativeArgs, OptimArgs, ModelArgs, DataArgs):
    """fine-tune the judge with accelerate + peft: every argument of train_judge, flat (defaults: the
    embedded-evaluator recipe)"""

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        for group in ARG_GROUPS:
            group.validate(self)
        if self.full_finetune and self.merge:
            raise UsageError("--merge applies to LoRA training only (a full fine-tune already writes full weights)")

    def to_dict(self) -> dict[str, Any]:
        """All fields, flat (the keys of a ``--config`` YAML file)."""
        return dataclasses.asdict(self)


def make_parser(**kwargs: Any) -> argparse.ArgumentParser:
    """The parser of ``training/train_evaluator.py``: the training flags, a group per class of
    :data:`ARG_GROUPS` (``--lora-r``, as ``findbench train-judge`` has them), plus ``--config``.
    Standard library only: ``--help`` imports no model library."""
    kwargs.setdefault("description", "Fine-tune FIND's unit-test judge (accelerate + peft).")
    kwargs.setdefault("formatter_class", HelpFormatter)
    parser = argparse.ArgumentParser(**kwargs)
    for group in ARG_GROUPS:
        add_arguments(parser.add_argument_group(group._argument_group_name, group.__doc__), group)
    parser.add_argument(
        "--config", default=None, metavar="FILE.yaml",
        help="YAML file of flat field: value pairs (e.g. training/configs/embedded.yaml); flags given here win",
    )
    return parser


def _read_config(path: str) -> dict[str, Any]:
    import yaml

    with open(path, encoding="utf-8") as fh:
        values = yaml.safe_load(fh) or {}
    if not isinstance(values, dict):
        raise ValueError(f"--config {path}: expected a mapping of training fields")
    unknown = sorted(set(values) - {f.name for f in dataclasses.fields(TrainArgs)})
    if unknown:
        raise ValueError(f"--config {path}: unknown fields {unknown}")
    return values


def parse_train_args(argv: Sequence[str] | None = None, *, prog: str | None = None) -> TrainArgs:
    """TrainArgs from command-line flags (default ``sys.argv[1:]``); ``--config file.yaml`` supplies
    values that flags override. ValueError naming an unknown YAML field or a bad value."""
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser(**({"prog": prog} if prog else {}))
    # first pass: find --config, whose values become defaults that flags override in the second
    known, _ = parser.parse_known_args(argv)
    if known.config:
        parser.set_defaults(**_read_config(known.config))
    args = from_namespace(TrainArgs, parser.parse_args(argv))
    args.validate()
    return args


# -- data ---------------------------------------------------------------------------------
def _ensure_chat_template(tokenizer: Any) -> None:
    if not getattr(tokenizer, "chat_template", None):
        from findbench.lm.transformers_lm import VICUNA_CHAT_TEMPLATE

        tokenizer.chat_template = VICUNA_CHAT_TEMPLATE


def tokenize_judge_row(
    tokenizer: Any, messages: Sequence[dict], target: str, max_length: int
) -> dict[str, list[int]]:
    """Token ids and labels of one judge row: the prompt as the judge renders it, then the answer
    with the template's end-of-turn tokens (so the model learns to stop); labels are -100 on the prompt."""
    prompt = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(list(messages) + [{"role": "assistant", "content": target}], tokenize=False)
    if not full.startswith(prompt):
        answer = target + (tokenizer.eos_token or "")
    else:
        answer = full[len(prompt) :]
    p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    a_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    if len(a_ids) >= max_length:
        raise ValueError(f"max_length {max_length} leaves no room for the prompt (answer is {len(a_ids)} tokens)")
    keep = max_length - len(a_ids)
    if len(p_ids) > keep:
        p_ids = p_ids[-keep:]
    return {"input_ids": p_ids + a_ids, "labels": [-100] * len(p_ids) + a_ids}


def judge_training_pair(row: Mapping[str, Any], judge_mode: str) -> tuple[list[dict], str]:
    """The ``(messages, target)`` a judge row trains on: ``"logprob"``, the row's prompt and
    ``"[ANSWER]: k"``; ``"pmi"``, the pmi prompt of its description and the correct option as an example."""
    from findbench.judge.scoring import render_pmi_option, render_pmi_prompt

    if judge_mode == "logprob":
        return list(row["messages"]), row["target"]
    if not row.get("description"):
        raise ValueError(
            "row has no 'description' (judge data from findbench < 0.2?); rebuild it with `findbench judge-data`"
        )
    unit_test = json.loads(row["unit_test"]) if isinstance(row["unit_test"], str) else row["unit_test"]
    category = row["category"]
    return render_pmi_prompt(row["description"], category), render_pmi_option(
        unit_test, int(unit_test["correct"]), category
    )


def _continuation_row(tokenizer: Any, messages: Sequence[dict], prefix: str, continuation: list[int],
                      max_length: int) -> dict[str, list[int]]:
    """Token ids and labels of ``continuation`` (token ids) after the prompt ``messages`` + ``prefix``, as
    the judge renders them; the prompt is cut from the left to ``max_length``."""
    prompt = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True) + prefix
    p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"][-max(1, max_length - len(continuation)) :]
    return {"input_ids": p_ids + continuation, "labels": [-100] * len(p_ids) + continuation}


def _digit_context(tokenizer: Any) -> tuple[str, list[int]]:
    """What the ``logprob`` judge scores the option numbers after (the answer prefix, its trailing space
    moved into the digits where that keeps each one token) and the digits' token ids."""
    from findbench.judge.scoring import ANSWER_PREFIX

    stripped = ANSWER_PREFIX.rstrip()
    for ctx, moved in ((stripped, ANSWER_PREFIX[len(stripped) :]), (ANSWER_PREFIX, "")):
        base = tokenizer(ctx, add_special_tokens=False)["input_ids"]
        ids = [tokenizer(ctx + moved + str(k), add_special_tokens=False)["input_ids"] for k in (1, 2, 3)]
        if all(len(f) == len(base) + 1 and f[: len(base)] == base for f in ids):
            return ctx, [f[-1] for f in ids]
    raise ValueError(f"the option numbers are not single tokens after {ANSWER_PREFIX!r} for this tokenizer")


def encode_comparison(
    tokenizer: Any, row: Mapping[str, Any], judge_mode: str, n_negatives: int, rng: Any, max_length: int
) -> dict[str, Any] | None:
    """The sequences the pairwise term scores for one judge row, or None when it lists no negatives.

    ``{"seqs": [{"input_ids", "labels"}], "layout": [n_options, correct (0-based), n_negatives, pmi]}``:
    every option under the true description, in ``pmi`` mode every option under the null description too,
    then the correct option under each of ``n_negatives`` losing descriptions drawn from the row's ``negatives``.
    """
    from findbench.judge.scoring import (
        NULL_DESCRIPTION,
        render_judge_prompt,
        render_pmi_option,
        render_pmi_prompt,
    )

    negatives = json.loads(row.get("negatives") or "[]")
    if not negatives:
        return None
    chosen = [n["description"] for n in rng.sample(negatives, min(n_negatives, len(negatives)))]
    unit_test = json.loads(row["unit_test"]) if isinstance(row["unit_test"], str) else row["unit_test"]
    category, correct, n_opts = row["category"], int(unit_test["correct"]) - 1, len(unit_test["inputs"])
    if judge_mode == "pmi":
        options = [tokenizer(render_pmi_option(unit_test, k, category), add_special_tokens=False)["input_ids"]
                   for k in range(1, n_opts + 1)]
        cases = [(render_pmi_prompt(d, category), options[k]) for d in (row["description"], NULL_DESCRIPTION)
                 for k in range(n_opts)] + [(render_pmi_prompt(d, category), options[correct]) for d in chosen]
        prefix = ""
    else:
        prefix, digits = _digit_context(tokenizer)
        cases = [(render_judge_prompt(row["description"], unit_test, category), [digits[k]]) for k in range(n_opts)]
        cases += [(render_judge_prompt(d, unit_test, category), [digits[correct]]) for d in chosen]
    seqs = [_continuation_row(tokenizer, m, prefix, c, max_length) for m, c in cases]
    return {"seqs": seqs, "layout": [n_opts, correct, len(chosen), int(judge_mode == "pmi")]}


#: Padded tokens per forward pass of the pairwise term's sequences (sorted by length, so little is padding);
#: :func:`comparative_backward` holds one such chunk's activations at a time.
_CMP_CHUNK_TOKENS = 2048


def _collate(pad_id: int):
    """Left-padded batches with position ids: the answer tokens are the last columns. Rows with a
    ``pairwise`` entry (:func:`encode_comparison`) add its sequences, sorted by length and padded in
    chunks of about :data:`_CMP_CHUNK_TOKENS` (``cmp_chunks``; ``cmp_order``: their places in the
    rows' order), and the rows' ``cmp_layout``."""
    import torch

    from findbench.lm.transformers_lm import left_pad

    def pad(rows: list[dict], key: str = "") -> dict[str, Any]:
        ids, mask = left_pad([b["input_ids"] for b in rows], pad_id)
        labels, _ = left_pad([b["labels"] for b in rows], -100)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        return {f"{key}input_ids": ids, f"{key}labels": labels, f"{key}attention_mask": mask,
                f"{key}position_ids": positions}

    def collate(batch: list[dict]) -> dict[str, Any]:
        out = pad(batch)
        pairs = [b["pairwise"] for b in batch if b.get("pairwise")]
        if pairs:
            seqs = [s for p in pairs for s in p["seqs"]]
            order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]["input_ids"]))
            chunks: list[list[int]] = [[]]
            for i in order:
                if chunks[-1] and (len(chunks[-1]) + 1) * len(seqs[i]["input_ids"]) > _CMP_CHUNK_TOKENS:
                    chunks.append([])
                chunks[-1].append(i)
            out["cmp_chunks"] = [pad([seqs[i] for i in chunk]) for chunk in chunks]
            out["cmp_order"] = torch.tensor(order, dtype=torch.long)
            out["cmp_layout"] = torch.tensor([p["layout"] for p in pairs], dtype=torch.long)
        return out

    return collate


def sequence_logprobs(model: Any, batch: dict) -> Any:
    """Each row's summed log-probability of its labelled tokens (differentiable), shape ``(B,)``."""
    import torch

    logits, labels = _answer_logits_and_labels(model, batch)
    logp = torch.log_softmax(logits.float(), dim=-1)
    picked = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (picked * (labels != -100)).sum(dim=1)


def pairwise_hinge(logprobs: Any, layout: Any, margin: float) -> Any:
    """The comparative loss from the sequences' log-probabilities laid out as :func:`encode_comparison`
    writes them: per row, with ``s(o | d)`` the judge's score of option ``o`` under description ``d``
    (``pmi``: log P(o | d) - log P(o | null); ``logprob``: log P(o | d)), the mean over losing descriptions
    ``L`` of ``relu(margin - (s(c | truth) - s(c | L)))`` plus the mean over wrong options ``o`` of
    ``relu(margin - (s(c | truth) - s(o | truth)))``; averaged over rows. Zero when the truth wins every
    comparison by ``margin``."""
    import torch

    losses, start = [], 0
    for n, c, m, pmi in layout.tolist():
        true = logprobs[start : start + n]
        score = true - logprobs[start + n : start + 2 * n] if pmi else true
        start += n * (1 + pmi)
        lose = logprobs[start : start + m]  # s(c | truth) - s(c | L): the null term cancels in pmi
        start += m
        wrong = torch.cat([score[:c], score[c + 1 :]])
        loss = torch.relu(margin - (score[c] - wrong)).mean()
        losses.append(loss + torch.relu(margin - (true[c] - lose)).mean() if m else loss)
    return torch.stack(losses).mean()


def comparison_logprobs(model: Any, batch: dict) -> Any:
    """The summed log-probabilities of a collated batch's pairwise sequences, in :func:`encode_comparison`'s order."""
    import torch

    by_length = torch.cat([sequence_logprobs(model, chunk) for chunk in batch["cmp_chunks"]])
    return by_length[torch.argsort(batch["cmp_order"])]


def comparative_loss(model: Any, batch: dict, margin: float) -> Any:
    """:func:`pairwise_hinge` of a collated batch's pairwise sequences under ``model``."""
    return pairwise_hinge(comparison_logprobs(model, batch), batch["cmp_layout"], margin)


def comparative_backward(model: Any, batch: dict, margin: float, weight: float, backward: Any) -> Any:
    """The value of :func:`comparative_loss` (detached), its gradient times ``weight`` accumulated through
    ``backward`` (``accelerator.backward``) one chunk at a time: the log-probabilities are first computed
    without a graph, the hinge's gradient with respect to them taken, then each chunk with a nonzero share
    is run again with a graph (the same dropout draws) and back-propagated with it, so the activations of
    one chunk are held at a time, not a batch's ten-odd sequences per row."""
    import torch

    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    seeds = [int(torch.randint(2**62, ())) for _ in batch["cmp_chunks"]]

    def run(chunk: dict, seed: int) -> Any:
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            return sequence_logprobs(model, chunk)

    with torch.no_grad():
        parts = [run(c, s) for c, s in zip(batch["cmp_chunks"], seeds)]
    lp = torch.cat(parts).detach().requires_grad_(True)
    loss = pairwise_hinge(lp[torch.argsort(batch["cmp_order"])], batch["cmp_layout"], margin)
    (grad,) = torch.autograd.grad(loss, lp)
    for chunk, seed, g in zip(batch["cmp_chunks"], seeds, torch.split(grad, [len(p) for p in parts])):
        if bool(g.any()):
            backward(weight * (run(chunk, seed) * g).sum())
    return loss.detach()


def _answer_logits_and_labels(model: Any, batch: dict) -> tuple[Any, Any]:
    """Logits predicting the answer tokens and their labels, ``(B, K, V)`` and ``(B, K)``; the LM
    head runs on the last ``K + 1`` positions only."""
    labels = batch["labels"]
    labelled = (labels != -100).any(dim=0).nonzero().flatten()
    if labelled.numel() == 0:
        raise ValueError("batch has no answer tokens (every label is -100)")
    k = labels.shape[1] - int(labelled[0])
    out = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
        use_cache=False,
        logits_to_keep=k + 1,
    )
    return out.logits[:, :-1, :], labels[:, -k:]


def answer_loss(model: Any, batch: dict, reduction: str = "row") -> Any:
    """Cross-entropy on a batch's answer tokens: ``"row"``, summed per row and averaged over rows;
    ``"token"``, averaged over all answer tokens."""
    return _cross_entropy(*_answer_logits_and_labels(model, batch), reduction=reduction)


def _cross_entropy(logits: Any, labels: Any, reduction: str = "token") -> Any:
    import torch

    flat = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100, reduction="none"
    ).reshape(labels.shape)
    if reduction == "token":
        return flat.sum() / (labels != -100).sum().clamp(min=1)
    return flat.sum(dim=1).mean()


def _load_rows(args: TrainArgs) -> tuple[list[dict], list[dict]]:
    """Training rows and up to ``eval_rows`` validation rows mixed across categories; sets ``args.data``."""
    from findbench.judge.data import default_data_dir, load_judge_data

    data = args.data if args.data is not None else default_data_dir(n=args.n_data, seed=args.data_seed)
    args.data = str(data)
    dd = load_judge_data(data)
    train = dd["train"].to_list()
    valid = dd["validation"].to_list() if "validation" in dd else []
    if args.max_train_rows:
        train = train[: args.max_train_rows]
    # validation rows are stored category by category: take them round-robin
    by_cat: dict[str, list[dict]] = {}
    for r in valid:
        by_cat.setdefault(r["category"], []).append(r)
    mixed = [r for group in zip_longest(*by_cat.values()) for r in group if r is not None]
    return train, mixed[: args.eval_rows]


# -- checkpoints --------------------------------------------------------------------------
def _checkpoints(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _CKPT.match(p.name)) and (p / _STATE_FILE).is_file()]
    return [p for _, p in sorted(found)]


def _resolve_resume(args: TrainArgs, ckpt_root: Path) -> Path | None:
    if not args.resume_from_checkpoint:
        return None
    if args.resume_from_checkpoint == "latest":
        found = _checkpoints(ckpt_root)
        if not found:
            log.info("no checkpoint under %s: starting from scratch", ckpt_root)
            return None
        return found[-1]
    path = Path(args.resume_from_checkpoint)
    if not (path / _STATE_FILE).is_file():
        raise UsageError(f"--resume-from-checkpoint: {path} is not a checkpoint (no {_STATE_FILE})")
    return path


def _model_card(args: TrainArgs, summary: dict) -> str:
    from findbench.resources import card_template

    body = card_template("evaluator_model_card.md")
    import yaml

    header = {
        "library_name": "peft" if not args.full_finetune else "transformers",
        "base_model": args.model,
        "license": "apache-2.0",
        "tags": ["find", "interpretability", "judge", "lora" if not args.full_finetune else "full-finetune"],
        "pipeline_tag": "text-generation",
    }
    values = {
        "base_model": args.model,
        "method": "full fine-tune"
        if args.full_finetune
        else (
            f"LoRA (r={args.lora_r}, alpha={args.lora_alpha}, targets {args.lora_target_modules}"
            + (f", top {args.lora_top_layers} layers" if args.lora_top_layers else "")
            + ")"
        ) + (
            f"; loss: {args.likelihood_weight:g} x likelihood + {args.pairwise_weight:g} x pairwise hinge on the "
            f"judge's score (margin {args.pairwise_margin:g} nats, {args.negatives_per_example} losing descriptions "
            "per row)" if args.pairwise_weight else ""
        ),
        "train_rows": str(summary["train_rows"]),
        "steps": str(summary["steps"]),
        "epochs": f"{summary['epochs']:.2f}",
        "learning_rate": f"{args.learning_rate:g}",
        "scheduler": args.lr_scheduler_type,
        "batch": str(summary["effective_batch_size"]),
        "final_loss": f"{summary['final_loss']:.4f}" if summary.get("final_loss") is not None else "n/a",
        "eval": json.dumps(summary.get("eval", {}), sort_keys=True),
        "data": args.data or f"built in memory (n={args.n_data}, seed={args.data_seed})",
        "wall": f"{summary['wall_seconds']:.0f}",
        "judge_mode": args.judge_mode,
        "prompt_fn": "render_pmi_prompt, render_pmi_option" if args.judge_mode == "pmi" else "render_judge_prompt",
        "mode_text": (
            "Trained in `pmi` mode: it learned to write an example of the function given its description, "
            "and a unit test is judged by scoring each example on its own as log P(example | description) - "
            "log P(example | no description), picking the highest."
            if args.judge_mode == "pmi"
            else "Trained in FIND's format: given the description and the three numbered examples it answers "
            "`[ANSWER]: k`."
        ),
    }
    for k, v in values.items():
        body = body.replace("{" + k + "}", v)
    return "---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n\n" + body


# -- evaluation ---------------------------------------------------------------------------
def _option_token_ids(tokenizer: Any, n_options: int = 3) -> list[int]:
    """Token ids of the option numbers after the answer prefix (its trailing space kept, else moved into the digit)."""
    from findbench.judge.scoring import ANSWER_PREFIX

    for ctx, moved in ((ANSWER_PREFIX, ""), (ANSWER_PREFIX.rstrip(), ANSWER_PREFIX[len(ANSWER_PREFIX.rstrip()) :])):
        base = tokenizer(ctx, add_special_tokens=False)["input_ids"]
        ids = []
        for k in range(1, n_options + 1):
            full = tokenizer(ctx + moved + str(k), add_special_tokens=False)["input_ids"]
            if len(full) == len(base) + 1 and full[: len(base)] == base:
                ids.append(full[-1])
        if len(ids) == n_options:
            return ids
    raise ValueError(f"the option numbers are not single tokens after {ANSWER_PREFIX!r} for this tokenizer")


def _eval_batches(model: Any, tokenizer: Any, encoded: list[dict], device: Any, batch_size: int):
    """``(logits, labels)`` of the answer tokens of ``encoded``, batch by batch, without gradients
    (under a progress bar)."""
    import torch
    from tqdm.auto import tqdm

    collate = _collate(tokenizer.pad_token_id)
    with tqdm(total=len(encoded), desc="validation: answer loss", unit="row", leave=False) as bar:
        for start in range(0, len(encoded), batch_size):
            batch = {k: v.to(device) for k, v in collate(encoded[start : start + batch_size]).items()}
            with torch.no_grad():
                yield _answer_logits_and_labels(model, batch)
            bar.update(len(encoded[start : start + batch_size]))


def _evaluate(model: Any, tokenizer: Any, encoded: list[dict], accelerator: Any, batch_size: int) -> dict[str, float]:
    """Mean answer loss and answer accuracy (argmax over the option digits) on encoded rows."""
    import torch

    option_ids = _option_token_ids(tokenizer)
    model.eval()
    losses, right = [], 0
    for logits, labels in _eval_batches(model, tokenizer, encoded, accelerator.device, batch_size):
        losses.append(float(_cross_entropy(logits, labels)) * len(labels))
        for r in range(labels.shape[0]):
            is_digit = torch.isin(labels[r], torch.tensor(option_ids, device=labels.device))
            digit_pos = int(is_digit.nonzero().flatten()[0])
            pick = int(torch.argmax(logits[r, digit_pos, option_ids]))
            right += int(option_ids[pick] == int(labels[r, digit_pos]))
    model.train()
    n = max(len(encoded), 1)
    return {"eval_loss": sum(losses) / n, "eval_answer_accuracy": right / n, "eval_rows": len(encoded)}


def _evaluate_pmi(
    model: Any, tokenizer: Any, rows: list[dict], encoded: list[dict], accelerator: Any, batch_size: int
) -> dict[str, Any]:
    """Mean target loss and the ``"pmi"`` judge's accuracy on the validation unit tests (and per category)."""
    from findbench.judge.scoring import judge_unit_tests
    from findbench.lm import TransformersLM

    model.eval()
    losses = [
        float(_cross_entropy(logits, labels)) * len(labels)
        for logits, labels in _eval_batches(model, tokenizer, encoded, accelerator.device, batch_size)
    ]
    lm = TransformersLM(
        model, tokenizer=tokenizer, device=str(accelerator.device), batch_size=max(batch_size, 8), name="training"
    )
    by_cat: dict[str, list[dict]] = {}
    for r in rows:
        by_cat.setdefault(r["category"], []).append(r)
    right, per_category = 0.0, {}
    for cat, cat_rows in sorted(by_cat.items()):
        tests = [[json.loads(r["unit_test"])] for r in cat_rows]
        out = judge_unit_tests(lm, [r["description"] for r in cat_rows], tests, cat, mode="pmi", progress=True)
        per_category[cat] = out["unit_test_accuracy"]
        right += sum(out["per_function"])
    model.train()
    n = max(len(encoded), 1)
    return {
        "eval_loss": sum(losses) / n,
        "eval_judge_accuracy": right / n,
        "eval_judge_accuracy_per_category": per_category,
        "eval_rows": len(encoded),
    }


# -- training -----------------------------------------------------------------------------
def train_judge(args: TrainArgs) -> str:
    """Fine-tune a judge; returns the output folder. Resumes from ``args.resume_from_checkpoint``."""
    import torch
    from accelerate import Accelerator
    from accelerate.utils import broadcast_object_list, set_seed

    if not isinstance(args, TrainArgs):
        raise TypeError(f"args must be a TrainArgs, got {type(args).__name__}")
    args.validate()
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    t_start = time.time()
    accelerator = Accelerator(
        gradient_accumulation_steps=args.gradient_accumulation_steps, mixed_precision=args.mixed_precision
    )
    out_dir = Path(broadcast_object_list([str(_output_dir(args))])[0])  # the main process's name everywhere
    args.output_dir = str(out_dir)
    log.info("the judge will be written to %s", out_dir)
    ckpt_root = out_dir.parent / f".{out_dir.name}.checkpoints"
    set_seed(args.seed)

    model, tokenizer = _load_model(args)
    train_rows, valid_rows = _load_rows(args)
    if not train_rows:
        raise UsageError("--data: no training rows")
    encoded = [
        tokenize_judge_row(tokenizer, *judge_training_pair(r, args.judge_mode), args.max_length) for r in train_rows
    ]
    if args.pairwise_weight > 0:
        for i, (row, enc) in enumerate(zip(train_rows, encoded)):
            enc["pairwise"] = encode_comparison(
                tokenizer, row, args.judge_mode, args.negatives_per_example, random.Random(f"{args.seed}:{i}"),
                args.max_length,
            )
        if not any(e["pairwise"] for e in encoded):
            raise UsageError(f"--data: {args.data} has no row with negatives for --pairwise-weight > 0; build it with "
                             "`findbench judge-data` (negatives on)")
    valid_encoded = [
        tokenize_judge_row(tokenizer, *judge_training_pair(r, args.judge_mode), args.max_length) for r in valid_rows
    ]
    lengths = [len(e["input_ids"]) for e in encoded]
    log.info(
        "training rows: %d (tokens per row: mean %.0f, max %d)", len(encoded), sum(lengths) / len(lengths), max(lengths)
    )

    run = _prepare(args, accelerator, model, tokenizer, encoded)
    if not args.full_finetune:
        _register_adapter_hooks(accelerator)
    resume = _resolve_resume(args, ckpt_root)
    if resume is not None:
        accelerator.load_state(str(resume))
        run.step = int(json.loads((resume / _STATE_FILE).read_text())["step"])
        log.info("resumed from %s at optimizer step %d of %d", resume, run.step, run.total_steps)
        if (resume / "log_history.json").is_file():
            run.history = json.loads((resume / "log_history.json").read_text())
    _train_loop(args, accelerator, run, ckpt_root, t_start)

    summary: dict[str, Any] = {
        "base_model": args.model,
        "method": "full" if args.full_finetune else "lora",
        "judge_mode": args.judge_mode,
        "train_rows": len(encoded),
        "steps": run.step,
        "epochs": run.step / run.steps_per_epoch,
        "effective_batch_size": args.per_device_train_batch_size
        * args.gradient_accumulation_steps
        * accelerator.num_processes,
        "final_loss": run.last_loss,
        "final_pairwise_loss": run.last_pairwise,
        "wall_seconds": time.time() - t_start,
        "log_history": run.history,
        "args": args.to_dict(),
    }
    unwrapped = accelerator.unwrap_model(run.model)
    if valid_encoded and accelerator.is_main_process:
        if args.judge_mode == "pmi":
            summary["eval"] = _evaluate_pmi(
                unwrapped, tokenizer, valid_rows, valid_encoded, accelerator, args.per_device_train_batch_size
            )
        else:
            summary["eval"] = _evaluate(
                unwrapped, tokenizer, valid_encoded, accelerator, args.per_device_train_batch_size
            )
        log.info("validation: %s", summary["eval"])
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        summary["trained"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        _write_judge(args, accelerator, run.model, tokenizer, summary, out_dir)
        if args.install_as_default:
            _install_as_default(out_dir)
        if args.push_to_hub:
            _push(out_dir, args)
        shutil.rmtree(ckpt_root, ignore_errors=True)
    accelerator.wait_for_everyone()
    accelerator.end_training()
    return str(out_dir)


def _output_dir(args: TrainArgs) -> Path:
    """``args.output_dir``, else a new folder ``judge-<UTC date-time>`` in the working folder (never the
    default judge's, which only ``install_as_default`` replaces); to resume the latest checkpoint, the
    newest such folder that left checkpoints."""
    if args.output_dir:
        return Path(args.output_dir).resolve()
    here = Path.cwd()
    if args.resume_from_checkpoint == "latest":
        left = sorted(p.name for p in here.glob(f".{_NEW_JUDGE}*.checkpoints") if _checkpoints(p))
        if left:
            return here / left[-1][1 : -len(".checkpoints")]
    stamp = time.strftime(f"{_NEW_JUDGE}%Y%m%d-%H%M%S", time.gmtime())
    names = itertools.chain([stamp], (f"{stamp}-{k}" for k in itertools.count(2)))  # runs started the same second
    return next(here / n for n in names if not (here / n).exists() and not (here / f".{n}.checkpoints").exists())


def _install_as_default(folder: Path) -> None:
    """Copy a finished judge folder into the default judge's place (``embedded-evaluator``), replacing it at once."""
    from findbench._io import atomic_dir

    target = Path(embedded_judge_dir(must_exist=False))
    with atomic_dir(target) as tmp:
        shutil.copytree(folder, tmp, dirs_exist_ok=True)
    log.info("installed %s as the default judge %s (evaluate, main and judge-card use it)", folder, target)


def _load_model(margs: TrainArgs) -> tuple[Any, Any]:
    """The base model (float32) with a LoRA adapter unless ``full_finetune``, and its tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from findbench.models import resolve

    base_path = resolve(margs.model)
    tokenizer = AutoTokenizer.from_pretrained(base_path)
    _ensure_chat_template(tokenizer)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32)
    model.config.use_cache = False
    if not margs.full_finetune:
        from peft import LoraConfig, get_peft_model

        targets: Any = margs.lora_target_modules
        if targets != "all-linear":
            targets = [t.strip() for t in targets.split(",") if t.strip()]
        layers: dict[str, Any] = {}
        if margs.lora_top_layers:
            n_layers = int(model.config.num_hidden_layers)
            if margs.lora_top_layers > n_layers:
                raise ValueError(
                    f"lora_top_layers must be at most the model's {n_layers} layers, got {margs.lora_top_layers}"
                )
            layers["layers_to_transform"] = list(range(n_layers - margs.lora_top_layers, n_layers))
            if targets == "all-linear":  # peft wants module names with layers_to_transform
                out_emb = model.get_output_embeddings()
                targets = sorted(
                    {
                        n.rsplit(".", 1)[-1]
                        for n, m in model.named_modules()
                        if isinstance(m, torch.nn.Linear) and m is not out_emb
                    }
                )
        peft_config = LoraConfig(
            r=margs.lora_r,
            lora_alpha=margs.lora_alpha,
            lora_dropout=margs.lora_dropout,
            target_modules=targets,
            task_type="CAUSAL_LM",
            bias="none",
            **layers,
        )
        with peft_wrapping():
            model = get_peft_model(model, peft_config)
    n_trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    n_total = sum(p.numel() for p in model.parameters())
    log.info("trainable parameters: %d of %d (%.2f%%)", n_trainable, n_total, 100 * n_trainable / n_total)
    return model, tokenizer


@dataclass
class _Run:
    """The prepared training objects and the loop's progress (step, log history, last loss)."""

    model: Any
    optimizer: Any
    scheduler: Any
    loader: Any
    generator: Any
    steps_per_epoch: int
    total_steps: int
    step: int = 0
    history: list[dict] = field(default_factory=list)
    last_loss: float | None = None
    last_pairwise: float | None = None


def _prepare(args: TrainArgs, accelerator: Any, model: Any, tokenizer: Any, encoded: list[dict]) -> _Run:
    """Data loader, AdamW (no weight decay on biases and norms) and schedule, prepared by accelerate."""
    import torch
    from transformers import get_scheduler

    generator = torch.Generator().manual_seed(args.seed)
    loader = torch.utils.data.DataLoader(
        encoded,
        batch_size=args.per_device_train_batch_size,
        shuffle=True,
        generator=generator,
        collate_fn=_collate(tokenizer.pad_token_id),
    )
    decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    optimizer = torch.optim.AdamW(groups, lr=args.learning_rate)

    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    steps_per_epoch = max(1, math.ceil(len(loader) / args.gradient_accumulation_steps))
    total_steps = args.max_steps if args.max_steps > 0 else math.ceil(args.num_train_epochs * steps_per_epoch)
    warmup = int(round(args.warmup_ratio * total_steps))
    # accelerate steps a prepared scheduler once per process: scale its horizon accordingly.
    scheduler = get_scheduler(
        args.lr_scheduler_type,
        optimizer=optimizer,
        num_warmup_steps=warmup * accelerator.num_processes,
        num_training_steps=total_steps * accelerator.num_processes,
    )
    scheduler = accelerator.prepare(scheduler)
    return _Run(model, optimizer, scheduler, loader, generator, steps_per_epoch, total_steps)


def _train_loop(args: TrainArgs, accelerator: Any, run: _Run, ckpt_root: Path, t_start: float) -> None:
    """Optimizer steps from ``run.step`` to ``run.total_steps``, with logs and checkpoints."""
    from tqdm.auto import tqdm

    model, optimizer, scheduler = run.model, run.optimizer, run.scheduler
    model.train()
    bar = tqdm(
        total=run.total_steps, initial=run.step, desc="train judge", disable=not accelerator.is_local_main_process
    )
    running, running_n = 0.0, 0
    pair_sum, pair_n = 0.0, 0  # the pairwise term's own running mean (its batches only)
    epoch = run.step // run.steps_per_epoch
    while run.step < run.total_steps:
        # One seeded order per epoch, so a resumed run sees the same batches as an unbroken one.
        run.generator.manual_seed(args.seed + epoch)
        skip_batches = (run.step - epoch * run.steps_per_epoch) * args.gradient_accumulation_steps
        epoch_loader = accelerator.skip_first_batches(run.loader, skip_batches) if skip_batches else run.loader
        for batch in epoch_loader:
            with accelerator.accumulate(model):
                loss = args.likelihood_weight * answer_loss(model, batch, args.loss_reduction)
                accelerator.backward(loss)
                if args.pairwise_weight and "cmp_layout" in batch:
                    pair = comparative_backward(model, batch, args.pairwise_margin, args.pairwise_weight,
                                                accelerator.backward)
                    loss = loss.detach() + args.pairwise_weight * pair
                    pair_sum, pair_n = pair_sum + float(pair), pair_n + 1
                if accelerator.sync_gradients and args.max_grad_norm > 0:
                    accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            running += float(loss.detach())
            running_n += 1
            if not accelerator.sync_gradients:
                continue
            run.step += 1
            bar.update(1)
            if args.logging_steps and (run.step % args.logging_steps == 0 or run.step == run.total_steps):
                run.last_loss = running / max(running_n, 1)
                entry = {
                    "step": run.step,
                    "loss": round(run.last_loss, 5),
                    "lr": scheduler.get_last_lr()[0],
                    "epoch": round(run.step / run.steps_per_epoch, 4),
                    "elapsed_s": round(time.time() - t_start, 1),
                }
                if pair_n:
                    run.last_pairwise = pair_sum / pair_n
                    entry["pairwise_loss"] = round(run.last_pairwise, 5)
                    pair_sum, pair_n = 0.0, 0
                run.history.append(entry)
                bar.set_postfix(loss=f"{run.last_loss:.4f}", **({"pairwise": f"{run.last_pairwise:.4f}"}
                                                                 if "pairwise_loss" in entry else {}))
                log.info("step %d/%d loss %.4f lr %.3g", run.step, run.total_steps, run.last_loss, entry["lr"])
                running, running_n = 0.0, 0
            if args.save_steps and run.step % args.save_steps == 0 and run.step < run.total_steps:
                _save_checkpoint(accelerator, ckpt_root, run.step, run.history, args)
            if run.step >= run.total_steps:
                break
        epoch += 1
    bar.close()
    if running_n:
        run.last_loss = running / running_n
    if pair_n:
        run.last_pairwise = pair_sum / pair_n


def _write_judge(args: TrainArgs, accelerator: Any, model: Any, tokenizer: Any, summary: dict, out_dir: Path) -> None:
    """The judge folder, written atomically: weights or adapter, tokenizer, merged weights, card, summary."""
    from findbench._io import atomic_dir, atomic_write_json

    unwrapped = accelerator.unwrap_model(model)
    with atomic_dir(out_dir) as tmp:
        state_dict = accelerator.get_state_dict(model)
        unwrapped.save_pretrained(tmp, state_dict=state_dict, safe_serialization=True)
        if not args.full_finetune:
            _portable_adapter_config(tmp, args.model)
        tokenizer.save_pretrained(tmp)
        if args.merge:
            merged = unwrapped.merge_and_unload()
            merged.save_pretrained(tmp / "merged", safe_serialization=True)
            tokenizer.save_pretrained(tmp / "merged")
        (tmp / "README.md").write_text(_model_card(args, summary), encoding="utf-8")
        atomic_write_json(tmp / TRAINED_MARKER, summary)
        if args.merge:  # the merged folder is a judge of its own: it records the mode too
            atomic_write_json(tmp / "merged" / TRAINED_MARKER, summary)
    log.info("judge written to %s", out_dir)


def _register_adapter_hooks(accelerator: Any) -> None:
    """Checkpoints of a LoRA run hold the adapter only (not the frozen base weights)."""
    from peft import PeftModel, get_peft_model_state_dict, set_peft_model_state_dict
    from safetensors.torch import load_file, save_file

    def save_hook(models: list, weights: list, output_dir: str) -> None:
        for i, m in enumerate(models):
            inner = accelerator.unwrap_model(m)
            if isinstance(inner, PeftModel):
                sd = {k: v.detach().cpu().contiguous() for k, v in get_peft_model_state_dict(inner).items()}
                save_file(sd, os.path.join(output_dir, f"adapter_{i}.safetensors"))
                if weights:
                    weights.pop(0)

    def load_hook(models: list, input_dir: str) -> None:
        keep = []
        for i, m in enumerate(list(models)):
            inner = accelerator.unwrap_model(m)
            path = os.path.join(input_dir, f"adapter_{i}.safetensors")
            if isinstance(inner, PeftModel) and os.path.isfile(path):
                set_peft_model_state_dict(inner, load_file(path))
            else:
                keep.append(m)
        models[:] = keep

    accelerator.register_save_state_pre_hook(save_hook)
    accelerator.register_load_state_pre_hook(load_hook)


def _save_checkpoint(accelerator: Any, root: Path, step: int, history: list, args: TrainArgs) -> None:
    from findbench._io import atomic_write_json

    path = root / f"step-{step}"
    tmp = root / f".step-{step}.tmp"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    if accelerator.is_main_process:
        atomic_write_json(tmp / "log_history.json", history)
        atomic_write_json(tmp / _STATE_FILE, {"step": step, "args": args.to_dict()})  # written last
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)
        for old in _checkpoints(root)[: -args.save_total_limit or None] if args.save_total_limit else []:
            shutil.rmtree(old, ignore_errors=True)
        log.info("checkpoint %s", path)
    accelerator.wait_for_everyone()


def _portable_adapter_config(folder: Path, model: str) -> None:
    """Record the base model as given (``"embedded"``, a Hub id), not a local cache path."""
    path = folder / "adapter_config.json"
    cfg = json.loads(path.read_text())
    cfg["base_model_name_or_path"] = model
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def _push(folder: Path, args: TrainArgs) -> None:
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(args.hub_model_id, private=args.hub_private, exist_ok=True, repo_type="model")
    api.upload_folder(
        folder_path=str(folder),
        repo_id=args.hub_model_id,
        repo_type="model",
        commit_message="Upload FIND judge (findbench train-judge)",
    )
    log.info("pushed %s to %s", folder, args.hub_model_id)
