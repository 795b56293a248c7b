"""LM backends behind one protocol (:class:`findbench.lm.base.LM`).

:class:`TransformersLM` (in process), :class:`OpenAILM` (an OpenAI-compatible server such as
vLLM) and :class:`CachedLM` (a sqlite request cache around either); :func:`load_lm` picks one from
a spec. Generation may be constrained by a :class:`Constraint` (a regex or a JSON schema).
"""

from __future__ import annotations

import os
from typing import Any

from findbench._lazy import lazy_getattr, names_of
from findbench.lm.base import (
    LM,
    STRUCTURED_OUTPUTS,
    Constraint,
    Conversation,
    Message,
    ScoringLM,
    check_conversations,
    use_structured_outputs,
)

#: The backends, by module; each loads its module on first use.
_MODULES = {
    "findbench.lm.transformers_lm": ("TransformersLM",),
    "findbench.lm.openai_lm": ("OpenAILM",),
    "findbench.lm.cache": ("CachedLM",),
}
__getattr__ = lazy_getattr(__name__, _MODULES)
__all__ = [
    "LM",
    "ScoringLM",
    "Conversation",
    "Message",
    "Constraint",
    "STRUCTURED_OUTPUTS",
    "use_structured_outputs",
    "check_conversations",
    "load_lm",
    *names_of(_MODULES),
]


def load_lm(
    spec: Any = "embedded", *, model: str | None = None, cache: str | os.PathLike | None = None, **kwargs: Any
) -> LM:
    """Build an LM from ``spec``: an :class:`LM` (as is); ``"embedded"``, a folder or a Hub id
    (:class:`TransformersLM`); or an ``http(s)://`` server URL (:class:`OpenAILM`, ``model=`` naming
    the served model). ``cache``: a sqlite file (:class:`CachedLM`); ``kwargs`` go to the backend."""
    if isinstance(spec, LM) and not isinstance(spec, (str, os.PathLike)):
        if model is not None or kwargs:
            raise ValueError("model= and backend options cannot be applied to an LM instance")
        lm = spec
    elif isinstance(spec, (str, os.PathLike)):
        text = os.fspath(spec)
        if not text:
            raise ValueError("spec must be a non-empty string")
        if text.startswith(("http://", "https://")):
            from findbench.lm.openai_lm import OpenAILM

            if not model:
                raise ValueError(f"model= (the served model name) is required for the server URL {text!r}")
            lm = OpenAILM(text, model=model, **kwargs)
        else:
            if model is not None:
                raise ValueError("model= applies only to server URLs; pass the model as spec")
            from findbench.lm.transformers_lm import TransformersLM

            lm = TransformersLM(text, **kwargs)
    else:
        raise TypeError(f"spec must be an LM, a model name/path or a server URL, got {type(spec).__name__}")
    if cache is not None:
        from findbench.lm.cache import CachedLM

        lm = CachedLM(lm, cache)
    return lm
