"""Shared pytest fixtures for findbench's tests.

Rules the fixtures here enforce:

* only tests marked ``@pytest.mark.slow`` may convert or load the embedded model (SmolLM2),
  so ``pytest -m "not slow"`` stays fast and runs offline without its weights;
* reference data beside the checkout is reached through the :func:`anchor` fixture, which
  skips with the exact missing path;
* each test starts from the same random state.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._paths import ANCHORS, REPO  # noqa: F401

#: Fixtures that give a test the embedded model (directly or through another fixture).
EMBEDDED_FIXTURES = frozenset({"embedded_model_dir", "embedded_lm"})

# ---------------------------------------------------------------------------------- seeding


@pytest.fixture(autouse=True)
def _seed_rngs():
    """Seed ``random`` and, when a test module already imported them, numpy and torch, so a
    test's outcome does not depend on the tests that ran before it."""
    random.seed(0)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(0)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(0)


# ------------------------------------------------------------- typed outputs fit their schemas


@pytest.fixture(scope="session", autouse=True)
def _typed_outputs_fit_their_schemas():
    """Every scores.json, AutoInterp results file (…: the classes of scripts/generate_json_schemas.py)
    a test writes is checked against its shipped schema (tests/test_schemas.py pins the schemas)."""
    from tests._schemas import documents_checked

    with documents_checked():
        yield


# ------------------------------------------------------------------ embedded model: slow only

_current_item: list[pytest.Item] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # remember which test runs (setup, call, teardown) for the embedded-model guard below;
    # module- and session-scoped fixtures are created inside this window too
    _current_item.append(item)
    try:
        yield
    finally:
        _current_item.pop()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A test whose fixtures include the embedded model must be marked slow (checked before
    any fixture runs, and also when an earlier slow test already built the fixture)."""
    uses = EMBEDDED_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    if uses and item.get_closest_marker("slow") is None:
        pytest.fail(
            f"{item.nodeid} uses {sorted(uses)} (the embedded model) but is not marked @pytest.mark.slow", pytrace=False
        )


@pytest.fixture(scope="session", autouse=True)
def _embedded_model_only_in_slow_tests():
    """Make every way to the embedded model (``resolve("embedded")``, ``load_model("embedded")``,
    ``TransformersLM("embedded")``, ``embedded_model_dir()``) raise inside a test that is not
    marked slow. Tests that replace the GGUF conversion with a fake (the build-locking tests
    of test_models.py) never touch the real model and are let through."""
    from findbench import models

    real_dir, real_convert = models.embedded_model_dir, models._convert_embedded

    def guarded() -> str:
        item = _current_item[-1] if _current_item else None
        if item is not None and item.get_closest_marker("slow") is None and models._convert_embedded is real_convert:
            raise RuntimeError(f"{item.nodeid} loads the embedded model but is not marked @pytest.mark.slow")
        return real_dir()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(models, "embedded_model_dir", guarded)
        mp.setitem(models.REGISTRY, "embedded", guarded)
        yield


@pytest.fixture(scope="session")
def embedded_model_dir() -> str:
    """Local folder of the embedded SmolLM2-135M-Instruct (converted from the wheel's GGUF once)."""
    from findbench.models import resolve

    return resolve("embedded")


@pytest.fixture(scope="session")
def embedded_lm(embedded_model_dir):
    """One in-process TransformersLM on the embedded model, shared by the session (CPU, float32)."""
    from findbench.lm import TransformersLM

    return TransformersLM(embedded_model_dir, device="cpu", batch_size=8, name="transformers:embedded")


# ------------------------------------------------------------------ a tiny chat tokenizer

#: The embedded model's chat template (ChatML with a default system turn), copied so the tiny
#: tokenizer renders conversations the way the real one does.
SMOL_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _tokenizer_corpus() -> list[str]:
    """Text the tiny BPE learns its merges from: judge prompts of every category and plain
    sentences, so the prompts the tests render come out in a few hundred tokens."""
    from findbench.judge import render_judge_prompt, render_pmi_prompt

    tests = {
        "strings": {"inputs": ["ab", "cd", "ef"], "outputs": ["AB", "dc", "f"], "correct": 1},
        "neurons_entities": {"inputs": ["NBA", "tulip", "cat"], "outputs": None, "correct": 2},
        "neurons_relations": {
            "inputs": ["France", "Spain", "cat"],
            "outputs": ["Paris", "Madrid", "meow"],
            "correct": 3,
        },
    }
    texts = []
    for category, ut in tests.items():
        for desc in ("Uppercases the input.", "Maps a country to its capital city.", "sports leagues"):
            for msgs in (render_judge_prompt(desc, ut, category), render_pmi_prompt(desc, category)):
                texts += [m["content"] for m in msgs]
    texts += [
        "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
        "Pick a number: 1, 2 or 3. Answer briefly. A much longer question that forces padding of the other rows?",
        "What is the capital of France? The capital of France is Paris. Description: (none)",
    ]
    return texts


def build_tiny_chat_tokenizer():
    """A byte-level BPE tokenizer with a small vocabulary (a few hundred tokens) that behaves
    like the embedded model's where the tests look: ChatML special tokens and template,
    ``<|im_end|>`` as end and padding token, digits always single tokens (so "[ANSWER]: 1"
    ends with the tokens " " and "1"). Built in memory in well under a second."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_tokenizer_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        unk_token="<|endoftext|>",
    )
    fast.chat_template = SMOL_CHAT_TEMPLATE
    return fast


@pytest.fixture(scope="session")
def tiny_chat_tokenizer():
    """The tiny stand-in for the embedded model's tokenizer (see :func:`build_tiny_chat_tokenizer`)."""
    return build_tiny_chat_tokenizer()


@pytest.fixture(scope="session", params=["tiny", pytest.param("embedded", marks=pytest.mark.slow)])
def chat_tokenizer(request):
    """A chat tokenizer for tiny random models: the tiny stand-in in fast runs, and the
    embedded model's own tokenizer in the same tests under ``-m slow``."""
    if request.param == "tiny":
        return request.getfixturevalue("tiny_chat_tokenizer")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(request.getfixturevalue("embedded_model_dir"))


# ----------------------------------------------------------------------------- anchors


@pytest.fixture(scope="session")
def anchor() -> Callable[[str], Path]:
    """``anchor("find-v1/numeric/data.json")``: that path under the reference data beside the
    checkout (``tests._paths.ANCHORS``); skips the calling test (or fixture) naming the exact
    missing path when it is absent. The one place tests skip for missing reference data."""

    def get(relpath: str = "") -> Path:
        path = ANCHORS / relpath if relpath else ANCHORS
        if not path.exists():
            pytest.skip(
                f"anchor data missing: {path} (the shared reference data sits beside the checkout, under {ANCHORS})"
            )
        return path

    return get


@pytest.fixture(scope="session")
def anchors_dir(anchor) -> Path:
    """The anchor root (``anchor("")``); prefer ``anchor("<relative path>")``, which skips on
    the exact file a test needs."""
    return anchor("")
