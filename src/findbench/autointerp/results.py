"""The AutoInterp results file, typed: ``<sae>_eval_results[_<run_id>].json`` in SAEBench's keys.

:class:`AutoInterpResults` is SAEBench's ``AutoInterpEvalOutput`` layout (``eval_type_id``,
``eval_config``, ``datetime_epoch_millis``, ``eval_result_metrics``, ``eval_result_details``,
``eval_result_unstructured``) with findbench's additions (version, skipped latents, the
``latents.json`` sidecar, run id, shard, merged shards). ``eval_result_metrics`` holds one
:class:`ScorerMetrics` per scorer under SAEBench's key (:data:`METRIC_KEYS`: ``autointerp`` for
detection, else the scorer's name), written as ``<key>_score``, ``<key>_std_dev`` and the rest.
Its schema is ``findbench/data/schemas/autointerp_results.schema.json``."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from findbench._io import atomic_write_json
from findbench._typed import OMIT_NONE, JsonDoc, doc_summary
from findbench.autointerp.config import SCORERS

#: What a run id may hold (it names the run's files).
RUN_ID_PATTERN = r"[A-Za-z0-9_.-]+"
#: The largest results or latents file read back (by ``autointerp merge`` and the report): 512 MiB, about 6,000
#: latents at SAEBench's window settings (~85 KB each in ``latents.json``).
READ_MAX_BYTES = 512 << 20

#: SAEBench's key of each scorer's block in ``eval_result_metrics``.
METRIC_KEYS = {name: "autointerp" if name == "detection" else name for name in SCORERS}


def latents_name(run_id: str | None) -> str:
    """The latents file beside a run's results: ``latents.json``, or ``latents_<run_id>.json`` for a named run."""
    return f"latents_{run_id}.json" if run_id else "latents.json"


def _doc(text: str, **kwargs: Any) -> Any:
    return field(metadata={"doc": text, **kwargs.pop("metadata", {})}, **kwargs)


@dataclass(frozen=True, kw_only=True)
class ScorerMetrics(JsonDoc):
    """One scorer's block of ``eval_result_metrics``: the mean and standard deviation over the scored latents, the
    degenerate and cut explanation counts, and (once a latent is scored) the bootstrap interval, floors and margin."""

    score: float = _doc("mean score over the scored latents (SAEBench's <key>_score; NaN when none)")
    std_dev: float = _doc("their standard deviation (<key>_std_dev)")
    n_unparsed: int | None = _doc("detection: answers that could not be parsed", default=None, metadata=OMIT_NONE)
    n_degenerate: int = _doc(
        "explanations flagged degenerate: empty, copied from the prompt or identical (still scored)")
    n_explanation_truncated: int = _doc("explanations cut to the length cap")
    n: int | None = _doc("latents scored", default=None, metadata=OMIT_NONE)
    ci: tuple[float, float] | None = _doc("seeded 95 % percentile bootstrap interval of the mean over latents",
                                          default=None, metadata=OMIT_NONE)
    floors: dict[str, float] | None = _doc("scores of answers that need no explanation", default=None,
                                           metadata=OMIT_NONE)
    best_floor: str | None = _doc("the highest floor", default=None, metadata=OMIT_NONE)
    margin: float | None = _doc("mean minus the best floor", default=None, metadata=OMIT_NONE)

    @staticmethod
    def _renamed(key: str) -> dict[str, str]:
        return {"score": f"{key}_score", "std_dev": f"{key}_std_dev"}

    def block(self, key: str) -> dict[str, Any]:
        """The JSON block under SAEBench's key ``key``."""
        names = self._renamed(key)
        return {names.get(k, k): v for k, v in self.to_json().items()}

    @classmethod
    def from_block(cls, obj: Any, key: str, where: str) -> ScorerMetrics:
        """The block under ``key`` read back; ValueError naming the field otherwise."""
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        back = {v: k for k, v in cls._renamed(key).items()}
        clash = [k for k in obj if k in cls._renamed(key)]  # "score" itself is not a key of the block
        if clash:
            raise ValueError(f"{where}: unknown key {clash[0]!r}")
        return cls.from_json({back.get(k, k): v for k, v in obj.items()}, where)

    @classmethod
    def block_schema(cls, key: str, defs: dict[str, Any]) -> dict[str, Any]:
        """The JSON schema of the block under ``key``."""
        schema, names = cls._object_schema(defs), cls._renamed(key)
        return schema | {"properties": {names.get(k, k): v for k, v in schema["properties"].items()},
                         "required": [names.get(k, k) for k in schema["required"]]}


