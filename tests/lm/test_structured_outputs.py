"""Structured outputs in the LM layer: the Constraint, the auto/on/off decision, xgrammar in
the in-process backend (a tiny random model; the embedded one under -m slow), the request
cache key, and the field the OpenAI-compatible backend sends (vLLM's structured_outputs)."""

from __future__ import annotations

import json
import re

import pytest
import torch

from findbench.lm import CachedLM, Constraint, OpenAILM, TransformersLM, use_structured_outputs
from findbench.lm.base import check_constraints

CONVS = [
    [{"role": "user", "content": "Pick a number: 1, 2 or 3."}],
    [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "A much longer question that forces padding of the other rows?"},
    ],
    [{"role": "user", "content": "Hi"}],
]
LIST = Constraint(regex=r"None|[1-3](, [1-3]){0,2}")
SCHEMA = {
    "type": "object",
    "properties": {"pick": {"enum": ["a", "b"]}},
    "required": ["pick"],
    "additionalProperties": False,
}


# --------------------------------------------------------------------------- the Constraint


def test_constraint_takes_exactly_one_grammar():
    with pytest.raises(ValueError, match="exactly one"):
        Constraint()
    with pytest.raises(ValueError, match="exactly one"):
        Constraint(regex="a", json_schema={"type": "string"})
    with pytest.raises(ValueError, match="regex"):
        Constraint(regex="")
    with pytest.raises(ValueError, match="json_schema"):
        Constraint(json_schema="not json")
    with pytest.raises(ValueError, match="JSON object"):
        Constraint(json_schema="[1, 2]")


def test_json_schema_is_canonical_and_hashable():
    a = Constraint(json_schema={"b": 1, "a": {"type": "string"}})
    b = Constraint(json_schema='{"a": {"type": "string"}, "b": 1}')
    assert a == b and hash(a) == hash(b)
    assert a.to_dict() == {"json_schema": '{"a":{"type":"string"},"b":1}'}
    assert a.schema() == {"a": {"type": "string"}, "b": 1}
    assert {LIST: 1}[Constraint(regex=LIST.regex)] == 1


def test_check_constraints_per_conversation():
    assert check_constraints(None, 2) == [None, None]
    assert check_constraints(LIST, 2) == [LIST, LIST]
    assert check_constraints([None, LIST], 2) == [None, LIST]
    with pytest.raises(ValueError, match="differ in length"):
        check_constraints([LIST], 2)
    with pytest.raises(TypeError, match=r"constraint\[1\]"):
        check_constraints([LIST, "x"], 2)
    with pytest.raises(TypeError, match="constraint must be"):
        check_constraints("None|1", 2)


class _Backend:
    def __init__(self, supports: bool, in_process: bool):
        self.name, self.supports_constraints, self.in_process = "fake", supports, in_process


def test_structured_outputs_setting():
    local, server, plain = _Backend(True, True), _Backend(True, False), _Backend(False, True)
    assert use_structured_outputs(local, "auto") and not use_structured_outputs(server, "auto")
    assert not use_structured_outputs(plain, "auto")
    assert use_structured_outputs(server, "on") and use_structured_outputs(local, "on")
    assert not any(use_structured_outputs(x, "off") for x in (local, server, plain))
    with pytest.raises(ValueError, match="cannot constrain"):
        use_structured_outputs(plain, "on")
    with pytest.raises(ValueError, match="structured_outputs must be one of"):
        use_structured_outputs(local, "yes")


# ------------------------------------------------------------------- in-process (xgrammar)


