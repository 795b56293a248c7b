"""Fine-tune FIND's judge with accelerate + peft (FIND appendix F1: Vicuna-13B, ~30K unit
tests, 3 epochs, cosine schedule).

LoRA (or ``full_finetune``), loss on the answer tokens only, checkpoints with
``Accelerator.save_state``; runs under ``python`` and ``accelerate launch``. The result is a folder
:func:`findbench.lm.load_lm` loads. The flags are the fields of :class:`TrainArgs` (:func:`make_parser`,
in :mod:`findbench.judge.config`, which imports no model library).
"""

from __future__ import annotations

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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, PeftModel, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer, get_scheduler

from findbench._checks import instance, str_list
from findbench._io import atomic_dir, atomic_write_json
from findbench.constants import TRAINED_MARKER, UsageError
from findbench.judge.config import _NEW_JUDGE, TrainArgs
from findbench.judge.data import _fill_card, default_data_dir, load_judge_data
from findbench.judge.scoring import (
    ANSWER_PREFIX,
    NULL_DESCRIPTION,
    judge_unit_tests,
    render_judge_prompt,
    render_pmi_option,
    render_pmi_prompt,
)
from findbench.lm.base import split_candidates
from findbench.lm.transformers_lm import VICUNA_CHAT_TEMPLATE, TransformersLM, left_pad
from findbench.models import embedded_judge_dir, peft_wrapping, resolve

log = logging.getLogger(__name__)

_STATE_FILE = "trainer_state.json"
_CKPT = re.compile(r"^step-(\d+)$")


# -- data ---------------------------------------------------------------------------------
def tokenize_judge_row(
    tokenizer: Any, messages: Sequence[dict], target: str, max_length: int
) -> dict[str, list[int]]:
    """Token ids and labels of one judge row: the prompt as the judge renders it, then the answer
    with the template's end-of-turn tokens (so the model learns to stop); labels are -100 on the prompt."""
    prompt = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(list(messages) + [{"role": "assistant", "content": target}], tokenize=False)
    answer = full[len(prompt) :] if full.startswith(prompt) else target + (tokenizer.eos_token or "")
    a_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    if len(a_ids) >= max_length:
        raise ValueError(f"max_length {max_length} leaves no room for the prompt (answer is {len(a_ids)} tokens)")
    return _continuation_row(tokenizer, messages, "", a_ids, max_length)


def judge_training_pair(row: Mapping[str, Any], judge_mode: str) -> tuple[list[dict], str]:
    """The ``(messages, target)`` a judge row trains on: ``"logprob"``, the row's prompt and
    ``"[ANSWER]: k"``; ``"pmi"``, the pmi prompt of its description and the correct option as an example."""
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


def _digit_context(tokenizer: Any, keep_space_first: bool = False) -> tuple[str, list[int]]:
    """What the ``logprob`` judge scores the option numbers after (the answer prefix, its trailing space
    moved into the digits where that keeps each one token) and the digits' token ids; ``keep_space_first``:
    the prefix with its space is tried first (the validation's digits, as the answer tokens hold them)."""
    split = split_candidates(ANSWER_PREFIX, ["1", "2", "3"],
                             lambda text: tokenizer(text, add_special_tokens=False)["input_ids"],
                             keep_space_first=keep_space_first)
    if split is None:
        raise ValueError(f"the option numbers are not single tokens after {ANSWER_PREFIX!r} for this tokenizer")
    return split


def encode_comparison(
    tokenizer: Any, row: Mapping[str, Any], judge_mode: str, n_negatives: int, rng: Any, max_length: int
) -> dict[str, Any] | None:
    """The sequences the pairwise term scores for one judge row, or None when it lists no negatives.

    ``{"seqs": [{"input_ids", "labels"}], "layout": [n_options, correct (0-based), n_negatives, pmi]}``:
    every option under the true description, in ``pmi`` mode every option under the null description too,
    then the correct option under each of ``n_negatives`` losing descriptions drawn from the row's ``negatives``.
    """
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
    def pad(rows: list[dict]) -> dict[str, Any]:
        ids, mask = left_pad([b["input_ids"] for b in rows], pad_id)
        labels, _ = left_pad([b["labels"] for b in rows], -100)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        return {"input_ids": ids, "labels": labels, "attention_mask": mask, "position_ids": positions}

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
            out.update(cmp_chunks=[pad([seqs[i] for i in chunk]) for chunk in chunks],
                       cmp_order=torch.tensor(order, dtype=torch.long),
                       cmp_layout=torch.tensor([p["layout"] for p in pairs], dtype=torch.long))
        return out

    return collate


