"""The OpenAI-compatible backend against a real vLLM server (CPU build in .venv-vllm)
serving the embedded model, compared with the in-process backend."""

from __future__ import annotations

import pytest

from findbench.lm import CachedLM, OpenAILM
from tests.lm._vllm import served_vllm

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


@pytest.fixture(scope="module")
def vllm_url(embedded_model_dir, tmp_path_factory):
    """`vllm serve` on the embedded model folder; stopped after the module."""
    yield from served_vllm(embedded_model_dir, tmp_path_factory, "vllm")


@pytest.fixture(scope="module")
def remote(vllm_url):
    return OpenAILM(vllm_url, model="embedded", max_workers=4, timeout=300)


CONVS = [
    [{"role": "user", "content": "Pick a number: 1, 2 or 3."}],
    [
        {"role": "system", "content": "Answer with one digit."},
        {"role": "user", "content": "Which is largest? 1. ant 2. whale 3. cat"},
    ],
    [{"role": "user", "content": "What is the capital of France?"}],
]


def test_generation_matches_in_process(remote, embedded_lm):
    got = remote.generate(CONVS, max_new_tokens=8)
    want = embedded_lm.generate(CONVS, max_new_tokens=8)
    assert got == want
    assert "Paris" in got[2]


def test_candidate_logprobs_match_in_process(remote, embedded_lm):
    cands = ["1", "2", "3"]
    got = remote.candidate_logprobs(CONVS, cands, assistant_prefix="[ANSWER]: ")
    want = embedded_lm.candidate_logprobs(CONVS, cands, assistant_prefix="[ANSWER]: ")
    for g, w in zip(got, want):
        assert g == pytest.approx(w, abs=5e-3)
        assert max(range(3), key=g.__getitem__) == max(range(3), key=w.__getitem__)


def test_candidate_outside_top_logprobs_is_exact(remote, embedded_lm):
    """A rare candidate is not among the 20 alternatives: scored from prompt log-probs."""
    conv = [CONVS[2]]
    cands = [" Paris", " banana"]
    got = remote.candidate_logprobs(conv, cands, assistant_prefix="The capital of France is")[0]
    want = embedded_lm.candidate_logprobs(conv, cands, assistant_prefix="The capital of France is")[0]
    assert want[0] > -3 and want[1] < -10  # " banana" is far outside the top 20
    assert got == pytest.approx(want, abs=5e-3)


def test_judge_through_the_server_matches_in_process(remote, embedded_lm, anchor):
    from findbench.find.find_v1 import load_rows
    from findbench.judge import judge_unit_tests

    rows = load_rows("neurons_relations", anchor("find-v1"))[:2]
    args = ([r["description"] for r in rows], [r["unit_tests"][:5] for r in rows], "neurons_relations")
    got = judge_unit_tests(remote, *args)
    want = judge_unit_tests(embedded_lm, *args)
    assert got["choices"] == want["choices"]
    assert got["judge"] == "openai:embedded"


def test_continuation_logprobs_and_pmi_judge_match_in_process(remote, embedded_lm):
    from findbench.judge import judge_unit_tests, render_pmi_prompt

    conv = render_pmi_prompt("Maps a country to its capital city.", "neurons_relations")
    conts = ["France -> Paris", "France -> Berlin", "Tristan -> male"]
    got = remote.continuation_logprobs([conv] * 3, conts)
    want = embedded_lm.continuation_logprobs([conv] * 3, conts)
    assert got == pytest.approx(want, abs=2e-2)
    assert want[0] > want[1]  # the model knows the capital of France
    tests = [[{"inputs": ["Peru", "Tristan", "Germany"], "outputs": ["Lima", "male", "Euro"], "correct": 1}]]
    a = judge_unit_tests(remote, ["Maps a country to its capital city."], tests, "neurons_relations", mode="pmi")
    b = judge_unit_tests(embedded_lm, ["Maps a country to its capital city."], tests, "neurons_relations", mode="pmi")
    assert a["choices"] == b["choices"]


def test_structured_outputs_reach_the_server(remote, embedded_lm):
    """The grammar travels as vLLM's structured_outputs field and the server enforces it: the
    free answers do not follow the format, the constrained ones do, as in process."""
    import json
    import re

    from findbench.lm import Constraint

    numbers = Constraint(regex=r"None|[1-3](, [1-3]){0,2}")
    free = remote.generate(CONVS, max_new_tokens=12)
    got = remote.generate(CONVS, max_new_tokens=12, constraint=numbers)
    assert all(re.fullmatch(numbers.regex, g) for g in got), got
    assert not all(re.fullmatch(numbers.regex, f) for f in free)
    assert got == embedded_lm.generate(CONVS, max_new_tokens=12, constraint=numbers)
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}},
        "required": ["city"],
        "additionalProperties": False,
    }
    (answer,) = remote.generate(CONVS[2:], max_new_tokens=24, constraint=Constraint(json_schema=schema))
    assert set(json.loads(answer)) == {"city"}


def test_cached_remote_does_not_repeat_requests(remote, tmp_path):
    cached = CachedLM(remote, tmp_path / "remote.sqlite")
    first = cached.generate(CONVS[:2], max_new_tokens=4)
    again = CachedLM(remote, tmp_path / "remote.sqlite")
    assert again.generate(CONVS[:2], max_new_tokens=4) == first
    assert (again.hits, again.misses) == (2, 0)


def test_wrong_model_name_is_reported(vllm_url):
    with pytest.raises(ValueError, match="not served"):
        OpenAILM(vllm_url, model="no-such-model").generate(CONVS[:1])
