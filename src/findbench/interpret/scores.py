"""``scores.json``, typed: FIND's Table 2 cells of one scored run (written by ``findbench evaluate``).

The document is ``{category: {method: cell}}``, after ``"judge"`` (a :class:`~findbench.models.JudgeIdentity`:
which judge scored the unit tests) when a judge scored. A :class:`Cell` holds one :class:`Estimate` per
aggregate its category has (:data:`~findbench.interpret.evaluate.CATEGORY_METRICS`, the floored
ones followed by ``<metric>_observed``, ``<metric>_margin`` and ``<metric>_margin_plan``), written
flat as ``<name>`` (the mean), ``<name>_ci`` (the seeded 95 % bootstrap interval over functions) and ``<name>_n`` (the
functions averaged), then ``n_degenerate`` and ``unverified``. Its schema is
``findbench/data/schemas/scores.schema.json``."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, Field, NonNegativeInt, TypeAdapter
from typing_extensions import NotRequired

from findbench._io import read_json_object
from findbench._typed import json_form, json_schema, validate
from findbench.interpret.protocol import METHODS
from findbench.models import JudgeIdentity
from findbench.schema import CONFIGS
from findbench.stats import bootstrap_ci

#: The file :class:`Scores` is written to.
SCORES_FILE = "scores.json"


@dataclass(frozen=True)
class Estimate:
    """A mean over functions with its seeded 95 % bootstrap interval and its number of functions
    (``mean`` and ``ci`` None when no function has a value)."""

    mean: float | None
    ci: tuple[float, float] | None
    n: int

    @classmethod
    def of(cls, units: Sequence[float]) -> Estimate:
        """The estimate of the mean of ``units`` (finite per-function values,
        :func:`~findbench.interpret.evaluate.unit_values`)."""
        if not units:
            return cls(None, None, 0)
        low, high = bootstrap_ci(units)
        return cls(float(sum(units) / len(units)), (low, high), len(units))


#: Each aggregate a :class:`Cell` may hold, in the order they are written, and what it is (its description in
#: the schema).
_ESTIMATE_DOCS = {
    "nmse_success": "numeric: share of functions whose code has NMSE < 0.1",
    "nmse_success_observed": "the same for the best floor answer of the agent's own observations",
    "nmse_success_margin": "per function: success minus the floor's (functions with a floor)",
    "nmse_success_margin_plan": (
        "per function: success minus that of the floor of the fixed observed plan, which no transcript moves"
    ),
    "mean_nmse": "numeric: mean of the finite NMSEs",
    "domain_iou": "numeric: mean IoU of the stated domain with the true one",
    "exact_match": (
        "strings: share of test inputs the code maps exactly; rasp: of held-out inputs, every position right"
    ),
    "exact_match_observed": "the floor's exact match (a lookup table of the observed pairs)",
    "exact_match_margin": "per function: exact match minus the floor's",
    "exact_match_margin_plan": "per function: exact match minus the observed plan floor's",
    "unit_test_accuracy": "strings and neurons: the judge's accuracy on FIND's unit tests",
    "unit_test_accuracy_observed": "the floor's (a description listing the observed pairs)",
    "unit_test_accuracy_margin": "per function: accuracy minus the floor's",
    "unit_test_accuracy_margin_plan": "per function: accuracy minus the observed plan floor's",
    "unit_test_accuracy_near": "the judge's accuracy on the near-miss unit tests",
    "unit_test_accuracy_near_observed": "the floor's on the near-miss unit tests",
    "unit_test_accuracy_near_margin": "per function: near-miss accuracy minus the floor's",
    "unit_test_accuracy_near_margin_plan": "per function: near-miss accuracy minus the observed plan floor's",
    "position_accuracy": "rasp: share of output positions the code gets right",
    "position_accuracy_observed": "the floor's share of positions right",
    "position_accuracy_margin": "per function: position accuracy minus the floor's",
    "position_accuracy_margin_plan": "per function: position accuracy minus the observed plan floor's",
    "role_accuracy": "rasp, white-box access: share of active components given their role",
    "role_f1": "rasp, white-box access: macro F1 over roles of the active components",
    "node_precision": "rasp, white-box access: components marked as mattering that do",
    "node_recall": "rasp, white-box access: components that matter marked as such",
    "node_auroc": "rasp, white-box access: AUROC of the answer's component scores",
    "role_accuracy_observed": (
        "the white-box floor's: the best map with no understanding (the majority role everywhere, all marked, "
        "or the components the episode's own ablations and patches changed)"
    ),
    "role_accuracy_margin": "per function: role accuracy minus the white-box floor's",
    "role_f1_observed": "the white-box floor's role F1",
    "role_f1_margin": "per function: role F1 minus the white-box floor's",
    "node_precision_observed": "the white-box floor's node precision",
    "node_precision_margin": "per function: node precision minus the white-box floor's",
    "node_recall_observed": "the white-box floor's node recall",
    "node_recall_margin": "per function: node recall minus the white-box floor's",
    "node_auroc_observed": "the white-box floor's node AUROC",
    "node_auroc_margin": "per function: node AUROC minus the white-box floor's",
}


class _CellMethods:
    """What a :class:`Cell` does beside holding its fields."""

    #: The aggregates a cell may hold, in the order they are written: its :class:`Estimate` fields.
    ESTIMATES: ClassVar[tuple[str, ...]] = tuple(_ESTIMATE_DOCS)

    def estimate(self, name: str) -> Estimate | None:
        """The aggregate ``name`` (one of :attr:`ESTIMATES`), None where the cell has none."""
        if name not in self.ESTIMATES:
            raise ValueError(f"name must be one of {self.ESTIMATES}, got {name!r}")
        return getattr(self, name)

    def to_json(self) -> dict[str, Any]:
        flat = {key: value for name in self.ESTIMATES if (est := getattr(self, name)) is not None
                for key, value in {name: est.mean, f"{name}_ci": None if est.ci is None else list(est.ci),
                                   f"{name}_n": est.n}.items()}
        return flat | {"n_degenerate": self.n_degenerate, "unverified": self.unverified}  # type: ignore[attr-defined]

    @classmethod
    def _of(cls, flat: dict[str, Any]) -> Any:
        """The cell of its validated JSON form."""
        estimates = {n: Estimate(flat[n], flat[f"{n}_ci"], flat[f"{n}_n"]) for n in cls.ESTIMATES if n in flat}
        return cls(**estimates, n_degenerate=flat["n_degenerate"], unverified=flat["unverified"])  # type: ignore


_D = "doc"
#: One (category, method) cell of ``scores.json``: an :class:`Estimate` (or None) per aggregate of its category
#: (a field per :data:`_ESTIMATE_DOCS` entry, default None), then ``n_degenerate`` and ``unverified``.
Cell = dataclasses.make_dataclass(
    "Cell",
    [
        *((name, "Estimate | None", field(default=None, metadata={_D: doc})) for name, doc in _ESTIMATE_DOCS.items()),
        ("n_degenerate", "int", field(default=0, metadata={_D: "answers flagged degenerate (still scored)"})),
        ("unverified", "bool", field(default=False, metadata={
            _D: "scored against a truth the run chose (carried rows, or run.json's data)"})),
    ],
    bases=(_CellMethods,),
    frozen=True,
    namespace={"__module__": __name__, "__doc__": "One (category, method) cell of ``scores.json``: an "
               ":class:`Estimate` per aggregate of its category."},
)


def _complete(flat: dict[str, Any]) -> dict[str, Any]:
    """A cell's JSON form with each aggregate's three keys together (the schema's ``dependentRequired``)."""
    for name in Cell.ESTIMATES:
        keys = (name, f"{name}_ci", f"{name}_n")
        present = [k for k in keys if k in flat]
        if 0 < len(present) < 3:
            raise ValueError(f"{present[0]!r} without {', '.join(repr(k) for k in keys if k not in flat)}")
    return flat


def _cell_form() -> Any:
    """The JSON form of a :class:`Cell`: each aggregate flat (its mean, ``_ci`` and ``_n``), then the counts."""
    docs = {f.name: f.metadata[_D] for f in dataclasses.fields(Cell)}
    keys: dict[str, Any] = {
        **{key: NotRequired[Annotated[kind, Field(description=doc)]]
           for name in Cell.ESTIMATES
           for key, kind, doc in ((name, float | None, f"{docs[name]} (the mean)"),
                                  (f"{name}_ci", tuple[float, float] | None, _CI_DOC),
                                  (f"{name}_n", NonNegativeInt, "the functions averaged"))},
        **{name: Annotated[kind, Field(description=docs[name])]
           for name, kind in (("n_degenerate", NonNegativeInt), ("unverified", bool))},
    }
    return Annotated[
        json_form("Cell", keys, "One (category, method) cell of ``scores.json``: an estimate per aggregate of its "
                  "category.", json_schema_extra={"dependentRequired": {
                      name: [f"{name}_ci", f"{name}_n"] for name in Cell.ESTIMATES}}),
        AfterValidator(_complete),
    ]


@dataclass(frozen=True)
class Scores:
    """``scores.json``: FIND's Table 2 cells of one scored run, ``{category: {method: cell}}``, and the judge
    that scored its unit tests (``"judge"``, absent when none did)."""

    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)
    judge: JudgeIdentity | None = None

    def cell(self, category: str, method: str) -> Cell | None:
        """The cell of ``category`` and ``method``, None where the run has none."""
        return self.cells.get(category, {}).get(method)

    def estimate(self, category: str, method: str, name: str) -> Estimate | None:
        """Aggregate ``name`` of a cell (:meth:`Cell.estimate`), None where the run has none."""
        cell = self.cell(category, method)
        return None if cell is None else cell.estimate(name)

    def __iter__(self) -> Iterator[tuple[str, str, Cell]]:
        """``(category, method, cell)`` in the document's order."""
        return ((c, m, cell) for c, methods in self.cells.items() for m, cell in methods.items())

    def to_json(self) -> dict[str, Any]:
        judge = {} if self.judge is None else {"judge": self.judge.to_json()}
        return judge | {c: {m: cell.to_json() for m, cell in methods.items()} for c, methods in self.cells.items()}

    def dumps(self) -> str:
        """The text of ``scores.json``."""
        return json.dumps(self.to_json(), indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, obj: Any, where: str | None = None) -> Scores:
        """The scores of the JSON form (read strictly: :func:`findbench._typed.validate`), in the document's order."""
        form = validate(SCORES_FORM, obj, where or SCORES_FILE)
        cells = {c: {m: Cell._of(form[c][m]) for m in obj[c]} for c in obj if c != "judge"}
        return cls(cells, form.get("judge"))

    @classmethod
    def read(cls, path: str | os.PathLike) -> Scores:
        """``scores.json`` at ``path``; ValueError naming the file and the field when it does not fit the schema."""
        return cls.from_json(read_json_object(path, "scores.json:"), f"{os.fspath(path)}: {SCORES_FILE}")

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON schema of ``scores.json`` (draft 2020-12)."""
        return json_schema(SCORES_FORM)


_CI_DOC = "its 95 % percentile bootstrap interval over functions, seed 0"
_CELL = _cell_form()
_METHODS = json_form("Methods", {m: NotRequired[_CELL] for m in METHODS},
                     "a category's cells, by interpreter method")
#: The JSON form of ``scores.json``: the judge, then ``{category: {method: cell}}``.
SCORES_FORM = TypeAdapter(json_form("Scores", {
    "judge": NotRequired[Annotated[JudgeIdentity, Field(description="the judge that scored the unit tests")]],
    **{c: NotRequired[_METHODS] for c in CONFIGS}}, Scores.__doc__))
