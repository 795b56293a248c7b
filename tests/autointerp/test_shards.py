"""Sharded AutoInterp: two `--shard I/2` runs merged give one unsharded run's files byte for byte
(but the fields listed in EXCLUDED), and merge refuses folders that do not make one run."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading

import pytest

from findbench import cli
from findbench.autointerp import run as run_mod
from findbench.autointerp.commands import AutoInterpCommand, AutoInterpMergeCommand, parse_shard
from findbench.autointerp.config import AutoInterpConfig
from findbench.autointerp.run import merge_shards, run_autointerp
from findbench.constants import UsageError

from .test_run import SENTENCES, ScriptedLM, _cfg

#: Results-JSON fields that may differ from the unsharded run's: the time it was written and the record of the merge.
EXCLUDED = ("datetime_epoch_millis", "merged_from")
#: Files that are caches (evidence, firing counts, LM answers), not results.
CACHES = ("evidence_*.json", "firing_counts_*.npy", "lm_cache.sqlite")


def _results(folder):
    caches = {p for pattern in CACHES for p in folder.glob(pattern)}
    return {p.name: p for p in folder.iterdir() if p not in caches}


def _run(corpus_path, out, shard=None, **kw):
    cfg = AutoInterpConfig(**_cfg(dataset=str(corpus_path), n_latents=6, **kw))
    return run_autointerp(AutoInterpCommand(model="minilm", sae="synthetic", explainer=ScriptedLM(), config=cfg,
                                            out=out, shard=shard, progress=False))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One unsharded run and its two shards (their folders), on the same corpus."""
    root = tmp_path_factory.mktemp("shards")
    path = root / "corpus.txt"
    path.write_text("\n".join(SENTENCES * 60) + "\n")
    mp = pytest.MonkeyPatch()
    mp.setenv("FINDBENCH_CACHE", str(root / "cache"))
    try:
        whole = _run(path, root / "whole")
        parts = [_run(path, root / f"part{i}", shard=f"{i}/2") for i in range(2)]
        yield root, path, whole, parts
    finally:
        mp.undo()


def test_two_shards_merged_equal_one_unsharded_run(runs, capsys):
    root, _, whole, parts = runs
    n = len(whole.results.eval_result_unstructured) + len(whole.results.skipped_latents)
    assert n >= 4
    order = [r["latent"] for r in json.loads((root / "whole" / "latents.json").read_text())["latents"]]
    for i, part in enumerate(parts):
        assert part.results.shard.to_json() == {"index": i, "count": 2}
        mine = set(part.results.eval_result_unstructured) | set(part.results.skipped_latents)
        assert mine == {str(x) for x in order[i::2]}  # positions i, i + 2, ... of the selected list
    # every explanation is the same text: a shard of one latent's own run cannot see that; the merge does
    metrics = whole.results.eval_result_metrics.to_json()
    assert metrics["autointerp"]["n_degenerate"] == len(whole.results.eval_result_unstructured)

    assert (
        cli.main(["autointerp", "merge", str(root / "part1"), str(root / "part0"), "--out", str(root / "merged")]) == 0
    )
    assert "wrote" in capsys.readouterr().out
    merged = _assert_same_files(root / "whole", root / "merged")
    assert merged["merged_from"] == [str(root / "part1"), str(root / "part0")]


def _assert_same_files(whole, merged) -> dict:
    """The merged folder holds the unsharded run's result files, equal byte for byte but EXCLUDED
    (the results JSON is compared as written, sorted keys and indent 2, without those keys)."""
    want, got = _results(whole), _results(merged)
    assert sorted(got) == sorted(want) and len(want) == 3
    for name, path in want.items():
        if name.endswith("_eval_results.json"):
            a, b = json.loads(path.read_text()), json.loads(got[name].read_text())
            assert "merged_from" not in a and a["shard"] is None and b["shard"] is None
            merged_result = dict(b)
            for key in EXCLUDED:
                a.pop(key, None)
                b.pop(key, None)
            assert json.dumps(b, indent=2, sort_keys=True) == json.dumps(a, indent=2, sort_keys=True)
        else:
            assert got[name].read_bytes() == path.read_bytes(), name
    return merged_result


