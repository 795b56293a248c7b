"""The judge card as a document: :class:`JudgeCard` and its parts (``to_json`` / ``from_json``, a
JSON schema pinned in ``findbench/data/schemas/judge_card.schema.json`` by
``scripts/generate_json_schemas.py``), its Markdown tables, its
README (the template ``findbench/cards/judge_card.md``), its figure and its folder.

Cards written before the near-miss tests (no ``tests``) or the gaming probes (no probe rungs, no
``truncated`` counts) read as they are and write back the same keys and numbers.
"""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path
from typing import Any, Literal

from findbench._checks import one_of
from findbench._typed import JsonDoc, document, omit_none
from findbench.judge.config import ALL_RUNGS, RUNGS
from findbench.models import JudgeIdentity
from findbench.stats import INTERVAL_NOTE, SMALL_N_LEGEND, format_ci

#: The files of a card folder.
CARD_FILES = ("README.md", "judge_card.json", "judge_card.png")
#: The suffix of a test set's tables' keys (``accuracy_near``).
TEST_SUFFIX = {"find": "", "near": "_near"}
#: A probe's verdict from the paired bootstrap of its inflation over the truth (probe - truth).
VERDICTS = ("truth above probe", "not established", "probe above truth")
#: Marks of the ``probes`` table, one per verdict.
MARKS = {"truth above probe": "✓", "not established": "?", "probe above truth": "✗"}
_SHORT = {"strings": "strings", "neurons_entities": "entities", "neurons_relations": "relations", "all": "all"}
_WHAT = ("accuracy", "auroc", "probes")


# ----------------------------------------------------------------------------- the document


@document(kw_only=True)
class Interval(JsonDoc):
    """A function-level mean with its percentile-bootstrap interval (``findbench.stats.mean_ci``)."""

    mean: float
    ci: list[float]
    n: int


@document(kw_only=True)
class AurocInterval(JsonDoc):
    """The AUROC of the true description's scores against another rung's, with its paired-bootstrap interval."""

    auroc: float
    ci: list[float]
    n: int


@document(kw_only=True)
class Inflation(Interval):
    """A probe's score minus the truth's, per function, averaged (``findbench.stats.paired_bootstrap``)."""

    p_value: float


@document(kw_only=True)
class ProbeSummary(JsonDoc):
    """A gaming probe against the truth: its score, its inflation and whether the truth is above it."""

    score: Interval
    inflation: Inflation
    truth_above_probe: bool
    verdict: Literal["truth above probe", "not established", "probe above truth"] | None = omit_none()

    @property
    def mark(self) -> str:
        return MARKS[self.verdict or VERDICTS[0 if self.truth_above_probe else 1]]


#: ``{category | "all": {rung: summary}}``.
Table = dict[str, dict[str, Interval]]
AurocTable = dict[str, dict[str, AurocInterval]]
ProbeTable = dict[str, dict[str, ProbeSummary]]


@document(kw_only=True)
class RungResult(JsonDoc):
    """One rung of one category on one test set: each function's unit-test accuracy."""

    category: str
    rung: str
    tests: Literal["find", "near"] | None = omit_none()
    n_functions: int
    n_unit_tests: int
    judged_unit_tests: int
    accuracy: float
    per_function: list[float]
    function_ids: list[str]
    truncated: int | None = omit_none()
    unparsed: int | None
    unparsed_rate: float | None

    @property
    def test_set(self) -> str:
        return self.tests or "find"


@document(kw_only=True)
class CategoryCost(JsonDoc):
    """The cost of one judge call: a category on one test set, every rung."""

    category: str
    tests: Literal["find", "near"] | None = omit_none()
    seconds: float
    tokens: int
    judged_unit_tests: int


@document(kw_only=True)
class Cost(JsonDoc):
    """What judging cost: unit tests, seconds, tokens, requests, unparsed answers, the request cache."""

    judged_unit_tests: int
    seconds: float
    tokens: int
    requests: int
    seconds_per_1000_unit_tests: float | None
    tokens_per_1000_unit_tests: float | None
    tokens_counted_with: str
    unparsed: int | None
    unparsed_rate: float | None
    cache_hits: int | None
    cache_misses: int | None
    cache_entries_before: int | None = None
    device: str | None
    cpus: int | None
    machine: str
    per_category: list[CategoryCost]


