"""The text corpus that SAE latents are trained and explained on, tokenized SAEBench-style.

:func:`load_texts` yields English texts from ``"wordnet"`` (the default: one text per synset of
WordNet 3.0, ``"lemma, lemma: definition; "example""``, from Debian's ``wordnet-base``; 117,659
synsets, 2,754,288 SmolLM2 tokens, enough for SAEBench's 2 M), a Hugging Face dataset id
(streamed), or a local ``.txt`` / ``.jsonl`` / ``.parquet`` file or folder of them.
:func:`tokenize_corpus` packs consecutive texts into rows of ``context_size`` tokens with BOS at
column 0 (SAEBench's layout); :func:`corpus_tokens` caches the rows under
``~/.cache/findbench/autointerp/tokens``.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from findbench import _checks
from findbench._io import atomic_write_bytes, cache_dir
from findbench.autointerp.config import Corpus
from findbench.wordnet import WORDNET_FILES, WORDNET_LICENSE, parse_wordnet_line, wordnet_dir

log = logging.getLogger(__name__)

#: Name of the default corpus.
WORDNET = "wordnet"
_TEXT_SUFFIXES = (".txt", ".jsonl", ".parquet")
#: Bumped when texts or packing change, so cached token files are rebuilt.
_CORPUS_VERSION = "v1"


def wordnet_texts(dict_dir: str | os.PathLike | None = None) -> Iterator[str]:
    """The texts of every synset, in file order (``data.noun``, ``data.verb``, ``data.adj``,
    ``data.adv``; files that are missing are skipped, ``data.noun`` must exist)."""
    folder = wordnet_dir(dict_dir)
    for path in [folder / name for name in WORDNET_FILES if (folder / name).is_file()]:
        with path.open(encoding="utf-8", errors="replace") as fh:
            yield from (synset.text for synset in map(parse_wordnet_line, fh)
                        if synset is not None and synset.definition)


def _local_files(path: Path) -> list[Path]:
    if path.is_file():
        if path.suffix not in _TEXT_SUFFIXES:
            raise ValueError(f"dataset: {path} is not a {'/'.join(_TEXT_SUFFIXES)} file")
        return [path]
    if not (files := sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _TEXT_SUFFIXES)):
        raise ValueError(f"dataset: folder {path} holds no {'/'.join(_TEXT_SUFFIXES)} files")
    return files


def _file_texts(path: Path, text_column: str) -> Iterator[str]:
    if path.suffix == ".txt":
        with path.open(encoding="utf-8", errors="replace") as fh:
            yield from (line.rstrip("\n") for line in fh if line.strip())
    elif path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                if text_column not in row:
                    raise ValueError(f"text_column: {path}:{n} has no field {text_column!r} (fields: {sorted(row)})")
                yield str(row[text_column])
    else:
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        if text_column not in pf.schema_arrow.names:
            raise ValueError(f"text_column: {path} has no column {text_column!r} (columns: {pf.schema_arrow.names})")
        yield from (str(text) for batch in pf.iter_batches(columns=[text_column])
                    for text in batch.column(0).to_pylist() if text)


def _hub_texts(dataset: str, split: str, text_column: str) -> Iterator[str]:
    import datasets

    dataset, colon, name = dataset.partition(":")  # "org/ds:config"
    for row in datasets.load_dataset(dataset, name if colon else None, split=split, streaming=True):
        if text_column not in row:
            raise ValueError(f"text_column: dataset {dataset!r} has no field {text_column!r} (fields: {sorted(row)})")
        if row[text_column]:
            yield str(row[text_column])


def load_texts(dataset: str | os.PathLike, *, split: str, text_column: str) -> Iterator[str]:
    """English texts from ``dataset``, in a fixed order: ``"wordnet"``, a local ``.txt``/``.jsonl``/``.parquet``
    file or folder, or a Hugging Face dataset id (``"org/name[:config]"``, streamed)."""
    _checks.instance("dataset", dataset, (str, os.PathLike), "a string or path")
    for name, value in (("text_column", text_column), ("split", split)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    if dataset == WORDNET:
        return wordnet_texts()
    if (path := Path(dataset)).exists():
        return (text for f in _local_files(path) for text in _file_texts(f, text_column))
    if not (text := os.fspath(dataset)) or text.startswith((".", "/", "~")) or path.suffix in _TEXT_SUFFIXES:
        raise FileNotFoundError(f"dataset: no such file or folder {text!r}")
    return _hub_texts(text, split, text_column)


def corpus_description(dataset: str | os.PathLike) -> dict[str, str]:
    """Name, source and licence of a corpus, for model cards."""
    if dataset == WORDNET:
        return {
            "name": "WordNet 3.0 glosses (definitions and examples of every synset)",
            "source": "Debian package wordnet-base (https://wordnet.princeton.edu)",
            "license": WORDNET_LICENSE,
        }
    if (path := Path(dataset)).exists():
        return {"name": path.name, "source": f"local files ({path})", "license": "as the files' owner states"}
    return {
        "name": str(dataset),
        "source": f"Hugging Face dataset {dataset} (streamed)",
        "license": "see the dataset's card",
    }


def _bos_id(tokenizer: Any) -> int:
    ids = _ids(tokenizer, "bos_token_id", "cls_token_id")
    if not ids:
        raise ValueError("tokenizer has neither bos_token_id nor cls_token_id: column 0 needs one of them")
    return ids[0]


def _ids(tokenizer: Any, *attrs: str) -> list[int]:
    """The tokenizer's ids named ``attrs`` that it has, in their order."""
    return [int(value) for value in (getattr(tokenizer, attr, None) for attr in attrs) if value is not None]


