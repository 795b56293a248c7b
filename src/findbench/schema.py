"""The FIND dataset schema: one typed row per function, shared by every config and source.

Every config (``numeric``, ``strings``, ``neurons_entities``, ``neurons_relations``) and both
sources (``procedural`` and ``find-v1``) fill the same columns, so a metric or an interpreter
harness never needs to know where a row came from. Fields that do not apply to a category are
``None`` (scalars) or empty (lists).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

CATEGORIES = ("numeric", "strings", "neurons_entities", "neurons_relations")
#: The white-box config: compiled RASP programs (``findbench.find.rasp``); its rows have the
#: common columns plus :data:`RASP_COLUMNS`.
RASP = "rasp"
CONFIGS = (*CATEGORIES, RASP)
SOURCES = ("procedural", "find-v1")

#: Column -> (datasets feature type, documentation). The order is the column order on disk.
COLUMNS: dict[str, tuple[Any, str]] = {
    "function_id": ("string", 'Stable id "<category>/fNNNNN", e.g. "numeric/f00042".'),
    "category": ("string", "One of numeric, strings, neurons_entities, neurons_relations."),
    "subcategory": (
        "string",
        "atomic / composition / mlp / noise / corruption (numeric), atomic / composition (strings, entities), "
        "atomic / corruption (relations).",
    ),
    "name": ("string", "Short machine-readable name of the function, e.g. 'relu' or 'reverse∘uppercase'."),
    "params": ("string", "JSON text with every parameter needed to rebuild the function."),
    "code": ("string", "Self-contained Python source defining function(x) (numeric, strings). Empty for neurons."),
    "description": ("string", "Ground-truth natural-language description."),
    "source": ("string", "procedural (findbench generator) or find-v1 (import of the original release)."),
    "domain_low": ("float64", "Lower end of the numeric domain (numeric only)."),
    "domain_high": ("float64", "Upper end of the numeric domain (numeric only)."),
    "noise_type": ("string", "normal / uniform / poisson, or null (numeric only)."),
    "corruption_type": ("string", "below / above / inside (the domain part replaced by noise), or null."),
    "corruption_params": ("string", "JSON text: boundary (list of floats) and the replacement mean/std, or null."),
    "test_inputs": (["string"], "Inputs chosen to reveal the behaviour (strings: 10 test strings)."),
    "unit_tests": (
        [{"inputs": ["string"], "outputs": ["string"], "correct": "int32"}],
        "10 triplets: 3 candidate inputs, their outputs (null for entities) and the 1-based index of the one that "
        "matches the function.",
    ),
    "unit_tests_near": (
        [{"inputs": ["string"], "outputs": ["string"], "correct": "int32"}],
        "10 near-miss triplets, as unit_tests but with distractors from near misses of the function: "
        "the same input with a near miss's output (strings, relations) or words of the nearest concepts (entities). "
        "Empty for numeric and find-v1.",
    ),
    "exemplars": (["string"], "Initial exemplar inputs for MILAN-style interpreters (neurons)."),
    "concept1": ("string", "Entity concept or relation input kind (neurons)."),
    "concept2": ("string", "Second entity concept (OR composition) or relation output kind (neurons)."),
    "exception": ("string", "Relation corruption clause: the subdomain answered 'undefined' (neurons)."),
    "backbone": ("string", "Backbone the neuron runs on by default: embedding / table / lm (neurons)."),
    "prompt": ("string", "FIND prompt the lm backbone uses (neurons)."),
}


#: The ``rasp`` config's own columns (ground truth; never shown to an interpreter but ``domain``).
RASP_COLUMNS: dict[str, tuple[Any, str]] = {
    "domain": ("string", "JSON text: vocab, min_len, max_len, bos, preconditions, tolerance (numerical outputs)."),
    "program": ("string", "JSON text: the RASP program spec (ops over the named registry; ground truth)."),
    "components": (
        [{"hook": "string", "layer": "int32", "head": "int32", "units": ["int32"], "variable": "string",
          "op": "string", "reads": ["string"], "role": "string"}],
        "One entry per attention head and MLP hidden-unit group of the aligned model: hook name, layer, head or "
        "units, the variable it computes, its RASP op, the variables it reads, and its role (map, sequence_map, "
        "linear_map, mover, averager, counter, inactive).",
    ),
    "variable_values": ("string", "JSON text: per test input, every variable's value at each position."),
    "weights_sha256": ("string", "sha256 of the compiled weights and residual labels (checked on load)."),
    "split": ("string", "dev (tracr's public library programs, never in a headline score) or test."),
}


def _to_feature(spec: Any):
    from datasets import List, Value

    if isinstance(spec, str):
        return Value(spec)
    if isinstance(spec, list):
        return List(_to_feature(spec[0]))
    if isinstance(spec, dict):
        return {k: _to_feature(v) for k, v in spec.items()}
    raise TypeError(f"bad feature spec {spec!r}")


def features(config: str | None = None):
    """The ``datasets.Features`` of a FIND config (``rasp`` adds :data:`RASP_COLUMNS`)."""
    from datasets import Features

    columns = COLUMNS | (RASP_COLUMNS if config == RASP else {})
    return Features({name: _to_feature(spec) for name, (spec, _doc) in columns.items()})


def empty_row(**values: Any) -> dict[str, Any]:
    """A row with every column present (None / [] defaults), updated with ``values``; ValueError
    naming any unknown column."""
    unknown = set(values) - set(COLUMNS)
    if unknown:
        raise ValueError(f"unknown column(s) {sorted(unknown)}; known: {list(COLUMNS)}")
    return {name: [] if isinstance(spec, list) else None for name, (spec, _doc) in COLUMNS.items()} | values


def dumps(obj: Any) -> str:
    """Canonical JSON text for ``params`` / ``corruption_params`` (sorted keys, stable floats)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def function_id(category: str, index: int) -> str:
    if category not in CONFIGS:
        raise ValueError(f"category must be one of {CONFIGS}, got {category!r}")
    return f"{category}/f{index:05d}"


def parse_function_id(fid: str) -> tuple[str, int]:
    """Split ``"numeric/f00042"`` into ``("numeric", 42)``; ValueError naming the id otherwise."""
    if not isinstance(fid, str) or "/" not in fid:
        raise ValueError(f"function_id must look like 'numeric/f00042', got {fid!r}")
    category, _, local = fid.partition("/")
    if category not in CONFIGS or not (local.startswith("f") and local[1:].isdigit()):
        raise ValueError(f"function_id must look like '<category>/fNNNNN' with category in {CONFIGS}, got {fid!r}")
    return category, int(local[1:])


def check_row(row: Mapping[str, Any]) -> None:
    """Validate a row against the schema; ValueError naming the first bad field."""
    missing = [c for c in COLUMNS if c not in row]
    if missing:
        raise ValueError(f"row is missing column(s) {missing}")
    parse_function_id(row["function_id"])
    for name in ("params", "corruption_params"):
        if row[name] is not None:
            try:
                json.loads(row[name])
            except (TypeError, json.JSONDecodeError) as exc:
                raise ValueError(f"row[{name!r}] of {row['function_id']} is not JSON text: {exc}") from None
    for column in ("unit_tests", "unit_tests_near"):
        for k, ut in enumerate(row[column] or []):
            n = len(ut["inputs"])
            if ut.get("outputs") is not None and len(ut["outputs"]) != n:
                raise ValueError(f"{column}[{k}] of {row['function_id']}: outputs and inputs differ in length")
            if not 1 <= int(ut["correct"]) <= n:
                raise ValueError(f"{column}[{k}].correct of {row['function_id']} must be in 1..{n}")
