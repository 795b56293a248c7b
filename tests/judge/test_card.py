"""Instrument cards for judges (findbench.judge.card): the ladder of descriptions, the AUROC and
its interval, the card folder, the command, the shipped cards and (slow) the embedded judges."""

from __future__ import annotations

import json

import numpy as np
import pytest

from findbench.constants import CONSTANT_DESCRIPTIONS
from findbench.find.synthetic_neurons.entities import describe_entity
from findbench.find.synthetic_neurons.entity_words import load_entity_words
from findbench.find.synthetic_neurons.relations import describe_relation
from findbench.judge.card import (
    CARD_FILES,
    RUNGS,
    TEST_COLUMNS,
    auroc,
    auroc_ci,
    description_ladder,
    format_table,
    judge_card,
    write_card,
)
from findbench.judge.probes import PROBE_RUNGS
from findbench.resources import data_path
from tests.interpret.fakes import KnowingJudge

#: Judges whose cards ship in the package (findbench/data/judge/cards/<name>/).
SHIPPED_CARDS = ("embedded", "embedded-evaluator")


def shipped_card(name: str):
    return data_path("judge", "cards", name)


class LetterEncoder:
    """Embeds a name by its letter-bigram counts: no model, deterministic."""

    name = "letter-bigrams"

    def encode(self, texts):
        out = np.zeros((len(texts), 26 * 26))
        for i, t in enumerate(texts):
            letters = [c for c in t.lower() if "a" <= c <= "z"]
            for a, b in zip(letters, letters[1:]):
                out[i, (ord(a) - 97) * 26 + ord(b) - 97] += 1
        return out


def _tests(correct_items, other_items, entities: bool, shift: int = 0) -> list[dict]:
    """Ten unit tests: the right item at position 1, 2, 3 in turn (from ``shift``), two other items beside it."""
    tests = []
    for k in range(10):
        items = [other_items[(2 * k) % len(other_items)], other_items[(2 * k + 1) % len(other_items)]]
        pos = (k + shift) % 3
        items.insert(pos, correct_items[k % len(correct_items)])
        if entities:
            tests.append({"inputs": list(items), "outputs": None, "correct": pos + 1})
        else:
            tests.append({"inputs": [x for x, _ in items], "outputs": [y for _, y in items], "correct": pos + 1})
    return tests


_WORDS = {
    "chess": ["rook", "bishop", "checkmate", "pawn", "gambit"],
    "tennis": ["racket", "serve", "deuce", "volley", "Wimbledon"],
    "golf": ["putter", "birdie", "fairway", "caddie", "bogey"],
    "banking": ["loan", "teller", "mortgage", "deposit", "vault"],
    "cryptocurrencies": ["bitcoin", "blockchain", "wallet", "ether", "mining"],
}


@pytest.fixture(scope="module")
def entity_rows() -> list[dict]:
    specs = [("chess",), ("tennis",), ("golf",), ("banking",), ("chess", "banking")]
    rows = []
    for i, spec in enumerate(specs):
        own = [w for c in spec for w in _WORDS[c]]
        other = [w for c in _WORDS if c not in spec for w in _WORDS[c]]
        rows.append({"function_id": f"neurons_entities/f{i:05d}", "category": "neurons_entities",
                     "subcategory": "atomic" if len(spec) == 1 else "composition", "concept1": spec[0],
                     "concept2": spec[1] if len(spec) == 2 else None, "description": describe_entity(spec),
                     "unit_tests": _tests(own, other, entities=True)})
    return rows


_RELATIONS = {
    "country_capital": ("a country", "the capital of that country", ["the input country is in Asia", "the input country is in Europe"],
                        [("France", "Paris"), ("Japan", "Tokyo"), ("Peru", "Lima")]),
    "country_language": ("a country", "the official language of that country",
                         ["the input country is in North America", "the input country is in South America"],
                         [("France", "French"), ("Japan", "Japanese"), ("Peru", "Spanish")]),
    "book_author": ("the title of a book", "the author of that book",
                    ["the input book was written after 1900", "the input book was written before 1900"],
                    [("Emma", "Jane Austen"), ("Ulysses", "James Joyce"), ("Dracula", "Bram Stoker")]),
}