@document(kw_only=True)
class Bootstrap(JsonDoc):
    """The bootstrap of every interval."""

    resamples: int
    seed: int
    confidence: float


@document(kw_only=True)
class CardSettings(JsonDoc):
    """What decided the card (the command that reproduces it is in its README)."""

    categories: list[str]
    functions_per_category: int | None
    seed: int
    source: str
    data: str | None
    evaluator_data: str | None
    function_seed: int
    data_seed: int
    heldout_fraction: float
    encoder: str | None
    bootstrap: Bootstrap
    findbench: str
    tests: Literal["find", "near", "both"] | None = omit_none()
    probes: bool | None = omit_none()
    rungs: list[str] | None = omit_none()
    baseline_mode: list[str] | None = omit_none()

    @classmethod
    def of(cls, cfg: Any, **resolved: Any) -> CardSettings:
        """The record of the card's config ``cfg`` (:class:`~findbench.judge.config.JudgeCardConfig`):
        the fields of ``cfg`` this record shares (paths as strings), then what the card resolved."""
        taken = {f.name: getattr(cfg, f.name) for f in fields(cls) if hasattr(cfg, f.name)}
        taken = {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in taken.items()}
        return cls(**{**taken, **resolved})


@document(kw_only=True)
class _Tables(JsonDoc):
    """The tables of one judge: accuracy, AUROC and (with probes) probes per test set."""

    accuracy: Table | None = omit_none()
    auroc: AurocTable | None = omit_none()
    probes: ProbeTable | None = omit_none()
    accuracy_near: Table | None = omit_none()
    auroc_near: AurocTable | None = omit_none()
    probes_near: ProbeTable | None = omit_none()

    def table(self, what: str, tests: str) -> dict[str, dict[str, Any]] | None:
        """The ``accuracy``, ``auroc`` or ``probes`` table on the ``tests`` unit tests, or None."""
        return getattr(self, what + TEST_SUFFIX[tests])


@document(kw_only=True)
class Measurement(_Tables):
    """A baseline judge (in one mode) measured on the card's descriptions."""

    label: str
    judge: str
    spec: str
    judge_identity: JudgeIdentity | None = omit_none()
    mode: str
    results: list[RungResult]
    cost: Cost


@document(kw_only=True)
class JudgeCard(_Tables):
    """An instrument card for a judge: its unit-test accuracy on held-out functions with a ladder of
    descriptions per function (the truth, close and wrong ones, gaming probes), AUROC of the truth
    against each, the cost, and the descriptions themselves."""

    JSON_NAME = "judge_card.json"

    judge: str
    spec: str
    #: Which judge this is (shipped adapter and version, a folder trained here with its steps and date, ...);
    #: cards written before it have none.
    judge_identity: JudgeIdentity | None = omit_none()
    mode: str
    rungs: dict[str, str]
    tests: list[Literal["find", "near"]] | None = omit_none()
    results: list[RungResult]
    cost: Cost
    baseline: list[Measurement] | None = omit_none()
    ladder: dict[str, list[dict[str, str | None]]]
    settings: CardSettings

    def to_json(self) -> dict[str, Any]:
        """The card's JSON: its judge, mode and rungs, then the tables, results, cost, ladder, settings."""
        out = super().to_json()
        head = [k for k in ("judge", "spec", "judge_identity", "mode", "rungs", "tests") if k in out]
        return {k: out[k] for k in (*head, *[k for k in out if k not in head])}

    @property
    def test_sets(self) -> list[str]:
        """The test sets the card was judged on (a card without ``tests`` predates near-miss tests: ``["find"]``)."""
        return list(self.tests or ["find"])

    @property
    def has_probes(self) -> bool:
        return self.probes is not None or self.probes_near is not None

    def measurements(self) -> list[tuple[str, _Tables]]:
        """``(label, tables)`` of the baselines (``before``) and the judge (``after`` beside a baseline)."""
        return [(m.label, m) for m in self.baseline or ()] + [("after" if self.baseline else "judge", self)]


def read_card(path: str | os.PathLike) -> JudgeCard:
    """The card of a card folder or ``judge_card.json`` file; ValueError naming the field that does not fit."""
    path = Path(path)
    if path.is_dir():
        path = path / CARD_FILES[1]
    return JudgeCard.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))


