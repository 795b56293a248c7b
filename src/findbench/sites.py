"""Reading and writing MLP neuron activations (and block outputs) of Hugging Face models.

Where a model family keeps its components is *data*: :data:`MODEL_SITES` maps a
``config.model_type`` to abstract sites and, for each, the module path template, whether the
site is that module's input (forward pre-hook) or output (forward hook), and its width. A new
architecture is a new table entry, not new code.

Sites:

- ``"mlp_activation"``: the MLP's hidden activation, one value per neuron. Llama-style
  models: the input to ``mlp.down_proj`` (``act(gate_proj(x)) * up_proj(x)``); GPT-2: the
  input to ``mlp.c_proj`` (``gelu(c_fc(x))``); GPT-NeoX: the input to ``mlp.dense_4h_to_h``.
- ``"block_output"``: the residual stream after the whole decoder block.

All functions take already tokenised batches (``input_ids`` + optional ``attention_mask``)
and token positions per row, so batches of any composition can be read and patched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "SiteSpec",
    "MODEL_SITES",
    "LAYERS_PATH",
    "SITES",
    "site_spec",
    "site_module",
    "site_dim",
    "num_layers",
    "record",
    "patch",
    "skip_to_layer",
    "block_input",
    "StopForward",
]


@dataclass(frozen=True)
class SiteSpec:
    """Where one abstract site lives in a model family.

    Attributes:
        module: dotted module path with a ``{layer}`` placeholder.
        hook: ``"input"`` (the module's first positional input, via a forward pre-hook) or
            ``"output"`` (the module's output, via a forward hook).
        dim: the site's width from the model config.
    """

    module: str
    hook: str
    dim: Callable[[Any], int]


def _mlp_width(cfg) -> int:
    for attr in ("intermediate_size", "n_inner", "ffn_dim"):
        value = getattr(cfg, attr, None)
        if value:
            return int(value)
    return 4 * int(getattr(cfg, "n_embd", None) or cfg.hidden_size)


def _hidden_width(cfg) -> int:
    return int(getattr(cfg, "hidden_size", None) or cfg.n_embd)


def _llama_like(prefix: str) -> dict[str, SiteSpec]:
    return {
        "mlp_activation": SiteSpec(f"{prefix}.{{layer}}.mlp.down_proj", "input", _mlp_width),
        "block_output": SiteSpec(f"{prefix}.{{layer}}", "output", _hidden_width),
    }


#: model_type -> site name -> :class:`SiteSpec`.
MODEL_SITES: dict[str, dict[str, SiteSpec]] = {
    **{t: _llama_like("model.layers") for t in ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "olmo", "olmo2", "phi3")},
    "gpt2": {
        "mlp_activation": SiteSpec("transformer.h.{layer}.mlp.c_proj", "input", _mlp_width),
        "block_output": SiteSpec("transformer.h.{layer}", "output", _hidden_width),
    },
    "gpt_neox": {
        "mlp_activation": SiteSpec("gpt_neox.layers.{layer}.mlp.dense_4h_to_h", "input", _mlp_width),
        "block_output": SiteSpec("gpt_neox.layers.{layer}", "output", _hidden_width),
    },
}

#: model_type -> dotted path of the decoder-block list (used by :func:`skip_to_layer`).
LAYERS_PATH: dict[str, str] = {
    **{t: "model.layers" for t, s in MODEL_SITES.items() if s["block_output"].module.startswith("model.layers")},
    "gpt2": "transformer.h",
    "gpt_neox": "gpt_neox.layers",
}

SITES = ("mlp_activation", "block_output")


class StopForward(Exception):
    """Raised inside a hook to end a forward pass early once the needed values are read."""


def _model_type(model) -> str:
    cfg = getattr(model, "config", None)
    if cfg is None:
        raise TypeError(f"model must be a transformers PreTrainedModel with a config, got {type(model).__name__}")
    return cfg.model_type


def site_spec(model, site: str) -> SiteSpec:
    """The :class:`SiteSpec` of ``site`` for ``model``'s family (``ValueError`` when unknown)."""
    if site not in SITES:
        raise ValueError(f"site must be one of {SITES}, got {site!r}")
    mtype = _model_type(model)
    if mtype not in MODEL_SITES:
        raise ValueError(f"model_type {mtype!r} has no entry in MODEL_SITES (known: {sorted(MODEL_SITES)})")
    return MODEL_SITES[mtype][site]


def num_layers(model) -> int:
    """Number of decoder blocks."""
    cfg = model.config
    return int(getattr(cfg, "num_hidden_layers", None) or cfg.n_layer)


def _check_layer(model, layer) -> int:
    if isinstance(layer, bool) or not isinstance(layer, int):
        raise TypeError(f"layer must be an int, got {type(layer).__name__}")
    n = num_layers(model)
    if not 0 <= layer < n:
        raise ValueError(f"layer must be in [0, {n}), got {layer}")
    return layer


def site_module(model, site: str, layer: int) -> torch.nn.Module:
    """The module whose input/output is ``site`` at ``layer``."""
    spec = site_spec(model, site)
    _check_layer(model, layer)
    return model.get_submodule(spec.module.format(layer=layer))


def site_dim(model, site: str) -> int:
    """Width of ``site`` (number of MLP neurons for ``"mlp_activation"``)."""
    return site_spec(model, site).dim(model.config)


def _inputs(input_ids, attention_mask) -> dict:
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise ValueError("input_ids must be a 2-D LongTensor [batch, tokens]")
    out = {"input_ids": input_ids}
    if attention_mask is not None:
        if not isinstance(attention_mask, torch.Tensor) or attention_mask.shape != input_ids.shape:
            raise ValueError("attention_mask must be a tensor shaped like input_ids")
        out["attention_mask"] = attention_mask
    return out


def _hook(module: torch.nn.Module, kind: str, fn: Callable[[torch.Tensor], torch.Tensor | None]):
    """Register ``fn(tensor) -> tensor | None`` on the module's first input or its output."""
    if kind == "input":

        def pre(mod, args):
            new = fn(args[0])
            if new is not None:
                return (new,) + tuple(args[1:])
            return None

        return module.register_forward_pre_hook(pre)

    def post(mod, args, output):
        first = output[0] if isinstance(output, tuple) else output
        new = fn(first)
        if new is None:
            return None
        return (new,) + tuple(output[1:]) if isinstance(output, tuple) else new

    return module.register_forward_hook(post)


def _positions_tensor(positions, batch: int, seq: int) -> torch.Tensor | None:
    if positions is None:
        return None
    pos = torch.as_tensor(positions, dtype=torch.long)
    if pos.dim() == 1:
        pos = pos.unsqueeze(1)
    if pos.dim() != 2 or pos.shape[0] != batch:
        raise ValueError(f"positions must be [batch, n_positions] with batch={batch}, got shape {tuple(pos.shape)}")
    if pos.numel() and (pos.min() < -seq or pos.max() >= seq):
        raise ValueError(f"positions must index tokens in [-{seq}, {seq}), got {pos.tolist()}")
    return pos % seq


@torch.no_grad()
def record(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    *,
    layer: int,
    site: str = "mlp_activation",
    positions=None,
    neurons: Sequence[int] | None = None,
    stop_early: bool = True,
    return_logits: bool = False,
):
    """Read ``site`` at ``layer``.

    Args:
        positions: ``None`` (all tokens) or per-row token positions ``[batch, P]`` (negative
            counts from the end, e.g. ``-1`` the last token).
        neurons: indices of the units to keep (default: all).
        stop_early: end the forward pass right after the site is read (not with
            ``return_logits``).

    Returns:
        Tensor ``[batch, tokens or P, units]`` (float, on the model's device); with
        ``return_logits`` a pair ``(values, logits)``.
    """
    module = site_module(model, site, layer)
    kind = site_spec(model, site).hook
    inputs = _inputs(input_ids, attention_mask)
    pos = _positions_tensor(positions, input_ids.shape[0], input_ids.shape[1])
    idx = None if neurons is None else torch.as_tensor(list(neurons), dtype=torch.long)
    box: dict[str, torch.Tensor] = {}
    stop = stop_early and not return_logits

    def read(t: torch.Tensor):
        vals = t
        if pos is not None:
            vals = torch.gather(t, 1, pos.to(t.device).unsqueeze(-1).expand(-1, -1, t.shape[-1]))
        if idx is not None:
            vals = vals[..., idx.to(t.device)]
        box["values"] = vals.detach().clone()
        if stop:
            raise StopForward
        return None

    handle = _hook(module, kind, read)
    logits = None
    try:
        out = model(**inputs, use_cache=False)
        logits = out.logits
    except StopForward:
        pass
    finally:
        handle.remove()
    if "values" not in box:
        raise RuntimeError(f"site {site!r} at layer {layer} was not reached in the forward pass")
    return (box["values"], logits) if return_logits else box["values"]


@contextlib.contextmanager
def patch(
    model,
    *,
    layer: int,
    site: str = "mlp_activation",
    positions,
    values: torch.Tensor,
    neurons: Sequence[int] | torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> Iterator[None]:
    """Within the block, forward passes have ``site`` at ``layer`` overwritten.

    Args:
        positions: ``[batch, P]`` token positions per row.
        values: ``[batch, P, n]`` the values to write, where ``n`` is ``len(neurons)`` (or the
            site's width when ``neurons`` is ``None``).
        neurons: unit indices written (default: all units).
        mask: optional bool ``[batch, n]``: per row, which of the ``n`` units are written (a
            row with an all-false mask runs unpatched); lets one batch hold interventions on
            different neuron sets.
    """
    module = site_module(model, site, layer)
    kind = site_spec(model, site).hook
    width = site_dim(model, site)
    pos = torch.as_tensor(positions, dtype=torch.long)
    if pos.dim() == 1:
        pos = pos.unsqueeze(1)
    if not isinstance(values, torch.Tensor) or values.dim() != 3:
        raise ValueError("values must be a 3-D tensor [batch, positions, units]")
    idx = torch.arange(width) if neurons is None else torch.as_tensor(neurons, dtype=torch.long).reshape(-1)
    if idx.numel() and (idx.min() < 0 or idx.max() >= width):
        raise ValueError(f"neurons must be in [0, {width}), got min {int(idx.min())} max {int(idx.max())}")
    if values.shape[:2] != pos.shape or values.shape[2] != idx.numel():
        raise ValueError(
            f"values shape {tuple(values.shape)} must be (batch, positions, units) = "
            f"({pos.shape[0]}, {pos.shape[1]}, {idx.numel()})"
        )
    if mask is not None and tuple(mask.shape) != (pos.shape[0], idx.numel()):
        raise ValueError(f"mask must be [batch, units] = ({pos.shape[0]}, {idx.numel()}), got {tuple(mask.shape)}")

    def write(t: torch.Tensor):
        b, seq = t.shape[0], t.shape[1]
        if b != pos.shape[0]:
            raise ValueError(f"patched batch has {b} rows but positions has {pos.shape[0]}")
        p = pos.to(t.device) % seq
        new = t.clone()
        rows = torch.arange(b, device=t.device)[:, None, None]
        cols = p[:, :, None]
        units = idx.to(t.device)[None, None, :]
        vals = values.to(device=t.device, dtype=t.dtype)
        if mask is not None:
            current = new[rows, cols, units]
            vals = torch.where(mask.to(t.device)[:, None, :], vals, current)
        new[rows, cols, units] = vals
        return new

    handle = _hook(module, kind, write)
    try:
        yield
    finally:
        handle.remove()


@contextlib.contextmanager
def skip_to_layer(model, layer: int, hidden: torch.Tensor) -> Iterator[None]:
    """Within the block, decoder blocks ``0 .. layer-1`` are skipped: block ``layer`` receives
    ``hidden`` (the residual stream recorded before it, ``[batch, tokens, d_model]``).

    Exact when ``hidden`` was recorded on the same inputs: the blocks before ``layer`` do not
    depend on anything patched at or after ``layer``. Used to run many interventions at a
    late layer without recomputing the early blocks.
    """
    _check_layer(model, layer)
    mtype = _model_type(model)
    if mtype not in LAYERS_PATH:
        raise ValueError(f"model_type {mtype!r} has no entry in LAYERS_PATH")
    blocks = model.get_submodule(LAYERS_PATH[mtype])
    skipped = [blocks[i] for i in range(layer)]

    def passthrough(*args, **kwargs):
        return hidden

    for block in skipped:
        block.forward = passthrough
    try:
        yield
    finally:
        for block in skipped:
            del block.forward


def block_input(model, input_ids, attention_mask=None, *, layer: int) -> torch.Tensor:
    """The residual stream entering block ``layer`` (``[batch, tokens, d_model]``)."""
    if layer == 0:
        raise ValueError("layer must be >= 1 to read a block input (layer 0 starts from the embeddings)")
    return record(model, input_ids, attention_mask, layer=layer - 1, site="block_output", stop_early=True)

