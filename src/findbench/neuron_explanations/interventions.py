"""Interchange interventions on MLP neurons and IIA@K sweeps (Huang et al. 2023, Sec. 5).

An *interchange intervention* runs the base input with the chosen neurons' values (at the
chosen positions) taken from a source input; it succeeds when the patched run predicts (greedy
next token) the source's expected output. IIA is the success rate over (base, source) pairs.
IIA@K patches the top K percent of a layer's neurons under a ranking: ``"random"`` (seeded),
``"correlation"`` (|Pearson r| with the concept-token indicator) or a user-given order.

Speed, all exact: patched runs skip the blocks before the layer, start from the KV cache of
the base inputs' shared prefix, and all K of a ranking share one batched pass.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from findbench import _checks
from findbench import sites as acts
from findbench._io import atomic_dir
from findbench.models import load_causal_lm
from findbench.neuron_explanations.config import DEFAULT_KS, POSITIONS, RANKINGS, IIAConfig
from findbench.neuron_explanations.intervention_tasks import build_task_rows, equal_length_batches, get_task

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_KS", "POSITIONS", "RANKINGS"]  # re-exported from the config


def neurons_for_k(k: float, width: int) -> int:
    """Number of neurons in the top ``k`` percent of ``width`` (rounded, at least 1 for k > 0)."""
    return 0 if _checks.number("ks: each K", k, 0, 100) == 0 else max(1, min(width, int(round(k / 100.0 * width))))


def make_pairs(rows: Sequence[Mapping], n_pairs: int, *, seed: int = 0) -> list[tuple[int, int]]:
    """Up to ``n_pairs`` seeded (base, source) index pairs of one task's rows: both answered
    correctly, same token length and filler positions, different expected next tokens."""
    _checks.positive_int("n_pairs", n_pairs)
    good = [i for i, r in enumerate(rows) if r["correct"]]
    valid = [(b, s) for b in good for s in good
             if b != s and rows[b]["n_tokens"] == rows[s]["n_tokens"]
             and list(rows[b]["filler_positions"]) == list(rows[s]["filler_positions"])
             and rows[b]["expected_token_id"] != rows[s]["expected_token_id"]]
    if len(valid) <= n_pairs:
        return valid
    return [valid[i] for i in sorted(np.random.default_rng(seed).choice(len(valid), n_pairs, replace=False).tolist())]


def random_ranking(width: int, seed: int = 0) -> list[int]:
    """A seeded random permutation of the ``width`` neurons."""
    return torch.randperm(width, generator=torch.Generator().manual_seed(int(seed))).tolist()


def correlation_ranking(values: Sequence[torch.Tensor], concept_masks: Sequence[Sequence[bool]]) -> list[int]:
    """Neurons sorted by |Pearson r| between token activation (per prompt ``[tokens, width]``) and
    the concept-token indicator (per prompt, a bool per token); zero variance gives r = 0."""
    if len(values) != len(concept_masks) or not values:
        raise ValueError("values and concept_masks must be non-empty and of equal length")
    x = torch.cat([v.double() for v in values], 0)
    y = torch.cat([torch.as_tensor(list(m), dtype=torch.float64) for m in concept_masks], 0)
    if x.shape[0] != y.shape[0]:
        raise ValueError("concept_masks must have one entry per token of values")
    xc = x - x.mean(0)
    yc = y - y.mean()
    denom = xc.norm(dim=0) * yc.norm()
    r = torch.where(denom > 0, (xc * yc[:, None]).sum(0) / denom.clamp_min(1e-300), torch.zeros_like(denom))
    return sorted(range(r.numel()), key=lambda i: (-abs(float(r[i])), i))


@torch.no_grad()
def _clean_pass(model, tokens, needed, layer, site, need_block_input, batch_size):
    """Per row of ``needed`` (its ids in ``tokens``): site values ``[T, D]`` and (optionally) the
    residual stream entering ``layer``."""
    values: dict[int, torch.Tensor] = {}
    hidden: dict[int, torch.Tensor] = {}
    for chunk in equal_length_batches([tokens[i] for i in needed], batch_size):
        ids = torch.tensor([list(tokens[needed[j]]) for j in chunk], device=model.device)
        rows = [needed[j] for j in chunk]
        values.update(zip(rows, acts.record(model, ids, layer=layer, site=site)))
        if need_block_input:
            hidden.update(zip(rows, acts.record(model, ids, layer=layer, site="block_input")))
    return values, hidden


def _orders(spec: Mapping[str, Any], width: int, seed: int, values: Sequence[torch.Tensor],
            masks: Sequence[Sequence[bool]]) -> dict[str, list[int]]:
    """Each ranking's full neuron order: a built-in one (None) computed, a given order completed
    with the unlisted neurons in index order."""
    built_in = {"random": lambda: random_ranking(width, seed),
                "correlation": lambda: correlation_ranking(values, masks)}
    orders: dict[str, list[int]] = {}
    for name, given in spec.items():
        if given is None:
            if name not in built_in:
                raise ValueError(f"rankings[{name!r}]: no built-in ranking of that name; give a neuron order")
            orders[name] = built_in[name]()
        else:
            order = [int(i) for i in given]
            if len(set(order)) != len(order) or any(i < 0 or i >= width for i in order):
                raise ValueError(f"rankings[{name!r}] must hold distinct neuron indices in [0, {width})")
            orders[name] = order + [i for i in range(width) if i not in set(order)]
    return orders


def _prefix(model, bases: Sequence[Sequence[int]], n_pre: int) -> tuple[int, object]:
    """The prefix every base input shares before its first patched position (at most ``n_pre``
    tokens), run once: its length and KV cache (causal attention: nothing before it can change)."""
    first = bases[0]
    while n_pre > 0 and any(b[:n_pre] != first[:n_pre] for b in bases):
        n_pre -= 1
    if n_pre == 0:
        return 0, None
    with torch.no_grad():
        ids = torch.tensor([first[:n_pre]], device=model.device)
        return n_pre, model(input_ids=ids, use_cache=True).past_key_values


def _patched_logits(model, ids: torch.Tensor, cache: object, *, layer: int, site: str, positions: torch.Tensor,
                    values: torch.Tensor, neurons: torch.Tensor, mask: torch.Tensor,
                    early: torch.Tensor | None) -> torch.Tensor:
    """Last-position logits of ``ids`` (after the cached prefix ``cache``) with ``values`` patched
    in at ``positions``; ``early``: the clean hidden states the blocks before ``layer`` would give."""
    kwargs: dict[str, Any] = {"use_cache": False, "logits_to_keep": 1}
    if cache is not None:
        past = copy.deepcopy(cache)
        past.batch_repeat_interleave(len(ids))
        kwargs = {"past_key_values": past, "use_cache": True, "logits_to_keep": 1}
    if not len(neurons):
        return model(input_ids=ids, **kwargs).logits[:, -1]
    skip = acts.skip_to_layer(model, layer, early) if early is not None else contextlib.nullcontext()
    with skip, acts.patch(model, layer=layer, site=site, positions=positions, values=values, neurons=neurons,
                          mask=mask):
        return model(input_ids=ids, **kwargs).logits[:, -1]


def iia_sweep(
    cfg: IIAConfig,
    model,
    tokenizer,
    task,
    layer: int,
    *,
    rows: Sequence[Mapping] | None = None,
    skip_early_layers: bool = True,
    prefix_cache: bool = True,
    progress: bool = False,
) -> dict:
    """IIA@K curves of one task (a name or the task) at one layer, with the settings ``cfg`` (its
    ``task`` and ``layer`` not read; ``rankings``: :meth:`~IIAConfig.all_rankings`).

    Args:
        rows: the task's rows from :func:`build_task_rows` (built here when ``None``).
        skip_early_layers, prefix_cache: exact speed-ups (the latter up to float rounding).

    Returns:
        dict with ``task``, ``layer``, ``site``, ``position``, ``ks``, ``n_neurons`` (per K),
        ``width``, ``n_pairs``, ``pairs``, ``curves`` (ranking -> IIA per K), ``successes``,
        ``rankings`` (ranking -> neuron order), ``interventions``, ``seconds``, ``interventions_per_second``.
    """
    site, n_pairs, ks, position, seed, batch_size = (cfg.site, cfg.n_pairs, list(cfg.k_values), cfg.position,
                                                     cfg.seed, cfg.batch_size)
    task_obj = get_task(task)
    width = acts.site_dim(model, site)
    acts.site_module(model, site, layer)
    n_neurons = [neurons_for_k(k, width) for k in ks]
    pos_mode = position if position != "auto" else ("concept" if layer < acts.num_layers(model) / 2 else "last")
    if rows is None:
        rows = build_task_rows(model, tokenizer, [task_obj.name], progress=progress)
    rows = [r for r in rows if r["task"] == task_obj.name]
    if not rows:
        raise ValueError(f"rows: no rows of task {task_obj.name!r}")
    t0 = time.perf_counter()
    pairs = make_pairs(rows, n_pairs, seed=seed)
    if not pairs:
        raise ValueError(f"task {task_obj.name!r} has no valid (base, source) pair for this model "
                         f"({sum(bool(r['correct']) for r in rows)} of {len(rows)} inputs answered correctly)")
    tokens = {i: tokenizer(rows[i]["prompt"], add_special_tokens=True)["input_ids"] for i in range(len(rows))}
    correct = [i for i, r in enumerate(rows) if r["correct"]]
    needed = sorted(set(correct) | {i for p in pairs for i in p})
    skip = skip_early_layers and layer > 0
    values, hidden = _clean_pass(model, tokens, needed, layer, site, skip, batch_size)

    masks = [[j in set(rows[i]["filler_positions"]) for j in range(len(tokens[i]))] for i in correct]
    orders = _orders(cfg.all_rankings(), width, seed, [values[i] for i in correct], masks)

    n_max = max(n_neurons)
    per_batch = max(1, batch_size // len(ks))
    groups: dict[int, list[int]] = {}
    for p_i, (b, s) in enumerate(pairs):
        groups.setdefault(len(tokens[b]), []).append(p_i)
    by_pair: dict[str, dict[int, list[int]]] = {name: {} for name in orders}  # ranking -> pair -> per-K prediction
    kmask = torch.arange(n_max)[None, :] < torch.tensor(n_neurons)[:, None]  # K row j: its top n_neurons[j]
    total_batches = len(orders) * sum(math.ceil(len(g) / per_batch) for g in groups.values())

    patched = {b: list(rows[b]["filler_positions"]) if pos_mode == "concept" else [len(tokens[b]) - 1]
               for b, _ in pairs}  # each base input's patched positions
    prefixes = {length: _prefix(model, [tokens[pairs[p][0]] for p in pidx],
                                min(min(patched[pairs[p][0]]) for p in pidx) if prefix_cache else 0)
                for length, pidx in groups.items()}

    with torch.no_grad(), tqdm(total=total_batches, desc=f"IIA {task_obj.name} L{layer}", disable=not progress) as bar:
        for name, order in orders.items():
            top = torch.tensor(order[:n_max], dtype=torch.long)
            for length, pidx in sorted(groups.items()):
                n_pre, cache = prefixes[length]
                for s0 in range(0, len(pidx), per_batch):
                    chunk = pidx[s0 : s0 + per_batch]
                    base_rows = [pairs[p][0] for p in chunk]
                    pos = torch.tensor([patched[b] for b in base_rows], dtype=torch.long)
                    vals = torch.stack([values[pairs[p][1]][pos[j]][:, top] for j, p in enumerate(chunk)])
                    rep = len(ks)  # one row per (pair, K): each pair repeated len(ks) times
                    ids = torch.tensor([tokens[b][n_pre:] for b in base_rows], device=model.device)
                    ids = ids.repeat_interleave(rep, 0)
                    early = (torch.stack([hidden[b][n_pre:] for b in base_rows]).repeat_interleave(rep, 0)
                             if skip else None)
                    logits = _patched_logits(model, ids, cache, layer=layer, site=site,
                                             positions=pos.repeat_interleave(rep, 0) - n_pre,
                                             values=vals.repeat_interleave(rep, 0), neurons=top,
                                             mask=kmask.repeat(len(chunk), 1), early=early)
                    by_pair[name].update(zip(chunk, logits.argmax(-1).view(len(chunk), rep).tolist()))
                    bar.update(1)
    predictions = {name: [[int(by_pair[name][p][kk]) for p in range(len(pairs))] for kk in range(len(ks))]
                   for name in orders}
    expected = [int(rows[s]["expected_token_id"]) for _, s in pairs]
    successes = {name: [sum(p == e for p, e in zip(row, expected)) for row in predictions[name]] for name in orders}
    seconds = time.perf_counter() - t0
    n_int = len(pairs) * len(ks) * len(orders)
    return {
        "task": task_obj.name,
        "concept": task_obj.concept,
        "layer": layer,
        "site": site,
        "position": pos_mode,
        "ks": ks,
        "n_neurons": n_neurons,
        "width": width,
        "n_pairs": len(pairs),
        "n_correct_inputs": len(correct),
        "n_inputs": len(rows),
        "pairs": [{"base": rows[b]["filler"], "source": rows[s]["filler"]} for b, s in pairs],
        "pair_indices": [list(p) for p in pairs],
        "expected": expected,
        "predictions": predictions,
        "curves": {name: [c / len(pairs) for c in successes[name]] for name in orders},
        "successes": successes,
        "rankings": orders,
        "interventions": n_int,
        "seconds": seconds,
        "interventions_per_second": n_int / seconds if seconds > 0 else float("inf"),
    }


def plot_iia_curves(results: Sequence[Mapping] | Mapping, path) -> None:
    """Write a PNG of IIA@K curves (one panel per result, one line per ranking)."""
    from matplotlib.figure import Figure

    results = [results] if isinstance(results, Mapping) else list(results)
    if not results:
        raise ValueError("results must not be empty")
    fig = Figure(figsize=(4.2 * len(results), 3.4))
    for ax, res in zip(fig.subplots(1, len(results), squeeze=False)[0], results):
        for name, curve in res["curves"].items():
            ax.plot(res["ks"], curve, marker="o", label=name)
        ax.set_title(f"{res['task']} · layer {res['layer']} ({res['position']})", fontsize=9)
        ax.set(xlabel="K (% of the layer's neurons)", ylabel="IIA", ylim=(-0.02, 1.02))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(str(path), dpi=120)


def run_iia(cfg: IIAConfig, *, progress: bool = True) -> list[dict]:
    """IIA@K sweeps for each (task, layer) of the settings ``cfg`` (``findbench iia``'s flags); with
    ``cfg.out``, writes ``out/iia.json`` (all results) and ``out/iia.png`` (the curves), atomically."""
    for t in cfg.task:
        get_task(t)
    lm, tok = load_causal_lm(cfg.model)  # float32, eval mode
    rows = build_task_rows(lm, tok, list(cfg.task), model_name=str(cfg.model), batch_size=cfg.batch_size,
                           progress=progress)
    results = []
    for t in cfg.task:
        for layer in cfg.layers:
            res = {**iia_sweep(cfg, lm, tok, t, int(layer), rows=rows, progress=progress), "model": str(cfg.model)}
            log.info(
                "%s layer %d (%s): %s",
                t,
                layer,
                res["position"],
                {k: [round(v, 3) for v in c] for k, c in res["curves"].items()},
            )
            results.append(res)
    if cfg.out is not None:
        with atomic_dir(cfg.out) as tmp:
            (tmp / "iia.json").write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            plot_iia_curves(results, tmp / "iia.png")
    return results
