"""The AutoInterp text corpus: WordNet parsing, local files, packing into BOS-led rows, the
too-small error, determinism and the token cache."""

from __future__ import annotations

import json

import numpy as np
import pytest

from findbench.autointerp import corpus
from findbench.autointerp.config import Corpus
from findbench.autointerp.corpus import (
    corpus_tokens,
    load_texts,
    parse_wordnet_line,
    special_token_ids,
    tokenize_corpus,
    wordnet_texts,
)

HEADER = "  1 This software and database is being provided to you, the LICENSEE, by  \n  2 Princeton University  \n"
NOUNS = (
    "00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 ~ 00002137 n 0000 ~ 04424418 n 0000 | that which is perceived "
    "or known or inferred to have its own distinct existence (living or nonliving)  \n"
    "07386370 11 n 02 knock 1 knocking 0 001 @ 07371293 n 0000 | the sound of knocking (as on a door or in an engine "
    'or bearing); "the knocking grew louder"  \n'
)
VERBS = (
    "00001740 29 v 04 breathe 0 take_a_breath 0 respire 0 suspire 3 001 * 00005041 v 0000 02 + 02 00 + 08 00 | "
    "draw air into, and expel out of, the lungs; "
    '"I can breathe better when the air is clean"; "The patient is respiring"  \n'
)
ADJS = '00013887 00 s 01 big(a) 0 000 | above average in size; "a big house" - Anon.  \n'


@pytest.fixture
def wn_dir(tmp_path):
    folder = tmp_path / "dict"
    folder.mkdir()
    (folder / "data.noun").write_text(HEADER + NOUNS)
    (folder / "data.verb").write_text(HEADER + VERBS)
    (folder / "data.adj").write_text(HEADER + ADJS)
    return folder


class WordTokenizer:
    """Whitespace tokenizer with a newline token and BOS/EOS/PAD ids, for packing tests."""

    bos_token_id, eos_token_id, pad_token_id, unk_token_id = 1, 2, 2, 0
    name_or_path = "words"

    def __init__(self, words):
        self.vocab = {"<unk>": 0, "<bos>": 1, "<eos>": 2, "\n": 3}
        for w in words:
            self.vocab.setdefault(w, len(self.vocab))

    def encode(self, text, add_special_tokens=False):
        return [self.vocab.get(w, 0) for w in (["\n"] if text == "\n" else text.split())]

    def __call__(self, texts, add_special_tokens=False):
        return {"input_ids": [self.encode(t) for t in texts]}

    def get_vocab(self):
        return dict(self.vocab)


TEXTS = [f"w{i} " * (1 + i % 5) for i in range(200)]


@pytest.fixture
def tok():
    return WordTokenizer(f"w{i}" for i in range(200))


# ------------------------------------------------------------------------------ WordNet


def test_parse_wordnet_line_definition_examples_and_lemmas():
    syn = parse_wordnet_line(VERBS)
    assert syn.offset == "00001740" and syn.pos == "v"
    assert syn.lemmas == ("breathe", "take a breath", "respire", "suspire")
    assert syn.definition == "draw air into, and expel out of, the lungs"
    assert syn.examples == ("I can breathe better when the air is clean", "The patient is respiring")
    assert syn.text == (
        "breathe, take a breath, respire, suspire: draw air into, and expel out of, the lungs; "
        '"I can breathe better when the air is clean"; "The patient is respiring"'
    )
    adj = parse_wordnet_line(ADJS)
    assert adj.lemmas == ("big",)  # the (a) marker is dropped
    assert adj.examples == ("a big house",)  # the attribution is dropped
    assert parse_wordnet_line(HEADER.splitlines()[0]) is None
    assert parse_wordnet_line("\n") is None
    with pytest.raises(ValueError, match="not a WordNet data line"):
        parse_wordnet_line("garbage")


def test_wordnet_texts_in_file_order(wn_dir):
    texts = list(wordnet_texts(wn_dir))
    assert texts == [
        "entity: that which is perceived or known or inferred to have its own distinct existence (living or nonliving)",
        'knock, knocking: the sound of knocking (as on a door or in an engine or bearing); "the knocking grew louder"',
        "breathe, take a breath, respire, suspire: draw air into, and expel out of, the lungs; "
        '"I can breathe better when the air is clean"; "The patient is respiring"',
        'big: above average in size; "a big house"',
    ]
    assert texts == list(wordnet_texts(wn_dir))


def test_load_texts_wordnet_follows_wnsearchdir(wn_dir, monkeypatch):
    monkeypatch.setenv("WNSEARCHDIR", str(wn_dir))
    assert list(load_texts("wordnet", split="train", text_column="text")) == list(wordnet_texts(wn_dir))


def test_missing_wordnet_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.delenv("WNSEARCHDIR", raising=False)
    monkeypatch.delenv("WNHOME", raising=False)
    import findbench.wordnet

    monkeypatch.setattr(findbench.wordnet, "_WORDNET_DIRS", (str(tmp_path / "none"),))
    with pytest.raises(FileNotFoundError, match="apt-get install wordnet-base"):
        list(load_texts("wordnet", split="train", text_column="text"))


