"""How well an explanation predicts where a latent fires: four scorers over the same windows.

Every scorer takes ``(evidence, explanation)`` pairs and returns one dict per latent with a
``score`` in [0, 1] and its details, over the latent's scoring windows (top and
importance-weighted windows left out of generation, labelled active; random ones, inactive).

- ``detection`` (SAEBench): an LM lists the active windows among the numbered ones; score = share
  classified correctly (floor: answering "None", 10/14 with the defaults). ``structured=True``
  generates under :func:`~findbench.autointerp.prompts.detection_constraint`, so every answer parses.
- ``fuzz`` (delphi's fuzzing): each active window is shown with its active tokens marked and with
  as many decoy marks on silent tokens; the LM says whether the marks fit the explanation (Yes/No
  log-probabilities, already a two-word grammar). Score = accuracy, chance 0.5; ``answers`` lists
  each showing.
- ``embedding`` (delphi's): cosine similarity of the explanation's and each window's MiniLM
  embedding; score = ROC AUC of active vs inactive windows. No LM.
- ``likelihood`` (as the judge's ``pmi`` mode): log P(window | explanation) − log P(window) under
  the LM; score = ROC AUC of active vs inactive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from findbench.autointerp.config import AutoInterpConfig
from findbench.autointerp.detection import detection_score, parse_detection
from findbench.autointerp.evidence import LatentEvidence
from findbench.autointerp.prompts import (
    EXPLANATION_PREFIX,
    TokenRenderer,
    detection_constraint,
    detection_messages,
    mark_window,
)
from findbench.lm.encoder import load_encoder

Item = tuple[LatentEvidence, str]


def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """ROC AUC of ``scores`` for the positive ``labels`` (ties count one half; 0.5 when one
    class is missing)."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    pos, neg = s[y, None], s[None, ~y]
    return 0.5 if not pos.size or not neg.size else float(
        ((pos > neg).sum() + 0.5 * (pos == neg).sum()) / (pos.size * neg.size))


class DetectionScorer:
    """SAEBench's detection task through any findbench LM (``generate``)."""

    name = "detection"

    def __init__(
        self, lm, renderer: TokenRenderer, *, max_new_tokens: int = 200, progress: bool = True, structured: bool = False
    ):
        self.lm, self.renderer, self.max_new_tokens = lm, renderer, max_new_tokens
        self.progress, self.structured = progress, structured

    def score(self, items: Sequence[Item]) -> list[dict[str, Any]]:
        convs = [detection_messages(expl, ev.scoring, self.renderer) for ev, expl in items]
        kwargs: dict[str, Any] = {}
        limit = self.max_new_tokens
        if self.structured and items:
            kwargs["constraint"] = [detection_constraint(len(ev.scoring)) for ev, _ in items]
            # room for the longest answer the grammar allows (every window: ", 14" is up to 4 tokens),
            # so no list is cut after a comma; the grammar itself ends every answer
            limit = max(limit, 4 * max(len(ev.scoring) for ev, _ in items) + 2)
        answers = self.lm.generate(convs, max_new_tokens=limit, progress=self.progress and "detection scorer: answers",
                                   **kwargs) if convs else []
        out = []
        for (ev, _), answer in zip(items, answers):
            n = len(ev.scoring)
            predicted = parse_detection(answer, n)
            truth = [i for i, w in enumerate(ev.scoring, start=1) if w.active]
            out.append(
                {
                    "score": detection_score(predicted, truth, n),
                    "predictions": predicted,
                    "correct seqs": truth,
                    "answer": answer,
                    "parsed": predicted is not None,
                }
            )
        return out


_FUZZ_SYSTEM = (
    "A neuron of a neural network has been described in words. In a text, some tokens are marked <<like this>>. "
    "Answer Yes if the marked tokens are ones the described neuron would respond to, No otherwise. "
    "Answer with one word."
)