def sequence_logprobs(model: Any, batch: dict) -> Any:
    """Each row's summed log-probability of its labelled tokens (differentiable), shape ``(B,)``."""
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


def comparative_backward(model: Any, batch: dict, margin: float, weight: float, backward: Any) -> Any:
    """The pairwise hinge (:func:`pairwise_hinge`) of a collated batch's pairwise sequences under ``model``
    (detached), its gradient times ``weight`` accumulated through
    ``backward`` (``accelerator.backward``) one chunk at a time: the log-probabilities are first computed
    without a graph, the hinge's gradient with respect to them taken, then each chunk with a nonzero share
    is run again with a graph (the same dropout draws) and back-propagated with it, so the activations of
    one chunk are held at a time, not a batch's ten-odd sequences per row."""
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


def _cross_entropy(logits: Any, labels: Any, reduction: str = "token") -> Any:
    """Cross-entropy on the answer tokens: ``"row"``, summed per row and averaged over rows; ``"token"``,
    averaged over all answer tokens."""
    flat = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100, reduction="none"
    ).reshape(labels.shape)
    return flat.sum() / (labels != -100).sum().clamp(min=1) if reduction == "token" else flat.sum(dim=1).mean()


def _load_rows(args: TrainArgs) -> tuple[list[dict], list[dict]]:
    """Training rows and up to ``eval_rows`` validation rows mixed across categories; sets ``args.data``."""
    args.data = str(args.data if args.data is not None else default_data_dir(n=args.n_data, seed=args.data_seed))
    dd = load_judge_data(args.data)
    train = dd["train"].to_list()[: args.max_train_rows or None]
    valid = dd["validation"].to_list() if "validation" in dd else []
    # validation rows are stored category by category: take them round-robin
    by_cat = [[r for r in valid if r["category"] == c] for c in dict.fromkeys(r["category"] for r in valid)]
    mixed = [r for group in itertools.zip_longest(*by_cat) for r in group if r is not None]
    return train, mixed[: args.eval_rows]


# -- checkpoints --------------------------------------------------------------------------
def _checkpoints(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _CKPT.match(p.name)) and (p / _STATE_FILE).is_file()]
    return [p for _, p in sorted(found)]


def _resolve_resume(args: TrainArgs, ckpt_root: Path) -> Path | None:
    if args.resume_from_checkpoint == "latest":
        found = _checkpoints(ckpt_root)
        if not found:
            log.info("no checkpoint under %s: starting from scratch", ckpt_root)
        return found[-1] if found else None
    if not args.resume_from_checkpoint:
        return None
    path = Path(args.resume_from_checkpoint)
    if not (path / _STATE_FILE).is_file():
        raise UsageError(f"--resume-from-checkpoint: {path} is not a checkpoint (no {_STATE_FILE})")
    return path


def _model_card(args: TrainArgs, summary: dict) -> str:
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
    return _fill_card("evaluator_model_card.md", header, values)


# -- evaluation ---------------------------------------------------------------------------
def _evaluate(model: Any, tokenizer: Any, rows: list[dict], encoded: list[dict], accelerator: Any,
              args: TrainArgs) -> dict[str, Any]:
    """Mean answer loss on the encoded validation rows, and the judge's accuracy on them: ``logprob``,
    the argmax over the option digits at the answer (``eval_answer_accuracy``); ``pmi``, the ``"pmi"``
    judge's on the rows' unit tests, also per category (``eval_judge_accuracy``)."""
    option_ids = _digit_context(tokenizer, keep_space_first=True)[1] if args.judge_mode == "logprob" else []
    batch_size, n = args.per_device_train_batch_size, max(len(encoded), 1)
    model.eval()
    loss, right = 0.0, 0
    collate = _collate(tokenizer.pad_token_id)
    for start in tqdm(range(0, len(encoded), batch_size), desc="validation: answer loss", leave=False):
        batch = {k: v.to(accelerator.device) for k, v in collate(encoded[start : start + batch_size]).items()}
        with torch.no_grad():
            logits, labels = _answer_logits_and_labels(model, batch)
        loss += float(_cross_entropy(logits, labels)) * len(labels)
        for r in range(labels.shape[0]) if option_ids else ():
            is_digit = torch.isin(labels[r], torch.tensor(option_ids, device=labels.device))
            digit_pos = int(is_digit.nonzero().flatten()[0])
            right += int(option_ids[int(torch.argmax(logits[r, digit_pos, option_ids]))] == int(labels[r, digit_pos]))
    out: dict[str, Any] = {"eval_loss": loss / n}
    if option_ids:
        out["eval_answer_accuracy"] = right / n
    else:
        lm = TransformersLM(
            model, tokenizer=tokenizer, device=str(accelerator.device), batch_size=max(batch_size, 8), name="training"
        )
        per_category = {}
        for cat, group in itertools.groupby(sorted(rows, key=lambda r: r["category"]), key=lambda r: r["category"]):
            cat_rows = list(group)
            judged = judge_unit_tests(lm, [r["description"] for r in cat_rows],
                                      [[json.loads(r["unit_test"])] for r in cat_rows], cat, mode="pmi", progress=True)
            per_category[cat] = judged["unit_test_accuracy"]
            right += sum(judged["per_function"])
        out.update(eval_judge_accuracy=right / n, eval_judge_accuracy_per_category=per_category)
    model.train()
    return {**out, "eval_rows": len(encoded)}


