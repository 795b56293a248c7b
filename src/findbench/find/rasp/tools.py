"""White-box tools over one variant of a compiled program: what an interpreter may ask of the model.

:class:`RaspTools` holds the chosen variant's torch module and the row's public input domain, never
the program, residual labels, variable names or roles. Each tool call is counted against a budget
and each reply is bounded in size (numbers rounded, arrays truncated to a stated count):

- ``run(tokens)``: the model's output, one value per input token;
- ``run_with_cache(tokens, hooks)``: activations at TransformerLens hook names (position 0 is BOS);
- ``weights(component)``: a head's ``W_Q``/``W_K``/``W_V``/``W_O`` or an MLP's ``W_in``/``b_in``/``W_out``/
  ``b_out`` (a summary: norm, singular values, largest entries, for a matrix above the size limit);
- ``ablate(component, tokens, mode)``: the output with the component zero-, mean- or resample-ablated;
- ``patch(component, source_tokens, target_tokens)``: the target's output with the component's
  activation taken from the source run (an interchange intervention).

Component names come from the architecture alone: ``blocks.{l}.attn.head{h}``, ``blocks.{l}.mlp``
(every hidden unit), ``blocks.{l}.mlp.unit{u}`` (one hidden unit); ``weights`` also takes ``embed``,
``pos_embed`` and ``unembed``. A bad argument raises :class:`ToolError` (a ``ValueError``) in one line
naming it; the caller turns it into the reply, so an ordinary bad call never stops a run. :data:`TOOLS`
is the one table (name, arguments as JSON schema, doc) that Inspect tools and text commands are
generated from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from findbench.find.rasp import programs as P
from findbench.find.rasp.model import HookPoint, RaspTransformer

MODES = ("zero", "mean", "resample")
#: Defaults: calls per episode, numbers per reply, decimals, characters per reply.
BUDGET, MAX_VALUES, DECIMALS, MAX_CHARS = 100, 600, 3, 8000
_TOKENS = {"type": "array", "items": {"type": ["string", "integer"]},
           "description": "input tokens, without BOS (the model adds it)"}
_COMPONENT = {"type": "string", "description": "blocks.{l}.attn.head{h}, blocks.{l}.mlp or blocks.{l}.mlp.unit{u}"}

#: One entry per tool: ``name``, ``args`` (JSON schema per argument), ``required``, ``doc``.
TOOLS: tuple[dict, ...] = (
    {"name": "run", "args": {"tokens": _TOKENS}, "required": ["tokens"],
     "doc": "The model's output on tokens: one value per input token."},
    {"name": "run_with_cache",
     "args": {"tokens": _TOKENS, "hooks": {"type": "array", "items": {"type": "string"},
                                           "description": "TransformerLens hook names (blocks.0.attn.hook_pattern)"}},
     "required": ["tokens", "hooks"],
     "doc": "Activations at the hooks (batch dimension dropped, position 0 is BOS), rounded; each hook gives "
            "its full shape and the kept values (trailing axes cut first when over the size limit)."},
    {"name": "weights", "args": {"component": _COMPONENT | {"description": _COMPONENT["description"]
                                                            + ", embed, pos_embed or unembed"}},
     "required": ["component"],
     "doc": "A component's matrices (a head's W_Q, W_K, W_V, W_O; an MLP's W_in, b_in, W_out, b_out); a matrix over "
            "the size limit comes as a summary (shape, norm, nonzero fraction, singular values, largest entries)."},
    {"name": "ablate", "args": {"component": _COMPONENT, "tokens": _TOKENS,
                                "mode": {"type": "string", "enum": list(MODES)}},
     "required": ["component", "tokens", "mode"],
     "doc": "The output with the component's activation set to zero, to its mean over reference inputs (per "
            "position), or to its value on another input of the same length (resample), beside the clean output."},
    {"name": "patch", "args": {"component": _COMPONENT, "source_tokens": _TOKENS, "target_tokens": _TOKENS},
     "required": ["component", "source_tokens", "target_tokens"],
     "doc": "The target's output with the component's activation taken from the source run (same length)."},
)
_SPECS = {t["name"]: t for t in TOOLS}
_HEAD = re.compile(r"blocks\.(\d+)\.attn\.head(\d+)")
_MLP = re.compile(r"blocks\.(\d+)\.mlp(?:\.unit(\d+))?")


class ToolError(ValueError):
    """A refused tool call, in one line naming the argument."""


class RaspTools:
    """The white-box tools of one episode over ``model`` (one variant) and its public ``domain``."""

    def __init__(self, model: RaspTransformer, domain: dict, *, budget: int = BUDGET, max_values: int = MAX_VALUES,
                 decimals: int = DECIMALS, max_chars: int = MAX_CHARS, seed: int = 0, reference_inputs: int = 64):
        self._model, self._domain = model, dict(domain)
        self.budget, self.calls, self.max_values = budget, 0, max_values
        self.decimals, self.max_chars = decimals, max_chars
        self._rng = np.random.default_rng([seed, 43])
        self._reference = P.domain_inputs(self._domain, reference_inputs, np.random.default_rng([seed, 7]))
        self._modules = dict(model.named_modules())
        self.hooks = [name for name, m in self._modules.items() if isinstance(m, HookPoint)]
        self._mean_cache: dict[str, torch.Tensor] = {}

    @property
    def model(self) -> RaspTransformer:
        """The variant's module (for in-process baselines such as ``attribution``; never sent to an agent)."""
        return self._model

    @classmethod
    def for_row(cls, row: dict, variant: str = "aligned", **kwargs) -> RaspTools:
        """The tools over ``variant`` of a ``rasp`` row's model; only its domain is kept from the row."""
        from findbench.find.rasp.store import load_model

        domain = row["domain"] if isinstance(row["domain"], dict) else json.loads(row["domain"])
        return cls(load_model(row, variant), domain, **kwargs)

    # ------------------------------------------------------------------ what the interpreter is told

    def architecture(self) -> dict:
        """Shapes, hook and component names, the input domain (free: part of the prompt)."""
        m = self._model
        n_heads, d_model, d_head = m.blocks[0].attn.W_Q.shape if m.n_layers else (0, m.W_E.shape[1], 0)
        return {"n_layers": m.n_layers, "n_heads": n_heads, "d_model": d_model, "d_head": d_head,
                "d_mlp": m.blocks[0].mlp.W_in.shape[1] if m.n_layers else 0, "vocab": self._domain["vocab"],
                "min_len": self._domain["min_len"], "max_len": self._domain["max_len"],
                "preconditions": self._domain.get("preconditions", []), "output_numerical": m.numerical,
                "hooks": self.hooks, "components": self.components()}

    def components(self) -> list[str]:
        """Heads and MLPs, named from the architecture (units: ``blocks.{l}.mlp.unit{u}``)."""
        heads = self._model.blocks[0].attn.W_Q.shape[0] if self._model.n_layers else 0
        return [name for layer in range(self._model.n_layers)
                for name in [f"blocks.{layer}.attn.head{h}" for h in range(heads)] + [f"blocks.{layer}.mlp"]]

    # ------------------------------------------------------------------ the counted entry point

    def count(self) -> None:
        """Count one call (refused ones too): :class:`ToolError` once the budget is spent."""
        self.calls += 1
        if self.calls > self.budget:
            raise ToolError(f"budget: all {self.budget} tool calls are used; answer now")

    def call(self, name: str, args: dict) -> str:
        """One counted tool call: the reply as JSON text of at most ``max_chars`` characters.
        A refused call (bad name or argument, budget spent) raises :class:`ToolError` and counts too."""
        self.count()
        spec = _SPECS.get(name)
        if spec is None:
            raise ToolError(f"tool: {name!r} is not one of {list(_SPECS)}")
        if not isinstance(args, dict):
            raise ToolError(f"{name}: arguments must be an object, got {type(args).__name__}")
        unknown = sorted(set(args) - set(spec["args"]))
        missing = [a for a in spec["required"] if a not in args]
        if unknown:
            raise ToolError(f"{name}: unknown argument {unknown[0]!r}")
        if missing:
            raise ToolError(f"{name}: missing {missing[0]!r}")
        limit = self.max_values
        while True:
            text = json.dumps(getattr(self, f"_{name}")(limit=limit, **args), separators=(",", ":"))
            if len(text) <= self.max_chars or limit <= 8:
                return text[: self.max_chars]
            limit //= 2

    def run(self, tokens) -> dict:
        return json.loads(self.call("run", {"tokens": tokens}))

    def run_with_cache(self, tokens, hooks) -> dict:
        return json.loads(self.call("run_with_cache", {"tokens": tokens, "hooks": hooks}))

    def weights(self, component) -> dict:
        return json.loads(self.call("weights", {"component": component}))

    def ablate(self, component, tokens, mode) -> dict:
        return json.loads(self.call("ablate", {"component": component, "tokens": tokens, "mode": mode}))

    def patch(self, component, source_tokens, target_tokens) -> dict:
        return json.loads(self.call("patch", {"component": component, "source_tokens": source_tokens,
                                              "target_tokens": target_tokens}))

    # ------------------------------------------------------------------ the tools' bodies

    def _run(self, tokens, limit):
        return {"output": self._show(self._model.run(self.tokens(tokens)))}

    def _run_with_cache(self, tokens, hooks, limit):
        x = self.tokens(tokens)
        if isinstance(hooks, str):
            hooks = [hooks]
        if not isinstance(hooks, list) or not hooks:
            raise ToolError("hooks: give a list of hook names, e.g. ['blocks.0.attn.hook_pattern']")
        for h in hooks:
            if h not in self.hooks:
                raise ToolError(f"hooks: {h!r} is not a hook of this model (e.g. {self.hooks[2]!r})")
        hooks = list(dict.fromkeys(hooks))
        _, cache = self._model.run_with_cache(x)
        per = max(1, limit // len(hooks))
        return {h: self._array(cache[h][0], per) for h in hooks}

    def _weights(self, component, limit):
        m = self._model
        if component in ("embed", "pos_embed", "unembed"):
            mats = {"embed": {"W_E": m.W_E}, "pos_embed": {"W_pos": m.W_pos}, "unembed": {"W_U": m.W_U}}[component]
        else:
            layer, head, units = self.component(component)
            if head is not None:
                a = m.blocks[layer].attn
                mats = {"W_Q": a.W_Q[head], "W_K": a.W_K[head], "W_V": a.W_V[head], "W_O": a.W_O[head]}
            else:
                mlp = m.blocks[layer].mlp
                mats = {"W_in": mlp.W_in[:, units], "b_in": mlp.b_in[units], "W_out": mlp.W_out[units],
                        "b_out": mlp.b_out}
        per = max(1, limit // len(mats))
        return {name: self._matrix(w, per) for name, w in mats.items()}

    def _ablate(self, component, tokens, mode, limit):
        x = self.tokens(tokens)
        if mode not in MODES:
            raise ToolError(f"mode: {mode!r} is not one of {list(MODES)}")
        site = self.component(component)
        out = {"output": self._show(self.ablated([x], site, mode)[0]), "clean": self._show(self._model.run(x))}
        return out | {"changed_positions": [i for i, (a, b) in enumerate(zip(out["output"], out["clean"])) if a != b]}

    def _patch(self, component, source_tokens, target_tokens, limit):
        source, target = self.tokens(source_tokens, "source_tokens"), self.tokens(target_tokens, "target_tokens")
        if len(source) != len(target):
            raise ToolError(f"source_tokens: {len(source)} tokens, target_tokens {len(target)}; give the same length")
        site = self.component(component)
        donor = self.activation([source], site)
        out = {"output": self._show(self.intervened([target], site, lambda act: donor)[0]),
               "target_output": self._show(self._model.run(target)),
               "source_output": self._show(self._model.run(source))}
        return out | {"changed_positions": [i for i, (a, b) in enumerate(zip(out["output"], out["target_output"]))
                                            if a != b]}

    # ------------------------------------------------------------------ checks and interventions (uncounted)

    def tokens(self, tokens, arg: str = "tokens") -> list:
        """``tokens`` checked against the domain (one line naming ``arg`` otherwise)."""
        if isinstance(tokens, str):
            tokens = tokens.split()
        if not isinstance(tokens, list):
            raise ToolError(f"{arg}: give a list of tokens, got {type(tokens).__name__}")
        try:
            return P.check_input(self._domain, tokens)
        except ValueError as exc:
            raise ToolError(str(exc).replace("tokens:", f"{arg}:", 1)) from None

    def component(self, name) -> tuple[int, int | None, list[int]]:
        """``(layer, head or None, units)`` of a component name (one line naming ``component`` otherwise)."""
        m = self._model
        head_match = _HEAD.fullmatch(name) if isinstance(name, str) else None
        mlp_match = _MLP.fullmatch(name) if isinstance(name, str) else None
        layer = int((head_match or mlp_match).group(1)) if head_match or mlp_match else -1
        if not 0 <= layer < m.n_layers:
            raise ToolError(f"component: {name!r} is not a component; give blocks.{{l}}.attn.head{{h}}, "
                            f"blocks.{{l}}.mlp or blocks.{{l}}.mlp.unit{{u}} with l < {m.n_layers}")
        if head_match:
            head, n = int(head_match.group(2)), m.blocks[layer].attn.W_Q.shape[0]
            if head >= n:
                raise ToolError(f"component: {name!r}: layer {layer} has {n} heads")
            return layer, head, []
        d_mlp = m.blocks[layer].mlp.W_in.shape[1]
        if mlp_match.group(2) is None:
            return layer, None, list(range(d_mlp))
        if int(mlp_match.group(2)) >= d_mlp:
            raise ToolError(f"component: {name!r}: layer {layer}'s MLP has {d_mlp} units")
        return layer, None, [int(mlp_match.group(2))]

    def _hook(self, site) -> str:
        layer, head, _ = site
        return f"blocks.{layer}.attn.hook_result" if head is not None else f"blocks.{layer}.mlp.hook_post"

    def _select(self, act: torch.Tensor, site) -> torch.Tensor:
        _, head, units = site
        return act[:, :, head] if head is not None else act[:, :, units]

    @torch.no_grad()
    def activation(self, batch: Sequence[Sequence], site) -> torch.Tensor:
        """The component's activation on a padded batch: ``(batch, position, ...)``."""
        seen = {}
        handle = self._modules[self._hook(site)].register_forward_hook(
            lambda mod, inp, out: seen.__setitem__("act", self._select(out, site).clone()))
        try:
            ids, mask = self._model.encode(batch)
            self._model(ids, mask)
        finally:
            handle.remove()
        return seen["act"]

    @torch.no_grad()
    def intervened(self, batch: Sequence[Sequence], site, new: Callable[[torch.Tensor], torch.Tensor]) -> list[list]:
        """Outputs of ``batch`` with the component's activation replaced by ``new(activation)``."""
        _, head, units = site

        def hook(mod, inp, out):
            out = out.clone()
            value = new(self._select(out, site))[:, : out.shape[1]]
            if head is not None:
                out[:, :, head] = value
            else:
                out[:, :, units] = value
            return out

        handle = self._modules[self._hook(site)].register_forward_hook(hook)
        try:
            ids, mask = self._model.encode(batch)
            return self._model.decode(self._model(ids, mask), [len(x) for x in batch])
        finally:
            handle.remove()

    def ablated(self, batch: Sequence[Sequence], site, mode: str) -> list[list]:
        """Outputs of ``batch`` with the component ablated (``zero``, ``mean`` per position over the
        reference inputs, or ``resample``: a reference input of the same length)."""
        if mode == "zero":
            return self.intervened(batch, site, torch.zeros_like)
        if mode == "mean":
            key = repr(site)
            if key not in self._mean_cache:
                act = self.activation(self._reference, site)
                _, mask = self._model.encode(self._reference)
                w = mask.to(act.dtype).reshape(mask.shape + (1,) * (act.dim() - 2))
                mean = (act * w).sum(0, keepdim=True) / w.sum(0, keepdim=True).clamp(min=1)
                pad = self._model.max_len + 1 - mean.shape[1]  # positions no reference input reaches: zero
                self._mean_cache[key] = torch.cat([mean, mean.new_zeros((1, max(pad, 0)) + mean.shape[2:])], 1)
            mean = self._mean_cache[key]
            return self.intervened(batch, site, lambda act: mean.expand((act.shape[0],) + mean.shape[1:]))
        donors = []
        for x in batch:
            same = [r for r in self._reference if len(r) == len(x)] or [list(x)]
            donors.append(same[int(self._rng.integers(len(same)))])
        donor = self.activation(donors, site)
        return self.intervened(batch, site, lambda act: donor)

    # ------------------------------------------------------------------ bounded replies

    def _show(self, values: list) -> list:
        return [round(v, 4) + 0.0 if isinstance(v, float) else v for v in values]

    def _array(self, t: torch.Tensor, limit: int) -> dict:
        """Full shape and the values rounded, trailing axes cut first until at most ``limit`` numbers."""
        a = t.detach().cpu().numpy()
        kept = list(a.shape)
        for axis in range(len(kept) - 1, -1, -1):
            rest = int(np.prod(kept)) // max(kept[axis], 1)
            if rest * kept[axis] <= limit:
                break
            kept[axis] = max(1, limit // max(rest, 1))
        part = a[tuple(slice(0, k) for k in kept)]
        return {"shape": list(a.shape), "kept": kept, "values": (np.round(part, self.decimals) + 0.0).tolist()}

    def _matrix(self, t: torch.Tensor, limit: int) -> dict:
        a = t.detach().cpu().numpy()
        if a.size <= limit:
            return {"shape": list(a.shape), "values": (np.round(a, self.decimals) + 0.0).tolist()}
        m = a.reshape(a.shape[0], -1)
        top = [k for k in np.argsort(-np.abs(m), axis=None)[: max(1, min(16, limit // 3))] if np.abs(m).flat[k] > 1e-9]
        return {"shape": list(a.shape), "summary": True, "norm": round(float(np.linalg.norm(m)), self.decimals),
                "nonzero_fraction": round(float(np.mean(np.abs(m) > 1e-9)), self.decimals),
                "singular_values": np.round(np.linalg.svd(m, compute_uv=False)[:8], self.decimals).tolist(),
                "largest": [[int(i), int(j), round(float(m[i, j]), self.decimals)]
                            for i, j in zip(*np.unravel_index(np.asarray(top, dtype=int), m.shape))]}


def tool_specs() -> list[dict[str, Any]]:
    """:data:`TOOLS` as JSON-schema function specs (``name``, ``description``, ``parameters``)."""
    return [{"name": t["name"], "description": t["doc"],
             "parameters": {"type": "object", "properties": t["args"], "required": t["required"]}} for t in TOOLS]
