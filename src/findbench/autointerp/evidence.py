"""Evidence per latent, collected in one streaming pass over the corpus:

- the ``n_top_ex`` best window centres, none within ``buffer`` tokens of another in the same row
  (ties: earlier row, then column), as a greedy pass over the whole corpus picks them;
- an exact weighted sample without replacement of ``n_iw_sampled_ex`` positions, probability ∝
  act² among positions below the smallest top-window centre (Efraimidis-Spirakis keys ``E / act²``);
- ``n_random_ex`` random windows drawn before the pass (labelled inactive, as SAEBench);
- the firing count and an exact histogram of the positive activations (:data:`HIST_BINS` bins).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from findbench.autointerp.activations import encode_latents, read_hook
from findbench.autointerp.config import AutoInterpConfig

log = logging.getLogger(__name__)

_INF = float("inf")

#: Bins of each latent's activation histogram (a power of two: the range doubles by merging pairs).
HIST_BINS = 32


@dataclass
class Window:
    """``2 * buffer + 1`` tokens of one corpus row around ``centre`` with the latent's activations; ``kind``: top, iw
    or random."""

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
        """Whether the scorer should call it active (random windows are labelled inactive, as in SAEBench)."""
        return self.kind != "random"


@dataclass
class LatentEvidence:
    """What the explainer and the scorers see for one latent; ``extra``: ``n_fired`` and ``histogram`` for the
    report. Saved as ``dataclasses.asdict`` writes it, read back by :meth:`from_dict`."""

    latent: int
    generation: list[Window]
    scoring: list[Window]
    top_max_act: float
    n_random_with_activity: int = 0
    skipped: str | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict) -> LatentEvidence:
        return cls(**{**d, **{key: [Window(**w) for w in d[key]] for key in ("generation", "scoring")}})


def _group_best(
    lat: torch.Tensor, primary: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Among flat entries grouped by latent, the first ``k`` of each group ordered by
    ``primary`` ascending, then row, then column: ``(indices, rank within the group)``."""
    order = torch.argsort(cols, stable=True)
    order = order[torch.argsort(rows[order], stable=True)]
    order = order[torch.argsort(primary[order], stable=True)]
    order = order[torch.argsort(lat[order], stable=True)]
    lat_sorted = lat[order]
    rank = torch.arange(len(order)) - torch.searchsorted(lat_sorted, lat_sorted)
    keep = rank < k
    return order[keep], rank[keep]


