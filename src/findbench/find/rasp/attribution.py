"""``attribution``: a reference interpreter of the ``rasp`` config without an LM, in the spirit of
ACDC / attribution patching: a simple, documented circuit-discovery baseline.

It sees only what the white-box tools see (:class:`~findbench.find.rasp.tools.RaspTools` over one
variant: outputs, activations, weights, ablations, through the tools' batch forms, uncounted), never
the program, labels or roles, and every
heuristic below is invariant under the ``rotated`` variant's change of basis (it uses ranks, cosines
between weight vectors, subspace overlaps and attention patterns, never a coordinate):

1. **Components.** Each attention head; each MLP's hidden units with non-zero weights, grouped
   into connected components of the graph linking two units that write non-orthogonal directions
   (``|cos(W_out[u], W_out[v])| > 0.1``), read partly shared inputs (``0.3 < |cos(W_in[:, u],
   W_in[:, v])| < 0.95``), or both read a counting head's output (step 3). Units with no weights form
   one ``inactive`` group per layer.
2. **Node scores.** Each component zero-ablated on the inputs (the row's test inputs plus in-domain
   samples), and mean-ablated where zeroing changes nothing; its score is the share of output
   positions that change (numbers by more than 1e-3). A component with score 0 is ``inactive``.
3. **Head roles.** A head whose OV circuit (``W_V W_O``) has rank 1 writes one number: ``counter``
   when non-BOS queries put on average at least ``BOS_COUNTER`` of their attention on BOS (tracr's
   selector width attends BOS beside the selected keys), else ``averager``; a higher rank is a
   ``mover`` (a categorical aggregate copies a one-hot value).
4. **MLP roles.** A group reading (over half of its input weight) a same-layer counting head's output
   is a ``counter``; one writing a single direction (output rank 1) from a two-dimensional input is a
   ``linear_map``; one whose units' inputs partly overlap (two variables combined) a ``sequence_map``;
   else a ``map``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import torch

from findbench.find.rasp import programs as P
from findbench.find.rasp.tools import RaspTools

BOS_COUNTER = 0.05
N_SAMPLES = 54
_EPS = 1e-9


def _rank(m: np.ndarray) -> int:
    s = np.linalg.svd(m, compute_uv=False) if m.size else np.zeros(0)
    return int((s > 1e-6 * s.max()).sum()) if s.size and s.max() > _EPS else 0


def _unit(m: np.ndarray, axis: int) -> np.ndarray:
    return m / np.maximum(np.linalg.norm(m, axis=axis, keepdims=True), _EPS)


def _changed(a: list, b: list, numerical: bool) -> list[bool]:
    return [abs(x - y) > 1e-3 if numerical else x != y for x, y in zip(a, b)]


def _groups(n: int, edges: np.ndarray) -> list[list[int]]:
    parent = list(range(n))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in zip(*np.nonzero(edges)):
        parent[find(int(i))] = find(int(j))
    out: dict[int, list[int]] = {}
    for i in range(n):
        out.setdefault(find(i), []).append(i)
    return sorted(out.values())


def attribute(tools: RaspTools, inputs: Sequence[Sequence]) -> list[dict]:
    """A ``find_circuit`` prediction (``hook``, ``head`` or ``units``, ``role``, ``score``) for the
    model behind ``tools``, from ablations on ``inputs`` and the weights' structure."""
    model = tools.model
    inputs = [tools.tokens(list(x)) for x in inputs]
    clean = model.run_batch(inputs)
    _, mask = model.encode(inputs)

    def score(site) -> float:
        for mode in ("zero", "mean"):  # mean ablation only where zeroing changes nothing
            got = tools.ablated(inputs, site, mode)
            share = float(np.mean([c for g, w in zip(got, clean) for c in _changed(g, w, model.numerical)]))
            if share > 0:
                return share
        return 0.0

    _, cache = _batch_cache(model, inputs)
    out = []
    for layer, block in enumerate(model.blocks):
        attn, mlp = block.attn, block.mlp
        counting = []  # output directions of this layer's counting heads
        for head in range(attn.W_Q.shape[0]):
            ov = (attn.W_V[head] @ attn.W_O[head]).numpy()
            s = score((layer, head, [])) if _rank(ov) else 0.0
            pattern = cache[f"blocks.{layer}.attn.hook_pattern"][:, head]  # (batch, query, key)
            queries = mask.clone()
            queries[:, 0] = False
            bos = float(pattern[..., 0][queries].mean()) if queries.any() else 0.0
            role = ("inactive" if s == 0 else "mover" if _rank(ov) > 1
                    else "counter" if bos >= BOS_COUNTER else "averager")
            if role == "counter":
                counting.append(np.linalg.svd(ov.T)[0][:, : _rank(ov)])  # the directions it writes
            out.append({"hook": f"blocks.{layer}.attn.hook_result", "head": head, "role": role, "score": s})
        W_in, W_out = mlp.W_in.numpy(), mlp.W_out.numpy()
        live = [u for u in range(W_in.shape[1]) if np.abs(W_in[:, u]).sum() + np.abs(W_out[u]).sum() > _EPS]
        idle = [u for u in range(W_in.shape[1]) if u not in live]
        if idle:
            out.append({"hook": f"blocks.{layer}.mlp.hook_post", "units": idle, "role": "inactive", "score": 0.0})
        if not live:
            continue
        cin, cout = _unit(W_in[:, live], 0), _unit(W_out[live], 1)
        reads_count = np.zeros(len(live), dtype=bool)
        for basis in counting:
            reads_count |= np.linalg.norm(basis.T @ W_in[:, live], axis=0) ** 2 > 0.5 * np.linalg.norm(
                W_in[:, live], axis=0) ** 2
        overlap_in = np.abs(cin.T @ cin)
        edges = (np.abs(cout @ cout.T) > 0.1) | ((overlap_in > 0.3) & (overlap_in < 0.95))
        edges |= reads_count[:, None] & reads_count[None, :]
        for group in _groups(len(live), edges):
            units = [live[i] for i in group]
            s = score((layer, None, units))
            partial = overlap_in[np.ix_(group, group)]
            if s == 0:
                role = "inactive"
            elif reads_count[group].mean() > 0.5:
                role = "counter"
            elif _rank(W_out[units]) == 1 and _rank(W_in[:, units]) == 2:
                role = "linear_map"
            elif ((partial > 0.3) & (partial < 0.95)).any():
                role = "sequence_map"
            else:
                role = "map"
            out.append({"hook": f"blocks.{layer}.mlp.hook_post", "units": units, "role": role, "score": s})
    return out


@torch.no_grad()
def _batch_cache(model, inputs):
    cache: dict[str, torch.Tensor] = {}
    hooks = [m.register_forward_hook(lambda mod, inp, out, name=name: cache.__setitem__(name, out.detach()))
             for name, m in model.named_modules() if name.endswith("hook_pattern")]
    try:
        ids, mask = model.encode(inputs)
        logits = model(ids, mask)
    finally:
        for h in hooks:
            h.remove()
    return logits, cache


def inputs_for(row: dict, n_samples: int = N_SAMPLES, seed: int = 0) -> list[list]:
    """The row's test inputs plus ``n_samples`` seeded in-domain inputs (the domain is public)."""
    domain = row["domain"] if isinstance(row["domain"], dict) else json.loads(row["domain"])
    tests = [json.loads(x) if isinstance(x, str) else list(x) for x in row["test_inputs"]]
    return tests + P.domain_inputs(domain, n_samples, np.random.default_rng([seed, 43]))


def predict(row: dict, variant: str = "aligned") -> list[dict]:
    """``attribution``'s component map of a ``rasp`` row's ``variant`` model."""
    tools = RaspTools.for_row(row, variant)
    return attribute(tools, inputs_for(row))
