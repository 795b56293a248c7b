"""Window selection of the streaming evidence pass, on hand-made activation tensors."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest
import torch

from benchmarks.p5_evidence import dense_top_windows  # the reference (dense) pass
from findbench.autointerp.config import AutoInterpConfig
from findbench.autointerp.evidence import HIST_BINS, EvidenceCollector

CTX = 32


def _cfg(**kw) -> AutoInterpConfig:
    base = dict(
        llm_context_size=CTX,
        total_tokens=CTX * 8,
        buffer=3,
        n_top_ex=4,
        n_top_ex_for_generation=3,
        n_iw_sampled_ex=3,
        n_iw_sampled_ex_for_generation=2,
        n_random_ex=4,
        override_latents=[0, 1],
    )
    base.update(kw)
    return AutoInterpConfig(**base)


def _run(acts: torch.Tensor, cfg: AutoInterpConfig, batch: int = 3):
    rows = acts.shape[0]
    tokens = np.arange(rows * CTX, dtype=np.int32).reshape(rows, CTX)
    col = EvidenceCollector(list(range(acts.shape[2])), rows, cfg)
    for s in range(0, rows, batch):
        col.update(acts[s : s + batch])
    return col, col.finish(tokens), tokens


def _sparse(rows: int, n: int, seed: int, density: float = 0.15) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    vals = torch.rand((rows, CTX, n), generator=g)
    keep = torch.rand((rows, CTX, n), generator=g) < density
    return torch.where(keep, vals, torch.zeros(()))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("batch", [1, 3, 8])
def test_streaming_top_windows_equal_the_dense_greedy_pass(seed, batch):
    acts = _sparse(10, 2, seed)
    cfg = _cfg()
    col, _, _ = _run(acts, cfg, batch)
    for i in range(2):
        want = dense_top_windows(acts[..., i], cfg.n_top_ex, cfg.buffer)
        got = list(zip(col.top_r[i].tolist(), col.top_c[i].tolist()))
        assert got == want


def test_top_windows_never_overlap_and_stay_inside_the_row():
    acts = torch.zeros((2, CTX, 1))
    acts[0, 10:20, 0] = torch.linspace(1, 2, 10)  # a ramp: greedy must skip neighbours
    acts[1, 5, 0] = 0.5
    cfg = _cfg(
        override_latents=[0], n_top_ex=3, n_top_ex_for_generation=2, n_iw_sampled_ex=0, n_iw_sampled_ex_for_generation=0
    )
    col, _, _ = _run(acts, cfg)
    picks = list(zip(col.top_r[0].tolist(), col.top_c[0].tolist()))
    assert picks == [(0, 19), (0, 15), (0, 11)]
    for r, c in picks:
        assert cfg.buffer <= c < CTX - cfg.buffer
    same_row = [c for r, c in picks if r == 0]
    assert all(abs(a - b) > cfg.buffer for a in same_row for b in same_row if a != b)


def test_windows_carry_the_tokens_and_activations_around_the_centre():
    acts = _sparse(6, 2, 3, density=0.4)
    cfg = _cfg()
    _, evidence, tokens = _run(acts, cfg)
    for ev in evidence:
        assert ev.skipped is None
        for w in ev.generation + ev.scoring:
            assert w.tokens == tokens[w.row, w.centre - 3 : w.centre + 4].tolist()
            want = acts[w.row, w.centre - 3 : w.centre + 4, ev.latent].tolist()
            assert w.acts == pytest.approx(want, abs=1e-6)


def test_importance_weighted_positions_lie_below_the_top_centres_and_follow_act_squared():
    # latent 0: two strong positions (top windows) and, far below, weights 1 and 3 (ratio 9 in act^2)
    acts = torch.zeros((4, CTX, 1))
    acts[0, 5, 0], acts[1, 5, 0], acts[2, 20, 0] = 10.0, 9.0, 8.0
    acts[3, 8, 0], acts[3, 20, 0] = 1.0, 3.0
    hits = {8: 0, 20: 0}
    for seed in range(300):
        cfg = _cfg(
            override_latents=[0],
            n_top_ex=3,
            n_top_ex_for_generation=2,
            n_iw_sampled_ex=1,
            n_iw_sampled_ex_for_generation=0,
            random_seed=seed,
        )
        col, _, _ = _run(acts, cfg, batch=1)
        assert col.iw_r[0, 0].item() == 3
        hits[col.iw_c[0, 0].item()] += 1
    # P(act 3) = 9 / 10
    assert 0.83 < hits[20] / 300 < 0.96


def test_positions_at_or_above_the_final_threshold_are_never_sampled_even_when_seen_before_it_was_known():
    # row 0 comes first with moderate values; the strong top windows arrive later
    acts = torch.zeros((3, CTX, 1))
    acts[0, 6, 0], acts[0, 20, 0] = 2.0, 0.1
    acts[1, 6, 0], acts[2, 6, 0] = 5.0, 4.0
    for seed in range(20):
        cfg = _cfg(
            override_latents=[0],
            n_top_ex=2,
            n_top_ex_for_generation=1,
            n_iw_sampled_ex=1,
            n_iw_sampled_ex_for_generation=0,
            random_seed=seed,
        )
        col, _, _ = _run(acts, cfg, batch=1)
        # threshold = 4.0: act 2.0 (row 0) and 0.1 are eligible, 5.0 and 4.0 are not
        assert (col.iw_r[0, 0].item(), col.iw_c[0, 0].item()) in {(0, 6), (0, 20)}


def test_masked_special_tokens_and_split_sizes():
    acts = _sparse(8, 2, 5, density=0.5)
    acts[:, 0, :] = 100.0  # BOS column: the caller zeroes specials; column 0 can never be a centre anyway
    cfg = _cfg()
    _, evidence, _ = _run(acts, cfg)
    for ev in evidence:
        assert len(ev.generation) == cfg.n_top_ex_for_generation + cfg.n_iw_sampled_ex_for_generation
        assert len(ev.scoring) == cfg.n_scoring_examples
        assert [w.kind for w in ev.scoring].count("random") == cfg.n_random_ex
        assert [w.max_act for w in ev.generation] == sorted((w.max_act for w in ev.generation), reverse=True)


def test_split_is_seeded_and_a_rare_latent_is_reported_not_dropped():
    acts = _sparse(8, 2, 6, density=0.5)
    acts[..., 1] = 0
    acts[2, 10, 1] = 1.0
    cfg = _cfg()
    _, a, _ = _run(acts, cfg)
    _, b, _ = _run(acts, cfg)
    assert [asdict(e) for e in a] == [asdict(e) for e in b]
    assert a[1].skipped and "top windows" in a[1].skipped and a[1].scoring == []
    _, c, _ = _run(acts, _cfg(random_seed=7))
    assert [w.row for w in c[0].scoring] != [w.row for w in a[0].scoring]


@pytest.mark.parametrize("batch", [1, 3, 8])
def test_activation_histogram_is_exact_whatever_the_batches(batch):
    acts = _sparse(8, 2, 11, density=0.4) * torch.tensor([1.0, 7.0])
    acts[5, 7, 0] = 3.0  # a late, larger activation: the range doubles twice and the bins merge
    cfg = _cfg()
    _, evidence, _ = _run(acts, cfg, batch)
    for i, ev in enumerate(evidence):
        values = acts[..., i][acts[..., i] > 0].numpy()
        hist = ev.extra["histogram"]
        assert ev.extra["n_fired"] == len(values) == sum(hist["counts"])
        assert len(hist["counts"]) == HIST_BINS
        top = 2.0 ** (np.floor(np.log2(values.max())) + 1)
        assert hist["bin_width"] == top / HIST_BINS
        want, _ = np.histogram(values, bins=HIST_BINS, range=(0.0, top))
        assert hist["counts"] == want.tolist()
