"""Compiled RASP programs as plain torch modules with TransformerLens's hook names (no jax, no
TransformerLens): ``hook_embed``, ``hook_pos_embed``, ``blocks.{l}.hook_resid_pre`` /
``hook_resid_mid`` / ``hook_resid_post``, ``blocks.{l}.attn.hook_pattern`` / ``hook_z`` /
``hook_result``, ``blocks.{l}.mlp.hook_post``.

tracr's architecture: no layer norm, non-causal attention scaled by ``1/sqrt(d_head)``, ReLU
MLPs, BOS at position 0 (no position embedding there), the unembedding read off the output
variable's residual directions (argmax for a categorical output, the one value for a numerical
one). Computation is in float64 so that the ``rotated`` variant agrees with ``aligned`` to 1e-5.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

#: Parameter names per layer, in digest order.
LAYER_PARAMS = ("W_Q", "W_K", "W_V", "W_O", "W_in", "b_in", "W_out", "b_out")


class HookPoint(nn.Module):
    """Identity; its module name is the hook name (``register_forward_hook`` reads it)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Attention(nn.Module):
    def __init__(self, W_Q, W_K, W_V, W_O):
        super().__init__()
        for name, w in (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V), ("W_O", W_O)):
            self.register_buffer(name, w)
        self.hook_pattern, self.hook_z, self.hook_result = HookPoint(), HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        q = torch.einsum("btd,hde->bthe", x, self.W_Q)
        k = torch.einsum("btd,hde->bthe", x, self.W_K)
        v = torch.einsum("btd,hde->bthe", x, self.W_V)
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / self.W_Q.shape[-1] ** 0.5
        scores = scores.masked_fill(~key_mask[:, None, None, :], -1e30)
        pattern = self.hook_pattern(torch.softmax(scores, dim=-1))
        z = self.hook_z(torch.einsum("bhqk,bkhe->bqhe", pattern, v))
        result = self.hook_result(torch.einsum("bqhe,hed->bqhd", z, self.W_O))
        return result.sum(dim=2)


class MLP(nn.Module):
    def __init__(self, W_in, b_in, W_out, b_out):
        super().__init__()
        for name, w in (("W_in", W_in), ("b_in", b_in), ("W_out", W_out), ("b_out", b_out)):
            self.register_buffer(name, w)
        self.hook_post = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hook_post(torch.relu(x @ self.W_in + self.b_in)) @ self.W_out + self.b_out


class Block(nn.Module):
    def __init__(self, arrays: dict, layer: int):
        super().__init__()
        t = {name: torch.as_tensor(arrays[f"{layer}.{name}"], dtype=torch.float64) for name in LAYER_PARAMS}
        self.attn = Attention(t["W_Q"], t["W_K"], t["W_V"], t["W_O"])
        self.mlp = MLP(t["W_in"], t["b_in"], t["W_out"], t["b_out"])
        self.hook_resid_pre, self.hook_resid_mid, self.hook_resid_post = HookPoint(), HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(x + self.attn(x, key_mask))
        return self.hook_resid_post(x + self.mlp(x))


