"""findbench._guards: the probes, the degenerate rule and the derangement every scorer shares."""

from __future__ import annotations

import random

import numpy as np
import pytest

from findbench import _guards as G


def test_the_text_probes():
    assert G.hedged("t", ["a", "b"]) == "t or a or b"
    assert G.hedged("t", ["a", "b"], at=2, end=".") == "a or b or t."
    assert G.padded("t", ["A:", "B:"]) == "t A: t B: t"
    assert G.padded("t", ["A:", "B:"], times=4, sep="; ") == "t; A: t; B: t; A: t"  # the connectives cycle
    assert G.stuffed("t", ["x", "y"], label=" K: ", end=".") == "t K: x, y."
    assert G.stuffed("t", [], label="; k: ") == "t; k: "  # without a cap every keyword is listed, even none
    assert G.stuffed("t", ["xx", "yy"], label=" K: ", cap=9) == "t K: xx"  # dropped from the end to fit
    assert G.stuffed("t", ["xx"], label=" K: ", cap=3) == "t"  # none fits: the truth alone
    assert G.examples_only(["aa", "bb", "cc"], cap=6) == "aa, bb"
    assert G.examples_only(["aaaaaaa"], cap=6) == "" and G.within(None, "-".join, ["a", "b"]) == "a-b"


def test_the_degenerate_rule_in_order_by_group():
    texts = ["...", "", "Same", "same ", "same", "own"]
    found = G.degenerate_reasons(texts, prompt_texts=["...", "the form"], groups=[0, 0, 0, 0, 1, 1])
    # "..." normalizes to nothing but is the prompt's own text; "same" of group 1 has no twin there
    assert found == [("prompt_text", 0), ("empty", 0), ("identical", 1), ("identical", 1), None, None]
    assert G.degenerate_reasons(["The  FORM"], prompt_texts=["the form"]) == [("prompt_text", 0)]
    # parts: an answer is empty only when every part is, identical when all parts are
    parts = [("", "code"), ("", ""), ("d", "c1"), ("d", "c2")]
    assert G.degenerate_reasons(["", "", "d", "d"], parts=parts) == [None, ("empty", 0), None, None]
    assert set(G.DEGENERATE_REASONS) == {"prompt_text", "empty", "identical"}


@pytest.mark.parametrize("rng", [random.Random(0), np.random.default_rng(0)])
def test_a_derangement_gives_each_item_another_key(rng):
    keys = ["a", "b", "a", "c", "b"]
    perm = G.derangement(keys, rng)
    assert sorted(perm) == list(range(5)) and all(keys[p] != keys[i] for i, p in enumerate(perm))
    with pytest.raises(ValueError, match="two distinct"):
        G.derangement(["x", "x"], rng)


def test_a_derangement_falls_back_to_a_rotation():
    # each item's next item with another key (items may repeat then)
    assert G.derangement(["a", "a", "b"], random.Random(0), tries=0) == [2, 2, 0]


def test_the_judge_and_autointerp_use_the_shared_guards():
    from findbench.autointerp import explanations, validation
    from findbench.judge import ladder, probes

    assert ladder.derangement is validation.derangement is G.derangement
    assert explanations.degenerate_reasons is G.degenerate_reasons
    assert probes.hedged is G.hedged and probes.padded is G.padded and probes.stuffed is G.stuffed
