"""Gaming probes: explanations that a scorer should rank below a latent's true explanation.

Each probe is built from what an explainer could write without understanding the latent, from
the true explanation and the evidence an explainer sees (the generation windows, never the
scoring ones):

- ``everything``: "every token" (the label of "This neuron activates on every token"), the same
  for every latent;
- ``hedged``: the true explanation, then :data:`HEDGE_OTHERS` other latents' true explanations
  (a seeded draw per latent), joined with " or ";
- ``examples_only``: the :data:`N_EXAMPLE_TOKENS` strongest distinct active tokens of the
  explainer's windows, quoted and listed, with no rule;
- ``stuffed``: the true explanation followed by those tokens as keywords;
- ``padded``: the true explanation restated :data:`PAD_FACTOR` times (4× its tokens) with
  content-free connectives, nothing new.

The probes are :mod:`findbench._guards`' (shared with the judge's card) in AutoInterp's wording;
this module picks their evidence, a latent's generation windows. Deterministic: the same
explanations, evidence and seed give the same probes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from findbench import _guards as guards
from findbench.autointerp.config import PROBES
from findbench.autointerp.evidence import LatentEvidence
from findbench.autointerp.prompts import TokenRenderer

#: The ``everything`` probe's explanation.
EVERYTHING = "every token"
#: Other latents' explanations a ``hedged`` probe adds to the truth (fewer when the run has fewer).
HEDGE_OTHERS = 2
#: Tokens an ``examples_only`` / ``stuffed`` probe lists.
N_EXAMPLE_TOKENS = 10
#: A ``padded`` probe holds the truth this many times.
PAD_FACTOR = 4
_RESTATE = ("in other words,", "that is,", "put differently,", "to say it again,")


def top_tokens(ev: LatentEvidence, renderer: TokenRenderer, threshold: float, k: int = N_EXAMPLE_TOKENS) -> list[str]:
    """The ``k`` distinct tokens (as written, stripped) that fire above ``threshold`` in the
    explainer's windows of ``ev``, strongest first (ties: first seen)."""
    best: dict[str, tuple[float, int]] = {}
    for w in ev.generation:
        for piece, act in zip(renderer.pieces(w.tokens), w.acts):
            if act > threshold and (text := piece.strip()) and (text not in best or act > best[text][0]):
                best[text] = (act, best.get(text, (0.0, len(best)))[1])
    return [t for t, _ in sorted(best.items(), key=lambda kv: (-kv[1][0], kv[1][1]))][:k]


def _quoted(tokens: Sequence[str]) -> list[str]:
    return [f'"{t}"' for t in tokens]


def hedged(truth: Sequence[str], seed: int, others: int = HEDGE_OTHERS) -> list[str]:
    """Per latent, its explanation and ``others`` other latents' (seeded draw), joined with " or "."""
    out = []
    for i, own in enumerate(truth):
        pool = [j for j in range(len(truth)) if j != i]
        picked = (np.random.default_rng([seed, i]).choice(pool, size=min(others, len(pool)), replace=False)
                  if pool else [])
        out.append(guards.hedged(own, [truth[int(j)] for j in picked]))
    return out


def padded(text: str, factor: int = PAD_FACTOR) -> str:
    """``text`` restated ``factor`` times, joined by content-free connectives."""
    return guards.padded(text, _RESTATE, times=factor, sep="; ")


def probe_explanations(truth: Sequence[str], evidence: Sequence[LatentEvidence], renderer: TokenRenderer, *,
                       act_threshold_frac: float, seed: int, probes: Sequence[str] = PROBES) -> dict[str, list[str]]:
    """The explanations of each probe in ``probes`` (names from :data:`PROBES`), one per latent
    (``truth[i]`` is the true explanation of ``evidence[i]``)."""
    if len(truth) != len(evidence):
        raise ValueError(f"truth ({len(truth)}) and evidence ({len(evidence)}) differ in length")
    if unknown := [p for p in probes if p not in PROBES]:
        raise ValueError(f"probes: unknown probe(s) {unknown} (known: {', '.join(PROBES)})")
    tokens = [top_tokens(ev, renderer, act_threshold_frac * ev.top_max_act) for ev in evidence]
    made = {
        "everything": lambda: [EVERYTHING] * len(truth),
        "hedged": lambda: hedged(truth, seed),
        "examples_only": lambda: [guards.examples_only(_quoted(t)) for t in tokens],
        "stuffed": lambda: [guards.stuffed(own, _quoted(t), label="; keywords: ") for own, t in zip(truth, tokens)],
        "padded": lambda: [padded(own) for own in truth],
    }
    return {name: made[name]() for name in probes}
