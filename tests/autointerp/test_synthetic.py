"""The planted-feature SAE and the validation of scorers on it.

Fast tests use MiniLM (WordPiece, the embedded encoder) and tiny models; the SmolLM2 ones
(byte-level BPE, the embedded model) are marked slow."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer, LlamaConfig, LlamaModel

from findbench._guards import derangement
from findbench.autointerp.activations import encode_latents, read_hook
from findbench.autointerp.commands import AutoInterpValidateCommand
from findbench.autointerp.config import PROBES, AutoInterpConfig
from findbench.autointerp.corpus import load_texts, special_token_ids, tokenize_corpus, wordnet_dir
from findbench.autointerp.evidence import collect_evidence
from findbench.autointerp.synthetic import DEFAULT_RULES, RULES, SyntheticSAE, TokenInfo, get_rule, token_infos
from findbench.autointerp.validation import MIN_SEPARATION, VERDICTS, planted_validation, quick_config


@pytest.fixture(scope="module")
def minilm():
    from findbench.lm.encoder import encoder_dir

    path = encoder_dir("embedded")
    return AutoModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="module")
def minilm_sae(minilm):
    model, tok = minilm
    return SyntheticSAE.for_model(model, tok)


def _info(piece: str, cased: bool = True) -> TokenInfo:
    stripped = piece.strip()
    return TokenInfo(piece, stripped, bool(stripped) and (piece[:1].isspace() or stripped[:1].isupper()), cased)


# --------------------------------------------------------------------------- rules by hand

HAND = {
    # rule: (pieces it fires on, pieces it must not fire on); pieces as TokenRenderer writes them
    "digits": ([" 42", "7", " 2000"], [" four", " 4th", "x1", " ", ")"]),
    "capitalized": ([" The", "Paris", " NASA"], [" the", "ing", " 42", " (", " éclair"]),
    "ing": ([" running", "ing", " thing", " Ring"], [" in", " ig", " the"]),
    "brackets": ([" (", ")", " ]", ").", "{"], [" the", " <", " 1"]),
    "closing_bracket": ([")", " ]", ").", "}"], [" (", " [", " the"]),
    "birds": ([" bird", " eagle", " Owl", "Sparrow", " feathers"], [" birds", "eagle", " dog", " cat", " ring"]),
    "colours": ([" red", " Green", " white", " grey"], ["red", " reddish", " colour", " bird"]),
    "pronouns": ([" he", " She", " their", "It"], [" the", "he", " hen", " we"]),
    "articles": ([" the", " The", " a", " an", "The"], ["the", " theory", " and", "an", " A1"]),
    "the": ([" the", "The"], [" a", " then"]),
    "days_months": ([" Monday", " october"], [" may", " march", " day"]),
    "number_words": ([" one", " Two", " first"], [" 1", " once"]),
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_each_rule_fires_on_its_pieces_and_not_on_others(name):
    rule = get_rule(name)
    yes, no = HAND[name]
    assert [p for p in yes if not rule.fires(_info(p))] == []
    assert [p for p in no if rule.fires(_info(p))] == []


def test_every_default_rule_is_registered_and_explained():
    assert set(DEFAULT_RULES) <= set(RULES) and len(DEFAULT_RULES) == 8
    for name in DEFAULT_RULES:
        text = RULES[name].explanation
        assert text and not text.lower().startswith(("this neuron", "activates")) and text == text.strip()
    assert get_rule("entity:color").explanation.startswith("words about color, such as red")
    with pytest.raises(ValueError, match="unknown rule"):
        get_rule("nonsense")
    with pytest.raises(ValueError, match="no FIND entity concept"):
        get_rule("entity:unicorns")


# ---------------------------------------------------------------------------- MiniLM (WordPiece)


def test_minilm_token_recovery_is_exact_for_every_vocab_id(minilm, minilm_sae):
    model, tok = minilm
    table = model.get_input_embeddings().weight.detach()
    assert minilm_sae.n_duplicate_groups == 0
    assert torch.equal(minilm_sae.token_ids(table), torch.arange(len(table)))
    # through the hook, batched, as the pipeline reads it
    ids = torch.randint(0, len(table), (3, 17), generator=torch.Generator().manual_seed(0))
    hidden = read_hook(model, ids, hook_name="hook_embed")
    assert torch.equal(minilm_sae.token_ids(hidden), ids)
    # vectors that are no row of the table are no token and never fire
    noise = table[:5] + 1e-3
    assert (minilm_sae.token_ids(noise) == -1).all()
    assert (minilm_sae.encode(noise) == 0).all()


def test_minilm_rules_fire_on_hand_checked_tokens(minilm, minilm_sae):
    _, tok = minilm
    sae = minilm_sae
    assert "capitalized" not in sae.rules  # an uncased vocabulary cannot express it
    assert sae.rules == [r for r in DEFAULT_RULES if r != "capitalized"]
    expect = {
        "7": {"digits"}, "1999": {"digits"}, "##ing": {"ing"}, "thing": {"ing"}, "(": {"brackets"}, ")": {"brackets"},
        "eagle": {"birds"}, "bird": {"birds"}, "red": {"colours"}, "white": {"colours"}, "she": {"pronouns"},
        "their": {"pronouns"}, "the": {"articles"}, "an": {"articles"}, "cat": set(), "theory": set(), "##red": set(),
        "[CLS]": set(), "[SEP]": set(), "[PAD]": set(), "[unused5]": set(),
    }
    for token, rules in expect.items():
        tid = tok.convert_tokens_to_ids(token)
        fired = {sae.rules[j] for j in range(sae.cfg.d_sae) if sae.activation_table[tid, j] > 0}
        assert fired == rules, token
    acts = sae.activation_table[sae.activation_table > 0]
    assert acts.min() >= 1.0 and acts.max() <= 1.5 and len(acts.unique()) > 1


def test_minilm_sae_has_the_sae_lens_surface(minilm, minilm_sae):
    model, _ = minilm
    sae = minilm_sae
    cfg = sae.cfg
    assert cfg.d_in == 384 and cfg.d_sae == len(sae.rules) == len(sae.explanations)
    assert cfg.architecture == "synthetic" and cfg.architecture() == "synthetic"
    assert cfg.metadata.hook_name == "hook_embed" and cfg.metadata.model_name
    assert cfg.dtype == "float32" and cfg.device == "cpu"
    json.dumps(cfg.to_dict())
    table = model.get_input_embeddings().weight.detach()
    x = read_hook(
        model, torch.randint(0, len(table), (2, 9), generator=torch.Generator().manual_seed(1)), hook_name="hook_embed"
    )
    z = sae.encode(x)
    assert z.shape == (2, 9, cfg.d_sae) and z.dtype == torch.float32
    assert sae.decode(z).shape == x.shape and torch.allclose(sae(x), sae.decode(z))
    # W_dec: each latent's mean embedding of the tokens it fires on
    for j in range(cfg.d_sae):
        toks = torch.nonzero(sae.activation_table[:, j] > 0).flatten().tolist()
        assert torch.allclose(sae.W_dec[j], table[toks].mean(0), atol=1e-6)


def test_encode_latents_equals_encode_then_index(minilm, minilm_sae):
    model, tok = minilm
    sae = minilm_sae
    ids = torch.as_tensor([tok.convert_tokens_to_ids(["the", "red", "eagle", "(", "7", "she", "##ing", "cat"])])
    x = read_hook(model, ids, hook_name="hook_embed")
    x = torch.cat([x, torch.randn(1, 2, x.shape[-1])], dim=1)  # and two vectors that are no token
    full = sae.encode(x)
    assert (full[0, -2:] == 0).all() and (full[0, :-3] > 0).any(dim=-1).all() and (full[0, 7] == 0).all()
    for idx in ([0], [3, 1], list(range(sae.cfg.d_sae))[::-1]):
        assert torch.equal(sae.encode_latents(x, torch.as_tensor(idx)), full[..., idx])
        assert torch.equal(encode_latents(sae, x, idx), full[..., idx])  # the pipeline's entry point


# -------------------------------------------------------------------- a small hand-made corpus

_BIRDS = ["bird", "eagle", "owl", "sparrow", "hawk", "crow"]
_COLOURS = ["red", "green", "blue", "white", "black", "yellow"]
_NOUNS = ["river", "table", "window", "garden", "letter", "mountain", "engine", "village"]


def _sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        out.append(
            rng.choice(
                [
                    f"{rng.choice(['she', 'he', 'they'])} saw a {rng.choice(_COLOURS)} {rng.choice(_BIRDS)} "
                    f"near the {rng.choice(_NOUNS)}",
                    f"the {rng.choice(_NOUNS)} was built in {rng.randint(1200, 1999)} "
                    f"(or so {rng.choice(['it', 'they'])} said)",
                    f"an old {rng.choice(_NOUNS)} standing by a {rng.choice(_NOUNS)} after raining",
                    f"{rng.choice(_NOUNS)} and {rng.choice(_NOUNS)} are quiet; "
                    f"walking home, {rng.choice(['their', 'his'])} "
                    f"{rng.choice(_NOUNS)} seemed {rng.choice(_COLOURS)}",
                ]
            )
        )
    return out


def _small_cfg(d_sae: int, **kw) -> AutoInterpConfig:
    base = dict(
        llm_context_size=64,
        total_tokens=64 * 60,
        buffer=4,
        n_top_ex=6,
        n_top_ex_for_generation=4,
        n_iw_sampled_ex=4,
        n_iw_sampled_ex_for_generation=2,
        n_random_ex=4,
        override_latents=list(range(d_sae)),
        scorers=["embedding"],
    )
    base.update(kw)
    return AutoInterpConfig(**base)


def test_evidence_windows_are_centred_on_tokens_of_the_rule(minilm, minilm_sae):
    model, tok = minilm
    sae = minilm_sae
    cfg = _small_cfg(sae.cfg.d_sae)
    tokens = tokenize_corpus(tok, _sentences(600), context_size=cfg.llm_context_size, total_tokens=cfg.total_tokens)
    evidence = collect_evidence(
        model,
        sae,
        tokens,
        cfg.override_latents,
        cfg,
        hook_name="hook_embed",
        special_ids=sorted(special_token_ids(tok)),
        batch_size=32,
        progress=False,
    )
    by_rule = {sae.rules[ev.latent]: ev for ev in evidence}
    assert (
        by_rule["digits"].skipped is None and by_rule["birds"].skipped is None and by_rule["articles"].skipped is None
    )
    infos = token_infos(tok)
    for ev in evidence:
        if ev.skipped is not None:
            continue
        rule = RULES[sae.rules[ev.latent]]
        for w in ev.generation + ev.scoring:
            centre = w.tokens[cfg.buffer]
            if w.kind == "random":
                continue
            assert infos[centre] is not None and rule.fires(infos[centre]), (
                rule.name,
                tok.convert_ids_to_tokens(centre),
            )
            assert w.acts[cfg.buffer] == pytest.approx(float(sae.activation_table[centre, ev.latent]))
            # every token of the window fires exactly where the rule holds
            for t, a in zip(w.tokens, w.acts):
                assert (a > 0) == bool(infos[t] is not None and rule.fires(infos[t]))


def test_derangement_moves_every_item():
    for n in (2, 3, 8):
        perm = derangement(range(n), np.random.default_rng(n))
        assert sorted(perm) == list(range(n)) and all(p != i for i, p in enumerate(perm))
    assert derangement(range(8), np.random.default_rng(1)) == derangement(range(8), np.random.default_rng(1))


def test_planted_validation_needs_an_lm_for_lm_scorers(minilm):
    model, tok = minilm
    with pytest.raises(ValueError, match="need an LM"):
        planted_validation(AutoInterpValidateCommand(model=(model, tok), scorers=["embedding", "detection"],
                                                     scorer=None, out=None))
    with pytest.raises(ValueError, match="scorers must be"):
        AutoInterpValidateCommand(model=(model, tok), scorers=["embedding", "embedding"])


def test_embedding_scorer_prefers_true_explanations_on_minilm(minilm, tmp_path):
    """On 60k tokens of WordNet glosses (real English) the embedding scorer ranks the planted
    explanation above another latent's on average."""
    try:
        wordnet_dir()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    model, tok = minilm
    cfg = quick_config(7, ["embedding"], total_tokens=60_000)
    tokens = tokenize_corpus(
        tok, load_texts("wordnet", split="train", text_column="text"), context_size=cfg.llm_context_size,
        total_tokens=cfg.total_tokens,
    )
    out = tmp_path / "planted.json"
    res = planted_validation(AutoInterpValidateCommand(model=(model, tok), scorers=["embedding"], config=cfg,
                                                       tokens=tokens, out=out, progress=False))
    emb = res["scorers"]["embedding"]
    assert emb["n_latents"] >= 4 and len(emb["rows"]) == emb["n_latents"]
    assert emb["true"] > emb["wrong"]
    assert emb["separation"] == pytest.approx(np.mean([r["true"] - r["wrong"] for r in emb["rows"]]))
    assert all(r["true_explanation"] != r["wrong_explanation"] for r in emb["rows"])
    assert json.loads(out.read_text())["scorers"]["embedding"]["verdict"] == emb["verdict"]
    # every gaming probe is scored on the same latents, with a paired verdict against the truth
    assert list(emb["probes"]) == list(PROBES) and res["kinds"] == ["true", "wrong", "empty", *PROBES]
    for name, probe in emb["probes"].items():
        assert probe["n"] == emb["n_latents"]
        assert probe["mean"] == pytest.approx(np.mean([r[name] for r in emb["rows"]]))
        assert probe["inflation"] == pytest.approx(probe["mean"] - emb["truth"]["mean"])
        assert probe["verdict"] in VERDICTS and probe["truth_above_probe"] == (probe["verdict"] == "truth above probe")
    assert emb["truth_above_every_probe"] == all(p["truth_above_probe"] for p in emb["probes"].values())
    # the one "every token" line for every latent is flagged; the truth is not; nothing is long enough to be cut
    assert res["explanations"]["everything"]["degenerate_reasons"] == {"identical": emb["n_latents"]}
    assert res["explanations"]["true"]["n_degenerate"] == 0
    assert res["explanations"]["empty"]["n_degenerate"] == emb["n_latents"]
    assert all(f["n_truncated"] == 0 for f in res["explanations"].values())
    row = emb["rows"][0]
    assert row["probe_explanations"]["stuffed"].startswith(row["true_explanation"] + "; keywords: ")
    # deterministic: the same seed gives the same probes and scores
    again = planted_validation(AutoInterpValidateCommand(
        model=(model, tok),
        scorers=["embedding"],
        config=cfg,
        tokens=tokens,
        progress=False,
        probes=["hedged", "padded"],
        max_explanation_tokens=16,
        out=None,
    ))
    assert again["kinds"] == ["true", "wrong", "empty", "hedged", "padded"]
    hedges = [r["probe_explanations"]["hedged"] for r in res["latents"]]
    assert [r["probe_explanations"]["hedged"] for r in again["latents"]] == hedges
    # a 16-token cap cuts every padded explanation (4 restatements) and is recorded
    assert again["explanations"]["padded"]["n_truncated"] == emb["n_latents"]
    assert all(r["explanation_truncated"]["padded"] for r in again["latents"])
    with pytest.raises(ValueError, match="probes"):
        AutoInterpValidateCommand(model=(model, tok), scorers=["embedding"], probes=["nonsense"])