# ------------------------------------------------------------------------ local files


def test_local_txt_jsonl_parquet_and_folder(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "a.txt").write_text("first line\n\nsecond line\n")
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "from jsonl", "id": 1}) + "\n")
    pq.write_table(pa.table({"text": ["from parquet", None]}), tmp_path / "c.parquet")
    (tmp_path / "ignored.csv").write_text("x")
    assert list(load_texts(tmp_path / "a.txt", split="train", text_column="text")) == ["first line", "second line"]
    assert list(load_texts(str(tmp_path), split="train", text_column="text")) == [
        "first line", "second line", "from jsonl", "from parquet"]
    with pytest.raises(ValueError, match="text_column"):
        list(load_texts(tmp_path / "b.jsonl", split="train", text_column="body"))
    with pytest.raises(ValueError, match="text_column"):
        list(load_texts(tmp_path / "c.parquet", split="train", text_column="body"))
    with pytest.raises(FileNotFoundError, match="dataset"):
        load_texts(str(tmp_path / "missing.txt"), split="train", text_column="text")
    with pytest.raises(TypeError, match="dataset"):
        load_texts(3, split="train", text_column="text")


# ------------------------------------------------------------------------------ packing


def test_rows_start_with_bos_and_pack_texts_in_order(tok):
    rows = tokenize_corpus(tok, TEXTS, context_size=8, total_tokens=80)
    assert rows.dtype == np.int32 and rows.shape == (10, 8)
    assert (rows[:, 0] == tok.bos_token_id).all()
    # the stream behind the BOS column is the texts joined by the newline token
    stream = []
    for i, text in enumerate(TEXTS):
        stream += ([3] if i else []) + tok.encode(text)
    assert rows[:, 1:].reshape(-1).tolist() == stream[: 10 * 7]


def test_bert_style_tokenizer_puts_cls_first_and_joins_with_sep():
    from transformers import AutoTokenizer

    from findbench.lm.encoder import encoder_dir

    bert = AutoTokenizer.from_pretrained(encoder_dir("embedded"))
    rows = tokenize_corpus(bert, ["the cat sat", "on the mat"] * 20, context_size=16, total_tokens=64)
    assert (rows[:, 0] == bert.cls_token_id).all()
    assert bert.sep_token_id in rows[0, 1:]  # BERT drops newlines: texts are joined by [SEP]
    assert special_token_ids(bert) == {bert.cls_token_id, bert.sep_token_id, bert.pad_token_id}
    assert bert.unk_token_id not in special_token_ids(bert)


def test_special_token_ids(tok):
    assert special_token_ids(tok) == {1, 2}


def test_too_small_corpus_names_total_tokens(tok):
    with pytest.raises(ValueError, match="total_tokens"):
        tokenize_corpus(tok, TEXTS[:5], context_size=8, total_tokens=800)


@pytest.mark.parametrize(
    ("field", "kwargs", "exc"),
    [
        ("context_size", {"context_size": 1}, ValueError),
        ("context_size", {"context_size": 8.0}, TypeError),
        ("total_tokens", {"total_tokens": 0}, ValueError),
        ("total_tokens", {"context_size": 8, "total_tokens": 4}, ValueError),
    ],
)
def test_bad_sizes_name_the_field(tok, field, kwargs, exc):
    with pytest.raises(exc, match=field):
        tokenize_corpus(tok, TEXTS, **{"context_size": 8, "total_tokens": 80, **kwargs})


def test_tokenize_is_deterministic_and_a_prefix_of_larger_runs(tok):
    a = tokenize_corpus(tok, TEXTS, context_size=8, total_tokens=80, batch_size=7)
    b = tokenize_corpus(tok, iter(TEXTS), context_size=8, total_tokens=80, batch_size=1000)
    c = tokenize_corpus(tok, TEXTS, context_size=8, total_tokens=160)
    assert np.array_equal(a, b)
    assert np.array_equal(a, c[:10])


# -------------------------------------------------------------------------------- cache


def test_corpus_tokens_cache(tok, tmp_path, monkeypatch):
    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "corpus.txt"
    data.write_text("\n".join(TEXTS) + "\n")
    first = corpus_tokens(tok, Corpus(str(data), 8, 80, "train", "text"))
    files = list((tmp_path / "cache" / "autointerp" / "tokens").glob("*.npy"))
    assert len(files) == 1 and files[0].name.startswith("words-")
    assert not list(files[0].parent.glob(".*"))  # no temporary file left

    def boom(*args, **kwargs):
        raise AssertionError("tokenized again instead of reading the cache")

    monkeypatch.setattr(corpus, "tokenize_corpus", boom)
    assert np.array_equal(corpus_tokens(tok, Corpus(str(data), 8, 80, "train", "text")), first)
    # other sizes are another cache entry
    with pytest.raises(AssertionError, match="tokenized again"):
        corpus_tokens(tok, Corpus(str(data), 8, 160, "train", "text"))
