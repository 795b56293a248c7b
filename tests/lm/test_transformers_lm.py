"""LM backends: in-process transformers (tiny model with known weights), load_lm, the cache,
and the HTTP backend's server-down path."""

from __future__ import annotations

import logging
import os
import re
import socket
import sqlite3
import time

import pytest
import torch

from findbench.lm import CachedLM, OpenAILM, TransformersLM, load_lm
from findbench.lm.base import LM

CONVS = [
    [{"role": "user", "content": "Pick a number: 1, 2 or 3."}],
    [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "A much longer question that forces padding of the other rows?"},
    ],
    [{"role": "user", "content": "Hi"}],
]


@pytest.fixture(scope="module")
def tokenizer(chat_tokenizer):
    """The tiny stand-in tokenizer in fast runs; the embedded model's own one under -m slow
    (see tests/conftest.py)."""
    return chat_tokenizer


@pytest.fixture(scope="module")
def tiny_model(tokenizer):
    """A 2-layer random Llama over the tokenizer's vocabulary (seeded)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # widen the logits so argmaxes are far from ties
        model.lm_head.weight.mul_(50)
    return model


@pytest.fixture(scope="module")
def tiny_lm(tiny_model, tokenizer):
    return TransformersLM(tiny_model, tokenizer=tokenizer, device="cpu", batch_size=2, name="tiny")


def _manual_logprobs(model, tokenizer, conv, prefix, candidates):
    """Independent reference: the unpadded prompt alone, full log_softmax, candidate ids."""
    text = tokenizer.apply_chat_template(conv, tokenize=False, add_generation_prompt=True) + prefix
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, -1]
    logp = torch.log_softmax(logits.float(), dim=-1)
    # SmolLM2's tokenizer (and the tiny stand-in) writes digits apart from the space before
    # them: "[ANSWER]: 1" ends with the tokens " " and "1", so after the prefix (space
    # included) "1" is one token.
    cand_ids = [tokenizer.convert_tokens_to_ids(c) for c in candidates]
    return [float(logp[i]) for i in cand_ids]


def test_tiny_lm_satisfies_protocol(tiny_lm):
    assert isinstance(tiny_lm, LM)
    assert tiny_lm.name == "tiny"


def test_candidate_logprobs_equal_manual_log_softmax(tiny_model, tokenizer, tiny_lm):
    got = tiny_lm.candidate_logprobs(CONVS, ["1", "2", "3"], assistant_prefix="[ANSWER]: ")
    for conv, row in zip(CONVS, got):
        want = _manual_logprobs(tiny_model, tokenizer, conv, "[ANSWER]: ", ["1", "2", "3"])
        assert row == pytest.approx(want, abs=1e-4)
    # log-probs under the full distribution: negative and not renormalised over the candidates
    assert all(v < 0 for row in got for v in row)
    assert all(sum(torch.tensor(row).exp().tolist()) < 0.999 for row in got)


def test_shared_prefix_equals_plain(tiny_lm):
    base = [{"role": "system", "content": "A long shared system prompt " * 5}]
    convs = [base + [{"role": "user", "content": f"Option {k} of " + "x " * k}] for k in range(5)]
    plain = tiny_lm.candidate_logprobs(convs, ["1", "2", "3"], assistant_prefix="[ANSWER]: ")
    shared = tiny_lm.candidate_logprobs(convs, ["1", "2", "3"], assistant_prefix="[ANSWER]: ", shared_prefix=True)
    assert torch.allclose(torch.tensor(plain), torch.tensor(shared), atol=1e-4)


def test_shared_prefix_groups_by_function_and_runs_fewer_tokens(tiny_lm):
    def convs_of(desc):
        return [[{"role": "user", "content": f"{desc} " * 8 + f"Option {k}: " + "y " * k}] for k in range(4)]

    convs = convs_of("alpha beta") + convs_of("gamma delta")  # two functions, 4 prompts each
    tiny_lm.tokens_forwarded = 0
    plain = tiny_lm.candidate_logprobs(convs, ["1", "2"], assistant_prefix="[ANSWER]: ")
    n_plain = tiny_lm.tokens_forwarded
    tiny_lm.tokens_forwarded = 0
    shared = tiny_lm.candidate_logprobs(convs, ["1", "2"], assistant_prefix="[ANSWER]: ", shared_prefix=True)
    n_shared = tiny_lm.tokens_forwarded
    assert torch.allclose(torch.tensor(plain), torch.tensor(shared), atol=1e-4)
    # batch_size 2 -> groups of 2; each group runs its long prefix once instead of twice
    assert n_shared < 0.75 * n_plain


def test_shared_prefix_packs_groups_with_different_prefix_lengths(tiny_model, tokenizer):
    lm = TransformersLM(tiny_model, tokenizer=tokenizer, device="cpu", batch_size=4)
    convs = []
    for desc in ("short desc", "a much longer description of another function " * 4, "mid length words " * 2):
        convs += [
            [{"role": "system", "content": "judge"}, {"role": "user", "content": f"{desc}\nOption {k}: " + "z " * k}]
            for k in range(3)
        ]
    plain = lm.candidate_logprobs(convs, ["1", "2", "3"], assistant_prefix="[ANSWER]: ")
    shared = lm.candidate_logprobs(convs, ["1", "2", "3"], assistant_prefix="[ANSWER]: ", shared_prefix=True)
    assert torch.allclose(torch.tensor(plain), torch.tensor(shared), atol=1e-4)


def _manual_continuation(model, tokenizer, conv, continuation):
    """Independent reference: prompt and continuation unpadded, one forward, summed log-probs."""
    prompt = tokenizer(
        tokenizer.apply_chat_template(conv, tokenize=False, add_generation_prompt=True), add_special_tokens=False
    )["input_ids"]
    cont = tokenizer(continuation, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([prompt + cont])).logits[0].float(), dim=-1)
    return float(sum(logp[len(prompt) - 1 + j, t] for j, t in enumerate(cont)))


def test_continuation_logprobs_equal_manual_sum(tiny_model, tokenizer):
    lm = TransformersLM(tiny_model, tokenizer=tokenizer, device="cpu", batch_size=2)
    desc = [
        {"role": "system", "content": "judge"},
        {"role": "user", "content": "Description: maps a country to its capital"},
    ]
    other = [{"role": "user", "content": "Description: (none)"}]
    # identical consecutive prompts share one prefix run; lengths differ; groups span packs
    convs = [desc, desc, desc, other, other, desc]
    conts = [
        "France -> Paris",
        "x",
        "Peru -> Lima, a much longer continuation",
        "France -> Paris",
        "y z",
        "Kenya -> Nairobi",
    ]
    lm.tokens_forwarded = 0
    got = lm.continuation_logprobs(convs, conts)
    assert len(got) == len(convs)
    for conv, cont, value in zip(convs, conts, got):
        assert value == pytest.approx(_manual_continuation(tiny_model, tokenizer, conv, cont), abs=1e-3)
    # the desc prompt ran once for its first three continuations, not three times
    n_prompt = len(tokenizer(lm.render(desc), add_special_tokens=False)["input_ids"])
    n_cont = sum(len(tokenizer(c, add_special_tokens=False)["input_ids"]) for c in conts)
    assert lm.tokens_forwarded < n_cont + 4 * n_prompt


def test_continuation_logprobs_bad_inputs(tiny_lm):
    conv = [[{"role": "user", "content": "x"}]]
    with pytest.raises(ValueError, match="continuations"):
        tiny_lm.continuation_logprobs(conv, ["a", "b"])
    with pytest.raises(ValueError, match=r"continuations\[0\]"):
        tiny_lm.continuation_logprobs(conv, [""])
    with pytest.raises(TypeError, match="continuations"):
        tiny_lm.continuation_logprobs(conv, "a")
    assert tiny_lm.continuation_logprobs([], []) == []


def test_generate_batched_equals_one_by_one(tiny_lm):
    batched = tiny_lm.generate(CONVS, max_new_tokens=6)
    alone = [tiny_lm.generate([c], max_new_tokens=6)[0] for c in CONVS]
    assert batched == alone
    assert all(isinstance(s, str) for s in batched)


def test_bad_inputs_name_the_argument(tiny_lm):
    with pytest.raises(ValueError, match="candidates"):
        tiny_lm.candidate_logprobs(CONVS[:1], ["hello world, friends"])
    with pytest.raises(ValueError, match="candidates"):
        tiny_lm.candidate_logprobs(CONVS[:1], "123")
    with pytest.raises(ValueError, match=r"conversations\[0\]\[0\]\['role'\]"):
        tiny_lm.generate([[{"role": "robot", "content": "x"}]])
    with pytest.raises(TypeError, match="conversations"):
        tiny_lm.generate("just a string")
    with pytest.raises(ValueError, match="max_new_tokens"):
        tiny_lm.generate(CONVS[:1], max_new_tokens=0)
    assert tiny_lm.candidate_logprobs([], ["1"]) == []


def test_load_lm_dispatch(tiny_lm, tmp_path):
    assert load_lm(tiny_lm) is tiny_lm
    remote = load_lm("http://127.0.0.1:9/v1", model="m")
    assert isinstance(remote, OpenAILM) and remote.name == "openai:m"
    cached = load_lm(tiny_lm, cache=tmp_path / "c.sqlite")
    assert isinstance(cached, CachedLM) and cached.inner is tiny_lm
    with pytest.raises(ValueError, match="model="):
        load_lm("http://127.0.0.1:9/v1")
    with pytest.raises(TypeError, match="spec"):
        load_lm(42)
    with pytest.raises(ValueError, match="model="):
        load_lm(tiny_lm, model="x")


def test_cache_continuation_logprobs(tmp_path, tiny_lm):
    convs = [[{"role": "user", "content": "Description: uppercases"}]] * 2 + [[{"role": "user", "content": "other"}]]
    conts = ['"ab" -> "AB"', '"ab" -> "ab"', '"ab" -> "AB"']
    cached = CachedLM(tiny_lm, tmp_path / "c.sqlite")
    first = cached.continuation_logprobs(convs, conts)
    assert first == pytest.approx(tiny_lm.continuation_logprobs(convs, conts), abs=1e-6)
    tiny_lm.tokens_forwarded = 0
    again = CachedLM(tiny_lm, tmp_path / "c.sqlite").continuation_logprobs(convs[::-1], conts[::-1])
    assert again == pytest.approx(first[::-1], abs=1e-6) and tiny_lm.tokens_forwarded == 0  # all from the cache
    # the continuation is part of the key: same conversation, new continuation -> computed
    assert cached.continuation_logprobs(convs[:1], ['"ab" -> "Ab"'])[0] != pytest.approx(first[0])


class CountingLM:
    """Deterministic fake LM counting the conversations it computes; can fail on demand."""

    name = "counting"

    def __init__(self, fail_after: int | None = None):
        self.computed = 0
        self.fail_after = fail_after

    def _tick(self, n):
        if self.fail_after is not None and self.computed + n > self.fail_after:
            raise RuntimeError("simulated crash")
        self.computed += n

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        self._tick(len(conversations))
        return [f"echo:{c[-1]['content']}:{max_new_tokens}" for c in conversations]

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        self._tick(len(conversations))
        return [[-float(len(c[-1]["content"]) + k) for k in range(len(candidates))] for c in conversations]


def _convs(n):
    return [[{"role": "user", "content": "q" * (i + 1)}] for i in range(n)]


def test_cache_resumes_after_crash(tmp_path):
    path = tmp_path / "cache.sqlite"
    convs = _convs(10)
    crashing = CountingLM(fail_after=4)  # chunks of 2: chunks 1-2 finish, chunk 3 crashes
    with pytest.raises(RuntimeError, match="simulated crash"):
        CachedLM(crashing, path, chunk_size=2).candidate_logprobs(convs, ["a", "b"])
    assert crashing.computed == 4

    fresh = CountingLM()
    cached = CachedLM(fresh, path, chunk_size=2)
    got = cached.candidate_logprobs(convs, ["a", "b"])
    assert fresh.computed == 6  # the 4 finished items are not recomputed
    assert got == CountingLM().candidate_logprobs(convs, ["a", "b"])
    assert (cached.hits, cached.misses) == (4, 6)
    # A third run computes nothing; other options are other keys.
    again = CountingLM()
    assert CachedLM(again, path).candidate_logprobs(convs, ["a", "b"]) == got
    assert again.computed == 0
    CachedLM(again, path).candidate_logprobs(convs[:3], ["a", "b"], assistant_prefix="P")
    assert again.computed == 3


def test_cache_generate_keys_include_options(tmp_path):
    inner = CountingLM()
    cached = CachedLM(inner, tmp_path / "g.sqlite")
    convs = _convs(3) + _convs(3)  # duplicates computed once
    out = cached.generate(convs, max_new_tokens=5)
    assert out[:3] == out[3:] == ["echo:q:5", "echo:qq:5", "echo:qqq:5"]
    assert inner.computed == 3
    assert cached.generate(_convs(3), max_new_tokens=7)[0] == "echo:q:7"
    assert inner.computed == 6
    assert len(cached) == 6


def test_cache_rejects_non_lm(tmp_path):
    with pytest.raises(TypeError, match="lm"):
        CachedLM(object(), tmp_path / "x.sqlite")


def _cache_file(path, damage: str) -> None:
    """Write a damaged cache at ``path``: a real cache cut in half, garbage, sqlite databases
    that are not caches, an empty file, or a real cache that stays good."""
    if damage in ("truncated", "good"):
        cached = CachedLM(CountingLM(), path)
        cached.generate(_convs(300), max_new_tokens=5)
        cached.close()  # the last connection folds the WAL into the file
        if damage == "truncated":
            data = path.read_bytes()
            path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x00not a database\xff" * 500)
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        db = sqlite3.connect(path)
        db.execute(
            "CREATE TABLE notes (body TEXT)"
            if damage == "other table"
            else "CREATE TABLE cache (key TEXT, answer TEXT)"
        )
        db.commit()
        db.close()


@pytest.mark.parametrize("damage", ["truncated", "garbage", "other table", "other columns"])
def test_a_corrupt_cache_is_set_aside_and_a_fresh_one_starts(damage, tmp_path, caplog):
    path = tmp_path / "lm-cache.sqlite"
    _cache_file(path, damage)
    original = path.read_bytes()
    inner = CountingLM()
    with caplog.at_level(logging.WARNING, logger="findbench.lm.cache"):
        cached = CachedLM(inner, path)
    aside = list(tmp_path.glob("lm-cache.sqlite.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == original  # kept as it was
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert str(path) in message and str(aside[0]) in message and "\n" not in message
    assert cached.generate(_convs(2), max_new_tokens=5) == ["echo:q:5", "echo:qq:5"] and len(cached) == 2
    cached.close()
    again = CountingLM()
    assert CachedLM(again, path).generate(_convs(2), max_new_tokens=5) == ["echo:q:5", "echo:qq:5"]
    assert again.computed == 0 and len(list(tmp_path.glob("*.corrupt-*"))) == 1  # the fresh cache serves the next run


@pytest.mark.parametrize("damage", ["empty", "good"])
def test_an_empty_or_good_cache_file_is_used_as_it_is(damage, tmp_path, caplog):
    path = tmp_path / "lm-cache.sqlite"
    _cache_file(path, damage)
    inner = CountingLM()
    with caplog.at_level(logging.WARNING, logger="findbench.lm.cache"):
        cached = CachedLM(inner, path)
    assert not caplog.records and not list(tmp_path.glob("*.corrupt-*"))
    assert len(cached) == (300 if damage == "good" else 0)
    cached.generate(_convs(3), max_new_tokens=5)
    assert inner.computed == (0 if damage == "good" else 3)


def test_a_cache_that_cannot_be_opened_is_named_in_one_line(tmp_path, monkeypatch):
    """Locked by another process, a folder in its place, or (not as root) unreadable: an error
    naming the file and what to do; nothing is set aside."""
    import findbench.lm.cache as cache_module

    path = tmp_path / "held.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE cache (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(cache_module, "_BUSY_TIMEOUT_S", 0.1)
    with pytest.raises(
        sqlite3.OperationalError, match=f"^lm cache {re.escape(str(path))} cannot be opened \\(database is locked\\)"
    ):
        CachedLM(CountingLM(), path)
    db.close()
    (tmp_path / "folder.sqlite").mkdir()
    with pytest.raises(sqlite3.OperationalError, match="^lm cache .*folder.sqlite cannot be opened"):
        CachedLM(CountingLM(), tmp_path / "folder.sqlite")
    _cache_file(tmp_path / "locked.sqlite", "empty")
    os.chmod(tmp_path / "locked.sqlite", 0)
    if os.geteuid() == 0:  # root opens any file: stand in for the denial an ordinary user gets

        def denied(path):
            raise sqlite3.OperationalError("unable to open database file")

        monkeypatch.setattr(cache_module.os, "access", lambda path, mode: False)
        monkeypatch.setattr(cache_module, "_connect", denied)
    with pytest.raises(PermissionError, match="^lm cache .*locked.sqlite is not readable and writable"):
        CachedLM(CountingLM(), tmp_path / "locked.sqlite")
    assert not list(tmp_path.glob("*.corrupt-*"))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_openai_server_down_fails_fast_naming_the_url():
    port = _closed_port()
    lm = OpenAILM(f"http://127.0.0.1:{port}/v1", model="m", timeout=5)
    t0 = time.monotonic()
    with pytest.raises(ConnectionError, match=f"http://127.0.0.1:{port}/v1"):
        lm.generate(CONVS[:1])
    with pytest.raises(ConnectionError, match=f"127.0.0.1:{port}"):
        lm.candidate_logprobs(CONVS[:1], ["1"])
    assert time.monotonic() - t0 < 10


def test_openai_bad_arguments():
    with pytest.raises(ValueError, match="base_url"):
        OpenAILM("localhost:8000", model="m")
    with pytest.raises(ValueError, match="top_logprobs"):
        OpenAILM("http://x/v1", model="m", top_logprobs=50)


def test_ctrl_c_stops_generation_at_the_next_token_and_returns_nothing(tiny_lm, monkeypatch):
    """Once INTERRUPT is set (the command line's Ctrl-C), a generation running in a worker thread
    stops at its next token and raises, so nothing cut short is returned or cached."""
    import threading

    from findbench.lm import base

    monkeypatch.setattr(base, "INTERRUPT", threading.Event())
    monkeypatch.setattr("findbench.lm.transformers_lm.INTERRUPT", base.INTERRUPT)
    steps = []
    forward = tiny_lm.model.forward

    def counting(*args, **kwargs):  # the third token's forward pass sets the flag
        steps.append(1)
        if len(steps) == 3:
            base.INTERRUPT.set()
        return forward(*args, **kwargs)

    monkeypatch.setattr(tiny_lm.model, "forward", counting)
    box = {}

    def run():
        try:
            box["out"] = tiny_lm.generate(CONVS, max_new_tokens=200)
        except KeyboardInterrupt as exc:
            box["raised"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=60)
    assert "raised" in box and "out" not in box
    assert len(steps) <= 4  # one batch, stopped at the next token (not 200 tokens, not the next batch)
    with pytest.raises(KeyboardInterrupt):  # set before the call: nothing runs
        tiny_lm.candidate_logprobs(CONVS, ["1", "2"])
    assert len(steps) <= 4