@pytest.fixture(scope="module")
def relation_rows() -> list[dict]:
    rows = []
    for v in (None, 0, 1):
        for key, (c1, c2, excs, pairs) in _RELATIONS.items():
            other = [p for k, (_, _, _, ps) in _RELATIONS.items() if k != key for p in ps]
            exc = None if v is None else excs[v]
            rows.append({"function_id": f"neurons_relations/f{len(rows):05d}", "category": "neurons_relations",
                         "subcategory": "atomic" if v is None else "corruption", "name": key if v is None else f"{key}~except{v + 1}",
                         "params": json.dumps({"relation": key, "exception_index": v}), "concept1": c1, "concept2": c2,
                         "exception": exc, "description": describe_relation(c1, c2, exc),
                         "unit_tests": _tests(pairs, other, entities=False, shift=0 if v is None else v + 1)})
    return rows


@pytest.fixture(scope="module")
def string_rows() -> list[dict]:
    from findbench.find import strings

    return strings.generate(12, seed=0, progress=False)


# ----------------------------------------------------------------------------- the ladder


def _check_common(ladder: dict, rows: list[dict], category: str) -> None:
    assert tuple(ladder) == RUNGS
    assert all(len(ladder[r]) == len(rows) for r in RUNGS)
    assert ladder["true"] == [r["description"] for r in rows]
    for rung in ("partial", "near_miss", "other"):
        assert all(d and d != t for d, t in zip(ladder[rung], ladder["true"])), rung
    assert sorted(ladder["other"]) == sorted(ladder["true"])  # another judged function's description
    assert ladder["constant"] == [CONSTANT_DESCRIPTIONS[category]] * len(rows)
    assert ladder["empty"] == [""] * len(rows)


def test_strings_ladder(string_rows):
    from findbench.judge.card import _ladder

    ladder = description_ladder(string_rows, seed=0)
    _check_common(ladder, string_rows, "strings")
    for row, partial, near in zip(string_rows, ladder["partial"], ladder["near_miss"]):
        if row["subcategory"] == "composition":
            # one of the two steps, described alone; its phrase is in the true description
            assert "two operations" not in partial
            phrase = partial.removeprefix("The function takes a string and ").rstrip(".")
            assert phrase in row["description"]
            assert "two operations" in near  # one step changed, the other kept
        else:
            assert "two operations" not in partial and "two operations" not in near
    # every near miss behaves differently from the function on its test inputs
    _, rules = _ladder(string_rows, "strings", string_rows, 0, None)
    assert not any("same outputs" in r for r in rules["near_miss"])
    assert any("other parameter" in r for r in rules["near_miss"]) and any("sibling operation" in r for r in rules["near_miss"])
    assert any(r.startswith("family only") for r in rules["partial"]) and any(r.startswith("step") for r in rules["partial"])
    # deterministic by seed; another seed draws other parts, parameters and pairings
    assert description_ladder(string_rows, seed=0) == ladder
    other_seed = description_ladder(string_rows, seed=1)
    assert other_seed["true"] == ladder["true"] and other_seed != ladder


def test_entities_ladder(entity_rows):
    ladder = description_ladder(entity_rows, seed=0, encoder=LetterEncoder())
    _check_common(ladder, entity_rows, "neurons_entities")
    for row, partial, near in zip(entity_rows, ladder["partial"], ladder["near_miss"]):
        own = [c for c in (row["concept1"], row["concept2"]) if c]
        if len(own) == 1:  # the concept narrowed to one member word that no unit test shows
            shown = {w.lower() for ut in row["unit_tests"] for w in ut["inputs"]}
            assert partial in [describe_entity([w]) for w in load_entity_words()[own[0]] if w.lower() not in shown]
        else:
            assert partial in (describe_entity([own[0]]), describe_entity([own[1]]))
        named = [c for c in _WORDS if c in near]
        assert len(named) == len(own) and not set(named) & set(own)  # sibling concepts, never its own
    assert description_ladder(entity_rows, seed=0, encoder=LetterEncoder()) == ladder
    # a concept the word lists do not hold: its name alone
    odd = [dict(entity_rows[0], concept1="zither music", description=describe_entity(["zither music"])), entity_rows[1]]
    assert description_ladder(odd, seed=0, encoder=LetterEncoder())["partial"][0] == "zither music"


