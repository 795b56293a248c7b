"""The guards on explanations: the length cap and the degenerate flag."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from findbench.autointerp.config import MAX_EXPLANATION_TOKENS, AutoInterpConfig
from findbench.autointerp.explanations import cap_explanation, degenerate, guard_explanations, normalize
from findbench.autointerp.prompts import EXPLANATION_PREFIX, prompt_explanations
from findbench.lm.encoder import encoder_dir


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(encoder_dir("embedded"))


def test_the_cap_mirrors_the_judges_description_cap():
    from findbench.judge.scoring import MAX_DESCRIPTION_TOKENS

    assert MAX_EXPLANATION_TOKENS == MAX_DESCRIPTION_TOKENS == AutoInterpConfig().max_explanation_tokens == 512


def test_cap_cuts_to_the_token_limit_and_says_so(tokenizer):
    short = "numbers written with digits"
    assert cap_explanation(short, tokenizer, 8) == (short, False)
    long = " ".join(["birds"] * 20)
    text, cut = cap_explanation(long, tokenizer, 8)
    assert cut and text == " ".join(["birds"] * 8)
    assert len(tokenizer(text, add_special_tokens=False)["input_ids"]) == 8
    # exactly at the limit: kept whole
    assert cap_explanation(" ".join(["birds"] * 8), tokenizer, 8) == (" ".join(["birds"] * 8), False)
    # without a tokenizer: 2 characters per token
    assert cap_explanation("abcdefghij", None, 4) == ("abcdefgh", True)
    assert cap_explanation("abcdefgh", None, 4) == ("abcdefgh", False)
    with pytest.raises(ValueError, match="max_explanation_tokens"):
        cap_explanation("x", tokenizer, 0)
    with pytest.raises(TypeError, match="explanation must be a str"):
        cap_explanation(None, tokenizer)


def test_degenerate_empty_prompt_text_and_identical():
    assert prompt_explanations()[:2] == ("...", "units of measurement following a number")
    demo = prompt_explanations()[2]
    assert demo == "the word 'and' joining two words or phrases"
    texts = ["digits", "", "  ", "...", f"{demo.upper()}.", "Pronouns.", '"pronouns"', ")", "birds"]
    assert degenerate(texts) == [None, "empty", "empty", "prompt_text", "prompt_text", "identical", "identical",
                                         None, None]
    # one latent alone is never 'identical'; two different ones neither
    assert degenerate(["birds"]) == [None] and degenerate(["birds", "bird"]) == [None, None]
    assert normalize(f"  {EXPLANATION_PREFIX}  ") == EXPLANATION_PREFIX.lower()
    with pytest.raises(TypeError, match=r"explanations\[1\]"):
        degenerate(["a", None])


def test_guard_flags_the_cut_text(tokenizer):
    long = " ".join(["digits"] * 30)
    out = guard_explanations([long, " ".join(["digits"] * 4), "colours", ""], tokenizer, 4)
    assert [g["explanation_truncated"] for g in out] == [True, False, False, False]
    # after the cut the first equals the second: both identical
    assert [g["degenerate_reason"] for g in out] == ["identical", "identical", None, "empty"]
    assert [g["degenerate"] for g in out] == [True, True, False, True]
    assert out[0]["explanation"] == out[1]["explanation"] == "digits digits digits digits"
