"""The settings of ``findbench iia``, each written once: the command line makes a flag of every
field and ``__post_init__`` checks each one (naming the flag) before a model is loaded."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass
from typing import Any

from findbench import _checks
from findbench._config import Csv, arg
from findbench._io import read_json_object
from findbench.constants import UsageError

#: K values (percent of a layer's neurons) of the paper's IIA@K curves.
DEFAULT_KS = (1, 6, 12, 25, 50, 75, 100)
#: The built-in neuron rankings.
RANKINGS = ("random", "correlation")
#: The token positions intervened on (``auto``: concept in the first half of the layers, last after).
POSITIONS = ("auto", "concept", "last")
SITES = ("mlp_activation", "block_output")


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
    ks: Csv = arg(",".join(map(str, DEFAULT_KS)), "percentages of the layer's neurons")
    rankings: Any = arg(",".join(RANKINGS), "built-in rankings (random, correlation); from Python also a mapping "
                                            "name -> neuron order (None: the built-in ranking of that name)")
    ranking_file: str | None = arg(None, "JSON {name: [neuron indices, best first]} of extra rankings")
    position: str = arg("auto", "token position intervened on", choices=POSITIONS)
    site: str = arg("mlp_activation", "activation intervened on", choices=SITES)
    seed: int = arg(0, "seed of the pairs and the random ranking")
    batch_size: int = arg(64, "pairs per forward pass")

    def __post_init__(self) -> None:
        self.task = _checks.str_list("--task", self.task)
        self.rankings = dict(self.rankings) if isinstance(self.rankings, Mapping) else [
            _checks.one_of("--rankings", r, RANKINGS) for r in _checks.str_list("--rankings", self.rankings)]
        _checks.one_of("--position", self.position, POSITIONS)
        _checks.one_of("--site", self.site, SITES)
        try:
            self.layers = [int(x) for x in _numbers("--layer", self.layer)]
            self.k_values = [x if isinstance(x, (int, float)) else float(x) for x in _numbers("--ks", self.ks)]
        except ValueError:
            raise UsageError("--layer and --ks take comma-separated numbers") from None
        for name, values in (("--task", self.task), ("--layer", self.layers), ("--ks", self.k_values),
                             ("--rankings", self.rankings)):
            if not values:
                raise UsageError(f"{name}: give at least one")
        for name in ("n_pairs", "batch_size"):
            _checks.positive_int("--" + name.replace("_", "-"), getattr(self, name))
        from findbench.models import check_spec

        check_spec(self.model, flag="--model")

    def all_rankings(self) -> dict[str, Any]:
        """The built-in rankings (None: computed) and those of --ranking-file."""
        if isinstance(self.rankings, dict):
            return dict(self.rankings)
        rankings: dict[str, Any] = {name: None for name in self.rankings}
        if self.ranking_file:  # a JSON object {name: [neuron indices, best first]}
            rankings.update(read_json_object(self.ranking_file, "--ranking-file"))
        return rankings