@dataclass(frozen=True)
class EvalMetrics(JsonDoc):
    """``eval_result_metrics``: one block per scorer run, under SAEBench's key (``autointerp`` for detection)."""

    blocks: dict[str, ScorerMetrics] = field(default_factory=dict)

    def __getitem__(self, key: str) -> ScorerMetrics:
        return self.blocks[key]

    def get(self, key: str) -> ScorerMetrics | None:
        return self.blocks.get(key)

    def items(self) -> Iterator[tuple[str, ScorerMetrics]]:
        return iter(self.blocks.items())

    def to_json(self) -> dict[str, Any]:
        return {key: m.block(key) for key, m in self.blocks.items()}

    @classmethod
    def from_json(cls, obj: Any, where: str | None = None) -> EvalMetrics:
        where = where or "eval_result_metrics"
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        unknown = [k for k in obj if k not in METRIC_KEYS.values()]
        if unknown:
            raise ValueError(f"{where}: unknown scorer key {unknown[0]!r} (known: {', '.join(METRIC_KEYS.values())})")
        return cls({key: ScorerMetrics.from_block(v, key, f"{where}.{key}") for key, v in obj.items()})

    @classmethod
    def _object_schema(cls, defs: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "description": doc_summary(cls),
                "properties": {key: ScorerMetrics.block_schema(key, defs) for key in METRIC_KEYS.values()},
                "additionalProperties": False}


@dataclass(frozen=True)
class Shard(JsonDoc):
    """Which shard of the selected latents a sharded run scored: positions ``p`` with ``p % count == index``."""

    index: int
    count: int


@dataclass(frozen=True)
class AutoInterpResults(JsonDoc):
    """An AutoInterp results file (``<sae>_eval_results[_<run_id>].json``): SAEBench's keys plus findbench's."""

    eval_type_id: Literal["autointerp"] = _doc("SAEBench's eval type")
    eval_config: dict[str, Any] = _doc("the run's AutoInterpConfig (to_dict) with model_name, sae, hook_name, layer, "
                                       "explainer, scorer and structured_outputs_applied")
    datetime_epoch_millis: int = _doc("when the file was written")
    findbench_version: str = _doc("the findbench that wrote it")
    eval_result_metrics: EvalMetrics = _doc("one block per scorer")
    eval_result_details: list[Any] = _doc("SAEBench's per-detail results (none for AutoInterp)")
    eval_result_unstructured: dict[str, dict[str, Any]] = _doc("per scored latent: explanation, flags, each scorer's "
                                                               "score and answer")
    skipped_latents: dict[str, str] = _doc("latent → why it was not explained (too few activations)")
    latents_file: str = _doc("the latents.json sidecar beside it (windows, picks, histograms)")
    run_id: str | None = _doc("the run's --run-id")
    shard: Shard | None = _doc("the shard a sharded run scored (null when unsharded)")
    merged_from: list[str] | None = _doc("the shard folders `autointerp merge` joined", default=None,
                                         metadata=OMIT_NONE)

    JSON_NAME = "AutoInterp results"

    @classmethod
    def from_json(cls, obj: Any, where: str | None = None) -> AutoInterpResults:
        """The results read back (:meth:`JsonDoc.from_json`), their ``run_id`` letters, digits, ``_``, ``.`` or
        ``-`` and their ``latents_file`` :func:`latents_name` of it: a name beside the file, never a path."""
        results = super().from_json(obj, where)
        where = where or cls.JSON_NAME
        if results.run_id is not None and not re.fullmatch(RUN_ID_PATTERN, results.run_id):
            raise ValueError(f"{where}.run_id: expected letters, digits, '_', '.' or '-', got {results.run_id!r}")
        if results.latents_file != latents_name(results.run_id):
            raise ValueError(f"{where}.latents_file: expected {latents_name(results.run_id)!r} (beside the results "
                             f"file), got {results.latents_file!r}")
        return results

    def write(self, path: str | os.PathLike) -> None:
        """Write the file atomically (keys sorted, as findbench's JSON files)."""
        atomic_write_json(path, self.to_json())

    @property
    def scorers(self) -> list[str]:
        """The scorers the run used (``eval_config['scorers']``)."""
        return list(self.eval_config.get("scorers") or [])

