"""Guards on explanations before they are scored: a length cap and the ``degenerate`` flag.

- **Cap.** An explanation longer than :data:`MAX_EXPLANATION_TOKENS` tokens (512, the unit-test
  judge's ``findbench.judge.scoring.MAX_DESCRIPTION_TOKENS``; the judge sits a layer above, so the
  value is mirrored here and a test keeps the two equal) is cut to that many tokens before any
  scorer reads it, and the latent is recorded as ``explanation_truncated``. Without a tokenizer
  the cut is at 2 characters per token, as the judge's.
- **Degenerate.** An explanation that is empty, equal to the explainer prompt's own text (the
  ``...`` of its answer template or a demonstration's answer) or identical to another latent's
  explanation in the same run is marked ``degenerate`` (with its reason); it is still scored.
  Texts are compared as :func:`normalize` writes them; the rule is the judge's and the FIND
  runs' too (:func:`findbench._guards.degenerate_reasons`).
"""

from __future__ import annotations

from collections.abc import Sequence

from findbench import _checks
from findbench._guards import degenerate_reasons
from findbench.autointerp.config import MAX_EXPLANATION_TOKENS
from findbench.autointerp.detection import clean_label
from findbench.autointerp.prompts import prompt_explanations

#: Characters per token: at most this many are tokenized (a cheap bound before tokenizing) ...
_MAX_CHARS_PER_TOKEN = 8
#: ... and the cut without a tokenizer.
_MIN_CHARS_PER_TOKEN = 2


def cap_explanation(text: str, tokenizer=None, max_tokens: int = MAX_EXPLANATION_TOKENS) -> tuple[str, bool]:
    """``text`` cut to ``max_tokens`` tokens of ``tokenizer`` (an HF tokenizer; ``None``: 2
    characters per token), and whether it was cut."""
    _checks.instance("explanation", text, str, "a str")
    limit = _checks.positive_int("max_explanation_tokens", max_tokens)
    chars = limit * (_MAX_CHARS_PER_TOKEN if callable(tokenizer) else _MIN_CHARS_PER_TOKEN)
    cut = len(text) > chars
    text = text[:chars]
    if callable(tokenizer):
        if len(ids := tokenizer(text, add_special_tokens=False)["input_ids"]) > limit:
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


def degenerate(explanations: Sequence[str]) -> list[str | None]:
    """Per explanation of one run, why it is degenerate (a :data:`~findbench._guards.DEGENERATE_REASONS`
    entry: the rule of :func:`findbench._guards.degenerate_reasons`, with the explainer prompt's own
    texts and :func:`normalize`) or ``None``.

    >>> degenerate(["digits", " ", "...", "The word 'and' joining two words or phrases.", "Birds.", "birds"])
    [None, 'empty', 'prompt_text', 'prompt_text', 'identical', 'identical']
    """
    explanations = list(explanations)
    for i, e in enumerate(explanations):
        _checks.instance(f"explanations[{i}]", e, str, "a str")
    return [why and why[0]
            for why in degenerate_reasons(explanations, prompt_texts=prompt_explanations(), normalize=normalize)]


def guard_explanations(explanations: Sequence[str], tokenizer=None,
                       max_tokens: int = MAX_EXPLANATION_TOKENS) -> list[dict]:
    """Per explanation of one run, what the scorers read and its flags: ``explanation`` (cut by
    :func:`cap_explanation`), ``explanation_truncated``, ``degenerate`` and ``degenerate_reason``
    (:func:`degenerate` of the cut texts)."""
    capped = [cap_explanation(e, tokenizer, max_tokens) for e in explanations]
    return [{"explanation": text, "explanation_truncated": cut, "degenerate": reason is not None,
             "degenerate_reason": reason} for (text, cut), reason in zip(capped, degenerate([t for t, _ in capped]))]
