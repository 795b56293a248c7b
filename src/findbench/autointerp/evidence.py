"""Evidence per latent: top-activating, importance-weighted and random windows, collected in
one streaming pass over the corpus.

Nothing dense is kept: per batch of rows the SAE's chosen latents are encoded, and each
latent keeps

- its ``n_top_ex`` best window centres (a centre never lies within ``buffer`` tokens of
  another chosen centre in the same row; ties go to the earlier row, then column). Per row
  the greedy choice is made once; the global choice is the best ``n_top_ex`` of the rows'
  choices, which is what a greedy pass over the whole corpus would pick;
- an exact weighted sample without replacement of ``n_iw_sampled_ex`` positions, with
  probability proportional to act² among positions whose activation is below the smallest
  top-window centre (Efraimidis-Spirakis: each position draws ``E / act²`` with
  ``E ~ Exp(1)`` and the smallest draws win). That threshold is only known at the end; it
  never decreases during the pass, so positions below the current threshold compete at
  once and the few above it wait in a side list until the threshold passes them;
- its ``n_random_ex`` random windows, drawn before the pass, and how many of them contain
  activity (SAEBench labels them inactive without looking).

Memory does not grow with the corpus: ``O(latents × (n_top_ex + n_iw_sampled_ex + n_random_ex)
× window)`` plus the side list.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from findbench.autointerp.activations import encode_latents, read_hook
from findbench.autointerp.config import AutoInterpConfig

__all__ = ["Window", "LatentEvidence", "EvidenceCollector", "collect_evidence", "firing_counts", "choose_latents"]

log = logging.getLogger(__name__)

_INF = float("inf")


@dataclass
class Window:
    """``2 * buffer + 1`` tokens of one corpus row centred on ``centre``, with the latent's
    activation on each token. ``kind`` is ``top``, ``iw`` or ``random``."""

    row: int
    centre: int
    tokens: list[int]
    acts: list[float]
    kind: str

    @property
    def max_act(self) -> float:
        return max(self.acts) if self.acts else 0.0

    @property
    def active(self) -> bool:
        """Whether the scorer should call this window active (top and importance-weighted
        windows are; random windows are labelled inactive, as in SAEBench)."""
        return self.kind != "random"


@dataclass
class LatentEvidence:
    """What the explainer and the scorers see for one latent."""

    latent: int
    generation: list[Window]
    scoring: list[Window]
    top_max_act: float
    n_random_with_activity: int = 0
    skipped: str | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> LatentEvidence:
        d = dict(d)
        d["generation"] = [Window(**w) for w in d["generation"]]
        d["scoring"] = [Window(**w) for w in d["scoring"]]
        return cls(**d)


def _sort_key_order(values: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """Per latent (dim 0), the order by value descending, then row, then column."""
    order = torch.argsort(cols, dim=1, stable=True)
    order = order.gather(1, torch.argsort(rows.gather(1, order), dim=1, stable=True))
    return order.gather(1, torch.argsort(-values.gather(1, order), dim=1, stable=True))


class EvidenceCollector:
    """Streaming top / importance-weighted / random windows for ``n`` latents.

    Call :meth:`update` with each batch of activations ``[rows, context, n]`` in corpus
    order, then :meth:`finish` with the corpus tokens.
    """

    def __init__(self, latents: Sequence[int], n_rows: int, cfg: AutoInterpConfig):
        self.latents = list(latents)
        self.cfg = cfg
        self.n = n = len(self.latents)
        self.k = k = cfg.n_top_ex
        self.m = m = cfg.n_iw_sampled_ex
        self.b = cfg.buffer
        self.w = cfg.window
        self.context = cfg.llm_context_size
        self.n_rows = n_rows
        self.rows_seen = 0
        self.gen = torch.Generator().manual_seed(cfg.random_seed)
        self.counts = torch.zeros(n, dtype=torch.long)
        # top windows
        self.top_v = torch.full((n, k), -_INF)
        self.top_r = torch.full((n, k), -1, dtype=torch.long)
        self.top_c = torch.full((n, k), -1, dtype=torch.long)
        self.top_win = torch.zeros((n, k, self.w))
        # importance-weighted sample: eligible pool and side list
        self.iw_key = torch.full((n, m), _INF)
        self.iw_r = torch.full((n, m), -1, dtype=torch.long)
        self.iw_c = torch.full((n, m), -1, dtype=torch.long)
        self.iw_win = torch.zeros((n, m, self.w))
        self.side: dict[str, torch.Tensor] = {
            "lat": torch.zeros(0, dtype=torch.long),
            "row": torch.zeros(0, dtype=torch.long),
            "col": torch.zeros(0, dtype=torch.long),
            "act": torch.zeros(0),
            "key": torch.zeros(0),
            "win": torch.zeros((0, self.w)),
        }
        # random windows, drawn up front
        rng = np.random.default_rng(cfg.random_seed)
        self.rand_r = torch.as_tensor(rng.integers(0, n_rows, size=(n, cfg.n_random_ex)), dtype=torch.long)
        self.rand_c = torch.as_tensor(rng.integers(self.b, self.context - self.b, size=(n, cfg.n_random_ex)), dtype=torch.long)
        self.rand_win = torch.zeros((n, cfg.n_random_ex, self.w))

    # -- helpers -----------------------------------------------------------------------------
    def _windows(self, acts_nbc: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """Window activations ``[n, M, w]`` for per-latent batch rows / centre columns ``[n, M]``."""
        offs = torch.arange(-self.b, self.b + 1)
        lat = torch.arange(self.n)[:, None, None]
        return acts_nbc[lat, rows[..., None], cols[..., None] + offs]

    def _threshold(self) -> torch.Tensor:
        """A lower bound of the final IW threshold per latent (-inf until k windows exist)."""
        full = torch.isfinite(self.top_v).all(dim=1)
        low = self.top_v.min(dim=1).values
        return torch.where(full, low, torch.full_like(low, -_INF))

    def _merge_iw(self, key, row, col, win) -> None:
        """Keep the ``m`` smallest keys per latent among the pool and ``[n, M]`` newcomers."""
        key = torch.cat([self.iw_key, key], dim=1)
        row = torch.cat([self.iw_r, row], dim=1)
        col = torch.cat([self.iw_c, col], dim=1)
        win = torch.cat([self.iw_win, win], dim=1)
        best = torch.topk(key, self.m, dim=1, largest=False, sorted=True).indices if self.m else key[:, :0].long()
        self.iw_key = key.gather(1, best)
        self.iw_r = row.gather(1, best)
        self.iw_c = col.gather(1, best)
        self.iw_win = win.gather(1, best[..., None].expand(-1, -1, self.w))

    def _release_side(self, threshold: torch.Tensor) -> None:
        """Move side-list positions below ``threshold`` into the eligible pool."""
        side = self.side
        if not len(side["lat"]):
            return
        go = side["act"] < threshold[side["lat"]]
        if not go.any():
            return
        lat, row, col, key, win = (side[name][go] for name in ("lat", "row", "col", "key", "win"))
        for name in side:
            side[name] = side[name][~go]
        for latent in lat.unique().tolist():
            sel = lat == latent
            cnt = int(sel.sum())
            key_l = torch.full((self.n, cnt), _INF)
            row_l = torch.full((self.n, cnt), -1, dtype=torch.long)
            col_l = torch.full((self.n, cnt), -1, dtype=torch.long)
            win_l = torch.zeros((self.n, cnt, self.w))
            key_l[latent], row_l[latent], col_l[latent], win_l[latent] = key[sel], row[sel], col[sel], win[sel]
            self._merge_iw(key_l, row_l, col_l, win_l)

    # -- the pass ----------------------------------------------------------------------------
    @torch.inference_mode()
    def update(self, acts: torch.Tensor) -> None:
        """Take the next ``[rows, context, n]`` activations (special tokens already zeroed)."""
        if acts.dim() != 3 or acts.shape[1] != self.context or acts.shape[2] != self.n:
            raise ValueError(f"acts must be [rows, {self.context}, {self.n}], got {tuple(acts.shape)}")
        acts = acts.float()
        B = acts.shape[0]
        start = self.rows_seen
        if start + B > self.n_rows:
            raise ValueError(f"more rows than the corpus has ({start + B} > {self.n_rows})")
        b, k = self.b, self.k
        x = acts.permute(2, 0, 1).contiguous()  # [n, B, C]
        self.counts += (x > 0).sum(dim=(1, 2))
        centre = x[:, :, b : self.context - b]  # [n, B, C']
        cw = centre.shape[2]

        # (1) per-row greedy top-k centres, then merge with the running best
        work = centre.clone()
        pos = torch.arange(cw)
        vals, cols = [], []
        for _ in range(k):
            v, c = work.max(dim=2)
            vals.append(v)
            cols.append(c)
            near = (pos[None, None, :] - c[..., None]).abs() <= b
            work = work.masked_fill(near, -_INF)
        cand_v = torch.stack(vals, dim=2).reshape(self.n, B * k)
        cand_c = torch.stack(cols, dim=2).reshape(self.n, B * k) + b
        cand_rl = torch.arange(B).repeat_interleave(k)[None, :].expand(self.n, -1)
        cand_win = self._windows(x, cand_rl, cand_c)
        all_v = torch.cat([self.top_v, cand_v], dim=1)
        all_r = torch.cat([self.top_r, cand_rl + start], dim=1)
        all_c = torch.cat([self.top_c, cand_c], dim=1)
        all_win = torch.cat([self.top_win, cand_win], dim=1)
        # invalid (-inf) entries sort last whatever their row
        order = _sort_key_order(all_v, torch.where(torch.isfinite(all_v), all_r, self.n_rows), all_c)[:, :k]
        threshold_before = self._threshold()
        self.top_v, self.top_r, self.top_c = all_v.gather(1, order), all_r.gather(1, order), all_c.gather(1, order)
        self.top_win = all_win.gather(1, order[..., None].expand(-1, -1, self.w))

        # (2) importance-weighted candidates: keys E / act^2 on active centre positions
        if self.m:
            e = torch.empty(centre.shape).exponential_(generator=self.gen)
            active = centre > 0
            key = torch.where(active, e / centre.clamp_min(1e-30) ** 2, torch.full_like(e, _INF))
            sure = active & (centre < threshold_before[:, None, None])
            flat = torch.where(sure, key, torch.full_like(key, _INF)).reshape(self.n, B * cw)
            take = min(self.m, B * cw)
            best = torch.topk(flat, take, dim=1, largest=False).indices
            rows_l, cols_l = best // cw, best % cw + b
            self._merge_iw(flat.gather(1, best), rows_l + start, cols_l, self._windows(x, rows_l, cols_l))
            wait = active & ~sure
            if wait.any():
                lat, rl, cl = wait.nonzero(as_tuple=True)
                cols_w = cl + b
                win = x[lat[:, None], rl[:, None], cols_w[:, None] + torch.arange(-b, b + 1)]
                add = {"lat": lat, "row": rl + start, "col": cols_w, "act": centre[lat, rl, cl], "key": key[lat, rl, cl], "win": win}
                for name in self.side:
                    self.side[name] = torch.cat([self.side[name], add[name]])
            self._release_side(self._threshold())

        # (3) random windows that fall in this batch
        here = (self.rand_r >= start) & (self.rand_r < start + B)
        if here.any():
            lat, j = here.nonzero(as_tuple=True)
            rl = self.rand_r[lat, j] - start
            self.rand_win[lat, j] = x[lat[:, None], rl[:, None], self.rand_c[lat, j][:, None] + torch.arange(-b, b + 1)]
        self.rows_seen += B

    # -- results -------------------------------------------------------------------------------
    def finish(self, tokens: np.ndarray) -> list[LatentEvidence]:
        """The evidence per latent, split into generation and scoring windows (seeded per latent).

        A latent with fewer than ``n_top_ex`` active top windows or fewer than
        ``n_iw_sampled_ex`` positions to sample from is returned with ``skipped`` set (and
        no windows) rather than dropped silently.
        """
        if self.rows_seen != self.n_rows:
            raise ValueError(f"the pass saw {self.rows_seen} of {self.n_rows} rows")
        self._release_side(torch.where(torch.isfinite(self.top_v), self.top_v, torch.full_like(self.top_v, _INF)).min(dim=1).values)
        cfg = self.cfg
        out = []
        for i, latent in enumerate(self.latents):
            top_ok = torch.isfinite(self.top_v[i]) & (self.top_v[i] > 0)
            iw_ok = torch.isfinite(self.iw_key[i])
            n_top, n_iw = int(top_ok.sum()), int(iw_ok.sum())
            randoms = [self._window(tokens, int(self.rand_r[i, j]), int(self.rand_c[i, j]), self.rand_win[i, j], "random")
                       for j in range(cfg.n_random_ex)]
            n_rand_active = sum(w.max_act > 0 for w in randoms)
            if n_top < self.k or n_iw < self.m:
                reason = (f"{n_top} active top windows (needs {self.k})" if n_top < self.k
                          else f"{n_iw} positions below the top windows to sample from (needs {self.m})")
                out.append(LatentEvidence(latent, [], [], float(self.top_v[i, 0].clamp_min(0)), n_rand_active, skipped=reason))
                continue
            tops = [self._window(tokens, int(self.top_r[i, j]), int(self.top_c[i, j]), self.top_win[i, j], "top") for j in range(self.k)]
            iws = [self._window(tokens, int(self.iw_r[i, j]), int(self.iw_c[i, j]), self.iw_win[i, j], "iw") for j in range(self.m)]
            rng = np.random.default_rng([cfg.random_seed, latent])
            top_perm, iw_perm = rng.permutation(self.k), rng.permutation(self.m)
            gen = [tops[j] for j in top_perm[: cfg.n_top_ex_for_generation]]
            gen += [iws[j] for j in iw_perm[: cfg.n_iw_sampled_ex_for_generation]]
            gen.sort(key=lambda w: -w.max_act)
            scoring = [tops[j] for j in top_perm[cfg.n_top_ex_for_generation :]]
            scoring += [iws[j] for j in iw_perm[cfg.n_iw_sampled_ex_for_generation :]] + randoms
            scoring = [scoring[j] for j in rng.permutation(len(scoring))]
            out.append(LatentEvidence(latent, gen, scoring, float(self.top_v[i, 0]), n_rand_active))
        return out

    def _window(self, tokens: np.ndarray, row: int, centre: int, acts: torch.Tensor, kind: str) -> Window:
        ids = tokens[row, centre - self.b : centre + self.b + 1]
        return Window(row, centre, [int(t) for t in ids], [round(float(a), 6) for a in acts], kind)


def _special_mask(ids: torch.Tensor, special_ids: Sequence[int]) -> torch.Tensor:
    if not special_ids:
        return torch.zeros_like(ids, dtype=torch.bool)
    return torch.isin(ids, torch.as_tensor(sorted(special_ids), dtype=ids.dtype))


def _batches(n_rows: int, batch_size: int, desc: str, progress: bool):
    bar = tqdm(total=n_rows, desc=desc, unit="row", disable=not progress)
    for start in range(0, n_rows, batch_size):
        yield start, min(start + batch_size, n_rows)
        bar.update(min(batch_size, n_rows - start))
    bar.close()


@torch.inference_mode()
def firing_counts(model, sae, tokens: np.ndarray, *, hook_name: str, special_ids: Sequence[int] = (), batch_size: int = 32,
                  progress: bool = True) -> np.ndarray:
    """How many corpus positions each of the SAE's latents fires on (special tokens excluded)."""
    counts = torch.zeros(int(sae.cfg.d_sae), dtype=torch.long)
    for start, stop in _batches(len(tokens), batch_size, "latent firing counts", progress):
        ids = torch.as_tensor(tokens[start:stop], dtype=torch.long)
        hidden = read_hook(model, ids, hook_name=hook_name)
        acts = encode_latents(sae, hidden)
        acts = acts.masked_fill(_special_mask(ids, special_ids)[..., None], 0)
        counts += (acts > 0).sum(dim=(0, 1)).cpu()
    return counts.numpy()


