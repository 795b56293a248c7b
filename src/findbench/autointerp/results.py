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
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter
from pydantic_core import core_schema
from typing_extensions import NotRequired

from findbench._io import atomic_write_json
from findbench._typed import JsonDoc, document, json_form, omit_none, validate
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


@document(frozen=True, kw_only=True)
class ScorerMetrics(JsonDoc):
    """One scorer's block of ``eval_result_metrics``: the mean and standard deviation over the scored latents, the
    degenerate and cut explanation counts, and (once a latent is scored) the bootstrap interval, floors and margin."""

    score: float = Field(description="mean score over the scored latents (SAEBench's <key>_score; NaN when none)")
    std_dev: float = Field(description="their standard deviation (<key>_std_dev)")
    n_unparsed: int | None = omit_none("detection: answers that could not be parsed")
    n_degenerate: int = Field(description=
        "explanations flagged degenerate: empty, copied from the prompt or identical (still scored)")
    n_explanation_truncated: int = Field(description="explanations cut to the length cap")
    n: int | None = omit_none("latents scored")
    ci: tuple[float, float] | None = omit_none("seeded 95 % percentile bootstrap interval of the mean over latents")
    floors: dict[str, float] | None = omit_none("scores of answers that need no explanation")
    best_floor: str | None = omit_none("the highest floor")
    margin: float | None = omit_none("mean minus the best floor")

    @staticmethod
    def _renamed(key: str) -> dict[str, str]:
        return {"score": f"{key}_score", "std_dev": f"{key}_std_dev"}

    def block(self, key: str) -> dict[str, Any]:
        """The JSON block under SAEBench's key ``key``."""
        return {self._renamed(key).get(k, k): v for k, v in self.to_json().items()}

    @classmethod
    def block_form(cls, key: str) -> Any:
        """The JSON form of the block under ``key``: a TypedDict of its keys (those left out while None not
        required)."""
        names, keys = cls._renamed(key), {}
        for name, f in cls.__pydantic_fields__.items():  # type: ignore[attr-defined]
            value = Annotated[f.annotation, Field(description=f.description)]
            keys[names.get(name, name)] = value if f.is_required() else NotRequired[value]
        return json_form(f"{key}_metrics", keys, cls.__doc__)


@dataclass(frozen=True)
class EvalMetrics:
    """``eval_result_metrics``: one block per scorer run, under SAEBench's key (``autointerp`` for detection)."""

    blocks: dict[str, ScorerMetrics] = field(default_factory=dict)

    def __getitem__(self, key: str) -> ScorerMetrics:
        return self.blocks[key]

    def get(self, key: str) -> ScorerMetrics | None:
        return self.blocks.get(key)

    def to_json(self) -> dict[str, Any]:
        return {key: m.block(key) for key, m in self.blocks.items()}

    @classmethod
    def from_json(cls, obj: Any, where: str | None = None) -> EvalMetrics:
        """The blocks read strictly (:func:`findbench._typed.validate`); ValueError naming the key otherwise."""
        return cls._of(validate(TypeAdapter(_METRICS_FORM), obj, where or "eval_result_metrics"))

    @classmethod
    def _of(cls, form: dict[str, dict[str, Any]]) -> EvalMetrics:
        back = {key: {v: k for k, v in ScorerMetrics._renamed(key).items()} for key in form}
        return cls({key: ScorerMetrics(**{back[key].get(k, k): v for k, v in block.items()})
                    for key, block in form.items()})

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """In a document: read from its JSON form, written as :meth:`to_json`, described by the form's schema."""
        from_form = core_schema.no_info_after_validator_function(cls._of, handler(_METRICS_FORM))
        return core_schema.json_or_python_schema(
            from_form, core_schema.union_schema([core_schema.is_instance_schema(cls), from_form]),
            serialization=core_schema.plain_serializer_function_ser_schema(cls.to_json))


#: The JSON form of ``eval_result_metrics``: a block per scorer under its key.
_METRICS_FORM = json_form("EvalMetrics", {key: NotRequired[ScorerMetrics.block_form(key)]
                                          for key in METRIC_KEYS.values()}, EvalMetrics.__doc__)


@document(frozen=True)
class Shard(JsonDoc):
    """Which shard of the selected latents a sharded run scored: positions ``p`` with ``p % count == index``."""

    index: int
    count: int


@document(frozen=True)
class AutoInterpResults(JsonDoc):
    """An AutoInterp results file (``<sae>_eval_results[_<run_id>].json``): SAEBench's keys plus findbench's."""

    eval_type_id: Literal["autointerp"] = Field(description="SAEBench's eval type")
    eval_config: dict[str, Any] = Field(description="the run's AutoInterpConfig (to_dict) with model_name, sae, "
                                        "hook_name, layer, explainer, scorer and structured_outputs_applied")
    datetime_epoch_millis: int = Field(description="when the file was written")
    findbench_version: str = Field(description="the findbench that wrote it")
    eval_result_metrics: EvalMetrics = Field(description="one block per scorer")
    eval_result_details: list[Any] = Field(description="SAEBench's per-detail results (none for AutoInterp)")
    eval_result_unstructured: dict[str, dict[str, Any]] = Field(
        description="per scored latent: explanation, flags, each scorer's score and answer")
    skipped_latents: dict[str, str] = Field(description="latent → why it was not explained (too few activations)")
    latents_file: str = Field(description="the latents.json sidecar beside it (windows, picks, histograms)")
    run_id: str | None = Field(description="the run's --run-id")
    shard: Shard | None = Field(description="the shard a sharded run scored (null when unsharded)")
    merged_from: list[str] | None = omit_none("the shard folders `autointerp merge` joined")

    JSON_NAME = "AutoInterp results"

    def __post_init__(self) -> None:
        """Its ``run_id`` letters, digits, ``_``, ``.`` or ``-`` and its ``latents_file`` :func:`latents_name` of it:
        a name beside the file, never a path."""
        if self.run_id is not None and not re.fullmatch(RUN_ID_PATTERN, self.run_id):
            raise ValueError(f"run_id: expected letters, digits, '_', '.' or '-', got {self.run_id!r}")
        if self.latents_file != latents_name(self.run_id):
            raise ValueError(f"latents_file: expected {latents_name(self.run_id)!r} (beside the results file), got "
                             f"{self.latents_file!r}")

    def write(self, path: str | os.PathLike) -> None:
        """Write the file atomically (keys sorted, as findbench's JSON files)."""
        atomic_write_json(path, self.to_json())

    @property
    def scorers(self) -> list[str]:
        """The scorers the run used (``eval_config['scorers']``)."""
        return list(self.eval_config.get("scorers") or [])