# ------------------------------------------------------------- byte-level BPE without SmolLM2


def test_bpe_rules_and_identical_rows_on_a_tiny_model(tiny_chat_tokenizer):
    tok = tiny_chat_tokenizer
    torch.manual_seed(0)
    model = LlamaModel(
        LlamaConfig(
            vocab_size=len(tok),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
        )
    ).eval()
    emb = model.get_input_embeddings().weight
    the = tok.convert_tokens_to_ids("Ġthe")
    with torch.no_grad():
        emb[the + 1] = emb[the]  # two identical rows: recovered as the smaller id
    sae = SyntheticSAE.for_model(model, tok, rules=["articles", "digits", "capitalized"])
    assert sae.rules == ["articles", "digits", "capitalized"]
    assert sae.n_duplicate_groups == 1
    ids = sae.token_ids(emb.detach())
    assert torch.equal(ids, sae.canonical_id) and ids[the + 1] == the
    assert (ids == torch.arange(len(emb))).sum() == len(emb) - 1
    assert sae.activation_table[tok.convert_tokens_to_ids("1"), 1] > 0
    with pytest.raises(ValueError, match="matches no token"):
        SyntheticSAE.for_model(model, tok, rules=["days_months"])


# ------------------------------------------------------------------------- SmolLM2 (slow)


