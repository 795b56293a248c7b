"""What the explainer and the detection scorer are shown, and the grammars their answers follow.

The prompts follow SAEBench's AutoInterp (the explainer sees windows with the active tokens
between ``<<`` and ``>>`` and answers "This neuron activates on ..."; the scorer sees numbered,
unmarked windows and answers with the active ones or "None"), written anew for findbench.
:func:`explanation_constraint` and :func:`detection_constraint` are their structured-output
grammars (every answer the latter allows parses).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from findbench import _checks
from findbench.autointerp.evidence import Window
from findbench.lm.base import Constraint

#: What the explainer's answer starts with; the label is the text after "activates on".
EXPLANATION_PREFIX = "This neuron activates on"

_EXPLAIN_SYSTEM = (
    "You study one neuron of a neural network. It responds to a particular token, word, substring or topic "
    "in short pieces of text. You will see texts on which it responds, strongest first; the tokens where it "
    "responds are marked as <<like this>>. Say in one short sentence what the neuron responds to. Describe "
    "the common pattern behind the marked tokens rather than one single word, unless a single word is all "
    "it responds to; some neurons respond to one exact word or piece of a word, others to every word of a "
    "passage about some topic. Mention capital letters or punctuation only if they matter. Use at most 20 "
    "words, no lists, no formatting."
)
_EXPLAIN_FORMAT = f'Answer in the form "{EXPLANATION_PREFIX} ...".'

# Demonstrations (user turn, assistant turn) written for findbench.
_DEMOS: tuple[tuple[list[str], str], ...] = (
    (
        [
            "the recipe calls for two <<cups>> of flour and a <<teaspoon>> of salt",
            "pour three <<litres>> of water into the pot",
            "he ran five <<miles>> before breakfast",
        ],
        f"{EXPLANATION_PREFIX} units of measurement following a number.",
    ),
    (
        [
            "she opened the door <<and>> walked in <<and>> sat down",
            "bread <<and>> butter",
            "slowly <<and>> carefully",
        ],
        f"{EXPLANATION_PREFIX} the word 'and' joining two words or phrases.",
    ),
)

_DETECT_SYSTEM = (
    "A neuron of a neural network has been described in words. You will see the description and a numbered "
    "list of texts. The neuron responds strongly to some of the texts and not at all to the others. Decide, "
    "from the description alone, which texts it responds to. Reply with the numbers of those texts separated "
    'by commas, for example "2, 5, 9", or with "None" if you think it responds to none of them. Reply with '
    "nothing else."
)


class TokenRenderer:
    """Token ids → the text pieces a window is written with (byte-level BPE pieces carry their own
    leading space; WordPiece pieces get one unless they continue a word with ``##``)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        model = getattr(tokenizer, "backend_tokenizer", None)
        self.wordpiece = type(getattr(model, "model", None)).__name__ == "WordPiece"
        self._cache: dict[int, str] = {}

    def piece(self, token_id: int) -> str:
        if token_id not in self._cache:
            if self.wordpiece:
                tok = self.tokenizer.convert_ids_to_tokens(int(token_id))
                self._cache[token_id] = tok[2:] if tok.startswith("##") else " " + tok
            else:
                self._cache[token_id] = self.tokenizer.decode([int(token_id)])
        return self._cache[token_id]

    def pieces(self, token_ids: Sequence[int]) -> list[str]:
        out = [self.piece(t) for t in token_ids]
        if out and self.wordpiece:
            out[0] = out[0].lstrip(" ")
        return out

    def text(self, token_ids: Sequence[int]) -> str:
        return _clean("".join(self.pieces(token_ids)))


def _clean(text: str) -> str:
    return " ".join(text.replace("\n", " ").split())


def mark_window(pieces: Sequence[str], acts: Sequence[float], threshold: float) -> str:
    """The window's text with each run of tokens whose activation exceeds ``threshold``
    wrapped in ``<<`` ``>>`` (a token's leading spaces stay outside the marks)."""
    if len(pieces) != len(acts):
        raise ValueError(f"pieces ({len(pieces)}) and acts ({len(acts)}) differ in length")
    out = []
    for on, run in itertools.groupby(zip(pieces, acts), key=lambda pa: pa[1] > threshold):
        run = [piece for piece, _ in run]
        if on:  # the first token's leading spaces stay outside
            stripped = run[0].lstrip()
            run = [run[0][: len(run[0]) - len(stripped)], "<<", stripped, *run[1:], ">>"]
        out += run
    return _clean("".join(out))


def _numbered(texts: Sequence[str]) -> str:
    return "\n".join(f"{i}. {t}" for i, t in enumerate(texts, start=1))


def explanation_messages(
    windows: Sequence[Window], renderer: TokenRenderer, threshold: float, *, demos: bool = True
) -> list[dict]:
    """The explainer's conversation for one latent (``threshold``: the activation above which a
    token is marked, ``act_threshold_frac`` × the largest activation in the top windows)."""
    return [
        {"role": "system", "content": _EXPLAIN_SYSTEM + " " + _EXPLAIN_FORMAT},
        *(turn for demo, answer in (_DEMOS if demos else ()) for turn in (
            {"role": "user", "content": "Texts:\n" + _numbered(demo)}, {"role": "assistant", "content": answer})),
        {"role": "user", "content": "Texts:\n" + _numbered(
            [mark_window(renderer.pieces(w.tokens), w.acts, threshold) for w in windows])},
    ]


def detection_messages(explanation: str, windows: Sequence[Window], renderer: TokenRenderer) -> list[dict]:
    """The detection scorer's conversation: the explanation and the numbered, unmarked windows."""
    texts = _numbered([renderer.text(w.tokens) for w in windows])
    return [{"role": "system", "content": _DETECT_SYSTEM}, {"role": "user", "content": (
        f"Description: {EXPLANATION_PREFIX} {explanation}\n\nTexts:\n{texts}\n\n"
        "Which texts does the neuron respond to?")}]


def prompt_explanations() -> tuple[str, ...]:
    """The explanations the explainer's prompt itself holds: the ``...`` of its answer template and
    each demonstration's label (an explanation equal to one was copied from the prompt)."""
    return ("...", *(answer[len(EXPLANATION_PREFIX) :].strip().rstrip(".") for _, answer in _DEMOS))


def explanation_constraint() -> Constraint:
    """The explainer's answer: :data:`EXPLANATION_PREFIX`, a space and one line of text (the
    label; the token limit ends it if the model does not)."""
    return Constraint(regex=EXPLANATION_PREFIX + r" [^\n]+")  # the prefix is letters and spaces


def detection_constraint(n_examples: int) -> Constraint:
    """The detection scorer's answer for ``n_examples`` windows: ``None``, or increasing window numbers
    separated by ``", "`` (``1(, 2)?(, 3)?|2(, 3)?|3`` for three); every answer it allows parses."""
    _checks.positive_int("n_examples", n_examples)
    return Constraint(regex="None|" + "|".join(
        "".join([str(first), *(f"(, {k})?" for k in range(first + 1, n_examples + 1))])
        for first in range(1, n_examples + 1)
    ))