# -- training -----------------------------------------------------------------------------
def train_judge(args: TrainArgs) -> str:
    """Fine-tune a judge; returns the output folder. Resumes from ``args.resume_from_checkpoint``."""
    from accelerate import Accelerator
    from accelerate.utils import broadcast_object_list, set_seed

    instance("args", args, TrainArgs, "a TrainArgs")
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
    encoded, valid_encoded = (
        [tokenize_judge_row(tokenizer, *judge_training_pair(r, args.judge_mode), args.max_length) for r in rows]
        for rows in (train_rows, valid_rows)
    )
    if args.pairwise_weight > 0:
        for i, (row, enc) in enumerate(zip(train_rows, encoded)):
            enc["pairwise"] = encode_comparison(
                tokenizer, row, args.judge_mode, args.negatives_per_example, random.Random(f"{args.seed}:{i}"),
                args.max_length,
            )
        if not any(e["pairwise"] for e in encoded):
            raise UsageError(f"--data: {args.data} has no row with negatives for --pairwise-weight > 0; build it with "
                             "`findbench judge-data` (negatives on)")
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
        "args": asdict(args),
    }
    if valid_encoded and accelerator.is_main_process:
        summary["eval"] = _evaluate(accelerator.unwrap_model(run.model), tokenizer, valid_rows, valid_encoded,
                                    accelerator, args)
        log.info("validation: %s", summary["eval"])
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        summary["trained"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        _write_judge(args, accelerator, run.model, tokenizer, summary, out_dir)
        if args.install_as_default:  # replaces the default judge (embedded-evaluator) at once
            target = Path(embedded_judge_dir(must_exist=False))
            with atomic_dir(target) as tmp:
                shutil.copytree(out_dir, tmp, dirs_exist_ok=True)
            log.info("installed %s as the default judge %s (evaluate, main and judge-card use it)", out_dir, target)
        if args.push_to_hub:
            from huggingface_hub import HfApi

            HfApi().create_repo(args.hub_model_id, private=args.hub_private, exist_ok=True, repo_type="model")
            HfApi().upload_folder(folder_path=str(out_dir), repo_id=args.hub_model_id, repo_type="model",
                                  commit_message="Upload FIND judge (findbench train-judge)")
            log.info("pushed %s to %s", out_dir, args.hub_model_id)
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


def _load_model(margs: TrainArgs) -> tuple[Any, Any]:
    """The base model (float32) with a LoRA adapter unless ``full_finetune``, and its tokenizer."""
    base_path = resolve(margs.model)
    tokenizer = AutoTokenizer.from_pretrained(base_path)
    if not getattr(tokenizer, "chat_template", None):
        tokenizer.chat_template = VICUNA_CHAT_TEMPLATE
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32)
    model.config.use_cache = False
    if not margs.full_finetune:
        targets: Any = margs.lora_target_modules
        targets = targets if targets == "all-linear" else str_list("--lora-target-modules", targets)
        layers = None  # peft's default: every layer
        if margs.lora_top_layers:
            n_layers = int(model.config.num_hidden_layers)
            if margs.lora_top_layers > n_layers:
                raise ValueError(
                    f"lora_top_layers must be at most the model's {n_layers} layers, got {margs.lora_top_layers}"
                )
            layers = list(range(n_layers - margs.lora_top_layers, n_layers))
            if targets == "all-linear":  # peft wants module names with layers_to_transform
                out_emb = model.get_output_embeddings()
                targets = sorted(
                    {
                        n.rsplit(".", 1)[-1]
                        for n, m in model.named_modules()
                        if isinstance(m, torch.nn.Linear) and m is not out_emb
                    }
                )
        peft_config = LoraConfig(r=margs.lora_r, lora_alpha=margs.lora_alpha, lora_dropout=margs.lora_dropout,
                                 target_modules=targets, task_type="CAUSAL_LM", bias="none", layers_to_transform=layers)
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
    generator = torch.Generator().manual_seed(args.seed)
    loader = torch.utils.data.DataLoader(
        encoded,
        batch_size=args.per_device_train_batch_size,
        shuffle=True,
        generator=generator,
        collate_fn=_collate(tokenizer.pad_token_id),
    )
    trained = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in trained if p.ndim >= 2], "weight_decay": args.weight_decay},
              {"params": [p for p in trained if p.ndim < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups if groups[1]["params"] else groups[:1], lr=args.learning_rate)

    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    steps_per_epoch = max(1, math.ceil(len(loader) / args.gradient_accumulation_steps))
    total_steps = args.max_steps if args.max_steps > 0 else math.ceil(args.num_train_epochs * steps_per_epoch)
    # accelerate steps a prepared scheduler once per process: scale its horizon accordingly.
    scheduler = accelerator.prepare(get_scheduler(
        args.lr_scheduler_type,
        optimizer=optimizer,
        num_warmup_steps=int(round(args.warmup_ratio * total_steps)) * accelerator.num_processes,
        num_training_steps=total_steps * accelerator.num_processes,
    ))
    return _Run(model, optimizer, scheduler, loader, generator, steps_per_epoch, total_steps)


def _train_loop(args: TrainArgs, accelerator: Any, run: _Run, ckpt_root: Path, t_start: float) -> None:
    """Optimizer steps from ``run.step`` to ``run.total_steps``, with logs and checkpoints."""
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
                logits, labels = _answer_logits_and_labels(model, batch)
                loss = args.likelihood_weight * _cross_entropy(logits, labels, args.loss_reduction)
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
            running, running_n = running + float(loss.detach()), running_n + 1
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
    unwrapped = accelerator.unwrap_model(model)
    with atomic_dir(out_dir) as tmp:
        unwrapped.save_pretrained(tmp, state_dict=accelerator.get_state_dict(model), safe_serialization=True)
        if not args.full_finetune:  # the base model as given ("embedded", a Hub id), not a local cache path
            config = tmp / "adapter_config.json"
            config.write_text(json.dumps({**json.loads(config.read_text()), "base_model_name_or_path": args.model},
                                         indent=2, sort_keys=True) + "\n")
        tokenizer.save_pretrained(tmp)
        if args.merge:  # the merged folder is a judge of its own: it records the mode too
            unwrapped.merge_and_unload().save_pretrained(tmp / "merged", safe_serialization=True)
            tokenizer.save_pretrained(tmp / "merged")
            atomic_write_json(tmp / "merged" / TRAINED_MARKER, summary)
        (tmp / "README.md").write_text(_model_card(args, summary), encoding="utf-8")
        atomic_write_json(tmp / TRAINED_MARKER, summary)
    log.info("judge written to %s", out_dir)


def _register_adapter_hooks(accelerator: Any) -> None:
    """Checkpoints of a LoRA run hold the adapter only (not the frozen base weights): written by hand because
    ``Accelerator.save_state`` saves each prepared model's whole state dict, the base model's included."""
    from safetensors.torch import load_file, save_file

    def save_hook(models: list, weights: list, output_dir: str) -> None:
        for i, m in enumerate(models):
            inner = accelerator.unwrap_model(m)
            if isinstance(inner, PeftModel):
                save_file({k: v.detach().cpu().contiguous() for k, v in get_peft_model_state_dict(inner).items()},
                          os.path.join(output_dir, f"adapter_{i}.safetensors"))
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
    path = root / f"step-{step}"
    tmp = root / f".step-{step}.tmp"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    if accelerator.is_main_process:
        atomic_write_json(tmp / "log_history.json", history)
        atomic_write_json(tmp / _STATE_FILE, {"step": step, "args": asdict(args)})  # written last
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)
        for old in _checkpoints(root)[: -args.save_total_limit or None] if args.save_total_limit else []:
            shutil.rmtree(old, ignore_errors=True)
        log.info("checkpoint %s", path)
    accelerator.wait_for_everyone()