@pytest.fixture(scope="module")
def tiny_lm(chat_tokenizer):
    """A 2-layer random Llama over the tokenizer's vocabulary (seeded): it never writes the
    format by itself, so every match below is the grammar's doing."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(chat_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        pad_token_id=chat_tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(cfg).eval()
    return TransformersLM(model, tokenizer=chat_tokenizer, device="cpu", batch_size=2, name="tiny")


def test_regex_constraint_holds_for_every_answer(tiny_lm):
    free = tiny_lm.generate(CONVS, max_new_tokens=12)
    got = tiny_lm.generate(CONVS, max_new_tokens=12, constraint=LIST)
    assert all(re.fullmatch(LIST.regex, g) for g in got), got
    assert not all(re.fullmatch(LIST.regex, f) for f in free)  # the grammar, not the model, made the format


def test_json_schema_constraint_gives_valid_json(tiny_lm):
    got = tiny_lm.generate(CONVS[:2], max_new_tokens=40, constraint=Constraint(json_schema=SCHEMA))
    for g in got:
        assert json.loads(g)["pick"] in ("a", "b"), g


def test_mixed_batch_equals_one_by_one(tiny_lm):
    constraints = [None, LIST, None]
    together = tiny_lm.generate(CONVS, max_new_tokens=8, constraint=constraints)
    alone = [tiny_lm.generate([c], max_new_tokens=8, constraint=k)[0] for c, k in zip(CONVS, constraints)]
    assert together == alone
    assert re.fullmatch(LIST.regex, together[1])


# ----------------------------------------------------------------------------------- cache


class _Recorder:
    """An LM that answers with the constraint it was given (or 'free') and records calls."""

    name = "recorder"
    supports_constraints = True
    in_process = True

    def __init__(self):
        self.calls: list[tuple[int, object]] = []

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False, constraint=None):
        self.calls.append((len(conversations), constraint))
        return ["free" if constraint is None else constraint.regex for _ in conversations]

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        return [[0.0] * len(candidates) for _ in conversations]


def test_cache_keeps_constrained_and_free_requests_apart(tmp_path):
    inner = _Recorder()
    lm = CachedLM(inner, tmp_path / "c.sqlite")
    other = Constraint(regex="None")
    assert lm.supports_constraints and lm.in_process
    assert lm.generate(CONVS[:1]) == ["free"]
    assert lm.generate(CONVS[:1], constraint=LIST) == [LIST.regex]
    assert lm.generate(CONVS[:1], constraint=other) == ["None"]
    assert (lm.hits, lm.misses) == (0, 3)
    again = CachedLM(inner, tmp_path / "c.sqlite")
    got = again.generate(CONVS, constraint=[LIST, None, other])
    assert got[0] == LIST.regex and got[2] == "None" and got[1] == "free"
    assert (again.hits, again.misses) == (1, 2)  # CONVS[0] under LIST was cached; the others are new requests
    assert inner.calls[-2:] == [(1, None), (1, other)]


def test_cache_refuses_a_constraint_for_a_backend_without_them(tmp_path):
    class Plain:
        name = "plain"

        def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
            return ["x"] * len(conversations)

        def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
            return [[0.0] * len(candidates) for _ in conversations]

    lm = CachedLM(Plain(), tmp_path / "p.sqlite")
    assert not lm.supports_constraints
    with pytest.raises(TypeError, match="cannot constrain"):
        lm.generate(CONVS[:1], constraint=LIST)


# ------------------------------------------------------------------ OpenAI-compatible field


def test_openai_backend_sends_vllm_structured_outputs(monkeypatch):
    lm = OpenAILM("http://127.0.0.1:9/v1", model="m", max_workers=1)
    bodies = []
    monkeypatch.setattr(lm, "_ensure_server", lambda: None)
    monkeypatch.setattr(
        lm, "_post", lambda url, body: bodies.append(body) or {"choices": [{"message": {"content": " 1 "}}]}
    )
    assert lm.supports_constraints and not lm.in_process
    assert lm.generate(CONVS, max_new_tokens=4, constraint=[LIST, Constraint(json_schema=SCHEMA), None]) == ["1"] * 3
    assert bodies[0]["structured_outputs"] == {"regex": LIST.regex}
    assert bodies[1]["structured_outputs"] == {"json": SCHEMA, "disable_any_whitespace": True}
    assert "structured_outputs" not in bodies[2]


# ----------------------------------------------------------------------- the embedded model


@pytest.mark.slow
def test_embedded_detection_answers_all_parse(embedded_lm):
    """SmolLM2 writes prose instead of window numbers; under the detection grammar every
    answer parses (including an empty explanation and one about nothing in the texts)."""
    from findbench.autointerp.detection import parse_detection
    from findbench.autointerp.evidence import Window
    from findbench.autointerp.prompts import TokenRenderer, detection_constraint, detection_messages

    tok = embedded_lm.tokenizer
    renderer = TokenRenderer(tok)
    texts = [
        "a robin sang in the tree",
        "the car would not start",
        "eagles fly over the hills",
        "tax forms are due",
        "the sparrow ate a seed",
        "he paid the bill",
        "owls hunt at night",
        "a red brick wall",
    ]
    windows = [
        Window(
            i,
            0,
            tok(t, add_special_tokens=False)["input_ids"],
            [0.0] * len(tok(t, add_special_tokens=False)["input_ids"]),
            "top" if i % 2 == 0 else "random",
        )
        for i, t in enumerate(texts)
    ]
    explanations = ["bird names", "", "words about money", "the letter q"]
    convs = [detection_messages(e, windows, renderer) for e in explanations]
    free = embedded_lm.generate(convs, max_new_tokens=32)
    got = embedded_lm.generate(convs, max_new_tokens=32, constraint=detection_constraint(len(windows)))
    assert all(parse_detection(a, len(windows)) is not None for a in got), got
    assert sum(parse_detection(a, len(windows)) is not None for a in free) < len(free)  # why the grammar is needed
