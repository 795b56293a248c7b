"""What every scorer guards against, in one place: gaming probes, degenerate answers, wrong answers.

The judge's card (:mod:`findbench.judge.probes`, :mod:`findbench.judge.ladder`), AutoInterp's
planted validation (:mod:`findbench.autointerp.probes`, :mod:`findbench.autointerp.validation`) and
the scoring of FIND runs (:mod:`findbench.interpret.evaluate`) build on these; each keeps only how
it picks its evidence (a function's observed pairs, a latent's windows) and its own wording, which
its published numbers were measured with.

- Text probes, descriptions that earn credit without stating the rule: :func:`hedged` (the truth
  among wrong ones), :func:`padded` (the truth restated), :func:`stuffed` (the truth plus the
  evidence as keywords) and :func:`examples_only` (the evidence listed, no rule), each within a
  character cap by :func:`within`.
- :func:`degenerate_reasons`: an answer that copies the prompt, says nothing or is the same as
  another's (:data:`DEGENERATE_REASONS`).
- :func:`derangement`: a seeded permutation that gives every item another's, the "wrong" control.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

#: Why an answer is degenerate, in the order they are tested.
DEGENERATE_REASONS = ("prompt_text", "empty", "identical")


def within(cap: int | None, render: Callable[[list[T]], str], items: Sequence[T]) -> str:
    """``render(items)``, items dropped from the end until it takes at most ``cap`` characters
    (``None``: no cap, every item); ``""`` when no item is left."""
    items = list(items)
    while items:
        text = render(items)
        if cap is None or len(text) <= cap:
            return text
        items.pop()
    return ""


def examples_only(items: Sequence[str], *, cap: int | None = None) -> str:
    """The evidence alone, comma-separated, no rule (within ``cap`` characters)."""
    return within(cap, ", ".join, items)


def hedged(truth: str, others: Sequence[str], *, at: int = 0, end: str = "") -> str:
    """``truth`` among ``others`` (at place ``at``), joined with " or ", then ``end``: right whichever
    of them is."""
    return " or ".join([*others[:at], truth, *others[at:]]) + end


def padded(text: str, connectives: Sequence[str], *, times: int | None = None, sep: str = " ") -> str:
    """``text`` ``times`` times (default one more than ``connectives``), each restatement after the next
    connective (cycling), joined by ``sep``: longer, nothing new."""
    times = len(connectives) + 1 if times is None else times
    return sep.join([text, *(f"{connectives[(k - 1) % len(connectives)]} {text}" for k in range(1, times))])


def stuffed(truth: str, keywords: Sequence[str], *, label: str, end: str = "", cap: int | None = None) -> str:
    """``truth``, ``label``, the keywords comma-separated and ``end``. With a ``cap``, keywords are
    dropped from the end until it fits (``truth`` alone when none does); without, all are listed."""
    def render(words: Sequence[str]) -> str:
        return f"{truth}{label}{', '.join(words)}{end}"

    return render(keywords) if cap is None else within(cap, render, keywords) or truth


def collapse(text: str) -> str:
    """``text`` case and spacing aside (case-folded, whitespace runs to one space, ends stripped)."""
    return " ".join(text.casefold().split())


def degenerate_reasons(
    texts: Sequence[str],
    *,
    prompt_texts: Iterable[str] = (),
    normalize: Callable[[str], str] = collapse,
    parts: Sequence[Sequence[str]] | None = None,
    groups: Sequence[Hashable] | None = None,
) -> list[tuple[str, int] | None]:
    """Per answer, why it is degenerate, as ``(reason, others)`` with a :data:`DEGENERATE_REASONS` entry,
    or ``None``; answers are compared as ``normalize`` writes them. In the order tested:

    - ``prompt_text``: the text is one of ``prompt_texts`` (the prompt's own form text or examples;
      one that normalizes to nothing, such as ``...``, is compared case and spacing aside);
    - ``empty``: nothing is left of its ``parts`` (default: the normalized text);
    - ``identical``: ``others`` answers of its group (``groups``, default one) have the same parts.
    """
    prompt_texts = list(prompt_texts)
    prompt = {normalize(p) for p in prompt_texts} - {""}
    bare = {collapse(p) for p in prompt_texts if not normalize(p)}
    normalized = [normalize(t) for t in texts]
    keys = [tuple(p) for p in parts] if parts is not None else [(n,) for n in normalized]
    grouped = list(zip(groups if groups is not None else [None] * len(keys), keys))
    counts = Counter(grouped)
    return [
        ("prompt_text", 0) if norm in prompt or (not norm and collapse(text) in bare)
        else ("empty", 0) if not any(key)
        else ("identical", counts[group] - 1) if counts[group] > 1
        else None
        for text, norm, key, group in zip(texts, normalized, keys, grouped)
    ]


def derangement(keys: Sequence[Hashable], rng: Any, *, tries: int = 1000) -> list[int]:
    """A seeded permutation ``perm`` of ``range(len(keys))`` that gives each item one with another key
    (``keys[perm[i]] != keys[i]``): the first of up to ``tries`` permutations drawn from ``rng`` (a
    ``random.Random``, by shuffling, or a numpy ``Generator``, by ``permutation``) that does; failing
    that (many repeated keys), each item's next one with another key in a rotation, which may repeat
    items. ValueError with fewer than two distinct keys."""
    keys, n = list(keys), len(keys)
    if len(set(keys)) < 2:
        raise ValueError(f"a derangement needs at least two distinct items, got {n} ({len(set(keys))} distinct)")
    for _ in range(tries):
        if isinstance(rng, random.Random):
            perm = list(range(n))
            rng.shuffle(perm)
        else:
            perm = [int(p) for p in rng.permutation(n)]
        if all(keys[p] != keys[i] for i, p in enumerate(perm)):
            return perm
    return [next((i + k) % n for k in range(1, n + 1) if keys[(i + k) % n] != keys[i]) for i in range(n)]
