"""One-hidden-layer ReLU MLPs (1 → 64 → 1) that approximate FIND numeric functions.

FIND serves 15 % of its numeric functions through an MLP fitted on the function's domain; its
reference recipe (:func:`reference_fit`) runs Adam (lr 0.01) for 10,000 full-batch epochs per
network. :func:`fit_mlps` fits many networks at once to a lower error: normalised inputs and
outputs, hidden ReLU knots following the target's curvature with a least-squares output layer,
batched Adam refinement under a cosine schedule, a final least-squares solve, keeping the better
fit. Seeded and single-threaded: the same inputs and seed give bit-identical float32 weights.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from findbench import _checks

logger = logging.getLogger(__name__)

#: Hidden width of FIND's approximating MLPs.
HIDDEN = 64
#: The weight arrays of :func:`fit_mlps`'s result, in the network's order.
_WEIGHTS = ("w1", "b1", "w2", "b2")
#: Models per batched torch solve / evaluation (bounds the (chunk, n_points, hidden) activations).
_CHUNK = 16


def float32_list(values: Any) -> list[float]:
    """Round ``values`` to float32 and return Python floats with the shortest digits that
    round-trip to the same float32 (so JSON and source code stay short and exact)."""
    return [float(str(v)) for v in np.asarray(values, dtype=np.float32).ravel()]


def mlp_forward(w1: Any, b1: Any, w2: Any, b2: float, x: Any) -> np.ndarray:
    """Evaluate ``w2 · relu(w1 * x + b1) + b2`` in float64 (x scalar or any-shape array).

    This is exactly the expression the generated source code of an MLP function uses.
    """
    w1, b1, w2, x = (np.asarray(a, dtype=np.float64) for a in (w1, b1, w2, x))
    return np.maximum(np.multiply.outer(x, w1) + b1, 0.0) @ w2 + float(b2)


def weights_from_state_dict(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """Convert a FIND ``nn.Sequential(Linear(1,64), ReLU(), Linear(64,1))`` state dict
    (keys ``layers.0.weight`` … ``layers.2.bias``) into ``{"w1","b1","w2","b2"}`` float32 lists."""
    _checks.instance("state_dict", state_dict, Mapping, "a mapping of tensors")
    keys = ("layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias")
    missing = [k for k in keys if k not in state_dict]
    if missing:
        raise ValueError(f"state_dict is missing key(s) {missing}; expected {list(keys)}")

    def arr(key: str) -> np.ndarray:
        v = state_dict[key]
        if hasattr(v, "detach"):
            v = v.detach().cpu().numpy()
        return np.asarray(v, dtype=np.float32)

    w1, b1, w2, b2 = (arr(k) for k in keys)
    h = b1.size
    if w1.shape != (h, 1) or w2.shape != (1, h) or b2.shape != (1,):
        raise ValueError(
            f"state_dict shapes {w1.shape}, {b1.shape}, {w2.shape}, {b2.shape} are not those of a 1→{h}→1 MLP"
        )
    return {"w1": float32_list(w1), "b1": float32_list(b1), "w2": float32_list(w2), "b2": float32_list(b2)[0]}


@contextlib.contextmanager
def _single_thread() -> Iterator[None]:
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _check_xy(xs: Any, ys: Any) -> tuple[np.ndarray, np.ndarray]:
    ys = np.atleast_2d(np.asarray(ys, dtype=np.float64))  # one model's targets: (1, n_points)
    if ys.ndim != 2 or ys.shape[1] < 2:
        raise ValueError(f"ys must have shape (n_models, n_points) with n_points >= 2, got {ys.shape}")
    xs = np.asarray(xs, dtype=np.float64)
    if xs.ndim == 1 and xs.shape[0] == ys.shape[1]:
        xs = np.repeat(xs[None, :], ys.shape[0], axis=0)
    if xs.shape != ys.shape:
        raise ValueError(f"xs has shape {xs.shape} but ys has shape {ys.shape}")
    if not np.all(np.isfinite(xs)):
        raise ValueError("xs must be finite")
    if not np.all(np.isfinite(ys)):
        bad = sorted({int(i) for i in np.nonzero(~np.isfinite(ys))[0]})[:10]
        raise ValueError(f"ys must be finite; non-finite targets in model(s) {bad}")
    return np.ascontiguousarray(xs), np.ascontiguousarray(ys)


def _initial_knots(xn: np.ndarray, yn: np.ndarray, hidden: int, curvature_power: float) -> np.ndarray:
    """Knot positions (M, hidden) in normalised input units: half evenly spaced, half at the
    quantiles of |second difference|^power (where a piecewise-linear fit needs them)."""
    m, n = yn.shape
    n_even = hidden - hidden // 2
    even = np.quantile(xn, (np.arange(n_even) + 0.5) / n_even, axis=1).T if n > 1 else np.zeros((m, n_even))
    n_curv = hidden - n_even
    if n_curv == 0:
        return even
    d2 = np.abs(np.diff(yn, n=2, axis=1)) ** curvature_power + 1e-12  # (M, N-2), at xn[:, 1:-1]
    cdf = np.cumsum(d2, axis=1)
    cdf /= cdf[:, -1:]
    qs = (np.arange(n_curv) + 0.5) / n_curv
    curv = np.array([np.interp(qs, cdf[i], xn[i, 1:-1]) for i in range(m)]).reshape(m, n_curv)  # m may be 0
    return np.concatenate([even, curv], axis=1)


def _solve_output(xn, yn, w1, b1, ridge: float):
    """Least-squares output layer (w2, b2) for fixed hidden layers; float64 torch, chunked."""
    import torch

    m, hidden = w1.shape
    w2 = torch.empty_like(w1)
    b2 = torch.empty(m, dtype=w1.dtype)
    eye = torch.eye(hidden + 1, dtype=w1.dtype)
    for s in range(0, m, _CHUNK):
        e = min(m, s + _CHUNK)
        h = torch.baddbmm(b1[s:e, None, :], xn[s:e, :, None], w1[s:e, None, :]).clamp_(min=0)  # (c, N, H)
        c, n = h.shape[0], h.shape[1]
        ata = torch.empty(c, hidden + 1, hidden + 1, dtype=h.dtype)
        ata[:, :hidden, :hidden] = h.transpose(1, 2) @ h
        hs = h.sum(dim=1)
        ata[:, :hidden, hidden] = hs
        ata[:, hidden, :hidden] = hs
        ata[:, hidden, hidden] = n
        aty = torch.empty(c, hidden + 1, dtype=h.dtype)
        aty[:, :hidden] = (h.transpose(1, 2) @ yn[s:e, :, None])[..., 0]
        aty[:, hidden] = yn[s:e].sum(dim=1)
        scale = torch.diagonal(ata, dim1=1, dim2=2).mean(dim=1).clamp_min(1e-30)
        sol = torch.linalg.solve(ata + ridge * scale[:, None, None] * eye, aty[..., None])[..., 0]
        w2[s:e] = sol[:, :-1]
        b2[s:e] = sol[:, -1]
    return w2, b2


def _denormalise(w1, b1, w2, b2, cx, sx, my, sy):
    """Map normalised-space weights (float64 numpy) to raw inputs/outputs; float32-round."""
    raw = (w1 / sx[:, None], b1 - w1 * (cx / sx)[:, None], w2 * sy[:, None], b2 * sy + my)
    return tuple(a.astype(np.float32) for a in raw)


def _raw_mse(xs, ys, w1, b1, w2, b2) -> np.ndarray:
    """MSE per model of the float32 weights evaluated in float64 against float64 targets."""
    import torch

    f64 = lambda a: torch.from_numpy(np.array(a, dtype=np.float64))  # noqa: E731  (a writable copy)
    tx, ty, tw1, tb1, tw2, tb2 = (f64(a) for a in (xs, ys, w1, b1, w2, b2))
    out = np.empty(xs.shape[0])
    for s in range(0, xs.shape[0], _CHUNK):
        e = min(xs.shape[0], s + _CHUNK)
        h = torch.baddbmm(tb1[s:e, None, :], tx[s:e, :, None], tw1[s:e, None, :]).clamp_(min=0)
        pred = torch.baddbmm(tb2[s:e, None, None], h, tw2[s:e, :, None])[..., 0]
        out[s:e] = ((pred - ty[s:e]) ** 2).mean(dim=1).numpy()
    return out


def fit_mlps(
    xs: Any,
    ys: Any,
    *,
    seed: int,
    epochs: int = 300,
    hidden: int = HIDDEN,
    lr: float = 3e-3,
    batch_size: int = 256,
    curvature_power: float = 0.4,
    ridge: float = 1e-9,
    progress: bool = False,
) -> dict[str, np.ndarray]:
    """Fit one 1→hidden→1 ReLU MLP per row of ``ys`` (all at once) and return their weights.

    Args:
        xs: inputs, shape ``(n_points,)`` shared by all models or ``(n_models, n_points)``.
        ys: finite targets, shape ``(n_models, n_points)`` (or ``(n_points,)`` for one model).
        seed: seeds the mini-batch sampling (the initialisation is deterministic).
        epochs: Adam refinement steps (0 keeps the least-squares initialisation).
        lr: peak Adam learning rate in normalised units (cosine-decayed to 0).
        curvature_power: exponent of ``|f''|`` for placing half of the initial knots.
        ridge: relative ridge term of the least-squares output-layer solves.

    Returns:
        ``{"w1", "b1", "w2": float32 (n_models, hidden), "b2": float32 (n_models,),
        "mse": float64 (n_models,)}`` in raw units; ``mse`` on all given points with the float32
        weights (as served).
    """
    import torch

    xs, ys = _check_xy(xs, ys)
    m, n = ys.shape

    # 1. per-model normalisation
    lo, hi = xs.min(axis=1), xs.max(axis=1)
    cx = (lo + hi) / 2
    sx = np.where(hi > lo, (hi - lo) / 2, 1.0)
    my = ys.mean(axis=1)
    sy = ys.std(axis=1)
    sy = np.where(sy > 0, sy, 1.0)
    xn = (xs - cx[:, None]) / sx[:, None]
    yn = (ys - my[:, None]) / sy[:, None]

    with _single_thread(), torch.no_grad():
        # 2. knots + exact output layer
        knots = _initial_knots(xn, yn, hidden, curvature_power)
        signs = np.where(np.arange(hidden) % 2 == 0, 1.0, -1.0)[None, :].repeat(m, axis=0)
        b1_0 = -signs * knots
        txn, tyn, t_w1, t_b1 = (torch.from_numpy(a) for a in (xn, yn, signs, b1_0))
        t_w2, t_b2 = _solve_output(txn, tyn, t_w1, t_b1, ridge)
        init = _denormalise(signs, b1_0, t_w2.numpy(), t_b2.numpy(), cx, sx, my, sy)
        mse_init = _raw_mse(xs, ys, *init)

    if epochs == 0:
        return {**dict(zip(_WEIGHTS, init)), "mse": mse_init}

    # 3. batched Adam refinement of all weights
    with _single_thread(), torch.no_grad():
        params = _adam_refine(txn.float(), tyn.float(), [t_w1.float(), t_b1.float(), t_w2.float(), t_b2.float()],
                              seed=seed, epochs=epochs, lr=lr, batch_size=batch_size, progress=progress)

        # 4. exact output layer for the refined hidden layer
        r_w1, r_b1 = params[0].double(), params[1].double()
        r_w2, r_b2 = _solve_output(txn, tyn, r_w1, r_b1, ridge)
        refined = _denormalise(r_w1.numpy(), r_b1.numpy(), r_w2.numpy(), r_b2.numpy(), cx, sx, my, sy)
        mse_ref = _raw_mse(xs, ys, *refined)

    better = mse_ref <= mse_init
    logger.debug("fit %d MLPs: refinement helped %d", m, int(better.sum()))
    kept = (np.where(better[:, None] if a.ndim == 2 else better, r, a).astype(np.float32)
            for r, a in zip(refined, init))
    return {**dict(zip(_WEIGHTS, kept)), "mse": np.where(better, mse_ref, mse_init)}


def _adam_refine(
    xf: Any, yf: Any, params: list, *, seed: int, epochs: int, lr: float, batch_size: int, progress: bool
) -> list:
    """Batched Adam on all models' weights at once (float32, normalised units), cosine-decayed ``lr``.
    The two-layer network's gradients are written out by hand (no autograd graph, no torch.optim),
    several times faster on CPU. Updates ``params`` ([w1, b1, w2, b2]) in place and returns them."""
    import torch
    from tqdm.auto import tqdm

    m, n = yf.shape
    gen = torch.Generator().manual_seed(int(seed))
    moments = [(torch.zeros_like(q), torch.zeros_like(q)) for q in params]
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    bs = min(batch_size, n)
    bar = tqdm(range(epochs), desc="fitting MLPs", disable=not progress, leave=False)
    for step in bar:
        idx = torch.randint(0, n, (m, bs), generator=gen)
        xb = torch.gather(xf, 1, idx)  # (M, B)
        yb = torch.gather(yf, 1, idx)
        w1, b1, w2, b2 = params
        z = torch.baddbmm(b1[:, None, :], xb[:, :, None], w1[:, None, :])  # (M, B, H)
        h = z.clamp(min=0)
        pred = torch.baddbmm(b2[:, None, None], h, w2[:, :, None])[..., 0]  # (M, B)
        g_pred = (pred - yb).mul_(2.0 / bs)  # d(mean squared error)/d pred, per model
        g_w2 = torch.bmm(g_pred[:, None, :], h)[:, 0, :]
        g_b2 = g_pred.sum(dim=1)
        g_z = (g_pred[:, :, None] * w2[:, None, :]).mul_(z > 0)
        g_w1 = torch.bmm(xb[:, None, :], g_z)[:, 0, :]
        g_b1 = g_z.sum(dim=1)
        t = step + 1
        lr_t = lr * 0.5 * (1 + math.cos(math.pi * step / epochs))
        bc1 = 1 - beta1**t
        bc2 = 1 - beta2**t
        for q, g, (m1, m2) in zip(params, (g_w1, g_b1, g_w2, g_b2), moments):
            m1.mul_(beta1).add_(g, alpha=1 - beta1)
            m2.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            denom = (m2 / bc2).sqrt_().add_(eps)
            q.addcdiv_(m1, denom, value=-lr_t / bc1)
    bar.close()
    return params


def reference_fit(
    x: Any, y: Any, seed: int, *, epochs: int = 10_000, lr: float = 0.01, progress: bool = False
) -> dict[str, Any]:
    """FIND's reference recipe: one ``Linear(1,64)-ReLU-Linear(64,1)`` from PyTorch's default
    initialisation, Adam(lr=0.01), ``epochs`` full-batch steps of plain MSE on raw values (float32).

    Returns ``{"w1","b1","w2": float32 (64,), "b2": float32, "mse": float}`` with the same
    float64 evaluation as :func:`fit_mlps`.
    """
    import torch
    from tqdm.auto import tqdm

    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f"x and y must be 1-D of the same length >= 2, got {x.shape} and {y.shape}")
    with _single_thread():
        torch.manual_seed(int(seed))
        model = torch.nn.Sequential(torch.nn.Linear(1, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 1))
        xt = torch.tensor(x, dtype=torch.float32)[:, None]
        yt = torch.tensor(y, dtype=torch.float32)[:, None]
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        crit = torch.nn.MSELoss()
        for _ in tqdm(range(epochs), desc="reference fit", disable=not progress, leave=False):
            opt.zero_grad()
            loss = crit(model(xt), yt)
            loss.backward()
            opt.step()
    w = weights_from_state_dict({"layers." + k: v for k, v in model.state_dict().items()})
    w1, b1, w2 = (np.asarray(w[k], dtype=np.float32) for k in ("w1", "b1", "w2"))
    b2 = np.float32(w["b2"])
    mse = float(np.mean((mlp_forward(w1, b1, w2, b2, x) - y) ** 2))
    return {"w1": w1, "b1": b1, "w2": w2, "b2": b2, "mse": mse}