def test_relations_ladder(relation_rows):
    ladder = description_ladder(relation_rows, seed=0, encoder=LetterEncoder())
    _check_common(ladder, relation_rows, "neurons_relations")
    for row, partial, near in zip(relation_rows, ladder["partial"], ladder["near_miss"]):
        key = json.loads(row["params"])["relation"]
        c1, c2, excs, _ = _RELATIONS[key]
        v = json.loads(row["params"])["exception_index"]
        if v is None:  # input kind only; the nearest other relation
            assert c1 in partial and c2 not in partial
            assert near in [describe_relation(a, b) for k, (a, b, _, _) in _RELATIONS.items() if k != key]
        else:  # without the exception; the other exception
            assert partial == describe_relation(c1, c2)
            assert near == describe_relation(c1, c2, excs[1 - v])
    assert description_ladder(relation_rows, seed=0, encoder=LetterEncoder()) == ladder


def test_ladder_refuses_bad_rows(entity_rows, relation_rows):
    with pytest.raises(ValueError, match="at least two"):
        description_ladder(entity_rows[:1], encoder=LetterEncoder())
    with pytest.raises(ValueError, match="one category"):
        description_ladder(entity_rows[:2] + relation_rows[:2], encoder=LetterEncoder())
    with pytest.raises(ValueError, match="category"):
        description_ladder([{"function_id": "numeric/f00000", "category": "numeric", "description": "x"}] * 2)


# ----------------------------------------------------------------------------- statistics


def test_auroc_and_its_interval():
    from sklearn.metrics import roc_auc_score

    from findbench.judge.card import _auroc_statistic

    rng = np.random.default_rng(3)
    pos, neg = rng.integers(0, 11, 15) / 10, rng.integers(0, 8, 15) / 10
    expected = roc_auc_score(np.r_[np.ones(15), np.zeros(15)], np.r_[pos, neg])
    assert auroc(pos, neg) == pytest.approx(expected)
    # the vectorised statistic on the sample itself is the same number
    levels = np.unique(np.r_[pos, neg])
    units = np.stack([np.searchsorted(levels, pos), np.searchsorted(levels, neg)], axis=1).astype(float)
    assert _auroc_statistic(len(levels))(units[None])[0] == pytest.approx(expected)
    summary = auroc_ci(pos, neg, n_resamples=2000)
    assert summary["n"] == 15 and summary["ci"][0] <= summary["auroc"] <= summary["ci"][1]
    assert auroc_ci(pos, neg, n_resamples=2000) == summary  # reproducible by seed
    assert auroc_ci(pos, neg, n_resamples=2000, seed=1)["ci"] != summary["ci"]
    # a perfect separation and a tie
    assert auroc_ci([1.0, 0.9, 0.8], [0.3, 0.2, 0.1], n_resamples=500) == {"auroc": 1.0, "ci": [1.0, 1.0], "n": 3}
    assert auroc_ci([0.5] * 4, [0.5] * 4, n_resamples=500) == {"auroc": 0.5, "ci": [0.5, 0.5], "n": 4}
    with pytest.raises(ValueError, match="paired"):
        auroc_ci([1.0, 0.5], [0.2])


