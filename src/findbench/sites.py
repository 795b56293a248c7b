"""Reading and writing activations of Hugging Face models at named sites.

Sites (one vocabulary for neurons and SAEs; :data:`SAE_HOOKS` maps sae_lens hook names onto them):

- ``"mlp_activation"``: the MLP's hidden activation, one value per neuron (``blocks.L.mlp.hook_post``),
  the input of the MLP's down projection (:data:`MODEL_SITES`);
- ``"block_output"``: the residual stream after block ``L`` (``blocks.L.hook_resid_post``; before
  the final norm);
- ``"block_input"``: the residual stream entering block ``L`` (``blocks.L.hook_resid_pre``);
- ``"embed"``: the output of the input-embedding table (``hook_embed``; no layer).

Blocks of an unknown family (encoders such as MiniLM) are the first ``ModuleList`` with one entry per layer.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Callable, Iterator, Sequence

import torch

from findbench import _checks
from findbench.constants import UsageError

#: model_type -> (path of its blocks, path inside a block of the module whose input is the MLP activation).
MODEL_SITES: dict[str, tuple[str, str]] = {
    **{
        t: ("model.layers", "mlp.down_proj")
        for t in ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "olmo", "olmo2", "phi3")
    },
    "gpt2": ("transformer.h", "mlp.c_proj"),
    "gpt_neox": ("gpt_neox.layers", "mlp.dense_4h_to_h"),
}
SITES = ("mlp_activation", "block_output", "block_input", "embed")
#: sae_lens / TransformerLens hook name (an SAE's ``cfg.metadata.hook_name``, after ``blocks.L.``) -> site.
SAE_HOOKS = {"hook_resid_post": "block_output", "hook_resid_pre": "block_input", "mlp.hook_post": "mlp_activation"}
_SAE_HOOK = re.compile(r"^blocks\.(\d+)\.(hook_resid_post|hook_resid_pre|mlp\.hook_post)$")


class StopForward(Exception):
    """Raised inside a hook to end a forward pass early once the needed values are read."""


def parse_hook_name(hook_name: str) -> tuple[str, int | None]:
    """``(site, layer)`` of a sae_lens hook name (``hook_embed``: ``("embed", None)``)."""
    if hook_name == "hook_embed":
        return "embed", None
    m = _SAE_HOOK.match(hook_name) if isinstance(hook_name, str) else None
    if not m:
        raise UsageError(
            "hook_name must be 'hook_embed' or 'blocks.<L>.hook_resid_post|hook_resid_pre|mlp.hook_post', "
            f"got {hook_name!r}"
        )
    return SAE_HOOKS[m.group(2)], int(m.group(1))


def num_layers(model) -> int:
    """Number of blocks."""
    cfg = model.config
    return int(getattr(cfg, "num_hidden_layers", None) or cfg.n_layer)


def blocks(model) -> torch.nn.ModuleList:
    """The model's list of blocks (see the module docstring)."""
    n = num_layers(model)
    path = MODEL_SITES.get(getattr(model.config, "model_type", None), ("",))[0]
    for candidate in (path, path.split(".", 1)[-1]) if path else ():
        with contextlib.suppress(AttributeError):
            return model.get_submodule(candidate)
    for _, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n:
            return module
    raise ValueError(f"cannot find the {n} blocks of {type(model).__name__}")


def site_module(model, site: str, layer: int | None = None) -> tuple[torch.nn.Module, str]:
    """The module whose ``"input"`` (first positional input) or ``"output"`` is ``site`` at ``layer``,
    and which of the two."""
    _checks.one_of("site", site, SITES)
    if site == "embed":
        return model.get_input_embeddings(), "output"
    n = num_layers(model)
    if not 0 <= _checks.integer("layer", layer) < n:
        raise UsageError(f"layer must be in [0, {n}), got {layer}")
    block = blocks(model)[layer]
    if site != "mlp_activation":
        return block, "output" if site == "block_output" else "input"
    mtype = model.config.model_type
    if mtype not in MODEL_SITES:
        raise UsageError(f"model_type {mtype!r} has no entry in MODEL_SITES (known: {sorted(MODEL_SITES)})")
    return block.get_submodule(MODEL_SITES[mtype][1]), "input"


def site_dim(model, site: str) -> int:
    """Width of ``site`` (number of MLP neurons for ``"mlp_activation"``)."""
    cfg = model.config
    if _checks.one_of("site", site, SITES) != "mlp_activation":
        return int(getattr(cfg, "hidden_size", None) or cfg.n_embd)
    width = next((getattr(cfg, a) for a in ("intermediate_size", "n_inner", "ffn_dim") if getattr(cfg, a, None)), None)
    return int(width or 4 * int(getattr(cfg, "n_embd", None) or cfg.hidden_size))


