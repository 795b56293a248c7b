"""Import of the observational test set released with Huang et al. (2023).

Source: github.com/explanare/eval-neuron-explanation, ``eval_data.tar.gz`` (member
``observational_eval_data.json``): 255 GPT-2 XL neurons ("layer:index"), each with its GPT-4
explanation and ``eval_data`` items ``{test_input, test_tokens, neuron_activations, label}``; the
list fields are Python literals, parsed with :func:`ast.literal_eval` (never ``eval``).

Labels: ``true_positive`` / ``false_positive`` items are in the explanation's denotation,
``true_positive`` / ``false_negative`` ones make the neuron fire (max activation > 0 agrees with
9,580 of 9,592 labels).

``block`` is inferred, not released: per neuron the *explanation* block (TN/FP, then TP items)
comes before the *activating* block (FN/TP); the boundary is ``len(items) - 20`` (the paper's 20
activating spans) clamped to lie after the last leading TN/FP and within the following run of TPs
(241 of 255 neurons need no clamp). 36 items whose token and activation counts differ are kept
and flagged ``length_mismatch``.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

#: Tarball of the release at the commit the anchors were taken from.
RELEASE_URL = "https://github.com/explanare/eval-neuron-explanation/raw/300eea4eddb13c6a7109f2af10aca8c17be7b87e/eval_data.tar.gz"
MEMBER = "observational_eval_data.json"
LABELS = ("true_positive", "false_positive", "false_negative", "true_negative")
IN_DENOTATION = frozenset({"true_positive", "false_positive"})
FIRING = frozenset({"true_positive", "false_negative"})
ACTIVATING_PER_NEURON = 20


def parse_literal_list(text: str, field: str, kind: type) -> list:
    """Parse a Python-literal list string safely; ``ValueError`` naming ``field`` otherwise."""
    if not isinstance(text, (list, str)):
        raise ValueError(f"{field}: expected a list literal string, got {type(text).__name__}")
    try:
        value = text if isinstance(text, list) else ast.literal_eval(text)
    except (ValueError, SyntaxError) as exc:
        raise ValueError(f"{field}: not a Python literal list: {text[:60]!r}") from exc
    numbers = kind is float  # ints and floats, not bools, read as floats
    if not isinstance(value, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) if numbers else isinstance(v, kind) for v in value
    ):
        raise ValueError(f"{field}: expected a list of {'numbers' if numbers else kind.__name__}, got {text[:60]!r}")
    return [float(v) for v in value] if numbers else value


def _find_source(data_dir: str | os.PathLike | None) -> Path:
    if data_dir is not None:
        path = Path(data_dir)
        for cand in (path, path / MEMBER, path / "eval_data.tar.gz"):
            if cand.is_file():
                return cand
        raise FileNotFoundError(f"data_dir: neither {MEMBER} nor eval_data.tar.gz found in {path}")
    from findbench._io import atomic_write_bytes, cache_dir

    dest = cache_dir("huang2023") / "eval_data.tar.gz"
    if not dest.is_file():
        import requests

        log.info("downloading %s", RELEASE_URL)
        resp = requests.get(RELEASE_URL, timeout=60)
        resp.raise_for_status()
        atomic_write_bytes(dest, resp.content)
    return dest


def load_release(data_dir: str | os.PathLike | None = None) -> list[dict]:
    """The raw release records: from ``data_dir`` (a folder with the tarball or the JSON, or
    either file itself), or downloaded from :data:`RELEASE_URL` into the cache."""
    src = _find_source(data_dir)
    if src.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(src, "r:gz") as tar:
            member = next((m for m in tar.getmembers() if Path(m.name).name == MEMBER), None)
            if member is None or not member.isfile():
                raise ValueError(f"data_dir: {src} has no member {MEMBER}")
            records = json.load(tar.extractfile(member))
    else:
        records = json.loads(src.read_text(encoding="utf-8"))
    if not isinstance(records, list):
        raise ValueError(f"{src}: expected a JSON list of neuron records")
    return records


def _block_boundary(labels: list[str]) -> int:
    n = len(labels)
    lo = next((i for i in range(n) if labels[i] not in ("true_negative", "false_positive")), n)
    hi = next((i for i in range(lo, n) if labels[i] != "true_positive"), n)
    return min(max(n - ACTIVATING_PER_NEURON, lo), hi)


def iter_items(records: list[dict]) -> Iterator[dict]:
    """Rows of the ``huang2023`` config, one per (neuron, item), in release order."""
    for r_i, rec in enumerate(records):
        for key in ("neuron", "gpt4_explanation", "eval_data"):
            if key not in rec:
                raise ValueError(f"records[{r_i}] lacks the field {key!r}")
        neuron = str(rec["neuron"])
        layer, _, index = neuron.partition(":")
        if not (layer.isdigit() and index.isdigit()):
            raise ValueError(f"records[{r_i}].neuron must be 'layer:index', got {neuron!r}")
        labels = [it.get("label") for it in rec["eval_data"]]
        bad = [lab for lab in labels if lab not in LABELS]
        if bad:
            raise ValueError(f"records[{r_i}].eval_data label must be one of {LABELS}, got {bad[0]!r}")
        boundary = _block_boundary(labels)
        for i, it in enumerate(rec["eval_data"]):
            where = f"records[{r_i}].eval_data[{i}]"
            tokens = parse_literal_list(it.get("test_tokens"), f"{where}.test_tokens", str)
            values = parse_literal_list(it.get("neuron_activations"), f"{where}.neuron_activations", float)
            if not values:
                raise ValueError(f"{where}.neuron_activations is empty")
            label = it["label"]
            yield {
                "neuron": neuron,
                "layer": int(layer),
                "neuron_index": int(index),
                "explanation": str(rec["gpt4_explanation"]),
                "item_index": i,
                "sentence": str(it.get("test_input", "")),
                "span_tokens": tokens,
                "activations": values,
                "max_activation": max(values),
                "label": label,
                "in_explanation": label in IN_DENOTATION,
                "fires": label in FIRING,
                "block": "explanation" if i < boundary else "activating",
                "length_mismatch": len(tokens) != len(values),
            }