def test_probe_verdicts_from_the_paired_bootstrap():
    from findbench.judge.card import VERDICTS, _probe_summary

    truth = [1.0, 0.9, 0.8, 1.0, 0.7, 0.9, 1.0, 0.8]
    below = _probe_summary(truth, [t - 0.3 for t in truth], 1000)
    assert below["verdict"] == VERDICTS[0] == "truth above probe" and below["truth_above_probe"] is True
    assert below["inflation"]["mean"] == pytest.approx(-0.3) and below["inflation"]["ci"] == pytest.approx([-0.3, -0.3])
    assert below["score"]["mean"] == pytest.approx(np.mean(truth) - 0.3)
    same = _probe_summary(truth, truth, 1000)  # padding that changes nothing: not established either way
    assert same["verdict"] == "not established" and same["truth_above_probe"] is False
    assert same["inflation"] == {"mean": 0.0, "ci": [0.0, 0.0], "n": 8, "p_value": 1.0}
    mixed = _probe_summary(truth, [t + d for t, d in zip(truth, [0.1, -0.1] * 4)], 1000)
    assert mixed["verdict"] == "not established"
    above = _probe_summary([t - 0.5 for t in truth], truth, 1000)
    assert above["verdict"] == "probe above truth" and above["truth_above_probe"] is False


def test_constant_rung_is_the_constant_interpreter_answer():
    from findbench.interpret.references import CONSTANT_ANSWERS

    assert {c: a.description for c, a in CONSTANT_ANSWERS.items()} == CONSTANT_DESCRIPTIONS


# ----------------------------------------------------------------------------- the card


class MuddledJudge(KnowingJudge):
    """Knows the truth, but every third answer does not parse."""

    name = "muddled-judge"

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        out = super().generate(conversations, max_new_tokens=max_new_tokens, temperature=temperature, progress=progress)
        return [a if i % 3 else "I cannot tell." for i, a in enumerate(out)]


def test_card_of_a_judge_that_knows_the_truth(tmp_path, string_rows, entity_rows, relation_rows):
    rows = {"strings": string_rows[:6], "neurons_entities": entity_rows, "neurons_relations": relation_rows}
    judge = KnowingJudge(rows)
    card = judge_card(judge, rows=rows, mode="logprob", encoder=LetterEncoder(), out=tmp_path / "card", progress=False,
                      n_resamples=1000)
    assert sorted(p.name for p in (tmp_path / "card").iterdir()) == sorted(CARD_FILES)
    saved = json.loads((tmp_path / "card" / "judge_card.json").read_text())
    rungs = (*RUNGS, *PROBE_RUNGS)
    assert saved["judge"] == "knowing-judge" and saved["mode"] == "logprob" and tuple(saved["rungs"]) == rungs
    assert list(saved["accuracy"]) == ["strings", "neurons_entities", "neurons_relations", "all"]
    assert saved["tests"] == ["find"] and "accuracy_near" not in saved
    assert len(saved["results"]) == 3 * len(rungs) and {r["tests"] for r in saved["results"]} == {"find"}
    assert [len(saved["ladder"][c]) for c in rows] == [6, 5, 9]
    assert {"function_id", "partial_rule", "near_miss_rule", "examples_only", "hedged_4", "padded",
            *[r for r in RUNGS if r != "empty"]} <= set(saved["ladder"]["strings"][0])
    for group, table in card["accuracy"].items():
        n = 20 if group == "all" else len(rows[group])
        assert tuple(table) == rungs and all(table[r]["n"] == n for r in rungs)
        assert table["true"] == {"mean": 1.0, "ci": [1.0, 1.0], "n": n}
        assert all(table[r]["mean"] < 1.0 and table[r]["ci"][0] <= table[r]["mean"] <= table[r]["ci"][1]
                   for r in rungs[1:])
        assert table["empty"] == {"mean": 0.0, "ci": [0.0, 0.0], "n": n}
        # a function scores higher with its true description than with any other: AUROC 1
        assert all(card["auroc"][group][r]["auroc"] == 1.0 for r in rungs[1:]), group
        # every probe (the judge picks option 1 for it) is below the truth: negative inflation, verdict
        # "truth above probe"
        for rung, probe in card["probes"][group].items():
            assert probe["score"] == table[rung]
            assert probe["inflation"]["mean"] == pytest.approx(table[rung]["mean"] - 1.0)
            assert probe["inflation"]["ci"][1] < 0 and probe["truth_above_probe"] is True, (group, rung)
    empty = [r for r in card["results"] if r["rung"] == "empty"]
    assert all(r["judged_unit_tests"] == 0 and r["accuracy"] == 0.0 for r in empty)  # never shown to the judge
    cost = card["cost"]
    assert cost["judged_unit_tests"] == (len(rungs) - 1) * 10 * 20 and cost["requests"] == cost["judged_unit_tests"]
    assert cost["tokens"] > 0 and cost["tokens_per_1000_unit_tests"] == pytest.approx(1000 * cost["tokens"] / cost["judged_unit_tests"])
    assert cost["tokens_counted_with"].startswith("an estimate") and cost["unparsed"] is None
    # the README: model-card front matter, the accuracy and AUROC tables, the method, the command
    readme = (tmp_path / "card" / "README.md").read_text()
    assert readme.startswith("---\n") and "judge_mode: logprob" in readme
    table = format_table(card)
    assert table in readme and format_table(card, what="auroc") in readme
    lines = table.splitlines()
    assert lines[0] == "| rung | strings | entities | relations | all |"
    assert [line.split(" | ")[0] for line in lines[2:]] == [f"| {r}" for r in rungs]
    probes = format_table(card, what="probes")
    assert probes in readme and probes.splitlines()[0] == "| probe | strings | entities | relations | all |"
    assert all(line.endswith("✓ |") for line in probes.splitlines()[2:])
    assert len(probes.splitlines()) == 2 + len(PROBE_RUNGS)
    assert "| true | 1.00 [1.00, 1.00] (n=6)† | 1.00 [1.00, 1.00] (n=5)† | 1.00 [1.00, 1.00] (n=9)† | 1.00 [1.00, 1.00] (n=20) |" in lines
    assert "findbench judge-card --judge knowing-judge --judge-mode logprob" in readme and "near_miss" in readme
    assert (tmp_path / "card" / "judge_card.png").stat().st_size > 5000


