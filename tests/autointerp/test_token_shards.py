"""AutoInterp's model side split over token ranges: three `--token-shard I/3` runs save their rows'
activations, and a run reading them (`--activations`), which never runs the model, writes the
unsharded run's files byte for byte (the results JSON but its time); the saved files are untrusted."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from findbench import cli
from findbench.autointerp import evidence as evidence_mod
from findbench.autointerp.activations import available_device
from findbench.autointerp.commands import AutoInterpCommand
from findbench.autointerp.config import AutoInterpConfig
from findbench.autointerp.run import run_autointerp
from findbench.autointerp.token_shards import shard_rows
from findbench.constants import UsageError

from .test_run import SENTENCES, ScriptedLM, _cfg

BATCH = 8  # 60 corpus rows: 8 batches, split 2 + 3 + 3


#: (model, SAE): the planted-rule SAE on MiniLM's embeddings, and the shipped TopK SAE on SmolLM2's layer 6.
SAES = [("minilm", "synthetic"), pytest.param(("embedded", "embedded"), marks=pytest.mark.slow, id="shipped-topk")]


def _settings(corpus_path) -> dict:
    return _cfg(dataset=str(corpus_path), n_latents=6, dead_latent_threshold=2)


def _flags(settings: dict) -> list[str]:
    """`findbench autointerp`'s flags for ``settings``."""
    out = []
    for k, v in settings.items():
        out += [f"--{k.replace('_', '-')}", ",".join(v) if isinstance(v, list) else str(v)]
    return out


def _run(corpus_path, out, model="minilm", sae="synthetic", **kw):
    return run_autointerp(model=model, sae=sae, explainer=ScriptedLM(), out=out,
                          config=AutoInterpConfig(**_settings(corpus_path)), progress=False,
                          **{"batch_size": BATCH, **kw})


@pytest.fixture(scope="module", params=SAES)
def shards(request, tmp_path_factory):
    """The unsharded run's folder and the three token shards' folders (saved through the command line),
    the corpus and the (model, SAE)."""
    model, sae = request.param
    root = tmp_path_factory.mktemp("token_shards")
    path = root / "corpus.txt"
    path.write_text("\n".join(SENTENCES * 60) + "\n")
    mp = pytest.MonkeyPatch()
    mp.setenv("FINDBENCH_CACHE", str(root / "cache"))
    try:
        _run(path, root / "whole", model, sae)
        for i in range(3):
            argv = ["autointerp", "--model", model, "--sae", sae, "--batch-size", str(BATCH),
                    "--token-shard", f"{i}/3", "--out", str(root / f"part{i}"), *_flags(_settings(path))]
            assert cli.main(argv) == 0
        yield root, path, (model, sae)
    finally:
        mp.undo()


def test_a_run_from_token_shards_writes_the_unsharded_files(shards, monkeypatch, capsys):
    root, path, (model, sae) = shards
    assert [shard_rows(60, BATCH, (i, 3)) for i in range(3)] == [(0, 16), (16, 40), (40, 60)]
    # the run from the shards never runs the model or the SAE
    monkeypatch.setattr(evidence_mod, "read_hook", lambda *a, **k: pytest.fail("the model ran"))
    monkeypatch.setenv("FINDBENCH_CACHE", str(root / "cache"))
    result = _run(path, root / "merged", model, sae, activations=[str(root / f"part{i}") for i in (2, 0, 1)])
    assert result["resumed"]["evidence"] is None and result["resumed"]["firing_counts"] is None  # computed here
    whole, merged = sorted((root / "whole").iterdir()), sorted((root / "merged").iterdir())
    assert [p.name for p in whole] == [p.name for p in merged]  # results, evidence, firing counts, LM cache
    for a, b in zip(whole, merged):
        if a.name.endswith("_eval_results.json"):
            x, y = (json.loads(p.read_text()) for p in (a, b))
            assert x.pop("datetime_epoch_millis") and y.pop("datetime_epoch_millis")
            assert x == y
        elif a.suffix != ".sqlite":
            assert a.read_bytes() == b.read_bytes(), a.name
    assert len(result["eval_result_unstructured"]) >= 4
    # a token shard run again finds its file and does nothing
    before = sorted((root / "part1").glob("activations_*.npz"))[0].stat().st_mtime_ns
    argv = ["autointerp", "--model", model, "--sae", sae, "--batch-size", str(BATCH), "--token-shard", "1/3",
            "--out", str(root / "part1"), *_flags(_settings(path))]
    assert cli.main(argv) == 0
    assert "token shard 1/3: rows 16..39 already saved in" in capsys.readouterr().out
    assert sorted((root / "part1").glob("activations_*.npz"))[0].stat().st_mtime_ns == before


@pytest.mark.parametrize("shards", SAES[:1], indirect=True)  # the checks do not depend on the SAE
def test_token_shard_folders_are_checked(shards, tmp_path, monkeypatch):
    root, path, (model, sae) = shards
    monkeypatch.setenv("FINDBENCH_CACHE", str(root / "cache"))
    parts = [str(root / f"part{i}") for i in range(3)]

    def refused(match, dirs, **kw):
        with pytest.raises((UsageError, ValueError), match=match):
            _run(path, tmp_path / "out", model, sae, activations=dirs, **kw)

    refused(r"shards \[1\] of 3 are missing", parts[::2])
    refused(r"shard 0/3 twice", [parts[0], *parts])
    refused("holds shards of other settings", parts, batch_size=4)  # another batching: other activations
    refused("holds no --token-shard activations", [*parts[:2], str(tmp_path)])
    refused("activations: .*none is not a folder", [*parts[:2], str(tmp_path / "none")])
    # a planted file: entries outside its rows, or a symbolic link
    planted = tmp_path / "planted"
    planted.mkdir()
    [source] = (root / "part2").glob("activations_*.npz")
    with np.load(source) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["row"] = arrays["row"] - 40
    np.savez(planted / source.name, **arrays)
    refused("has entries of the wrong type or outside its rows", [*parts[:2], str(planted)])
    (planted / source.name).unlink()
    os.symlink(source, planted / source.name)
    refused("is a symbolic link", [*parts[:2], str(planted)])
    # flags that do not go together
    with pytest.raises(UsageError, match="token_shard: it writes the activations that --activations reads"):
        AutoInterpCommand(token_shard="0/2", activations=parts)
    with pytest.raises(UsageError, match="--shard does not apply"):
        AutoInterpCommand(token_shard="0/2", shard="0/2")
    with pytest.raises(UsageError, match="token_shard must be I/N"):
        AutoInterpCommand(token_shard="2/2")


def test_the_device_flag_is_checked(capsys):
    """--device places the model and SAE (one GPU per token shard); this machine has no GPU."""
    import torch

    with pytest.raises(UsageError, match="device must be cpu, cuda, cuda:N or mps, got 'gpu0'"):
        AutoInterpCommand(device="gpu0")
    assert available_device("cpu") == "cpu"
    if not torch.cuda.is_available():
        assert cli.main(["autointerp", "--device", "cuda:1", "--sae", "synthetic", "--model", "minilm"]) == 2
        assert "error: --device: 'cuda:1' is not available to torch here" in capsys.readouterr().err
