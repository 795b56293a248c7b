"""The settings of ``findbench iia``, each written once: the command line makes a flag of every
field and ``__post_init__`` checks each one (naming the flag) before a model is loaded."""

from __future__ import annotations

import json
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any

from findbench import _checks
from findbench._config import Csv, arg
from findbench.constants import UsageError


def _numbers(name: str, value: Any) -> list:
    """A comma-separated string, or a list of strings or of numbers (Python callers), as a list."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return list(value)
    return _checks.str_list(name, value)


@dataclass
class IIAConfig:
    """IIA@K sweep of interchange interventions on MLP neurons (JSON + PNG)"""

    task: Csv = arg(MISSING, "comma-separated task names, e.g. numbers/unit_conversion")
    layer: Csv = arg(MISSING, "comma-separated layers")
    model: str = arg("embedded", "model under study")
    out: str | None = arg(None, "folder for iia.json and iia.png")
    n_pairs: int = arg(256, "base/source pairs per task")
    ks: Csv = arg("1,6,12,25,50,75,100", "percentages of the layer's neurons")
    rankings: Csv = arg("random,correlation", "built-in rankings (random, correlation)")
    ranking_file: str | None = arg(None, "JSON {name: [neuron indices, best first]} of extra rankings")
    position: str = arg("auto", "token position intervened on", choices=["auto", "concept", "last"])
    site: str = arg("mlp_activation", "activation intervened on", choices=["mlp_activation", "block_output"])
    seed: int = arg(0, "seed of the pairs and the random ranking")
    batch_size: int = arg(64, "pairs per forward pass")

    def __post_init__(self) -> None:
        self.task, self.rankings = _checks.str_list("--task", self.task), _checks.str_list("--rankings", self.rankings)
        try:
            self.layers = [int(x) for x in _numbers("--layer", self.layer)]
            self.k_values = [x if isinstance(x, (int, float)) else float(x) for x in _numbers("--ks", self.ks)]
        except ValueError:
            raise UsageError("--layer and --ks take comma-separated numbers") from None
        for name, values in (("--task", self.task), ("--layer", self.layers), ("--ks", self.k_values)):
            if not values:
                raise UsageError(f"{name}: give at least one")
        for name in ("n_pairs", "batch_size"):
            _checks.positive_int("--" + name.replace("_", "-"), getattr(self, name))
        from findbench.models import check_spec

        check_spec(self.model, flag="--model")

    def all_rankings(self) -> dict[str, Any]:
        """The built-in rankings (None: computed) and those of --ranking-file."""
        rankings: dict[str, Any] = {name: None for name in self.rankings}
        if self.ranking_file:
            extra = json.loads(Path(self.ranking_file).read_text(encoding="utf-8"))
            if not isinstance(extra, dict):
                raise UsageError("--ranking-file must hold a JSON object {name: [neuron indices]}")
            rankings.update(extra)
        return rankings