def test_card_counts_answers_that_do_not_parse(string_rows):
    rows = {"strings": string_rows[:5]}  # hedged_4 needs four other descriptions
    card = judge_card(MuddledJudge(rows), rows=rows, mode="generate", progress=False, n_resamples=200)
    cost = card["cost"]
    judged = cost["judged_unit_tests"]
    assert judged == (len(RUNGS) + len(PROBE_RUNGS) - 1) * 10 * 5
    assert cost["unparsed"] == sum(r["unparsed"] for r in card["results"]) > 0
    assert cost["unparsed_rate"] == pytest.approx(cost["unparsed"] / judged)
    true = next(r for r in card["results"] if r["rung"] == "true")
    assert true["unparsed_rate"] == pytest.approx(true["unparsed"] / 50) and true["accuracy"] < 1.0


def _near(tests: list[dict]) -> list[dict]:
    """Stand-in near-miss tests: each test's options rotated by one (a valid ``unit_tests_near``)."""
    out = []
    for ut in tests:
        k = len(ut["inputs"])
        order = [(i + 1) % k for i in range(k)]
        out.append({"inputs": [ut["inputs"][i] for i in order], "outputs": [ut["outputs"][i] for i in order],
                    "correct": order.index(ut["correct"] - 1) + 1})
    return out


class KnowingBothJudge(KnowingJudge):
    """Knows the truth on FIND's unit tests and on the near-miss ones."""

    def __init__(self, rows):
        super().__init__(rows)
        near = {c: [dict(r, unit_tests=r[TEST_COLUMNS["near"]]) for r in group] for c, group in rows.items()}
        self.answers.update(KnowingJudge(near).answers)