def _hook(module: torch.nn.Module, kind: str, fn: Callable[[torch.Tensor], torch.Tensor | None]):
    """Register ``fn(tensor) -> tensor | None`` on the module's first input or its output."""
    if kind == "input":

        def pre(mod, args, kwargs):
            new = fn(args[0] if args else kwargs["hidden_states"])
            if new is not None:  # (None: the inputs as they are)
                return ((new, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": new})

        return module.register_forward_pre_hook(pre, with_kwargs=True)

    def post(mod, args, output):
        new = fn(output[0] if isinstance(output, tuple) else output)
        return (new, *output[1:]) if isinstance(output, tuple) and new is not None else new  # None: as it is

    return module.register_forward_hook(post)


@torch.no_grad()
def record(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    *,
    layer: int | None = None,
    site: str = "mlp_activation",
    positions=None,
    neurons: Sequence[int] | None = None,
    stop_early: bool = True,
):
    """Read ``site`` at ``layer``: ``[batch, tokens or P, units]``.

    ``positions``: per-row token positions ``[batch, P]`` (negative from the end; default all);
    ``neurons``: the units kept (default all); ``stop_early``: end the forward pass once read.
    """
    module, kind = site_module(model, site, layer)
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise UsageError("input_ids must be a 2-D LongTensor [batch, tokens]")
    inputs = {"input_ids": input_ids.to(model.device)}
    if attention_mask is not None:
        inputs["attention_mask"] = attention_mask.to(model.device)
    if "use_cache" in inspect.signature(model.forward).parameters:
        inputs["use_cache"] = False
    batch, seq = input_ids.shape
    pos = None if positions is None else torch.as_tensor(positions, dtype=torch.long)
    if pos is not None:
        pos = pos.unsqueeze(1) if pos.dim() == 1 else pos
        if pos.dim() != 2 or pos.shape[0] != batch:
            raise UsageError(f"positions must be [batch, n_positions] with batch={batch}, got shape {tuple(pos.shape)}")
        if pos.numel() and (pos.min() < -seq or pos.max() >= seq):
            raise UsageError(f"positions must index tokens in [-{seq}, {seq}), got {pos.tolist()}")
        pos = pos % seq
    idx = None if neurons is None else torch.as_tensor(list(neurons), dtype=torch.long)
    box: dict[str, torch.Tensor] = {}

    def read(t: torch.Tensor):
        if pos is not None:
            t = torch.gather(t, 1, pos.to(t.device).unsqueeze(-1).expand(-1, -1, t.shape[-1]))
        box["values"] = (t if idx is None else t[..., idx.to(t.device)]).detach().clone()
        if stop_early:
            raise StopForward

    with _hook(module, kind, read), contextlib.suppress(StopForward):  # the hook's handle removes it on exit
        model(**inputs)
    if "values" not in box:
        raise RuntimeError(f"site {site!r} at layer {layer} was not reached in the forward pass")
    return box["values"]


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
    """Within the block, forward passes have ``site`` at ``layer`` overwritten at ``positions [batch, P]``
    with ``values [batch, P, len(neurons)]`` (``neurons`` default all); the optional bool ``mask
    [batch, n]`` picks per row which units are written (one batch, different neuron sets)."""
    module, kind = site_module(model, site, layer)
    width = site_dim(model, site)
    pos = torch.as_tensor(positions, dtype=torch.long)
    pos = pos.unsqueeze(1) if pos.dim() == 1 else pos
    idx = torch.arange(width) if neurons is None else torch.as_tensor(neurons, dtype=torch.long).reshape(-1)
    if idx.numel() and (idx.min() < 0 or idx.max() >= width):
        raise UsageError(f"neurons must be in [0, {width}), got min {int(idx.min())} max {int(idx.max())}")
    if (
        not isinstance(values, torch.Tensor)
        or values.dim() != 3
        or values.shape[:2] != pos.shape
        or values.shape[2] != idx.numel()
    ):
        raise UsageError(
            f"values must be a tensor (batch, positions, units) = ({pos.shape[0]}, {pos.shape[1]}, {idx.numel()}), "
            f"got {tuple(values.shape) if isinstance(values, torch.Tensor) else type(values).__name__}"
        )
    if mask is not None and tuple(mask.shape) != (pos.shape[0], idx.numel()):
        raise UsageError(f"mask must be [batch, units] = ({pos.shape[0]}, {idx.numel()}), got {tuple(mask.shape)}")

    def write(t: torch.Tensor):
        b, seq = t.shape[0], t.shape[1]
        if b != pos.shape[0]:
            raise UsageError(f"patched batch has {b} rows but positions has {pos.shape[0]}")
        new = t.clone()
        rows = torch.arange(b, device=t.device)[:, None, None]
        cols = (pos.to(t.device) % seq)[:, :, None]
        units = idx.to(t.device)[None, None, :]
        vals = values.to(device=t.device, dtype=t.dtype)
        if mask is not None:
            vals = torch.where(mask.to(t.device)[:, None, :], vals, new[rows, cols, units])
        new[rows, cols, units] = vals
        return new

    with _hook(module, kind, write):
        yield


@contextlib.contextmanager
def skip_to_layer(model, layer: int, hidden: torch.Tensor) -> Iterator[None]:
    """Within the block, blocks ``0 .. layer-1`` are skipped and block ``layer`` receives ``hidden``
    (recorded at ``"block_input"`` on the same inputs: exact)."""
    site_module(model, "block_input", layer)
    skipped = list(blocks(model))[:layer]
    for block in skipped:
        block.forward = lambda *args, **kwargs: hidden
    try:
        yield
    finally:
        for block in skipped:
            del block.forward
