"""The four scorers on hand-made evidence with scripted LMs (no model loaded)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from findbench.autointerp.config import AutoInterpConfig
from findbench.autointerp.evidence import LatentEvidence, Window
from findbench.autointerp.scorers import (
    DetectionScorer,
    EmbeddingScorer,
    FuzzScorer,
    LikelihoodScorer,
    make_scorer,
    roc_auc,
)

WORDS = ["alpha", "dog", "beta", "gamma", "cat", "delta", "eps"]


class WordRenderer:
    """Token id i is the word WORDS[i] with a leading space (a stand-in for TokenRenderer)."""

    def pieces(self, ids):
        return [" " + WORDS[i] for i in ids]

    def text(self, ids):
        return "".join(self.pieces(ids)).strip()


def _evidence(latent=3) -> LatentEvidence:
    # animal windows are active (dog = 1, cat = 4 in the middle); random ones hold no animal
    active = [Window(0, 1, [0, 1, 2], [0.0, 2.0, 0.0], "top"), Window(1, 1, [3, 4, 5], [0.0, 1.0, 0.0], "iw")]
    inactive = [
        Window(2, 1, [0, 2, 3], [0.0, 0.0, 0.0], "random"),
        Window(3, 1, [5, 6, 0], [0.0, 0.0, 0.0], "random"),
        Window(4, 1, [2, 2, 3], [0.0, 0.0, 0.0], "random"),
    ]
    scoring = [inactive[0], active[0], inactive[1], active[1], inactive[2]]
    return LatentEvidence(latent, generation=active, scoring=scoring, top_max_act=2.0)


def test_roc_auc_counts_ties_as_half_and_handles_one_class():
    assert roc_auc([3, 2, 1, 0], [True, True, False, False]) == 1.0
    assert roc_auc([0, 1, 2, 3], [True, True, False, False]) == 0.0
    assert roc_auc([1, 1], [True, False]) == 0.5
    assert roc_auc([1, 2], [True, True]) == 0.5


class AnimalDetector:
    """Lists the windows that contain an animal when the explanation mentions animals."""

    name = "animal-detector"

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        out = []
        for conv in conversations:
            user = conv[-1]["content"]
            if "animal" not in user:
                out.append("None")
                continue
            hits = [
                m.group(1)
                for m in re.finditer(r"^(\d+)\. (.*)$", user, re.M)
                if re.search(r"\b(dog|cat)\b", m.group(2))
            ]
            out.append(", ".join(hits) or "None")
        return out


def test_detection_scores_the_share_of_windows_classified_right():
    ev = _evidence()
    scorer = DetectionScorer(AnimalDetector(), WordRenderer(), progress=False)
    right, none = scorer.score([(ev, "animal names"), (ev, "colours")])
    assert right["score"] == 1.0 and right["predictions"] == [2, 4] and right["correct seqs"] == [2, 4]
    # "None" gets the random windows right: 3 of 5
    assert none["score"] == pytest.approx(3 / 5) and none["predictions"] == []


class Junk(AnimalDetector):
    def generate(self, conversations, **kw):
        return ["I think the second one"] * len(conversations)


def test_unparseable_detection_answers_score_zero_and_are_flagged():
    (row,) = DetectionScorer(Junk(), WordRenderer(), progress=False).score([(_evidence(), "animal names")])
    assert row["score"] == 0.0 and row["parsed"] is False and row["predictions"] is None


class MarkJudge:
    """Says Yes when the marked words are animals and the explanation is about animals."""

    name = "mark-judge"

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        assert candidates == ["Yes", "No"]
        out = []
        for conv in conversations:
            user = conv[-1]["content"]
            marked = re.findall(r"<<(.*?)>>", user)
            yes = "animal" in user and bool(marked) and all(w in ("dog", "cat") for w in marked)
            out.append([0.0, -3.0] if yes else [-3.0, 0.0])
        return out


def test_fuzz_shows_each_active_window_rightly_and_wrongly_marked():
    ev = _evidence()
    scorer = FuzzScorer(MarkJudge(), WordRenderer(), act_threshold_frac=0.01, seed=0, progress=False)
    good, bad = scorer.score([(ev, "animal names"), (ev, "colours")])
    assert good["n_shown"] == 4 and good["score"] == 1.0
    assert good["said_yes_correct"] == 2 and good["said_yes_wrong"] == 0
    assert bad["score"] == 0.5  # "No" to everything: right on the wrongly marked half only
    # each showing is written down: which scoring window, which marks, the answer and whether it was right
    active = [k for k, w in enumerate(ev.scoring, start=1) if w.active]
    assert [(a["window"], a["marks"]) for a in good["answers"]] == [(k, m) for k in active for m in ("true", "decoy")]
    assert [a["said_yes"] for a in good["answers"]] == [True, False] * 2 and all(a["correct"] for a in good["answers"])
    assert [a["correct"] for a in bad["answers"]] == [False, True] * 2
    for a in good["answers"]:
        w = ev.scoring[a["window"] - 1]
        assert a["marked"] and all((w.acts[i] > 0) == (a["marks"] == "true") for i in a["marked"])


class BagEncoder:
    """Bag-of-words unit vectors over WORDS plus 'animal' (which stands for dog and cat)."""

    def encode(self, texts):
        rows = []
        for t in texts:
            v = np.zeros(len(WORDS))
            for w in t.split():
                if w in WORDS:
                    v[WORDS.index(w)] += 1
                if w == "animals":
                    v[WORDS.index("dog")] += 1
                    v[WORDS.index("cat")] += 1
            n = np.linalg.norm(v)
            rows.append(v / n if n else v)
        return np.stack(rows)


def test_embedding_scorer_is_the_auc_of_similarity():
    ev = _evidence()
    good, empty = EmbeddingScorer(BagEncoder(), WordRenderer()).score([(ev, "animals"), (ev, "")])
    assert good["score"] == 1.0
    assert empty["score"] == 0.5  # every similarity is 0: all ties


class PMIJudge:
    """log P(text | explanation) is higher for animal texts when the explanation names animals."""

    name = "pmi-judge"

    def continuation_logprobs(self, conversations, continuations, *, progress=False):
        out = []
        for conv, text in zip(conversations, continuations):
            explained = "animals" in conv[-1]["content"]
            out.append(-10.0 + (3.0 if explained and re.search(r"\b(dog|cat)\b", text) else 0.0))
        return out

    def generate(self, *a, **k):
        raise AssertionError("the likelihood scorer never generates")

    candidate_logprobs = generate


def test_likelihood_scorer_is_the_auc_of_pmi():
    ev = _evidence()
    good, other = LikelihoodScorer(PMIJudge(), WordRenderer(), progress=False).score([(ev, "animals"), (ev, "colours")])
    assert good["score"] == 1.0 and good["pmi"][1] == 3.0 and good["pmi"][0] == 0.0
    assert other["score"] == 0.5


def test_make_scorer_names_an_unknown_scorer_and_likelihood_needs_scoring():
    with pytest.raises(ValueError, match="unknown scorer 'bogus'"):
        make_scorer("bogus", AutoInterpConfig(), renderer=WordRenderer())
    with pytest.raises(TypeError, match="continuation_logprobs"):
        make_scorer("likelihood", AutoInterpConfig(), lm=AnimalDetector(), renderer=WordRenderer())