def test_card_on_both_test_sets(tmp_path, string_rows):
    rows = {"strings": [dict(r, unit_tests_near=_near(r["unit_tests"])) for r in string_rows[:6]]}
    card = judge_card(KnowingBothJudge(rows), rows=rows, mode="logprob", tests="both", out=tmp_path / "card",
                      progress=False, n_resamples=300)
    assert card["tests"] == ["find", "near"] and card["settings"]["tests"] == "both"
    for suffix in ("", "_near"):
        table = card["accuracy" + suffix]["strings"]
        assert table["true"]["mean"] == 1.0 and all(table[r]["mean"] < 1.0 for r in PROBE_RUNGS)
        assert all(p["truth_above_probe"] for p in card["probes" + suffix]["strings"].values())
    rungs = (*RUNGS, *PROBE_RUNGS)
    assert {(r["tests"], r["rung"]) for r in card["results"]} == {(t, r) for t in ("find", "near") for r in rungs}
    # the near tests put the correct option elsewhere: a judge that picks option 1 scores differently on them
    other = {t: next(r for r in card["results"] if r["tests"] == t and r["rung"] == "other")["per_function"]
             for t in ("find", "near")}
    assert other["find"] != other["near"]
    assert card["cost"]["judged_unit_tests"] == 2 * (len(RUNGS) + len(PROBE_RUNGS) - 1) * 10 * 6
    readme = (tmp_path / "card" / "README.md").read_text()
    for what in ("accuracy", "auroc", "probes"):
        assert format_table(card, what=what) in readme and format_table(card, what=what, tests="near") in readme
    assert "## Gaming probes: inflation over the true description (near-miss unit tests)" in readme
    assert "its 10 FIND unit tests and, separately, its 10 near-miss unit tests" in readme and "--tests both" in readme
    # near only: no FIND tables
    near = judge_card(KnowingBothJudge(rows), rows=rows, mode="logprob", tests="near", progress=False, n_resamples=300)
    assert "accuracy" not in near and near["accuracy_near"] == card["accuracy_near"]
    with pytest.raises(ValueError, match="tests: the card has no 'accuracy' table"):
        format_table(near)


def test_card_argument_checks(string_rows):
    rows = {"strings": string_rows[:5]}
    with pytest.raises(ValueError, match="functions_per_category"):
        judge_card(KnowingJudge(rows), functions_per_category=1)
    with pytest.raises(ValueError, match="mode"):
        judge_card(KnowingJudge(rows), rows=rows, mode="vote")
    with pytest.raises(ValueError, match="no functions for"):
        judge_card(KnowingJudge(rows), rows=rows, categories=["entities"])
    with pytest.raises(TypeError, match="continuation_logprobs"):
        judge_card(KnowingJudge(rows), rows=rows, mode="pmi", progress=False)
    with pytest.raises(ValueError, match="tests: unknown value .nearby.; did you mean .near."):
        judge_card(KnowingJudge(rows), rows=rows, tests="nearby")
    # near-miss tests need the column: one line naming tests= (--tests) and the column, before any judge loads
    lacking = {"strings": [{k: v for k, v in r.items() if k != "unit_tests_near"} for r in rows["strings"]]}
    with pytest.raises(ValueError, match=r"^tests: near-miss tests need the rows' 'unit_tests_near' column, which 5 "):
        judge_card(KnowingJudge(rows), rows=lacking, tests="both")
    with pytest.raises(ValueError, match="hedged needs 4"):
        judge_card(KnowingJudge(rows), rows={"strings": string_rows[:4]})
    # without probes four functions are enough, and the card has the ladder only
    card = judge_card(KnowingJudge(rows), rows={"strings": string_rows[:4]}, probes=False, progress=False,
                      n_resamples=100)
    assert tuple(card["accuracy"]["strings"]) == RUNGS and "probes" not in card


def test_cli_tests_flag():
    from findbench.cli import parse_args

    args = parse_args(["judge-card", "--judge", "embedded", "--out", "card", "--tests", "both"])
    assert args.tests == "both"
    assert parse_args(["judge-card", "--judge", "embedded", "--out", "card"]).tests == "find"
    with pytest.raises(SystemExit):
        parse_args(["judge-card", "--judge", "embedded", "--out", "card", "--tests", "all"])


# ----------------------------------------------------------------------------- shipped cards