class FuzzScorer:
    """Are the marks where the explanation says? Correctly vs wrongly marked active windows."""

    name = "fuzz"

    def __init__(
        self, lm, renderer: TokenRenderer, *, act_threshold_frac: float, seed: int, progress: bool = True
    ):
        self.lm, self.renderer, self.frac, self.seed, self.progress = lm, renderer, act_threshold_frac, seed, progress

    def _marked(self, ev: LatentEvidence) -> list[tuple[str, bool, int, list[int]]]:
        """``(text, rightly marked, 1-based scoring window, marked token positions)`` per showing."""
        threshold = self.frac * ev.top_max_act
        rng = np.random.default_rng([self.seed, ev.latent])
        shown = []
        for k, w in enumerate(ev.scoring, start=1):
            if not w.active:
                continue
            pieces = self.renderer.pieces(w.tokens)
            on = [a > threshold for a in w.acts]
            off = [i for i, x in enumerate(on) if not x]
            n_on = sum(on)
            if not n_on or not off:
                continue
            wrong = np.zeros(len(on))
            wrong[rng.choice(off, size=min(n_on, len(off)), replace=False)] = 1.0
            shown += [(mark_window(pieces, w.acts, threshold), True, k, [i for i, x in enumerate(on) if x]),
                      (mark_window(pieces, wrong.tolist(), 0.5), False, k, np.flatnonzero(wrong).tolist())]
        return shown

    def score(self, items: Sequence[Item]) -> list[dict[str, Any]]:
        per_item = [self._marked(ev) for ev, _ in items]
        convs = [[{"role": "system", "content": _FUZZ_SYSTEM}, {"role": "user", "content": (
            f"Description: {EXPLANATION_PREFIX} {expl}\n\nText: {text}\n\n"
            "Are the marked tokens ones this neuron responds to?")}]
            for (_, expl), shown in zip(items, per_item) for text, *_ in shown]
        logps = self.lm.candidate_logprobs(convs, ["Yes", "No"], progress=self.progress and "fuzz scorer: Yes/No "
                                           "log-probs") if convs else []
        answers = iter([yes > no for yes, no in logps])  # in the conversations' order: item by item
        out = []
        for shown in per_item:
            yes = [next(answers) for _ in shown]
            correct = [y == s[1] for s, y in zip(shown, yes)]
            out.append(
                {
                    "score": float(np.mean(correct)) if correct else 0.5,
                    "n_shown": len(shown),
                    "said_yes_correct": int(sum(y for s, y in zip(shown, yes) if s[1])),
                    "said_yes_wrong": int(sum(y for s, y in zip(shown, yes) if not s[1])),
                    "answers": [
                        {"window": k, "marks": "true" if t else "decoy", "marked": marked, "said_yes": bool(y),
                         "correct": y == t}
                        for (_, t, k, marked), y in zip(shown, yes)
                    ],
                }
            )
        return out


class EmbeddingScorer:
    """Sentence-embedding similarity of the explanation to active vs inactive windows (AUC)."""

    name = "embedding"

    def __init__(self, encoder, renderer: TokenRenderer):
        self.encoder, self.renderer = encoder, renderer

    def score(self, items: Sequence[Item]) -> list[dict[str, Any]]:
        out = []
        for ev, expl in items:
            emb = self.encoder.encode([expl, *(self.renderer.text(w.tokens) for w in ev.scoring)])
            sims = emb[1:] @ emb[0]
            out.append({"score": roc_auc(sims.tolist(), [w.active for w in ev.scoring]),
                        "similarities": [round(float(s), 6) for s in sims]})
        return out


class LikelihoodScorer:
    """log P(window | explanation) − log P(window | nothing) under a scoring LM (AUC)."""

    name = "likelihood"

    def __init__(self, lm, renderer: TokenRenderer, *, progress: bool = True):
        if not callable(getattr(lm, "continuation_logprobs", None)):
            raise TypeError(
                "the likelihood scorer needs an LM with continuation_logprobs (in-process or vLLM with prompt logprobs)"
            )
        self.lm, self.renderer, self.progress = lm, renderer, progress

    @staticmethod
    def _conv(expl: str | None) -> list[dict]:
        return [{"role": "user", "content": "Write a short piece of text." if expl is None else
                 f"Write a short piece of text containing what this neuron responds to. {EXPLANATION_PREFIX} {expl}"}]

    def score(self, items: Sequence[Item]) -> list[dict[str, Any]]:
        # per item: its windows under the explanation, then under no explanation (runs of one
        # prompt, which the LM encodes once)
        convs, conts = [], []
        for ev, expl in items:
            texts = [self.renderer.text(w.tokens) or "." for w in ev.scoring]
            convs += [self._conv(expl)] * len(texts) + [self._conv(None)] * len(texts)
            conts += texts + texts
        lps = self.lm.continuation_logprobs(convs, conts, progress=self.progress and "likelihood scorer: log P(window "
                                            "| explanation), then with none") if convs else []
        out, start = [], 0
        for ev, _ in items:
            n = len(ev.scoring)
            pmi = [a - b for a, b in zip(lps[start : start + n], lps[start + n : start + 2 * n])]
            start += 2 * n
            out.append(
                {"score": roc_auc(pmi, [w.active for w in ev.scoring]), "pmi": [round(float(x), 4) for x in pmi]}
            )
        return out


def make_scorer(
    name: str,
    cfg: AutoInterpConfig,
    *,
    lm=None,
    renderer: TokenRenderer,
    encoder=None,
    progress: bool = True,
    structured: bool = False,
):
    """The scorer called ``name`` (``detection``, ``fuzz``, ``embedding`` or ``likelihood``) with ``cfg``'s
    settings (``max_tokens_in_prediction``, ``act_threshold_frac``, ``random_seed``); ``structured``: detection
    answers under their grammar (see :class:`DetectionScorer`)."""
    makers = {
        "detection": lambda: DetectionScorer(lm, renderer, max_new_tokens=cfg.max_tokens_in_prediction,
                                             progress=progress, structured=structured),
        "fuzz": lambda: FuzzScorer(lm, renderer, act_threshold_frac=cfg.act_threshold_frac, seed=cfg.random_seed,
                                   progress=progress),
        "embedding": lambda: EmbeddingScorer(load_encoder() if encoder is None else encoder, renderer),
        "likelihood": lambda: LikelihoodScorer(lm, renderer, progress=progress),
    }
    if name not in makers:
        raise ValueError(f"scorers: unknown scorer {name!r} (known: detection, fuzz, embedding, likelihood)")
    return makers[name]()
