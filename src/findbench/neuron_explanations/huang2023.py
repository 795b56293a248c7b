"""Import of the observational test set released with Huang et al. (2023).

Source: github.com/explanare/eval-neuron-explanation, ``eval_data.tar.gz`` with one member,
``observational_eval_data.json``: 255 GPT-2 XL neurons ("layer:index"), each with its GPT-4
explanation and ``eval_data`` items ``{test_input, test_tokens, neuron_activations, label}``.
``test_tokens`` and ``neuron_activations`` are Python-literal list strings; they are parsed
with :func:`ast.literal_eval` (literals only, never ``eval``).

Label semantics (checked against the data): ``true_positive`` and ``false_positive`` items
are in the explanation's denotation (the explanation predicts firing), ``true_positive`` and
``false_negative`` items make the neuron fire. With firing = max span activation > 0, 9,580
of the 9,592 labels agree with the released activations (12 disagree by a hair or sit on a
token/activation length mismatch). So ``in_explanation = label in {TP, FP}``.

Blocks: the release does not store which half of the paper's test set an item came from.
Per neuron the items are ordered: first the *explanation* block (strings generated from the
explanation, judged in-denotation or not: TN/FP items, then TP items), then the
*activating* block (top-activating corpus spans, judged: FN/TP, occasionally FP). The
boundary lies after the last leading TN/FP and at or before the first FN, inside a run of
TPs; we place it at ``len(items) - 20`` (the paper's 20 activating spans per neuron) clamped
into that range. 241 of the 255 neurons have ``len - 20`` inside the range; for the others
the clamp is used. ``block`` is therefore an inference, not a released field.

Length mismatches: 36 items have more tokens than activations or vice versa. They are kept
unchanged (the released label was computed from the activations, which the F1 metric uses)
and flagged with ``length_mismatch``.
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
RELEASE_URL = (
    "https://github.com/explanare/eval-neuron-explanation/raw/"
    "300eea4eddb13c6a7109f2af10aca8c17be7b87e/eval_data.tar.gz"
)
MEMBER = "observational_eval_data.json"
LABELS = ("true_positive", "false_positive", "false_negative", "true_negative")
IN_DENOTATION = frozenset({"true_positive", "false_positive"})
FIRING = frozenset({"true_positive", "false_negative"})
ACTIVATING_PER_NEURON = 20


def parse_literal_list(text: str, field: str, kind: type) -> list:
    """Parse a Python-literal list string safely; ``ValueError`` naming ``field`` otherwise."""
    if isinstance(text, list):
        value = text
    else:
        if not isinstance(text, str):
            raise ValueError(f"{field}: expected a list literal string, got {type(text).__name__}")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError) as exc:
            raise ValueError(f"{field}: not a Python literal list: {text[:60]!r}") from exc
    if not isinstance(value, list):
        raise ValueError(f"{field}: expected a list, got {type(value).__name__}")
    if kind is float:
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            raise ValueError(f"{field}: expected a list of numbers")
        return [float(v) for v in value]
    if not all(isinstance(v, kind) for v in value):
        raise ValueError(f"{field}: expected a list of {kind.__name__}")
    return value


def _find_source(data_dir: str | os.PathLike | None) -> Path:
    if data_dir is not None:
        path = Path(data_dir)
        for cand in (path, path / MEMBER, path / "eval_data.tar.gz"):
            if cand.is_file():
                return cand
        raise FileNotFoundError(f"data_dir: neither {MEMBER} nor eval_data.tar.gz found in {path}")
    from findbench._io import cache_dir

    dest = cache_dir("huang2023") / "eval_data.tar.gz"
    if not dest.is_file():
        import requests

        log.info("downloading %s", RELEASE_URL)
        resp = requests.get(RELEASE_URL, timeout=60)
        resp.raise_for_status()
        tmp = dest.with_name(dest.name + f".part-{os.getpid()}")
        tmp.write_bytes(resp.content)
        os.replace(tmp, dest)
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
    lo = 0
    while lo < n and labels[lo] in ("true_negative", "false_positive"):
        lo += 1
    hi = lo
    while hi < n and labels[hi] == "true_positive":
        hi += 1
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