@pytest.fixture(scope="module")
def smollm(request):
    path = request.getfixturevalue("embedded_model_dir")
    return AutoModel.from_pretrained(path, dtype=torch.float32).eval(), AutoTokenizer.from_pretrained(path)


@pytest.mark.slow
def test_smollm2_token_recovery_and_rules(embedded_model_dir, smollm):
    model, tok = smollm
    sae = SyntheticSAE.for_model(model, tok)
    assert sae.rules == list(DEFAULT_RULES)
    table = model.get_input_embeddings().weight.detach()
    ids = sae.token_ids(table)
    assert torch.equal(ids, sae.canonical_id)
    moved = torch.nonzero(ids != torch.arange(len(table))).flatten()
    assert len(moved) < 20  # a few untrained rows are identical
    for i in moved.tolist():
        assert torch.equal(table[i], table[ids[i]]) and ids[i] < i
    expect = {
        " The": {"articles", "capitalized"},
        " the": {"articles"},
        " eagle": {"birds"},
        " Eagle": {"birds", "capitalized"},
        "7": {"digits"},
        " running": {"ing"},
        " (": {"brackets"},
        ")": {"brackets"},
        " red": {"colours"},
        " she": {"pronouns"},
        " cat": set(),
        " Paris": {"capitalized"},
    }
    for text, rules in expect.items():
        [tid] = tok.encode(text, add_special_tokens=False)
        fired = {sae.rules[j] for j in range(sae.cfg.d_sae) if sae.activation_table[tid, j] > 0}
        assert fired == rules, text
    for special in special_token_ids(tok):
        assert (sae.activation_table[special] == 0).all()


