"""Fitting the entity probes: progress bars with an ETA, the same features as one encode call,
and one fit per cache entry however many processes need it at once.

The features and (for the cross-process test) the fit are cheap stand-ins: the real probes
read the embedded LM and take minutes; the code under test is the bars, batching and lock."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from findbench.find.synthetic_neurons import backbones
from findbench.find.synthetic_neurons.features import ConcatFeatures
from findbench.lm.encoder import CachedTextEncoder
from tests._paths import REPO


class _HashFeatures(CachedTextEncoder):
    """Deterministic pseudo-features per word; records the batches it is asked for."""

    def __init__(self, batch_size: int, dim: int = 6):
        super().__init__(batch_size)
        self.dim = dim
        self.batches: list[list[str]] = []

    def _forward(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return np.array(
            [[random.Random(f"{t}:{k}").gauss(0, 1) for k in range(self.dim)] for t in texts], dtype=np.float32
        )


def _words(n: int) -> list[str]:
    rng = random.Random(1)
    return ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(2, 9))) for _ in range(n)]


def test_encoding_under_a_bar_uses_the_batches_of_one_encode_call(monkeypatch):
    words = _words(150) + _words(20)  # duplicates too
    single = ConcatFeatures([_HashFeatures(4), _HashFeatures(6)])
    expected = single.encode(words)
    chunked = ConcatFeatures([_HashFeatures(4), _HashFeatures(6)])
    monkeypatch.setattr(backbones, "load_features", lambda spec: chunked)
    got = backbones.encode_features("stand-in", words, progress=False)
    assert np.array_equal(got, expected)
    for a, b in zip(chunked.parts, single.parts):
        assert a.batches == b.batches  # same batches, so the same floats from a real model


def test_probe_fit_shows_progress_bars_unless_told_not_to(monkeypatch, capsys):
    monkeypatch.setattr(backbones, "load_features", lambda spec: _HashFeatures(5, dim=12))
    # class means stand in for torch's L-BFGS (seconds per fit on a busy machine): the bars are tested here
    monkeypatch.setattr(
        backbones,
        "_ovr_logistic",
        lambda X, labels, n, C: (np.stack([X[labels == j].mean(0) for j in range(n)]), np.zeros(n)),
    )
    unit = {c: [f"{c}{i}" for i in range(8)] for c in ("red", "green", "blue")}
    backbones._FIT_MEMO.clear()
    probes, info = backbones.fit_entity_probes(unit, encoder="stand-in", use_cache=False, progress=False)
    assert "entity probe" not in capsys.readouterr().err
    backbones._FIT_MEMO.clear()
    again, _ = backbones.fit_entity_probes(unit, encoder="stand-in", use_cache=False, progress=True)
    err = capsys.readouterr().err
    # a bar over the 24 distinct words and one over the five cross-fits and the full fit, each
    # with tqdm's elapsed<remaining (the ETA) and rate
    assert re.search(r"entity probe features: .*/24 \[[0-9:]+<[?0-9:]+, .*word", err)
    assert re.search(r"fitting entity probes: .*/6 \[[0-9:]+<[?0-9:]+, .*fit", err)
    assert again == probes and set(probes) == set(unit) and info["n_folds"] == 5
    backbones._FIT_MEMO.clear()


# A process that fits the probes of a small word list with a stand-in fit which notes each
# call in MARKER, then waits until the file RELEASE exists (the test holds it back).
_CHILD = """
import json, logging, os, sys, time
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from findbench.find.synthetic_neurons import backbones

marker, release = sys.argv[1], sys.argv[2]

def stand_in_fit(config, *, progress=True):
    with open(marker, "a") as fh:
        fh.write(f"{os.getpid()}\\n")
    deadline = time.time() + 60
    while not os.path.exists(release) and time.time() < deadline:
        time.sleep(0.05)
    w = tuple(float(len(c)) for c in config["words"])
    return {c: backbones.EntityProbe(c, w, 0.25) for c in config["words"]}, {"fitted_by": os.getpid()}

backbones._fit_entity_probes = stand_in_fit
words = {"chess": ["rook", "pawn", "king", "queen", "bishop"], "tea": ["oolong", "matcha", "chai", "sencha", "kettle"]}
probes, info = backbones.fit_entity_probes(words, encoder="stand-in", progress=False)
print(json.dumps({"probes": {c: p.to_dict() for c, p in probes.items()}, "info": info}))
"""


def test_two_processes_fit_the_same_probes_once(tmp_path):
    marker, release = tmp_path / "fits.txt", tmp_path / "release"
    env = {**os.environ, "FINDBENCH_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO / "src")}

    def start():
        return subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(marker), str(release)],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    first = start()
    try:
        deadline = time.time() + 60
        while not marker.exists() and time.time() < deadline:  # the first is fitting, holding the lock
            assert first.poll() is None, first.communicate()
            time.sleep(0.05)
        assert marker.exists(), "the first process never started fitting"
        second = start()
        try:
            said = next(
                (line for line in iter(second.stderr.readline, "") if "waiting for another process" in line), ""
            )
            # the second waits on the first's lock; only now may the first finish
            release.touch()
            out_second, err_second = second.communicate(timeout=60)
        finally:
            second.kill()
        out_first, err_first = first.communicate(timeout=60)
    finally:
        release.touch()
        first.kill()
    assert first.returncode == 0, err_first
    assert second.returncode == 0, err_second
    lock = tmp_path / "cache" / "neuron_probes"
    assert "waiting for another process fitting the entity probes (lock " in said and str(lock) in said
    assert marker.read_text().split() == [str(first.pid)]  # fitted once, by the first process
    a, b = json.loads(out_first), json.loads(out_second)
    assert a == b and a["info"] == {"fitted_by": first.pid}
    assert len(list(lock.glob("*.json"))) == 1


def test_a_failed_fit_leaves_no_entry_and_frees_the_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path))
    words = {
        "chess": ["rook", "pawn", "king", "queen", "bishop"],
        "tea": ["oolong", "matcha", "chai", "sencha", "kettle"],
    }

    def broken(config, *, progress=True):
        raise RuntimeError("features failed")

    monkeypatch.setattr(backbones, "_fit_entity_probes", broken)
    backbones._FIT_MEMO.clear()
    with pytest.raises(RuntimeError, match="features failed"):
        backbones.fit_entity_probes(words, encoder="stand-in")
    assert list((tmp_path / "neuron_probes").glob("*.json")) == []

    def fit(config, *, progress=True):
        return {c: backbones.EntityProbe(c, (1.0,), 0.0) for c in config["words"]}, {"ok": True}

    monkeypatch.setattr(backbones, "_fit_entity_probes", fit)
    started = time.perf_counter()
    probes, info = backbones.fit_entity_probes(words, encoder="stand-in")  # not blocked by the failed attempt
    assert info == {"ok": True} and time.perf_counter() - started < 5
    assert len(list((tmp_path / "neuron_probes").glob("*.json"))) == 1
    backbones._FIT_MEMO.clear()