def test_the_merge_flags_identical_explanations_across_shards_and_keeps_skipped_latents_in_order(tmp_path, monkeypatch):
    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "corpus.txt"  # one digit in the whole corpus: the digits latent (0) is skipped
    path.write_text(
        "\n".join([s.translate(str.maketrans("", "", "0123456789")) for s in SENTENCES] * 60 + ["7"]) + "\n"
    )
    latents = [3, 0, 5, 1, 2, 4]
    texts = {3: "birds", 0: "digits", 5: "colours", 1: "Birds.", 2: "words ending in ing", 4: "brackets"}
    cfg = AutoInterpConfig(**_cfg(dataset=str(path), override_latents=latents, scorers=["embedding"]))
    args = dict(model="minilm", sae="synthetic", config=cfg, explanations=texts, progress=False)
    whole = run_autointerp(AutoInterpCommand(out=tmp_path / "whole", **args))
    parts = [run_autointerp(AutoInterpCommand(out=tmp_path / f"p{i}", shard=f"{i}/2", **args)) for i in range(2)]
    assert whole.results.skipped_latents.keys() == {"0"} and parts[1].results.skipped_latents.keys() == {"0"}
    # 3 (shard 0) and 1 (shard 1) say the same: neither shard can tell, the unsharded run and the merge can
    assert [whole.results.eval_result_unstructured[k]["degenerate_reason"] for k in ("3", "1")] == ["identical"] * 2
    assert not any(e["degenerate"] for p in parts for e in p.results.eval_result_unstructured.values())
    merged = merge_shards(AutoInterpMergeCommand([tmp_path / "p0", tmp_path / "p1"], tmp_path / "merged"))
    assert list(merged["eval_result_unstructured"]) == ["3", "5", "1", "2", "4"]
    assert merged["eval_result_metrics"]["embedding"]["n_degenerate"] == 2
    _assert_same_files(tmp_path / "whole", tmp_path / "merged")


def test_a_shard_resumes_its_evidence_and_answers(runs, monkeypatch):
    root, path, _, parts = runs
    monkeypatch.setattr(run_mod, "evidence_of", lambda *a, **k: pytest.fail("evidence recomputed"))
    monkeypatch.setattr(run_mod, "count_firing", lambda *a, **k: pytest.fail("firing counts recomputed"))
    again = _run(path, root / "part1", shard="1/2")
    assert again.resumed["evidence"] and again.resumed["lm_cache"]["misses"] == 0
    assert again.results.eval_result_unstructured == parts[1].results.eval_result_unstructured