@pytest.mark.slow
def test_planted_validation_on_smollm2_with_all_scorers(embedded_model_dir, embedded_lm, smollm, tmp_path):
    """All four scorers run end to end on 40k tokens (three rules, few windows, two of the probes:
    the LM scorers are slow on CPU); the result has the documented structure."""
    try:
        wordnet_dir()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    model, tok = smollm
    rules = ["digits", "pronouns", "articles"]
    cfg = quick_config(
        len(rules),
        total_tokens=40_000,
        n_top_ex=4,
        n_top_ex_for_generation=2,
        n_iw_sampled_ex=3,
        n_iw_sampled_ex_for_generation=1,
        n_random_ex=3,
        max_tokens_in_prediction=16,
    )
    tokens = tokenize_corpus(
        tok, load_texts("wordnet", split="train", text_column="text"), context_size=cfg.llm_context_size,
        total_tokens=cfg.total_tokens,
    )
    res = planted_validation(AutoInterpValidateCommand(
        model=(model, tok),
        scorer=embedded_lm,
        config=cfg,
        tokens=tokens,
        rules=rules,
        out=tmp_path / "p.json",
        probes=["everything", "stuffed"],
        progress=False,
    ))
    assert res["skipped"] == {} and [r["rule"] for r in res["latents"]] == rules
    assert list(res["scorers"]) == ["detection", "fuzz", "embedding", "likelihood"]
    for name, s in res["scorers"].items():
        assert {"true", "wrong", "empty", "separation", "win_rate", "verdict", "rows", "n_latents"} <= set(s), name
        assert s["n_latents"] == len(s["rows"]) == len(rules)
        assert all(0.0 <= r[k] <= 1.0 for r in s["rows"] for k in ("true", "wrong", "empty", "everything", "stuffed"))
        assert list(s["probes"]) == ["everything", "stuffed"] and all(
            p["n"] == len(rules) for p in s["probes"].values()
        )
        assert s["true"] == pytest.approx(np.mean([r["true"] for r in s["rows"]]))
        assert s["verdict"] in ("separates", "does not separate")
    assert json.loads((tmp_path / "p.json").read_text())["scorers"].keys() == res["scorers"].keys()
    # structured outputs (auto, an in-process LM): every detection answer parses, even cut at 16 tokens
    assert res["structured_outputs"] == {"setting": "auto", "applied": True}
    assert res["scorers"]["detection"]["unparsed"] == dict.fromkeys(res["kinds"], 0)
    assert res["scorers"]["detection"]["floors"]["none"] == pytest.approx(3 / 7)


@pytest.mark.slow
def test_embedding_scorer_separates_planted_features_on_smollm2(embedded_model_dir, smollm):
    """SAEBench's window counts on 200k tokens of WordNet glosses, all eight default rules
    (no LM needed): the true explanation beats another latent's by at least
    ``MIN_SEPARATION`` on average (measured: 0.697 vs 0.428). Not the full verdict: true beats
    wrong on only 5 of 8 latents, since sentence embeddings do not see letter case, brackets
    or articles."""
    try:
        wordnet_dir()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    model, tok = smollm
    res = planted_validation(AutoInterpValidateCommand(model=(model, tok), scorers=["embedding"], out=None,
                                                       progress=False))
    emb = res["scorers"]["embedding"]
    assert res["skipped"] == {} and emb["n_latents"] == 8
    assert emb["separation"] >= MIN_SEPARATION and emb["win_rate"] > 0.5 and emb["true"] > emb["empty"]
