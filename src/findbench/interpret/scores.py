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
from typing import Any, ClassVar

from findbench._io import read_json_object
from findbench._typed import JsonDoc, decode, doc_summary, schema_of
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


_D = "doc"


def _estimate(doc: str) -> Any:
    return field(default=None, metadata={_D: doc})


@dataclass(frozen=True)
class Cell(JsonDoc):
    """One (category, method) cell of ``scores.json``: an :class:`Estimate` per aggregate of its category."""

    nmse_success: Estimate | None = _estimate("numeric: share of functions whose code has NMSE < 0.1")
    nmse_success_observed: Estimate | None = _estimate(
        "the same for the best floor answer of the agent's own observations")
    nmse_success_margin: Estimate | None = _estimate("per function: success minus the floor's (functions with a floor)")
    nmse_success_margin_plan: Estimate | None = _estimate(
        "per function: success minus that of the floor of the fixed observed plan, which no transcript moves")
    mean_nmse: Estimate | None = _estimate("numeric: mean of the finite NMSEs")
    domain_iou: Estimate | None = _estimate("numeric: mean IoU of the stated domain with the true one")
    exact_match: Estimate | None = _estimate(
        "strings: share of test inputs the code maps exactly; rasp: of held-out inputs, every position right")
    exact_match_observed: Estimate | None = _estimate("the floor's exact match (a lookup table of the observed pairs)")
    exact_match_margin: Estimate | None = _estimate("per function: exact match minus the floor's")
    exact_match_margin_plan: Estimate | None = _estimate("per function: exact match minus the observed plan floor's")
    unit_test_accuracy: Estimate | None = _estimate("strings and neurons: the judge's accuracy on FIND's unit tests")
    unit_test_accuracy_observed: Estimate | None = _estimate("the floor's (a description listing the observed pairs)")
    unit_test_accuracy_margin: Estimate | None = _estimate("per function: accuracy minus the floor's")
    unit_test_accuracy_margin_plan: Estimate | None = _estimate(
        "per function: accuracy minus the observed plan floor's")
    unit_test_accuracy_near: Estimate | None = _estimate("the judge's accuracy on the near-miss unit tests")
    unit_test_accuracy_near_observed: Estimate | None = _estimate("the floor's on the near-miss unit tests")
    unit_test_accuracy_near_margin: Estimate | None = _estimate("per function: near-miss accuracy minus the floor's")
    unit_test_accuracy_near_margin_plan: Estimate | None = _estimate(
        "per function: near-miss accuracy minus the observed plan floor's")
    position_accuracy: Estimate | None = _estimate("rasp: share of output positions the code gets right")
    position_accuracy_observed: Estimate | None = _estimate("the floor's share of positions right")
    position_accuracy_margin: Estimate | None = _estimate("per function: position accuracy minus the floor's")
    position_accuracy_margin_plan: Estimate | None = _estimate(
        "per function: position accuracy minus the observed plan floor's")
    role_accuracy: Estimate | None = _estimate("rasp, white-box access: share of active components given their role")
    role_f1: Estimate | None = _estimate("rasp, white-box access: macro F1 over roles of the active components")
    node_precision: Estimate | None = _estimate("rasp, white-box access: components marked as mattering that do")
    node_recall: Estimate | None = _estimate("rasp, white-box access: components that matter marked as such")
    node_auroc: Estimate | None = _estimate("rasp, white-box access: AUROC of the answer's component scores")
    role_accuracy_observed: Estimate | None = _estimate(
        "the white-box floor's (components the episode's ablations and patches changed, given the majority role)")
    role_accuracy_margin: Estimate | None = _estimate("per function: role accuracy minus the white-box floor's")
    role_f1_observed: Estimate | None = _estimate("the white-box floor's role F1")
    role_f1_margin: Estimate | None = _estimate("per function: role F1 minus the white-box floor's")
    node_precision_observed: Estimate | None = _estimate("the white-box floor's node precision")
    node_precision_margin: Estimate | None = _estimate("per function: node precision minus the white-box floor's")
    node_recall_observed: Estimate | None = _estimate("the white-box floor's node recall")
    node_recall_margin: Estimate | None = _estimate("per function: node recall minus the white-box floor's")
    node_auroc_observed: Estimate | None = _estimate("the white-box floor's node AUROC")
    node_auroc_margin: Estimate | None = _estimate("per function: node AUROC minus the white-box floor's")
    n_degenerate: int = field(default=0, metadata={_D: "answers flagged degenerate (still scored)"})
    unverified: bool = field(default=False,
                             metadata={_D: "scored against a truth the run chose (carried rows, or run.json's data)"})

    #: The aggregates a cell may hold, in the order they are written: its :class:`Estimate` fields
    #: (set below the class, from the fields themselves).
    ESTIMATES: ClassVar[tuple[str, ...]] = ()

    def estimate(self, name: str) -> Estimate | None:
        """The aggregate ``name`` (one of :attr:`ESTIMATES`), None where the cell has none."""
        if name not in self.ESTIMATES:
            raise ValueError(f"name must be one of {self.ESTIMATES}, got {name!r}")
        return getattr(self, name)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.ESTIMATES:
            est = getattr(self, name)
            if est is not None:
                out.update({name: est.mean, f"{name}_ci": None if est.ci is None else list(est.ci), f"{name}_n": est.n})
        return out | {"n_degenerate": self.n_degenerate, "unverified": self.unverified}

    @classmethod
    def from_json(cls, obj: Any, where: str | None = None) -> Cell:
        where = where or "cell"
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        known = {f"{name}{suffix}" for name in cls.ESTIMATES for suffix in ("", "_ci", "_n")}
        known |= {"n_degenerate", "unverified"}
        unknown = [k for k in obj if k not in known]
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r}")
        values: dict[str, Any] = {}
        for name in cls.ESTIMATES:
            keys = (name, f"{name}_ci", f"{name}_n")
            present = [k for k in keys if k in obj]
            if not present:
                continue
            if len(present) < 3:
                raise ValueError(f"{where}: {present[0]!r} without {', '.join(repr(k) for k in keys if k not in obj)}")
            values[name] = Estimate(decode(float | None, obj[name], f"{where}.{name}"),
                                    decode(tuple[float, float] | None, obj[keys[1]], f"{where}.{keys[1]}"),
                                    decode(int, obj[keys[2]], f"{where}.{keys[2]}"))
        for name, tp in (("n_degenerate", int), ("unverified", bool)):
            if name not in obj:
                raise ValueError(f"{where}: missing key {name!r}")
            values[name] = decode(tp, obj[name], f"{where}.{name}")
        return cls(**values)

    @classmethod
    def _object_schema(cls, defs: dict[str, Any]) -> dict[str, Any]:
        docs = {f.name: f.metadata.get(_D, "") for f in dataclasses.fields(cls)}
        props: dict[str, Any] = {}
        for name in cls.ESTIMATES:
            props[name] = {"description": f"{docs[name]} (the mean)", **schema_of(float | None, defs)}
            props[f"{name}_ci"] = {"description": "its 95 % percentile bootstrap interval over functions, seed 0",
                                   **schema_of(tuple[float, float] | None, defs)}
            props[f"{name}_n"] = {"description": "the functions averaged", "type": "integer", "minimum": 0}
        props["n_degenerate"] = {"description": docs["n_degenerate"], "type": "integer", "minimum": 0}
        props["unverified"] = {"description": docs["unverified"], "type": "boolean"}
        return {"type": "object", "description": doc_summary(cls), "properties": props,
                "required": ["n_degenerate", "unverified"],
                "dependentRequired": {name: [f"{name}_ci", f"{name}_n"] for name in cls.ESTIMATES},
                "additionalProperties": False}