def choose_latents(counts: np.ndarray, cfg: AutoInterpConfig) -> list[int]:
    """``cfg.override_latents``, or ``cfg.n_latents`` latents drawn with ``cfg.random_seed``
    among those firing more than ``cfg.dead_latent_threshold`` times (all alive ones when
    fewer), in increasing order."""
    if cfg.override_latents is not None:
        return list(cfg.override_latents)
    alive = np.flatnonzero(np.asarray(counts) > cfg.dead_latent_threshold)
    if not len(alive):
        raise ValueError(f"no latent fires more than dead_latent_threshold={cfg.dead_latent_threshold} times on the corpus")
    rng = np.random.default_rng(cfg.random_seed)
    picked = rng.choice(alive, size=min(cfg.n_latents, len(alive)), replace=False)
    return sorted(int(x) for x in picked)


@torch.inference_mode()
def collect_evidence(model, sae, tokens: np.ndarray, latents: Sequence[int], cfg: AutoInterpConfig, *, hook_name: str,
                     special_ids: Sequence[int] = (), batch_size: int = 32, progress: bool = True) -> list[LatentEvidence]:
    """One pass over ``tokens [rows, context]``: the evidence of each latent in ``latents``."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or tokens.shape[1] != cfg.llm_context_size:
        raise ValueError(f"tokens must be [rows, llm_context_size={cfg.llm_context_size}], got shape {tokens.shape}")
    collector = EvidenceCollector(latents, len(tokens), cfg)
    idx = torch.as_tensor(list(latents), dtype=torch.long)
    for start, stop in _batches(len(tokens), batch_size, "evidence", progress):
        ids = torch.as_tensor(tokens[start:stop], dtype=torch.long)
        hidden = read_hook(model, ids, hook_name=hook_name)
        acts = encode_latents(sae, hidden, idx).cpu()
        acts = acts.masked_fill(_special_mask(ids, special_ids)[..., None], 0)
        collector.update(acts)
    return collector.finish(tokens)


def dense_top_windows(acts: torch.Tensor, k: int, buffer: int) -> list[tuple[int, int]]:
    """The reference procedure on a dense ``[rows, context]`` activation tensor of one latent:
    a greedy pass over all centre positions by activation (ties: earlier row, then column),
    skipping a centre within ``buffer`` tokens of a chosen one in the same row. Used to check
    :class:`EvidenceCollector` and as the dense path in ``benchmarks/p5_evidence.py``."""
    rows, context = acts.shape
    centre = acts[:, buffer : context - buffer]
    flat = centre.reshape(-1)
    r_idx = torch.arange(rows).repeat_interleave(centre.shape[1])
    c_idx = torch.arange(centre.shape[1]).repeat(rows) + buffer
    order = torch.argsort(c_idx, stable=True)
    order = order[torch.argsort(r_idx[order], stable=True)]
    order = order[torch.argsort(-flat[order], stable=True)]
    chosen: list[tuple[int, int]] = []
    taken: dict[int, list[int]] = {}
    for o in order.tolist():
        r, c = int(r_idx[o]), int(c_idx[o])
        if any(abs(c - c2) <= buffer for c2 in taken.get(r, ())):
            continue
        chosen.append((r, c))
        taken.setdefault(r, []).append(c)
        if len(chosen) == k:
            break
    return chosen