def _separator_ids(tokenizer: Any) -> list[int]:
    """Tokens between two texts: a newline where the tokenizer keeps it as one ordinary token
    (byte-level BPE: SmolLM2, GPT-2, Llama), else EOS / SEP (BERT drops whitespace)."""
    ids = tokenizer.encode("\n", add_special_tokens=False)
    return list(ids) if len(ids) == 1 and ids[0] not in special_token_ids(tokenizer) else _ids(
        tokenizer, "eos_token_id", "sep_token_id")[:1]


def special_token_ids(tokenizer: Any) -> set[int]:
    """Ids of the BOS, EOS, PAD, CLS and SEP tokens: positions that never count as activations.
    (UNK stands for real text, so it is not in the set.)"""
    return {int(value) for value in (getattr(tokenizer, attr, None) for attr in (
        "bos_token_id", "eos_token_id", "pad_token_id", "cls_token_id", "sep_token_id")) if isinstance(value, int)}


def tokenize_corpus(
    tokenizer: Any,
    texts: Iterable[str],
    *,
    context_size: int,
    total_tokens: int,
    batch_size: int = 1000,
) -> np.ndarray:
    """Pack the tokens of consecutive ``texts`` into ``total_tokens // context_size`` int32 rows, each
    BOS (or CLS) then ``context_size - 1`` tokens; texts are joined by a newline token (or EOS/SEP)
    and run on into the next row."""
    _checks.integer("context_size", context_size, 2)
    _checks.positive_int("total_tokens", total_tokens)
    rows = total_tokens // context_size
    if rows < 1:
        raise ValueError(f"total_tokens ({total_tokens}) must be at least context_size ({context_size})")
    bos, sep = _bos_id(tokenizer), _separator_ids(tokenizer)
    need = rows * (context_size - 1)
    chunks: list[np.ndarray] = []  # each text's tokens, the separator before all but the first
    have = 0
    texts = iter(texts)
    while have < need and (batch := list(itertools.islice(texts, batch_size))):
        if wrong := [type(text).__name__ for text in batch if not isinstance(text, str)]:
            raise TypeError(f"texts must be strings, got {wrong[0]}")
        for ids in tokenizer(batch, add_special_tokens=False)["input_ids"]:
            if ids:
                chunks.append(np.asarray([*(sep if chunks else []), *ids], dtype=np.int32))
                have += len(chunks[-1])
    if have < need:
        raise ValueError(
            f"total_tokens: the corpus holds {have} tokens ({len(chunks)} texts) but {rows} rows of "
            f"{context_size} (total_tokens={total_tokens}) need {need} corpus tokens besides BOS; "
            "lower total_tokens or use a larger dataset"
        )
    return np.concatenate([np.full((rows, 1), bos, dtype=np.int32),
                           np.concatenate(chunks)[:need].reshape(rows, context_size - 1)], axis=1)


def _tokenizer_key(tokenizer: Any) -> str:
    digest = hashlib.sha256(json.dumps(sorted(tokenizer.get_vocab().items()), ensure_ascii=False).encode("utf-8"))
    digest.update(repr((_bos_id(tokenizer), _separator_ids(tokenizer))).encode())
    name = Path(str(getattr(tokenizer, "name_or_path", "") or "tokenizer")).name or "tokenizer"
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}-{digest.hexdigest()[:12]}"


def _dataset_key(dataset: str | os.PathLike, split: str, text_column: str) -> str:
    text = os.fspath(dataset)
    if (path := Path(text)).exists():
        # local files: the key follows their content's size and mtime
        stats = [(str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in _local_files(path)]
        return (f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', path.name)}-{hashlib.sha256(repr(stats).encode()).hexdigest()[:12]}"
                f"-{text_column}")
    if text == WORDNET:
        # the installed files decide the texts ($WNSEARCHDIR may point elsewhere)
        folder = wordnet_dir()
        stats = [(str(folder / n), (folder / n).stat().st_size) for n in WORDNET_FILES if (folder / n).is_file()]
        return f"{WORDNET}-{hashlib.sha256(repr(stats).encode()).hexdigest()[:8]}"
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', text)}-{split}-{text_column}"


def corpus_tokens(tokenizer: Any, corpus: Corpus) -> np.ndarray:
    """:func:`tokenize_corpus` over :func:`load_texts` of a config's ``corpus`` with ``tokenizer``, cached under
    ``cache_dir("autointerp", "tokens")``."""
    dataset, context_size, total_tokens, split, text_column = corpus
    path = cache_dir("autointerp", "tokens") / (
        f"{_tokenizer_key(tokenizer)}__{_dataset_key(dataset, split, text_column)}"
        f"__{context_size}x{total_tokens}__{_CORPUS_VERSION}.npy"
    )
    if path.is_file():
        try:
            if (arr := np.load(path)).dtype == np.int32 and arr.shape == (total_tokens // context_size, context_size):
                return arr
        except (OSError, ValueError):
            pass
        log.warning("cached tokens %s are unreadable; rebuilding", path)
    arr = tokenize_corpus(tokenizer, load_texts(dataset, split=split, text_column=text_column),
                          context_size=context_size, total_tokens=total_tokens)
    buf = io.BytesIO()
    np.save(buf, arr)
    atomic_write_bytes(path, buf.getvalue())
    return arr