@pytest.mark.parametrize("text", ["2/2", "1", "-1/2", "0/0", "a/b", "0/2/3", ""])
def test_a_bad_shard_is_one_line_naming_the_flag_before_anything_loads(text, monkeypatch, capsys, tmp_path):
    with pytest.raises(UsageError, match="shard must be I/N"):
        parse_shard(text)
    monkeypatch.setattr(run_mod, "load_model", lambda *a: pytest.fail("model loaded"))
    assert cli.main(["autointerp", f"--shard={text}", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--shard must be I/N" in err


def test_merge_refuses_missing_duplicate_and_mismatched_shards(runs, capsys):
    root, path, _, _ = runs
    p0, p1, out = root / "part0", root / "part1", root / "refused"

    def refused(*dirs):
        assert cli.main(["autointerp", "merge", *map(str, dirs), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and not out.exists()
        return err

    assert "shard 1/2 missing" in refused(p0)
    assert f"shard folder {p0}: shard 0/2 again (also {p0})" in refused(p0, p1, p0)
    assert f"shard folder {root / 'whole'}: synthetic_eval_results.json is not a sharded run" in refused(
        p0, root / "whole"
    )
    assert f"shard folder {root / 'nowhere'} does not exist" in refused(p0, root / "nowhere")
    other = root / "other1"
    _run(path, other, shard="1/2", random_seed=7)
    capsys.readouterr()  # the run's own progress
    assert f"shard folder {other}: settings differ from {p0}'s (random_seed)" in refused(p0, other)
    three = root / "three"
    shutil.copytree(p1, three)
    res = json.loads((three / "synthetic_eval_results.json").read_text())
    res["shard"] = {"index": 1, "count": 3}
    (three / "synthetic_eval_results.json").write_text(json.dumps(res))
    assert f"shard folder {three}: shard 1/3, but {p0} is one of 2" in refused(p0, three)
    with pytest.raises(UsageError, match="out must not be one of the shard folders"):
        merge_shards(AutoInterpMergeCommand([p0, p1], p1))


def _copy(src, dst, results=None, latents=None):
    """A copy of the shard folder ``src`` at ``dst``, its results JSON and latent records edited in place by the
    functions ``results`` and ``latents``."""
    shutil.copytree(src, dst)
    for name, edit, key in (("synthetic_eval_results.json", results, None), ("latents.json", latents, "latents")):
        if edit is not None:
            data = json.loads((dst / name).read_text())
            edit(data[key] if key else data)
            (dst / name).write_text(json.dumps(data))
    return dst


def _fifo(path):
    """A FIFO at ``path`` whose writer sends ``{}`` to the first reader (so a reader that opens it does not hang)."""
    os.mkfifo(path)

    def feed():
        with contextlib.suppress(OSError), open(path, "w") as fh:
            fh.write("{}")

    threading.Thread(target=feed, daemon=True).start()


def test_merge_reads_shard_files_as_untrusted_and_writes_only_its_own_names(runs, tmp_path, capsys):
    root = runs[0]
    p0, out = root / "part0", tmp_path / "merged"

    def refused(folder, message):
        assert cli.main(["autointerp", "merge", str(p0), str(folder), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
        assert not out.exists()

    # a latents_file that leads outside the shard folder is neither read nor written
    outside = tmp_path / "outside" / "latents.json"
    outside.parent.mkdir()
    outside.write_text((root / "part1" / "latents.json").read_text())
    before = outside.read_bytes()
    planted = _copy(root / "part1", tmp_path / "planted", results=lambda r: r.update(latents_file=str(outside)))
    refused(planted, f"latents_file: expected 'latents.json' (beside the results file), got '{outside}'")
    assert outside.read_bytes() == before
    # a FIFO or a symbolic link in place of the latents file or the results file
    fifo = _copy(root / "part1", tmp_path / "fifo")
    (fifo / "latents.json").unlink()
    _fifo(fifo / "latents.json")
    refused(fifo, f"shard folder {fifo}: latents file {fifo / 'latents.json'} is not a regular file (refused)")
    with contextlib.suppress(OSError):  # let the writer go
        os.close(os.open(fifo / "latents.json", os.O_RDONLY | os.O_NONBLOCK))
    link = _copy(root / "part1", tmp_path / "link")
    (link / "synthetic_eval_results.json").unlink()
    (link / "synthetic_eval_results.json").symlink_to(root / "part1" / "synthetic_eval_results.json")
    refused(link, f"results file {link / 'synthetic_eval_results.json'} is a symbolic link (refused)")
    # --out a symbolic link (merge would replace the folder it leads to) or a FIFO
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "mine.txt").write_text("keep")
    out.symlink_to(kept)
    with pytest.raises(UsageError, match="is a symbolic link or not a folder"):
        merge_shards(AutoInterpMergeCommand([p0, root / "part1"], out))
    assert [p.name for p in kept.iterdir()] == ["mine.txt"]
    out.unlink()
    os.mkfifo(out)
    with pytest.raises(UsageError, match="is a symbolic link or not a folder"):
        merge_shards(AutoInterpMergeCommand([p0, root / "part1"], out))


def test_merge_refuses_repeated_latents_and_scores_the_results_do_not_hold(runs, tmp_path, capsys):
    root = runs[0]
    p0, p1, out = root / "part0", root / "part1", tmp_path / "merged"
    records = json.loads((p1 / "latents.json").read_text())["latents"]
    scored = next(r for r in records if r["skipped"] is None)

    def refused(folder, message, first=p0):
        assert cli.main(["autointerp", "merge", str(first), str(folder), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
        assert not out.exists()

    # one latent's record in place of each of the shard's: its score counted as many times
    refused(_copy(p1, tmp_path / "again", latents=lambda lat: lat.__setitem__(slice(None), [scored] * len(lat))),
            "are not distinct latent numbers")
    # shard 0's latents as shard 1's too
    twice = _copy(p0, tmp_path / "twice", results=lambda r: r.update(shard={"index": 1, "count": 2}))
    refused(twice, "the shards hold latents")
    # a record's score lifted above the results' (and the recomputed detection score)
    lifted = _copy(p1, tmp_path / "lifted", latents=lambda lat: next(
        r for r in lat if r["skipped"] is None)["scores"].update(detection=1.0))
    refused(lifted, f"latent {scored['latent']}'s detection scores [1.0, {scored['scores']['detection']}")
    # the shard's latents out of the drawn (increasing) order
    refused(_copy(p1, tmp_path / "order", latents=lambda lat: lat.reverse()), "are not the run's selection")
    # nor does a run list a latent twice
    with pytest.raises(UsageError, match=r"--latents must be a non-empty list without repeats, got \[3, 3\]"):
        AutoInterpConfig(override_latents="3,3")