class RaspTransformer(nn.Module):
    """One compiled program. ``run(tokens)`` takes the input tokens without BOS and gives one output
    per token, as the reference ``function(tokens)`` does; ``forward`` maps token ids (BOS first)
    to logits; ``run_with_cache`` also returns every hook's activation."""

    def __init__(self, arrays: dict, meta: dict, variant: str = "aligned"):
        super().__init__()
        self.variant = variant
        self.n_layers = int(meta["n_layers"])
        self.input_tokens = list(meta["input_tokens"])
        self.output_values = meta["output_values"]
        self.numerical = bool(meta["numerical"])
        self.bos = meta["bos"]
        self.token_ids = {t: i for i, t in enumerate(self.input_tokens)}
        f64 = {k: torch.as_tensor(v, dtype=torch.float64) for k, v in arrays.items() if "." not in k}
        self.register_buffer("W_E", f64["embed"])
        self.register_buffer("W_pos", f64["pos_embed"])
        self.register_buffer("W_U", f64["W_U"])
        self.hook_embed, self.hook_pos_embed = HookPoint(), HookPoint()
        self.blocks = nn.ModuleList(Block(arrays, layer) for layer in range(self.n_layers))

    @property
    def max_len(self) -> int:
        return self.W_pos.shape[0] - 1

    def forward(self, ids: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        if key_mask is None:
            key_mask = torch.ones_like(ids, dtype=torch.bool)
        pos = torch.arange(ids.shape[1])
        x = self.hook_embed(self.W_E[ids]) + self.hook_pos_embed(self.W_pos[pos])[None]
        for block in self.blocks:
            x = block(x, key_mask)
        return x @ self.W_U

    def encode(self, batch: Sequence[Sequence]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids with BOS first, padded, and the mask of real positions."""
        width = 1 + max(len(x) for x in batch)
        pad = self.token_ids.get("compiler_pad", 0)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.bool)
        for i, x in enumerate(batch):
            ids[i, : len(x) + 1] = torch.tensor([self.token_ids[self.bos]] + [self.token_ids[t] for t in x])
            mask[i, : len(x) + 1] = True
        return ids, mask

    def decode(self, logits: torch.Tensor, lengths: Sequence[int]) -> list[list]:
        if self.numerical:
            values = logits[..., 0].tolist()
            return [row[1 : n + 1] for row, n in zip(values, lengths)]
        best = logits.argmax(-1).tolist()
        return [[self.output_values[j] for j in row[1 : n + 1]] for row, n in zip(best, lengths)]

    @torch.no_grad()
    def run_batch(self, batch: Sequence[Sequence]) -> list[list]:
        """``run`` on many inputs at once (padded keys are masked out: same answers as one by one)."""
        ids, mask = self.encode(batch)
        return self.decode(self(ids, mask), [len(x) for x in batch])

    def run(self, tokens: Sequence) -> list:
        return self.run_batch([list(tokens)])[0]

    @torch.no_grad()
    def run_with_cache(self, tokens: Sequence) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Logits (BOS first) and every hook's activation for one input (batch dimension 1)."""
        cache: dict[str, torch.Tensor] = {}
        handles = [m.register_forward_hook(lambda mod, inp, out, name=name: cache.__setitem__(name, out.detach()))
                   for name, m in self.named_modules() if isinstance(m, HookPoint)]
        try:
            ids, mask = self.encode([list(tokens)])
            logits = self(ids, mask)
        finally:
            for h in handles:
                h.remove()
        return logits, cache


def digest(arrays: dict, labels: Sequence[str]) -> str:
    """sha256 over every array (name, shape, float32 bytes; sorted by name) and the residual labels."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name], dtype=np.float32)
        h.update(name.encode() + b"\0" + json.dumps(a.shape).encode() + b"\0" + a.tobytes())
    h.update(json.dumps(list(labels)).encode())
    return h.hexdigest()


def rotate(arrays: dict, n_layers: int, seed: int, perms: list | None = None) -> dict:
    """The ``rotated`` variant: the residual stream turned by a seeded random orthogonal matrix,
    each head's query/key and value/output spaces turned too, and each MLP's hidden units permuted
    and rescaled by positive factors (ReLU commutes with both). Same function; no basis direction
    names a program variable any more. ``perms``, when given, receives each layer's permutation
    (rotated unit ``j`` is aligned unit ``perm[j]``): the ground truth's side maps its units with it."""
    rng = np.random.default_rng(seed)

    def orthogonal(n):
        q, r = np.linalg.qr(rng.standard_normal((n, n)))
        return q * np.sign(np.diag(r))

    a = {k: np.asarray(v, dtype=np.float64) for k, v in arrays.items()}
    R = orthogonal(a["embed"].shape[1])
    out = {"embed": a["embed"] @ R, "pos_embed": a["pos_embed"] @ R, "W_U": R.T @ a["W_U"]}
    for layer in range(n_layers):
        p = {name: a[f"{layer}.{name}"] for name in LAYER_PARAMS}
        H, _, dk = p["W_Q"].shape
        qk = np.stack([orthogonal(dk) for _ in range(H)])
        ov = np.stack([orthogonal(dk) for _ in range(H)])
        out[f"{layer}.W_Q"] = np.einsum("ed,hef->hdf", R, p["W_Q"]) @ qk
        out[f"{layer}.W_K"] = np.einsum("ed,hef->hdf", R, p["W_K"]) @ qk
        out[f"{layer}.W_V"] = np.einsum("ed,hef->hdf", R, p["W_V"]) @ ov
        out[f"{layer}.W_O"] = np.transpose(ov, (0, 2, 1)) @ p["W_O"] @ R
        perm = rng.permutation(p["W_in"].shape[1])
        if perms is not None:
            perms.append(perm)
        scale = rng.uniform(0.5, 2.0, p["W_in"].shape[1])
        out[f"{layer}.W_in"] = (R.T @ p["W_in"])[:, perm] * scale
        out[f"{layer}.b_in"] = p["b_in"][perm] * scale
        out[f"{layer}.W_out"] = (p["W_out"][perm] / scale[:, None]) @ R
        out[f"{layer}.b_out"] = p["b_out"] @ R
    return out