Cell.ESTIMATES = tuple(f.name for f in dataclasses.fields(Cell) if f.name not in ("n_degenerate", "unverified"))


@dataclass(frozen=True)
class Scores(JsonDoc):
    """``scores.json``: FIND's Table 2 cells of one scored run, ``{category: {method: cell}}``, and the judge
    that scored its unit tests (``"judge"``, absent when none did)."""

    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)
    judge: JudgeIdentity | None = None

    JSON_NAME = SCORES_FILE

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

    def categories(self) -> list[str]:
        """The categories the run has cells for, in the document's order."""
        return list(self.cells)

    def to_json(self) -> dict[str, Any]:
        judge = {} if self.judge is None else {"judge": self.judge.to_json()}
        return judge | {c: {m: cell.to_json() for m, cell in methods.items()} for c, methods in self.cells.items()}

    def dumps(self) -> str:
        """The text of ``scores.json``."""
        return json.dumps(self.to_json(), indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, obj: Any, where: str | None = None) -> Scores:
        where = where or SCORES_FILE
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        cells: dict[str, dict[str, Cell]] = {}
        judge = JudgeIdentity.from_json(obj["judge"], f"{where}.judge") if "judge" in obj else None
        for category, methods in ((c, m) for c, m in obj.items() if c != "judge"):
            if category not in CONFIGS:
                raise ValueError(f"{where}: unknown category {category!r}; categories are {CONFIGS}")
            if not isinstance(methods, dict):
                raise ValueError(f"{where}.{category}: expected a JSON object, got {type(methods).__name__}")
            for method in methods:
                if method not in METHODS:
                    raise ValueError(f"{where}.{category}: unknown method {method!r}; methods are {METHODS}")
            cells[category] = {m: Cell.from_json(v, f"{where}.{category}.{m}") for m, v in methods.items()}
        return cls(cells, judge)

    @classmethod
    def read(cls, path: str | os.PathLike) -> Scores:
        """``scores.json`` at ``path``; ValueError naming the file and the field when it does not fit the schema."""
        obj = read_json_object(path, "scores.json:")
        try:
            return cls.from_json(obj)
        except ValueError as exc:
            raise ValueError(f"{os.fspath(path)}: {exc}") from None

    @classmethod
    def _object_schema(cls, defs: dict[str, Any]) -> dict[str, Any]:
        defs["Methods"] = {"type": "object", "description": "a category's cells, by interpreter method",
                           "properties": {m: schema_of(Cell, defs) for m in METHODS}, "additionalProperties": False}
        judge = {"description": "the judge that scored the unit tests", **schema_of(JudgeIdentity, defs)}
        return {"type": "object", "description": doc_summary(cls), "additionalProperties": False,
                "properties": {"judge": judge, **{c: {"$ref": "#/$defs/Methods"} for c in CONFIGS}}}
