"""Marking active tokens and the explainer / detection prompts."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from findbench.autointerp.evidence import Window
from findbench.autointerp.prompts import (
    EXPLANATION_PREFIX,
    TokenRenderer,
    detection_messages,
    explanation_messages,
    mark_window,
)
from findbench.lm.encoder import encoder_dir


def test_marks_wrap_runs_above_the_threshold_and_keep_spaces_outside():
    pieces = ["The", " cat", " sat", " on", " the", " mat"]
    acts = [0.0, 2.0, 0.5, 0.0, 0.02, 3.0]
    assert mark_window(pieces, acts, 0.01) == "The <<cat sat>> on <<the mat>>"
    # the threshold is strict: 0.02 > 0.02 is false
    assert mark_window(pieces, acts, 0.02) == "The <<cat sat>> on the <<mat>>"
    assert mark_window(pieces, [0.0] * 6, 0.01) == "The cat sat on the mat"
    with pytest.raises(ValueError, match="differ in length"):
        mark_window(pieces, acts[:3], 0.01)


@pytest.fixture(scope="module")
def wordpiece():
    return TokenRenderer(AutoTokenizer.from_pretrained(encoder_dir("embedded")))


def test_wordpiece_pieces_join_word_continuations(wordpiece):
    ids = wordpiece.tokenizer("unbelievable cats", add_special_tokens=False)["input_ids"]
    assert wordpiece.text(ids) == "unbelievable cats"
    pieces = wordpiece.pieces(ids)
    assert "".join(pieces) == "unbelievable cats"
    acts = [1.0 if p.strip() == "cats" else 0.0 for p in pieces]
    assert mark_window(pieces, acts, 0.5) == "unbelievable <<cats>>"


def _window(ids, acts, kind="top"):
    return Window(row=0, centre=len(ids) // 2, tokens=ids, acts=acts, kind=kind)


def test_explanation_prompt_shows_marked_windows_after_the_demos(wordpiece):
    ids = wordpiece.tokenizer("the dog barked loudly", add_special_tokens=False)["input_ids"]
    acts = [0.0, 4.0, 0.0, 0.0]
    msgs = explanation_messages([_window(ids, acts)], wordpiece, threshold=0.04)
    assert msgs[0]["role"] == "system" and f'"{EXPLANATION_PREFIX} ..."' in msgs[0]["content"]
    assert [m["role"] for m in msgs[1:]] == ["user", "assistant", "user", "assistant", "user"]
    assert all(m["content"].startswith(EXPLANATION_PREFIX) for m in msgs if m["role"] == "assistant")
    assert msgs[-1]["content"] == "Texts:\n1. the <<dog>> barked loudly"
    no_demos = explanation_messages([_window(ids, acts)], wordpiece, threshold=0.04, demos=False)
    assert [m["role"] for m in no_demos] == ["system", "user"]


def test_detection_prompt_numbers_unmarked_windows_from_one(wordpiece):
    a = wordpiece.tokenizer("red apples", add_special_tokens=False)["input_ids"]
    b = wordpiece.tokenizer("blue sky", add_special_tokens=False)["input_ids"]
    msgs = detection_messages("fruit words", [_window(a, [0, 1]), _window(b, [0, 0], "random")], wordpiece)
    user = msgs[-1]["content"]
    assert f"{EXPLANATION_PREFIX} fruit words" in user
    assert "1. red apples\n2. blue sky" in user
    assert "<<" not in user
    assert '"None"' in msgs[0]["content"]


# ------------------------------------------------------------------------------ grammars


def test_detection_grammar_allows_exactly_the_answers_that_parse():
    """For 5 windows: "None" and every non-empty increasing list match; nothing else does."""
    import itertools
    import re

    from findbench.autointerp.detection import parse_detection
    from findbench.autointerp.prompts import detection_constraint

    grammar = re.compile(detection_constraint(5).regex)
    subsets = [c for k in range(1, 6) for c in itertools.combinations(range(1, 6), k)]
    allowed = ["None"] + [", ".join(map(str, c)) for c in subsets]
    assert all(grammar.fullmatch(a) and parse_detection(a, 5) is not None for a in allowed)
    for bad in ["", "none", "2, 1", "1, 1", "0", "6", "1,2", "1, 2, ", "I think 2", "[1, 2]"]:
        assert not grammar.fullmatch(bad), bad
    assert len(detection_constraint(14).regex) < 1000  # n(n+1)/2 items: small for SAEBench's 14 windows
    with pytest.raises(ValueError, match="n_examples"):
        detection_constraint(0)


def test_explanation_grammar_starts_with_the_prefix_and_parses():
    import re

    from findbench.autointerp.detection import parse_explanation
    from findbench.autointerp.prompts import EXPLANATION_PREFIX, explanation_constraint

    grammar = re.compile(explanation_constraint().regex)
    answer = f"{EXPLANATION_PREFIX} bird names such as robin."
    assert grammar.fullmatch(answer) and parse_explanation(answer) == "bird names such as robin"
    assert not grammar.fullmatch("Birds") and not grammar.fullmatch(f"{EXPLANATION_PREFIX} a\nb")