class EvidenceCollector:
    """Streaming top / importance-weighted / random windows for ``n`` latents: :meth:`update` with
    each batch of activations ``[rows, context, n]`` in corpus order, then :meth:`finish`."""

    def __init__(self, latents: Sequence[int], n_rows: int, cfg: AutoInterpConfig):
        self.latents, self.cfg = list(latents), cfg
        self.n = n = len(self.latents)
        self.k, self.m = cfg.n_top_ex, cfg.n_iw_sampled_ex
        self.b, self.w, self.context = cfg.buffer, cfg.window, cfg.llm_context_size
        self.n_rows, self.rows_seen = n_rows, 0
        self.gen = torch.Generator().manual_seed(cfg.random_seed)
        self.counts = torch.zeros(n, dtype=torch.long)
        # top windows, best first; -inf marks an empty slot
        self.top_v, self.top_r, self.top_c, self.top_win = self._slots(self.k, -_INF)
        # importance-weighted sample (smallest keys first; inf marks an empty slot) and side list
        self.iw_key, self.iw_r, self.iw_c, self.iw_win = self._slots(self.m, _INF)
        self.side = {**self._entries(), "act": torch.zeros(0)}
        # random windows, drawn up front
        rng = np.random.default_rng(cfg.random_seed)
        self.rand_r = torch.as_tensor(rng.integers(0, n_rows, size=(n, cfg.n_random_ex)), dtype=torch.long)
        self.rand_c = torch.as_tensor(
            rng.integers(self.b, self.context - self.b, size=(n, cfg.n_random_ex)), dtype=torch.long
        )
        self.rand_win = torch.zeros((n, cfg.n_random_ex, self.w))
        # activation histograms: HIST_BINS bins over [0, hist_hi) per latent (0: nothing seen yet)
        self.hist = torch.zeros((n, HIST_BINS), dtype=torch.long)
        self.hist_hi = torch.zeros(n)

    def _entries(self, lat=None, row=None, col=None, value=None, win=None) -> dict[str, torch.Tensor]:
        """Flat entries ``{lat, row, col, value, win}`` (empty when no arguments)."""
        if lat is None:
            lat = row = col = torch.zeros(0, dtype=torch.long)
            value, win = torch.zeros(0), torch.zeros((0, self.w))
        return {"lat": lat, "row": row, "col": col, "value": value, "win": win}

    @staticmethod
    def _cat(*parts: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {key: torch.cat([p[key] for p in parts]) for key in parts[0]}

    def _flat(self, value, row, col, win) -> dict[str, torch.Tensor]:
        """The ``[n, slots]`` state as flat entries."""
        return self._entries(
            torch.arange(self.n).repeat_interleave(value.shape[1]),
            row.reshape(-1),
            col.reshape(-1),
            value.reshape(-1),
            win.reshape(-1, self.w),
        )

    def _window_acts(
        self, x: torch.Tensor, lat: torch.Tensor, row_local: torch.Tensor, col: torch.Tensor
    ) -> torch.Tensor:
        return x[lat[:, None], row_local[:, None], col[:, None] + torch.arange(-self.b, self.b + 1)]

    def _slots(self, k: int, empty: float, e=None, keep=None, rank=None) -> tuple[torch.Tensor, ...]:
        """``[n, k]`` values (``empty`` in an empty slot), rows, columns and ``[n, k, w]`` windows,
        holding entries ``e[keep]`` at slot ``rank`` of their latent."""
        v, r, c = torch.full((self.n, k), empty), torch.full((self.n, k), -1), torch.full((self.n, k), -1)
        win = torch.zeros((self.n, k, self.w))
        if e is not None:
            lat = e["lat"][keep]
            v[lat, rank], r[lat, rank], c[lat, rank], win[lat, rank] = (
                e["value"][keep],
                e["row"][keep],
                e["col"][keep],
                e["win"][keep],
            )
        return v, r, c, win

    def _merge_iw(self, new: dict[str, torch.Tensor]) -> None:
        """Keep the ``m`` smallest keys (entries' ``value``) per latent among the pool and ``new``."""
        if not len(new["lat"]) or not self.m:
            return
        e = self._cat(self._flat(self.iw_key, self.iw_r, self.iw_c, self.iw_win), new)
        keep, rank = _group_best(e["lat"], e["value"], e["row"], e["col"], self.m)
        self.iw_key, self.iw_r, self.iw_c, self.iw_win = self._slots(self.m, _INF, e, keep, rank)

    def _release_side(self, threshold: torch.Tensor) -> None:
        """Move side-list positions below ``threshold`` into the eligible pool (the side list
        keeps each position's activation in ``act`` and its key in ``value``)."""
        side = self.side
        if (go := side["act"] < threshold[side["lat"]]).any():
            self.side = {key: v[~go] for key, v in side.items()}
            self._merge_iw({key: side[key][go] for key in ("lat", "row", "col", "value", "win")})

    @torch.inference_mode()
    def update(self, acts: torch.Tensor) -> None:
        """Take the next ``[rows, context, n]`` activations (special tokens already zeroed)."""
        B, start, b, k = acts.shape[0], self.rows_seen, self.b, self.k
        x = acts.float().permute(2, 0, 1).contiguous()  # [n, B, C]
        self.counts += (x > 0).sum(dim=(1, 2))
        self._histogram(x)
        centre = x[:, :, b : self.context - b]  # [n, B, C']
        cw = centre.shape[2]

        # (1) top windows: greedy per (latent, row) where the row's best can still enter
        threshold_before = self.top_v[:, -1]  # a lower bound of the final IW threshold (-inf until k windows)
        lat_p, row_p = (centre.amax(dim=2) > threshold_before[:, None]).nonzero(as_tuple=True)  # rows' best
        if len(lat_p):
            work = centre[lat_p, row_p]  # [P, C']
            pos = torch.arange(cw)
            vals, cols = [], []
            for _ in range(k):
                v, c = work.max(dim=1)
                vals.append(v)
                cols.append(c)
                work = work.masked_fill((pos[None, :] - c[:, None]).abs() <= b, -_INF)
            v = torch.stack(vals, dim=1).reshape(-1)
            c = torch.stack(cols, dim=1).reshape(-1) + b
            lat_c, row_c = lat_p.repeat_interleave(k), row_p.repeat_interleave(k)
            ok = torch.isfinite(v)
            lat_c, row_c, c, v = lat_c[ok], row_c[ok], c[ok], v[ok]
            e = self._cat(self._flat(self.top_v, self.top_r, self.top_c, self.top_win),
                          self._entries(lat_c, row_c + start, c, v, self._window_acts(x, lat_c, row_c, c)))
            keep, rank = _group_best(
                e["lat"], -e["value"], torch.where(torch.isfinite(e["value"]), e["row"], self.n_rows), e["col"], k)
            self.top_v, self.top_r, self.top_c, self.top_win = self._slots(k, -_INF, e, keep, rank)

        # (2) importance-weighted sampling on the active positions: keys E / act^2, E ~ Exp(1)
        if self.m:
            lat_a, row_a, col_a = (centre > 0).nonzero(as_tuple=True)
            if len(lat_a):
                act = centre[lat_a, row_a, col_a]
                key = torch.empty(len(act)).exponential_(generator=self.gen) / act**2
                cols_a = col_a + b
                sure = act < threshold_before[lat_a]
                if sure.any():
                    # only each latent's m smallest keys of this batch can enter the pool
                    ls, rs, cs, ks = lat_a[sure], row_a[sure], cols_a[sure], key[sure]
                    keep, _ = _group_best(ls, ks, rs, cs, self.m)
                    ls, rs, cs = ls[keep], rs[keep], cs[keep]
                    self._merge_iw(self._entries(ls, rs + start, cs, ks[keep], self._window_acts(x, ls, rs, cs)))
                if (wait := ~sure).any():
                    lw, rw, cw_ = lat_a[wait], row_a[wait], cols_a[wait]
                    self.side = self._cat(self.side, self._entries(
                        lw, rw + start, cw_, key[wait], self._window_acts(x, lw, rw, cw_)) | {"act": act[wait]})
            self._release_side(self.top_v[:, -1])

        # (3) random windows that fall in this batch
        if (here := (self.rand_r >= start) & (self.rand_r < start + B)).any():
            lat, j = here.nonzero(as_tuple=True)
            self.rand_win[lat, j] = self._window_acts(x, lat, self.rand_r[lat, j] - start, self.rand_c[lat, j])
        self.rows_seen += B

    def _histogram(self, x: torch.Tensor) -> None:
        """Add the positive activations of ``x [n, B, C]`` to the histograms; when a latent's range
        doubles, its bins merge (bin widths are powers of two, so every division is exact)."""
        top = x.amax(dim=(1, 2))
        for i in ((top > 0) & (top >= self.hist_hi)).nonzero().flatten().tolist():
            hi = float(2.0 ** (math.floor(math.log2(float(top[i]))) + 1))
            if self.hist_hi[i] > 0:
                self.hist[i] = torch.zeros(HIST_BINS, dtype=torch.long).index_add_(
                    0, torch.arange(HIST_BINS) // round(hi / float(self.hist_hi[i])), self.hist[i])
            self.hist_hi[i] = hi
        lat, row, col = (x > 0).nonzero(as_tuple=True)
        if len(lat):
            bins = (x[lat, row, col] / (self.hist_hi[lat] / HIST_BINS)).long().clamp_(0, HIST_BINS - 1)
            self.hist.view(-1).index_add_(0, lat * HIST_BINS + bins, torch.ones_like(bins))

    def _extra(self, i: int) -> dict:
        return {
            "n_fired": int(self.counts[i]),
            "histogram": {"bin_width": float(self.hist_hi[i]) / HIST_BINS, "counts": self.hist[i].tolist()},
        }

    def finish(self, tokens: np.ndarray) -> list[LatentEvidence]:
        """The evidence per latent, split into generation and scoring windows (seeded per latent);
        a latent short of top windows or positions to sample comes back with ``skipped`` set."""
        if self.m:
            self._release_side(
                torch.where(torch.isfinite(self.top_v), self.top_v, torch.full_like(self.top_v, _INF)).min(dim=1).values
            )
        cfg = self.cfg
        out = []
        for i, latent in enumerate(self.latents):
            n_top = int((torch.isfinite(self.top_v[i]) & (self.top_v[i] > 0)).sum())
            n_iw = int(torch.isfinite(self.iw_key[i]).sum())
            randoms = [
                self._window(tokens, int(self.rand_r[i, j]), int(self.rand_c[i, j]), self.rand_win[i, j], "random")
                for j in range(cfg.n_random_ex)
            ]
            n_rand_active = sum(w.max_act > 0 for w in randoms)
            if n_top < self.k or n_iw < self.m:
                out.append(LatentEvidence(
                    latent, [], [], float(self.top_v[i, 0].clamp_min(0)), n_rand_active, extra=self._extra(i),
                    skipped=f"{n_top} active top windows (needs {self.k})" if n_top < self.k
                    else f"{n_iw} positions below the top windows to sample from (needs {self.m})"))
                continue
            tops = [
                self._window(tokens, int(self.top_r[i, j]), int(self.top_c[i, j]), self.top_win[i, j], "top")
                for j in range(self.k)
            ]
            iws = [
                self._window(tokens, int(self.iw_r[i, j]), int(self.iw_c[i, j]), self.iw_win[i, j], "iw")
                for j in range(self.m)
            ]
            rng = np.random.default_rng([cfg.random_seed, latent])
            top_perm, iw_perm = rng.permutation(self.k), rng.permutation(self.m)
            gen = sorted([tops[j] for j in top_perm[: cfg.n_top_ex_for_generation]]
                         + [iws[j] for j in iw_perm[: cfg.n_iw_sampled_ex_for_generation]], key=lambda w: -w.max_act)
            scoring = ([tops[j] for j in top_perm[cfg.n_top_ex_for_generation :]]
                       + [iws[j] for j in iw_perm[cfg.n_iw_sampled_ex_for_generation :]] + randoms)
            scoring = [scoring[j] for j in rng.permutation(len(scoring))]
            out.append(
                LatentEvidence(latent, gen, scoring, float(self.top_v[i, 0]), n_rand_active, extra=self._extra(i))
            )
        return out

    def _window(self, tokens: np.ndarray, row: int, centre: int, acts: torch.Tensor, kind: str) -> Window:
        return Window(row, centre, [int(t) for t in tokens[row, centre - self.b : centre + self.b + 1]],
                      [round(float(a), 6) for a in acts], kind)


@torch.inference_mode()
def corpus_acts(
    model,
    sae,
    tokens: np.ndarray,
    *,
    hook_name: str,
    special_ids: Sequence[int] = (),
    batch_size: int,
    latents: Sequence[int] | None = None,
    rows: tuple[int, int] | None = None,
    desc: str = "activations",
    progress: bool = True,
) -> Iterator[tuple[int, torch.Tensor]]:
    """``(first row, acts [rows, context, n])`` for each batch of ``batch_size`` rows of ``tokens``
    (within ``rows``, a ``(start, stop)`` range starting at a batch boundary): the activations of
    ``latents`` (every latent when None), special tokens zeroed, on the model's device."""
    idx = None if latents is None else torch.as_tensor(list(latents), dtype=torch.long)
    specials = torch.as_tensor(sorted(special_ids), dtype=torch.long)
    start, stop = rows or (0, len(tokens))
    with tqdm(total=stop - start, desc=desc, unit="row", disable=not progress) as bar:
        for first in range(start, stop, batch_size):
            ids = torch.as_tensor(tokens[first : min(first + batch_size, stop)], dtype=torch.long)
            acts = encode_latents(sae, read_hook(model, ids, hook_name=hook_name), idx)
            yield first, acts.masked_fill(torch.isin(ids, specials).to(acts.device)[..., None], 0)
            bar.update(len(ids))


def count_firing(batches: Iterable[tuple[int, torch.Tensor]], d_sae: int) -> np.ndarray:
    """How many positions of ``batches`` (:func:`corpus_acts` of every latent) each latent fires on."""
    per_batch = ((acts > 0).sum(dim=(0, 1)).cpu() for _, acts in batches)
    return sum(per_batch, torch.zeros(int(d_sae), dtype=torch.long)).numpy()


def choose_latents(counts: np.ndarray, cfg: AutoInterpConfig) -> list[int]:
    """``cfg.n_latents`` latents drawn with ``cfg.random_seed`` among those firing more than
    ``cfg.dead_latent_threshold`` times (all alive ones when fewer), in increasing order."""
    alive = np.flatnonzero(np.asarray(counts) > cfg.dead_latent_threshold)
    if not len(alive):
        raise ValueError(
            f"no latent fires more than dead_latent_threshold={cfg.dead_latent_threshold} times on the corpus"
        )
    picked = np.random.default_rng(cfg.random_seed).choice(alive, size=min(cfg.n_latents, len(alive)), replace=False)
    return sorted(int(x) for x in picked)


def collect_evidence(
    model,
    sae,
    tokens: np.ndarray,
    latents: Sequence[int],
    cfg: AutoInterpConfig,
    *,
    hook_name: str,
    special_ids: Sequence[int] = (),
    batch_size: int,
    progress: bool = True,
) -> list[LatentEvidence]:
    """One pass over ``tokens [rows, context]``: the evidence of each latent in ``latents``."""
    if len(shape := np.shape(tokens)) != 2 or shape[1] != cfg.llm_context_size:
        raise ValueError(f"tokens must be [rows, llm_context_size={cfg.llm_context_size}], got shape {shape}")
    return evidence_of(corpus_acts(model, sae, np.asarray(tokens), hook_name=hook_name, special_ids=special_ids,
                                   batch_size=batch_size, latents=latents, desc="evidence", progress=progress),
                       tokens, latents, cfg)


@torch.inference_mode()
def evidence_of(
    batches: Iterable[tuple[int, torch.Tensor]], tokens: np.ndarray, latents: Sequence[int], cfg: AutoInterpConfig
) -> list[LatentEvidence]:
    """The evidence of each latent in ``latents`` from ``batches`` (:func:`corpus_acts` of those
    latents, every row of ``tokens`` in order)."""
    collector = EvidenceCollector(latents, len(tokens), cfg)
    for _, acts in batches:
        collector.update(acts.cpu())
    return collector.finish(np.asarray(tokens))

