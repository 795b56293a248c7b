"""Guards on explanations before they are scored: a length cap and the ``degenerate`` flag.

- **Cap.** An explanation longer than :data:`MAX_EXPLANATION_TOKENS` tokens (512, the unit-test
  judge's ``findbench.judge.scoring.MAX_DESCRIPTION_TOKENS``; the judge sits a layer above, so the
  value is mirrored here and a test keeps the two equal) is cut to that many tokens before any
  scorer reads it, and the latent is recorded as ``explanation_truncated``. Without a tokenizer
  the cut is at 2 characters per token, as the judge's.
- **Degenerate.** An explanation that is empty, equal to the explainer prompt's own text (the
  ``...`` of its answer template or a demonstration's answer) or identical to another latent's
  explanation in the same run is marked ``degenerate`` (with its reason); it is still scored.
  Texts are compared as :func:`normalize` writes them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from findbench import _checks
from findbench.autointerp.config import MAX_EXPLANATION_TOKENS
from findbench.autointerp.detection import clean_label
from findbench.autointerp.prompts import prompt_explanations

#: Characters per token: at most this many are tokenized (a cheap bound before tokenizing) ...
_MAX_CHARS_PER_TOKEN = 8
#: ... and the cut without a tokenizer.
_MIN_CHARS_PER_TOKEN = 2

#: Why an explanation is degenerate, in the order they are tested.
DEGENERATE_REASONS = ("prompt_text", "empty", "identical")


def cap_explanation(text: str, tokenizer=None, max_tokens: int = MAX_EXPLANATION_TOKENS) -> tuple[str, bool]:
    """``text`` cut to ``max_tokens`` tokens of ``tokenizer`` (an HF tokenizer; ``None``: 2
    characters per token), and whether it was cut."""
    if not isinstance(text, str):
        raise TypeError(f"explanation must be a str, got {type(text).__name__}")
    limit = _checks.positive_int("max_explanation_tokens", max_tokens)
    chars = limit * (_MAX_CHARS_PER_TOKEN if callable(tokenizer) else _MIN_CHARS_PER_TOKEN)
    cut = len(text) > chars
    text = text[:chars]
    if callable(tokenizer):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) > limit:
            text, cut = tokenizer.decode(ids[:limit]), True
    return (text.strip() if cut else text), cut


def normalize(text: str) -> str:
    """The form explanations are compared in: case-folded, whitespace collapsed, cleaned as an
    explainer's label is (:func:`~findbench.autointerp.detection.clean_label`: a leading colon,
    trailing periods and surrounding quotes stripped).

    >>> normalize('  "Digits, such as 1  or 2."  '), normalize('")", "("')
    ('digits, such as 1 or 2', '")", "("')
    """
    return clean_label(" ".join(text.casefold().split()))


def degenerate_reasons(explanations: Sequence[str]) -> list[str | None]:
    """Per explanation of one run, why it is degenerate (a :data:`DEGENERATE_REASONS` entry) or ``None``.

    >>> degenerate_reasons(["digits", " ", "...", "The word 'and' joining two words or phrases.", "Birds.", "birds"])
    [None, 'empty', 'prompt_text', 'prompt_text', 'identical', 'identical']
    """
    explanations = list(explanations)
    for i, e in enumerate(explanations):
        if not isinstance(e, str):
            raise TypeError(f"explanations[{i}] must be a str, got {type(e).__name__}")
    texts = [normalize(e) for e in explanations]
    prompt = {normalize(t) for t in prompt_explanations()} - {""}
    # "..." normalizes to "": placeholders are also compared as written
    placeholders = {" ".join(t.casefold().split()) for t in prompt_explanations()}
    counts = Counter(texts)
    out: list[str | None] = []
    for e, t in zip(explanations, texts):
        if t in prompt or " ".join(e.casefold().split()) in placeholders:
            out.append("prompt_text")
        elif not t:
            out.append("empty")
        elif counts[t] > 1:
            out.append("identical")
        else:
            out.append(None)
    return out


def guard_explanations(explanations: Sequence[str], tokenizer=None,
                       max_tokens: int = MAX_EXPLANATION_TOKENS) -> list[dict]:
    """Per explanation of one run, what the scorers read and its flags: ``explanation`` (cut by
    :func:`cap_explanation`), ``explanation_truncated``, ``degenerate`` and ``degenerate_reason``
    (:func:`degenerate_reasons` of the cut texts)."""
    capped = [cap_explanation(e, tokenizer, max_tokens) for e in explanations]
    reasons = degenerate_reasons([text for text, _ in capped])
    return [{"explanation": text, "explanation_truncated": cut, "degenerate": reason is not None,
             "degenerate_reason": reason} for (text, cut), reason in zip(capped, reasons)]
