"""AutoInterp's model side split over token ranges: three `--token-shard I/3` runs save their rows'
activations, and a run reading them (`--activations`), which never runs the model, writes the
unsharded run's files byte for byte (the results JSON but its time); the saved files are untrusted."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch

from findbench import cli
from findbench.autointerp import evidence as evidence_mod
from findbench.autointerp.activations import available_device
from findbench.autointerp.commands import AutoInterpCommand
from findbench.autointerp.config import AutoInterpConfig
from findbench.autointerp.run import run_autointerp
from findbench.autointerp.token_shards import SavedActivations, save_shard, shard_path, shard_rows
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
    return run_autointerp(AutoInterpCommand(model=model, sae=sae, explainer=ScriptedLM(), out=out,
                          config=AutoInterpConfig(**_settings(corpus_path)), progress=False,
                          **{"batch_size": BATCH, **kw}))


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
    assert result.resumed["evidence"] is None and result.resumed["firing_counts"] is None  # computed here
    whole, merged = sorted((root / "whole").iterdir()), sorted((root / "merged").iterdir())
    assert [p.name for p in whole] == [p.name for p in merged]  # results, evidence, firing counts, LM cache
    for a, b in zip(whole, merged):
        if a.name.endswith("_eval_results.json"):
            x, y = (json.loads(p.read_text()) for p in (a, b))
            assert x.pop("datetime_epoch_millis") and y.pop("datetime_epoch_millis")
            assert x == y
        elif a.suffix != ".sqlite":
            assert a.read_bytes() == b.read_bytes(), a.name
    assert len(result.results.eval_result_unstructured) >= 4
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
    with pytest.raises(UsageError, match="--token-shard: it writes the activations that --activations reads"):
        AutoInterpCommand(token_shard="0/2", activations=parts)
    with pytest.raises(UsageError, match="--shard does not apply"):
        AutoInterpCommand(token_shard="0/2", shard="0/2")
    with pytest.raises(UsageError, match="--token-shard must be I/N"):
        AutoInterpCommand(token_shard="2/2")


def test_the_device_flag_is_checked(capsys):
    """--device places the model and SAE (one GPU per token shard); this machine has no GPU."""
    import torch

    with pytest.raises(UsageError, match="--device must be cpu, cuda, cuda:N or mps, got 'gpu0'"):
        AutoInterpCommand(device="gpu0")
    assert available_device("cpu") == "cpu"
    if not torch.cuda.is_available():
        assert cli.main(["autointerp", "--device", "cuda:1", "--sae", "synthetic", "--model", "minilm"]) == 2
        assert "error: --device: 'cuda:1' is not available to torch here" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ planted files

#: A tiny activations file's settings: shard 0/1 of ROWS corpus rows, CONTEXT positions, D_SAE latents.
KEY, ROWS, CONTEXT, D_SAE = "ab12", 4, 6, 8


def _saved(folder):
    """``folder`` holding a valid one-shard activations file with three entries (returns the file)."""
    acts = torch.zeros(ROWS, CONTEXT, D_SAE)
    acts[0, 1, 2], acts[2, 0, 0], acts[3, 5, 2] = 1.5, 2.0, 0.25
    folder.mkdir(parents=True, exist_ok=True)
    return save_shard(iter([(0, acts)]), shard_path(folder, KEY, (0, 1)), key=KEY, shard=(0, 1), rows=(0, ROWS),
                      n_rows=ROWS, d_sae=D_SAE, context=CONTEXT)


def _load(folder):
    return SavedActivations([folder], key=KEY, n_rows=ROWS, d_sae=D_SAE, context=CONTEXT)


def _rewrite(path, **arrays):
    """Write ``path`` again with some of its arrays replaced (np.savez: stored members, as save_shard)."""
    with np.load(path) as npz:
        old = {k: npz[k] for k in npz.files}
    with open(path, "wb") as fh:
        np.savez(fh, **(old | arrays))


def test_repeated_entries_negative_values_and_compressed_members_are_refused(tmp_path):
    path = _saved(tmp_path / "ok")
    assert _load(tmp_path / "ok").counts().tolist() == [1, 0, 2, 0, 0, 0, 0, 0]
    with np.load(path) as npz:
        cols = {k: npz[k] for k in ("row", "col", "latent", "value")}
    # every entry twice would double every firing count
    _rewrite(path, **{k: np.repeat(v, 2) for k, v in cols.items()})
    with pytest.raises(UsageError, match=rf"--activations: {path} has \(row, position, latent\) entries repeated"):
        _load(tmp_path / "ok")
    _rewrite(path, **(cols | {"value": -cols["value"]}))
    with pytest.raises(UsageError, match=f"--activations: {path} has negative activations"):
        _load(tmp_path / "ok")
    with np.load(path) as npz:
        old = {k: npz[k] for k in npz.files}
    np.savez_compressed(path, **(old | cols))
    with pytest.raises(UsageError, match=r"activations file \(member meta.npy is compressed"):
        _load(tmp_path / "ok")


def _bomb(path, kind):
    """A planted file: its value member declares 2**40 activations and holds 3 (``shape``), or holds 64M zero
    activations (256 MiB) deflated to well under 1 MiB (``deflate``)."""
    with np.load(path) as npz:
        members = {k: npz[k] for k in npz.files}
    n = 1 << 40 if kind == "shape" else 64 << 20
    with zipfile.ZipFile(path, "w") as zf:
        for name, array in members.items():
            if name != "value":
                buf = io.BytesIO()
                np.lib.format.write_array(buf, array)
                zf.writestr(f"{name}.npy", buf.getvalue())
        info = zipfile.ZipInfo("value.npy")
        info.compress_type = zipfile.ZIP_STORED if kind == "shape" else zipfile.ZIP_DEFLATED
        with zf.open(info, "w", force_zip64=True) as fh:
            np.lib.format.write_array_header_1_0(fh, {"descr": "<f4", "fortran_order": False, "shape": (n,)})
            if kind == "shape":
                fh.write(members["value"].tobytes())
            else:
                for _ in range(n * 4 >> 20):
                    fh.write(bytes(1 << 20))
    return path


#: ``python -c _PEAK python-args...`` runs python with those arguments and prints its exit status and peak RSS
#: (KiB, as getrusage(RUSAGE_CHILDREN) sees it: in a fresh process, so no other child of the tests counts), then its
#: output.
_PEAK = ("import resource, subprocess, sys\n"
         "r = subprocess.run([sys.executable, *sys.argv[1:]], capture_output=True, text=True)\n"
         "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
         "print(r.stdout + r.stderr, end=\"\")")
#: Reads the activations in the folder ``sys.argv[1]``, printing the refusal.
_LOAD = ("import sys\n"
         "from findbench.autointerp.token_shards import SavedActivations\n"
         "from findbench.constants import UsageError\n"
         "try:\n"
         f"    SavedActivations([sys.argv[1]], key={KEY!r}, n_rows={ROWS}, d_sae={D_SAE}, context={CONTEXT})\n"
         "except UsageError as exc:\n"
         "    print(exc)")


def _peak_rss(folder) -> tuple[int, str]:
    """The peak RSS (KiB) of a process reading the activations in ``folder``, and what it printed."""
    done = subprocess.run([sys.executable, "-c", _PEAK, "-c", _LOAD, str(folder)], capture_output=True, text=True,
                          check=True)
    head, _, out = done.stdout.partition("\n")
    rc, peak = map(int, head.split())
    assert rc == 0, out
    return peak, out


def test_shard_bombs_are_refused_within_a_memory_bound(tmp_path):
    base, out = _peak_rss(_saved(tmp_path / "ok").parent)
    assert not out.strip()
    for kind, why in (("shape", "member value.npy declares 4,398,046,511,232 bytes but holds"),
                      ("deflate", "member value.npy is compressed")):
        path = _bomb(_saved(tmp_path / kind), kind)
        peak, out = _peak_rss(path.parent)
        assert f"--activations: {path} is not a --token-shard activations file ({why}" in out, out
        assert out.count("\n") == 1 and "Traceback" not in out
        assert peak - base < 64 << 10, (kind, peak, base)  # 64 MiB over reading a valid file; the member is 256 MiB+