# ----------------------------------------------------------------------------- tables


def _cell(summary: Any, key: str = "mean") -> str:
    return format_ci(getattr(summary, key), summary.ci, summary.n)


def format_table(card: JudgeCard, *, what: str = "accuracy", tests: str) -> str:
    """The card's ``accuracy``, ``auroc`` or ``probes`` (inflation over the truth and verdict) on the
    ``tests`` unit tests as a Markdown table: a row per rung, a column per category."""
    one_of("what", what, _WHAT)
    one_of("tests", tests, tuple(TEST_SUFFIX))
    table = card.table(what, tests)
    if table is None:
        raise ValueError(f"tests: the card has no {what + TEST_SUFFIX[tests]!r} table (judged on {card.test_sets}, "
                         f"probes: {card.has_probes})")
    cols = list(table)
    rungs = [r for r in ALL_RUNGS if r in next(iter(table.values()))]
    head = {"accuracy": "rung", "auroc": "true vs", "probes": "probe"}[what]
    lines = [f"| {head} | " + " | ".join(_SHORT.get(c, c) for c in cols) + " |", "|---|" + "---:|" * len(cols)]
    for rung in rungs:
        cells = ([f"{_cell(table[c][rung].inflation)} {table[c][rung].mark}" for c in cols] if what == "probes"
                 else [_cell(table[c][rung], "mean" if what == "accuracy" else "auroc") for c in cols])
        lines.append(f"| {rung} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_comparison(card: JudgeCard, *, tests: str) -> str:
    """Accuracy of the baseline(s) beside the judge as a Markdown table: a row per category and rung
    (without ``all``), a column per judge (FIND Table A3 with the rungs ``true`` and ``other``)."""
    measured = [(label, m.table("accuracy", tests)) for label, m in card.measurements()]
    if any(table is None for _, table in measured):
        raise ValueError(
            f"tests: the card has no {'accuracy' + TEST_SUFFIX[tests]!r} table (judged on {card.test_sets})"
        )
    first = measured[0][1]
    lines = [
        "| category | rung | " + " | ".join(label for label, _ in measured) + " |",
        "|---|---|" + "---:|" * len(measured),
        *(f"| {_SHORT.get(cat, cat)} | {rung} | " + " | ".join(_cell(t[cat][rung]) for _, t in measured) + " |"
          for cat in first if cat != "all" for rung in first[cat]),
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- README


def _fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _command(card: JudgeCard) -> str:
    s, k = card.settings, card.settings.functions_per_category
    return "".join([
        f"findbench judge-card --judge {card.spec} --judge-mode {card.mode} --categories {','.join(s.categories)} "
        f"--functions-per-category {'all' if k is None else k} --seed {s.seed}",
        "" if (s.tests or "find") == "find" else f" --tests {s.tests}",
        "" if s.rungs is None else f" --rungs {','.join(s.rungs)}",
        f" --baseline {card.baseline[0].spec}" if card.baseline else "",
        f" --baseline-mode {','.join(s.baseline_mode)}" if card.baseline and s.baseline_mode is not None else "",
        " --out DIR",
    ])


def _cache_note(cost: Cost) -> str:
    if not cost.cache_hits:
        return ""
    total = f"{cost.cache_hits:,} of {cost.cache_hits + (cost.cache_misses or 0):,} requests"
    if cost.cache_entries_before == 0:
        return (
            f" {total} repeated an earlier request of the run (a description and an option shared by two functions) "
            "and were not recomputed; the request cache started empty."
        )
    return (
        f" {total} were not recomputed: repeats of an earlier request of the run, or answers a request cache "
        "kept from an earlier run, which make the seconds understate a fresh run."
    )


def _truncated(card: JudgeCard) -> str:
    """The descriptions the judge's cap cut, per rung (cards before the count have none)."""
    cut: dict[str, int] = {}
    for r in card.results:
        if r.truncated:
            cut[r.rung] = cut.get(r.rung, 0) + r.truncated
    return f"{sum(cut.values())} ({', '.join(f'`{rung}` {n}' for rung, n in cut.items())})" if cut else ""


def _readme(card: JudgeCard) -> str:
    import jinja2

    from findbench.resources import card_template

    s, cost, k = card.settings, card.cost, card.settings.functions_per_category
    ladder = [r for r in RUNGS if r in card.rungs]
    template = jinja2.Environment(
        keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined
    ).from_string(card_template("judge_card.md"))
    return template.render(
        card=card,
        s=s,
        cost=cost,
        k="all" if k is None else k,
        All="All" if k is None else k,
        cats=", ".join(_SHORT[c] for c in s.categories),
        tests=card.test_sets,
        probes=card.has_probes,
        descriptions=(
            "six descriptions, from its own to none"
            if tuple(ladder) == RUNGS
            else f"{len(ladder)} of its ladder's descriptions ({', '.join(ladder)})"
        ),
        tables={
            (what, t): format_table(card, what=what, tests=t)
            for t in card.test_sets
            for what in _WHAT
            if card.table(what, t) is not None
        },
        comparison={t: format_comparison(card, tests=t) for t in card.test_sets} if card.baseline else {},
        suffix=TEST_SUFFIX,
        marks=MARKS,
        not_established=MARKS[VERDICTS[1]],
        interval_note=INTERVAL_NOTE + " " + SMALL_N_LEGEND,
        seconds_per_1000=_fmt(cost.seconds_per_1000_unit_tests),
        tokens_per_1000=_fmt(cost.tokens_per_1000_unit_tests, 0),
        cache_note=_cache_note(cost),
        truncated=_truncated(card),
        command=_command(card),
    )


# ----------------------------------------------------------------------------- figure and folder


def _plot(card: JudgeCard, path: Path) -> None:
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    from findbench.judge.probes import PROBE_RUNGS

    tests = card.test_sets[0]
    table = card.table("accuracy", tests)
    cols = list(table)
    rungs = [r for r in ALL_RUNGS if r in next(iter(table.values()))]
    width = 0.8 / len(rungs)
    fig = Figure(figsize=(2.0 + 1.9 * len(cols) * max(1.0, len(rungs) / len(RUNGS)), 3.6))
    ax = fig.subplots()
    shades = [0.25 + 0.7 * i / max(1, len(PROBE_RUNGS) - 1) for i in range(len(PROBE_RUNGS))]  # the probes: oranges
    colour = {**dict(zip(RUNGS, ["#1b7837", "#7fbf7b", "#d9f0d3", "#e7d4e8", "#af8dc3", "#762a83"])),
              **dict(zip(PROBE_RUNGS, colormaps["Oranges"](shades)))}
    for j, rung in enumerate(rungs):
        xs = [i + (j - (len(rungs) - 1) / 2) * width for i in range(len(cols))]
        means = [table[c][rung].mean for c in cols]
        low = [max(0.0, m - table[c][rung].ci[0]) for m, c in zip(means, cols)]
        high = [max(0.0, table[c][rung].ci[1] - m) for m, c in zip(means, cols)]
        ax.bar(
            xs,
            means,
            width,
            yerr=[low, high],
            capsize=2,
            label=rung,
            color=colour[rung],
            edgecolor="#333333",
            linewidth=0.5,
            error_kw={"elinewidth": 0.8},
        )
    ax.axhline(1 / 3, color="grey", linestyle=":", linewidth=1, label="chance (1/3)")
    ax.set(xticks=range(len(cols)), xticklabels=[_SHORT.get(c, c) for c in cols], ylim=(0, 1.05),
           ylabel="unit-test accuracy (95% CI)")
    ax.set_title(f"{card.spec} ({card.mode}): accuracy per description"
                 + (" (near-miss tests)" if tests == "near" else ""), fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def write_card(card: JudgeCard, out: str | os.PathLike) -> list[str]:
    """Write ``card`` as a folder (replaced atomically) of :data:`CARD_FILES`; returns their paths."""
    from findbench._io import atomic_dir

    with atomic_dir(out) as tmp:
        (tmp / CARD_FILES[0]).write_text(_readme(card), encoding="utf-8")
        (tmp / CARD_FILES[1]).write_text(json.dumps(card.to_json(), indent=1, allow_nan=True) + "\n", encoding="utf-8")
        _plot(card, tmp / CARD_FILES[2])
    return [str(Path(out) / f) for f in CARD_FILES]