@pytest.mark.parametrize("name", SHIPPED_CARDS)
def test_shipped_cards(name):
    folder = shipped_card(name)
    assert sorted(p.name for p in folder.iterdir()) == sorted(CARD_FILES)
    card = json.loads((folder / "judge_card.json").read_text())
    assert card["spec"] == name and card["mode"] == "pmi"
    assert list(card["accuracy"]) == ["strings", "neurons_entities", "neurons_relations", "all"]
    for group, table in card["accuracy"].items():
        # the ladder, then the probes (cards made before the probes have none)
        probes = tuple(table)[len(RUNGS):]
        assert tuple(table)[:len(RUNGS)] == RUNGS and probes in ((), PROBE_RUNGS)
        assert all(table[r]["n"] >= 8 for r in table)
        assert table["empty"]["mean"] == 0.0
        assert tuple(card["auroc"][group]) == (*RUNGS[1:], *probes)
    cost = card["cost"]
    n_rungs = len(card["accuracy"]["all"])
    assert cost["judged_unit_tests"] == (n_rungs - 1) * 10 * 8 * 3 * len(card.get("tests", ["find"]))
    assert cost["seconds_per_1000_unit_tests"] > 0
    assert format_table(card) in (folder / "README.md").read_text()


@pytest.mark.parametrize("name", SHIPPED_CARDS)
def test_the_card_code_rewrites_the_shipped_cards_byte_for_byte(name, tmp_path):
    """The statistics and the writer reproduce the shipped README.md and judge_card.json exactly.

    A card made before the gaming probes (no ``tests`` key, the six ladder rungs only) goes
    through the same code as a new one: its per-function results give its numbers again, and
    the writer writes its files as they were."""
    from findbench import stats
    from findbench.judge.card import _summaries, card_tests

    folder = shipped_card(name)
    card = json.loads((folder / "judge_card.json").read_text())
    resamples = card["settings"]["bootstrap"]["resamples"]
    cats = card["settings"]["categories"]
    for tests in card_tests(card):
        suffix = "" if tests == "find" else "_near"
        probes = tuple(card["accuracy" + suffix]["all"])[len(RUNGS):]
        tables = _summaries(card["results"], cats, RUNGS, probes, tests, resamples)
        assert tables == {k: v for k, v in card.items() if k in tables}
        assert ("accuracy" + suffix, "auroc" + suffix) == tuple(tables)[:2]
        assert ("probes" + suffix in tables) == bool(probes)
    for group in card["accuracy"]:  # and by hand, for the ladder on FIND's tests
        def per_function(rung, group=group):
            return [v for r in card["results"] if r["rung"] == rung and group in ("all", r["category"])
                    and r.get("tests", "find") == "find" for v in r["per_function"]]

        for rung in RUNGS:
            assert stats.mean_ci(per_function(rung), n_resamples=resamples) == card["accuracy"][group][rung]
            if rung != "true":
                assert auroc_ci(per_function("true"), per_function(rung), n_resamples=resamples) == card["auroc"][group][rung]
    write_card(card, tmp_path / "card")
    for file in CARD_FILES[:2]:
        assert (tmp_path / "card" / file).read_bytes() == (folder / file).read_bytes()


def test_the_shipped_judge_card_links_its_instrument_card():
    from findbench.models import shipped_evaluator_dir

    model_card = (shipped_card("embedded-evaluator").parents[1] / "embedded-evaluator-v2" / "README.md").read_text()
    assert shipped_evaluator_dir() is not None
    assert "cards/embedded-evaluator/README.md" in model_card


# ----------------------------------------------------------------------------- the embedded judges


@pytest.mark.slow
@pytest.mark.parametrize("judge", ["embedded", "embedded-evaluator"])
def test_embedded_judges_rank_the_true_description_first_on_entities(judge):
    card = judge_card(judge, mode="pmi", categories=["neurons_entities"], functions_per_category=8, progress=False,
                      n_resamples=1000, probes=False)
    acc = {r: s["mean"] for r, s in card["accuracy"]["neurons_entities"].items()}
    assert all(acc["true"] > acc[r] for r in RUNGS[1:]), acc
    assert all(card["auroc"]["neurons_entities"][r]["auroc"] > 0.5 for r in RUNGS[1:])
