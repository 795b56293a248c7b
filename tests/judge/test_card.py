"""Instrument cards for judges (findbench.judge.card): the ladder of descriptions, the AUROC and
its interval, the card folder, the command, the shipped cards and (slow) the embedded judges."""

from __future__ import annotations

import json

import numpy as np
import pytest

from findbench.constants import CONSTANT_DESCRIPTIONS, JUDGE_CATEGORIES
from findbench.find.synthetic_neurons.entities import describe_entity
from findbench.find.synthetic_neurons.entity_words import load_entity_words
from findbench.find.synthetic_neurons.relations import describe_relation
from findbench.judge.card import RUNGS, TEST_COLUMNS, judge_card
from findbench.judge.card_doc import CARD_FILES, JudgeCard, format_table, read_card, write_card
from findbench.judge.config import JudgeCardConfig
from findbench.judge.ladder import description_ladder
from findbench.judge.probes import PROBE_RUNGS
from findbench.resources import data_path
from findbench.stats import auroc, auroc_ci
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
    "country_capital": (
        "a country",
        "the capital of that country",
        ["the input country is in Asia", "the input country is in Europe"],
        [("France", "Paris"), ("Japan", "Tokyo"), ("Peru", "Lima")],
    ),
    "country_language": (
        "a country",
        "the official language of that country",
        ["the input country is in North America", "the input country is in South America"],
        [("France", "French"), ("Japan", "Japanese"), ("Peru", "Spanish")],
    ),
    "book_author": (
        "the title of a book",
        "the author of that book",
        ["the input book was written after 1900", "the input book was written before 1900"],
        [("Emma", "Jane Austen"), ("Ulysses", "James Joyce"), ("Dracula", "Bram Stoker")],
    ),
}


@pytest.fixture(scope="module")
def relation_rows() -> list[dict]:
    rows = []
    for v in (None, 0, 1):
        for key, (c1, c2, excs, pairs) in _RELATIONS.items():
            other = [p for k, (_, _, _, ps) in _RELATIONS.items() if k != key for p in ps]
            exc = None if v is None else excs[v]
            rows.append(
                {
                    "function_id": f"neurons_relations/f{len(rows):05d}",
                    "category": "neurons_relations",
                    "subcategory": "atomic" if v is None else "corruption",
                    "name": key if v is None else f"{key}~except{v + 1}",
                    "params": json.dumps({"relation": key, "exception_index": v}),
                    "concept1": c1,
                    "concept2": c2,
                    "exception": exc,
                    "description": describe_relation(c1, c2, exc),
                    "unit_tests": _tests(pairs, other, entities=False, shift=0 if v is None else v + 1),
                }
            )
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
    from findbench.judge.ladder import _ladder

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
    assert any("other parameter" in r for r in rules["near_miss"]) and any(
        "sibling operation" in r for r in rules["near_miss"]
    )
    assert any(r.startswith("family only") for r in rules["partial"]) and any(
        r.startswith("step") for r in rules["partial"]
    )
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

    from findbench.stats import _auroc_statistic

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
    from findbench.judge.card import _probe_summary
    from findbench.judge.card_doc import VERDICTS, Inflation

    truth = [1.0, 0.9, 0.8, 1.0, 0.7, 0.9, 1.0, 0.8]
    below = _probe_summary(truth, [t - 0.3 for t in truth], 1000)
    assert below.verdict == VERDICTS[0] == "truth above probe" and below.truth_above_probe is True and below.mark == "✓"
    assert below.inflation.mean == pytest.approx(-0.3) and below.inflation.ci == pytest.approx([-0.3, -0.3])
    assert below.score.mean == pytest.approx(np.mean(truth) - 0.3)
    same = _probe_summary(truth, truth, 1000)  # padding that changes nothing: not established either way
    assert same.verdict == "not established" and same.truth_above_probe is False and same.mark == "?"
    assert same.inflation == Inflation(mean=0.0, ci=[0.0, 0.0], n=8, p_value=1.0)
    mixed = _probe_summary(truth, [t + d for t, d in zip(truth, [0.1, -0.1] * 4)], 1000)
    assert mixed.verdict == "not established"
    above = _probe_summary([t - 0.5 for t in truth], truth, 1000)
    assert above.verdict == "probe above truth" and above.truth_above_probe is False and above.mark == "✗"


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


def _card(judge, rows, **settings) -> JudgeCard:
    """The card of ``judge`` on ``rows`` (the letter encoder, no progress bars)."""
    settings = {"out": None, "categories": list(rows), **settings}
    cfg = JudgeCardConfig(judge=judge, **settings)
    return judge_card(cfg, rows, encoder=LetterEncoder(), progress=False)


def test_card_of_a_judge_that_knows_the_truth(tmp_path, string_rows, entity_rows, relation_rows):
    from findbench.judge.card_doc import Interval

    rows = {"strings": string_rows[:6], "neurons_entities": entity_rows, "neurons_relations": relation_rows}
    card = _card(KnowingJudge(rows), rows, judge_mode="logprob", out=str(tmp_path / "card"), n_resamples=1000)
    assert sorted(p.name for p in (tmp_path / "card").iterdir()) == sorted(CARD_FILES)
    text = (tmp_path / "card" / "judge_card.json").read_text()
    saved = json.loads(text)
    rungs = (*RUNGS, *PROBE_RUNGS)
    assert list(saved)[:6] == ["judge", "spec", "judge_identity", "mode", "rungs", "tests"] and "baseline" not in saved
    assert saved["judge_identity"] == {"source": "object", "name": "knowing-judge", "mode": "logprob"}
    assert saved["judge"] == "knowing-judge" and saved["mode"] == "logprob" and tuple(saved["rungs"]) == rungs
    assert list(saved["accuracy"]) == ["strings", "neurons_entities", "neurons_relations", "all"]
    assert saved["tests"] == ["find"] and "accuracy_near" not in saved and "rungs" not in saved["settings"]
    assert len(saved["results"]) == 3 * len(rungs) and {r["tests"] for r in saved["results"]} == {"find"}
    assert [len(saved["ladder"][c]) for c in rows] == [6, 5, 9]
    assert {
        "function_id",
        "partial_rule",
        "near_miss_rule",
        "examples_only",
        "hedged_4",
        "padded",
        *[r for r in RUNGS if r != "empty"],
    } <= set(saved["ladder"]["strings"][0])
    # the file is the card's JSON, and reads back to the same card and the same text
    assert read_card(tmp_path / "card") == card and saved == card.to_json()
    assert json.dumps(JudgeCard.from_json(saved).to_json(), indent=1) + "\n" == text
    for group, table in card.accuracy.items():
        n = 20 if group == "all" else len(rows[group])
        assert tuple(table) == rungs and all(table[r].n == n for r in rungs)
        assert table["true"] == Interval(mean=1.0, ci=[1.0, 1.0], n=n)
        assert all(table[r].mean < 1.0 and table[r].ci[0] <= table[r].mean <= table[r].ci[1] for r in rungs[1:])
        assert table["empty"] == Interval(mean=0.0, ci=[0.0, 0.0], n=n)
        # a function scores higher with its true description than with any other: AUROC 1
        assert all(card.auroc[group][r].auroc == 1.0 for r in rungs[1:]), group
        # every probe (the judge picks option 1 for it) is below the truth: negative inflation, verdict
        # "truth above probe"
        for rung, probe in card.probes[group].items():
            assert probe.score == table[rung]
            assert probe.inflation.mean == pytest.approx(table[rung].mean - 1.0)
            assert probe.inflation.ci[1] < 0 and probe.truth_above_probe is True, (group, rung)
    empty = [r for r in card.results if r.rung == "empty"]
    assert all(r.judged_unit_tests == 0 and r.accuracy == 0.0 for r in empty)  # never shown to the judge
    cost = card.cost
    assert cost.judged_unit_tests == (len(rungs) - 1) * 10 * 20 and cost.requests == cost.judged_unit_tests
    assert cost.tokens > 0 and cost.tokens_per_1000_unit_tests == pytest.approx(
        1000 * cost.tokens / cost.judged_unit_tests
    )
    assert cost.tokens_counted_with.startswith("an estimate") and cost.unparsed is None
    assert [(c.category, c.tests) for c in cost.per_category] == [(c, "find") for c in rows]
    # the README: model-card front matter, the accuracy and AUROC tables, the method, the command
    readme = (tmp_path / "card" / "README.md").read_text()
    assert readme.startswith("---\n") and "judge_mode: logprob" in readme
    assert "\n\nJudge: `knowing-judge`, an LM object given from Python, in `logprob` mode.\n\n" in readme
    table = format_table(card, tests="find")
    assert table in readme and format_table(card, what="auroc", tests="find") in readme
    lines = table.splitlines()
    assert lines[0] == "| rung | strings | entities | relations | all |"
    assert [line.split(" | ")[0] for line in lines[2:]] == [f"| {r}" for r in rungs]
    probes = format_table(card, what="probes", tests="find")
    assert probes in readme and probes.splitlines()[0] == "| probe | strings | entities | relations | all |"
    assert all(line.endswith("✓ |") for line in probes.splitlines()[2:])
    assert len(probes.splitlines()) == 2 + len(PROBE_RUNGS)
    assert (
        "| true | 1.00 [1.00, 1.00] (n=6)† | 1.00 [1.00, 1.00] (n=5)† | 1.00 [1.00, 1.00] (n=9)† "
        "| 1.00 [1.00, 1.00] (n=20) |"
        in lines
    )
    assert "findbench judge-card --judge knowing-judge --judge-mode logprob" in readme and "near_miss" in readme
    assert "--rungs" not in readme and "Beside the baseline" not in readme
    assert (tmp_path / "card" / "judge_card.png").stat().st_size > 5000


def test_card_counts_answers_that_do_not_parse(string_rows):
    rows = {"strings": string_rows[:5]}  # hedged_4 needs four other descriptions
    card = _card(MuddledJudge(rows), rows, judge_mode="generate", n_resamples=200)
    judged = card.cost.judged_unit_tests
    assert judged == (len(RUNGS) + len(PROBE_RUNGS) - 1) * 10 * 5
    assert card.cost.unparsed == sum(r.unparsed for r in card.results) > 0
    assert card.cost.unparsed_rate == pytest.approx(card.cost.unparsed / judged)
    true = next(r for r in card.results if r.rung == "true")
    assert true.unparsed_rate == pytest.approx(true.unparsed / 50) and true.accuracy < 1.0


def _near(tests: list[dict]) -> list[dict]:
    """Stand-in near-miss tests: each test's options rotated by one (a valid ``unit_tests_near``)."""
    out = []
    for ut in tests:
        k = len(ut["inputs"])
        order = [(i + 1) % k for i in range(k)]
        out.append(
            {
                "inputs": [ut["inputs"][i] for i in order],
                "outputs": [ut["outputs"][i] for i in order],
                "correct": order.index(ut["correct"] - 1) + 1,
            }
        )
    return out


class KnowingBothJudge(KnowingJudge):
    """Knows the truth on FIND's unit tests and on the near-miss ones."""

    def __init__(self, rows):
        super().__init__(rows)
        near = {c: [dict(r, unit_tests=r[TEST_COLUMNS["near"]]) for r in group] for c, group in rows.items()}
        self.answers.update(KnowingJudge(near).answers)


def test_card_on_both_test_sets(tmp_path, string_rows):
    rows = {"strings": [dict(r, unit_tests_near=_near(r["unit_tests"])) for r in string_rows[:6]]}
    card = _card(
        KnowingBothJudge(rows), rows, judge_mode="logprob", tests="both", out=str(tmp_path / "card"), n_resamples=300
    )
    assert card.tests == ["find", "near"] and card.settings.tests == "both"
    for tests in ("find", "near"):
        table = card.table("accuracy", tests)["strings"]
        assert table["true"].mean == 1.0 and all(table[r].mean < 1.0 for r in PROBE_RUNGS)
        assert all(p.truth_above_probe for p in card.table("probes", tests)["strings"].values())
    rungs = (*RUNGS, *PROBE_RUNGS)
    assert {(r.tests, r.rung) for r in card.results} == {(t, r) for t in ("find", "near") for r in rungs}
    # the near tests put the correct option elsewhere: a judge that picks option 1 scores differently on them
    other = {
        t: next(r for r in card.results if r.tests == t and r.rung == "other").per_function for t in ("find", "near")
    }
    assert other["find"] != other["near"]
    assert card.cost.judged_unit_tests == 2 * (len(RUNGS) + len(PROBE_RUNGS) - 1) * 10 * 6
    readme = (tmp_path / "card" / "README.md").read_text()
    for what in ("accuracy", "auroc", "probes"):
        assert all(format_table(card, what=what, tests=t) in readme for t in ("find", "near"))
    assert "## Gaming probes: inflation over the true description (near-miss unit tests)" in readme
    assert "its 10 FIND unit tests and, separately, its 10 near-miss unit tests" in readme and "--tests both" in readme
    # near only: no FIND tables
    near = _card(KnowingBothJudge(rows), rows, judge_mode="logprob", tests="near", n_resamples=300)
    assert near.accuracy is None and near.accuracy_near == card.accuracy_near
    with pytest.raises(ValueError, match="tests: the card has no 'accuracy' table"):
        format_table(near, tests="find")


def test_card_argument_checks(string_rows):
    from findbench.constants import UsageError

    rows = {"strings": string_rows[:5]}
    with pytest.raises(UsageError, match="--functions-per-category must be"):
        JudgeCardConfig(judge="embedded", out=None, functions_per_category=1)
    with pytest.raises(UsageError, match="--judge-mode: unknown value 'vote'"):
        JudgeCardConfig(judge="embedded", out=None, judge_mode="vote")
    with pytest.raises(UsageError, match="--tests: unknown value .nearby.; did you mean .near."):
        JudgeCardConfig(judge="embedded", out=None, tests="nearby")
    with pytest.raises(UsageError, match="--judge: unknown model 'embeded'.*did you mean 'embedded'"):
        JudgeCardConfig(judge="embeded", out=None)
    # the rungs: known names, the truth among them; a baseline's modes need a baseline
    with pytest.raises(UsageError, match="--rungs: unknown value 'wrong'"):
        JudgeCardConfig(judge="embedded", out=None, rungs="true,wrong")
    with pytest.raises(UsageError, match="--rungs must include 'true'"):
        JudgeCardConfig(judge="embedded", out=None, rungs=["other", "empty"])
    with pytest.raises(UsageError, match="--baseline-mode needs a baseline"):
        JudgeCardConfig(judge="embedded", out=None, baseline_mode="pmi")
    with pytest.raises(UsageError, match="--baseline-mode: unknown value 'vote'"):
        JudgeCardConfig(judge="embedded", out=None, baseline="embedded", baseline_mode="pmi,vote")
    cfg = JudgeCardConfig(judge="embedded", out=None, rungs="other, true", baseline="embedded", baseline_mode="pmi")
    assert (cfg.rungs, cfg.baseline_mode, cfg.categories) == (["other", "true"], ["pmi"], list(JUDGE_CATEGORIES))
    with pytest.raises(ValueError, match="no functions for"):
        _card(KnowingJudge(rows), {**rows}, categories=["entities"])
    with pytest.raises(TypeError, match="continuation_logprobs"):
        _card(KnowingJudge(rows), rows, judge_mode="pmi")
    # near-miss tests need the column: one line naming tests= (--tests) and the column, before any judge loads
    lacking = {"strings": [{k: v for k, v in r.items() if k != "unit_tests_near"} for r in rows["strings"]]}
    with pytest.raises(ValueError, match=r"^tests: near-miss tests need the rows' 'unit_tests_near' column, which 5 "):
        _card(KnowingJudge(rows), lacking, tests="both")
    with pytest.raises(ValueError, match="hedged needs 4"):
        _card(KnowingJudge(rows), {"strings": string_rows[:4]})
    # without probes four functions are enough, and the card has the ladder only
    card = _card(KnowingJudge(rows), {"strings": string_rows[:4]}, rungs=list(RUNGS), n_resamples=100)
    assert tuple(card.accuracy["strings"]) == RUNGS and card.probes is None and card.settings.probes is False


def _first_option(judge):
    """``judge`` that always picks option 1 in logprob mode (its generate mode unchanged)."""

    class FirstOption(type(judge)):
        name = "first-option"

        def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
            return [[0.0 if cand == "1" else -5.0 for cand in candidates] for _ in conversations]

    out = FirstOption.__new__(FirstOption)
    out.__dict__.update(judge.__dict__)
    return out


def test_table_a3_is_a_view_of_the_card(tmp_path, string_rows, entity_rows):
    """``--rungs true,other`` with a baseline is FIND's Table A3: the same functions and descriptions as
    the full card, each judge's numbers as the full card has them, the baseline(s) beside."""
    from findbench.judge.card_doc import format_comparison

    rows = {"strings": string_rows[:5], "neurons_entities": entity_rows}
    judge = KnowingJudge(rows)
    full = _card(judge, rows, judge_mode="logprob", n_resamples=300)
    a3 = _card(
        judge,
        rows,
        judge_mode="logprob",
        rungs="true,other",
        baseline=_first_option(MuddledJudge(rows)),
        baseline_mode="generate,logprob",
        n_resamples=300,
        out=str(tmp_path / "a3"),
    )
    assert list(a3.rungs) == ["true", "other"] and a3.probes is None and a3.settings.rungs == ["true", "other"]
    assert set(a3.ladder["strings"][0]) == {"function_id", "subcategory", "true", "other"}
    assert a3.settings.encoder is None  # no near misses: no encoder
    for cat in ("strings", "neurons_entities", "all"):
        for rung in ("true", "other"):
            assert a3.accuracy[cat][rung] == full.accuracy[cat][rung]
        assert a3.auroc[cat]["other"] == full.auroc[cat]["other"]
    # the baseline in each of its modes, on the same descriptions
    assert [m.label for m in a3.baseline] == ["before (generate)", "before (logprob)"]
    assert [m.mode for m in a3.baseline] == ["generate", "logprob"] and a3.baseline[0].judge == "first-option"
    generate, logprob = a3.baseline
    assert generate.accuracy["strings"]["true"].mean < 1.0 and generate.cost.unparsed > 0
    assert logprob.cost.unparsed is None and logprob.cost.judged_unit_tests == a3.cost.judged_unit_tests
    table = format_comparison(a3, tests="find")
    assert table.splitlines()[0] == "| category | rung | before (generate) | before (logprob) | after |"
    assert len(table.splitlines()) == 2 + 2 * 2  # two categories, two rungs; no `all` row
    readme = (tmp_path / "a3" / "README.md").read_text()
    assert (
        "## Beside the baseline" in readme
        and table in readme
        and "with 2 of its ladder's descriptions (true, other)" in readme
    )
    assert "--rungs true,other --baseline first-option --baseline-mode generate,logprob --out DIR" in readme
    assert read_card(tmp_path / "a3") == a3  # the baseline reads back too
    assert ("Baseline (before (generate)): `first-option`, an LM object given from Python, in `generate` mode."
            in readme)


def test_the_card_names_the_shipped_judge_and_one_trained_here(tmp_path, monkeypatch, string_rows):
    """The card says which judge it measured: the adapter shipped with findbench and its version, or a
    folder trained here with its path, steps and date."""
    import findbench.judge.scoring
    from findbench import __version__
    from findbench.constants import EMBEDDED_JUDGE_VERSION, TRAINED_MARKER

    rows = {"strings": string_rows[:3]}
    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path / "cache"))  # nothing installed here
    monkeypatch.setattr(findbench.judge.scoring, "load_judge", lambda judge, **kw: KnowingJudge(rows))
    local = tmp_path / "judge-20261128-120000"
    local.mkdir()
    record = {"judge_mode": "logprob", "steps": 7, "trained": "2026-11-28T12:00Z"}
    (local / TRAINED_MARKER).write_text(json.dumps(record))
    card = _card("embedded-evaluator", rows, judge_mode="logprob", rungs="true,other", baseline=str(local),
                 n_resamples=100, out=str(tmp_path / "card"))
    assert card.judge_identity.to_json() == {"source": "shipped", "name": "embedded-evaluator",
                                             "version": EMBEDDED_JUDGE_VERSION, "findbench": __version__,
                                             "mode": "logprob"}
    assert card.baseline[0].judge_identity.to_json() == {"source": "local", "name": str(local), "path": str(local),
                                                         "steps": 7, "trained": "2026-11-28T12:00Z", "mode": "logprob"}
    readme = (tmp_path / "card" / "README.md").read_text()
    assert (f"Judge: `embedded-evaluator` {EMBEDDED_JUDGE_VERSION}, the adapter shipped with findbench {__version__}, "
            f"in `logprob` mode. Baseline (before): the judge trained at `{local}` (7 steps, finished "
            "2026-11-28T12:00Z), in `logprob` mode.") in readme
    assert read_card(tmp_path / "card") == card


def test_cards_follow_the_schema(string_rows):
    """Shipped cards and a card with a baseline fit the schema; a document that does not is refused
    naming the field."""
    import jsonschema

    rows = {"strings": string_rows[:5]}
    card = _card(
        KnowingJudge(rows), rows, judge_mode="logprob", rungs="true,other", baseline=KnowingJudge(rows), n_resamples=100
    )
    schema = JudgeCard.json_schema()  # pinned in findbench/data/schemas by tests/test_schemas.py
    assert {"judge", "spec", "mode", "rungs", "results", "cost", "ladder", "settings"} <= set(schema["required"])
    assert "baseline" in schema["properties"] and "Measurement" in schema["$defs"]
    validator = jsonschema.Draft202012Validator(schema)
    for doc in (
        card.to_json(),
        *(json.loads((shipped_card(n) / "judge_card.json").read_text()) for n in SHIPPED_CARDS),
    ):
        assert not list(validator.iter_errors(doc))
    bad = dict(card.to_json(), mode=3)
    assert list(validator.iter_errors(bad))
    with pytest.raises(ValueError, match=r"^judge_card.json.mode: expected a valid string, got int$"):
        JudgeCard.from_json(bad)
    with pytest.raises(ValueError, match=r"judge_card.json: unknown key 'extra'"):
        JudgeCard.from_json(dict(card.to_json(), extra=1))


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
    card = read_card(folder)
    assert card.spec == name and card.mode == "pmi"
    assert list(card.accuracy) == ["strings", "neurons_entities", "neurons_relations", "all"]
    for group, table in card.accuracy.items():
        # the ladder, then the probes (cards made before the probes have none)
        probes = tuple(table)[len(RUNGS) :]
        assert tuple(table)[: len(RUNGS)] == RUNGS and probes in ((), PROBE_RUNGS)
        assert all(table[r].n >= 8 for r in table)
        assert table["empty"].mean == 0.0
        assert tuple(card.auroc[group]) == (*RUNGS[1:], *probes)
    n_rungs = len(card.accuracy["all"])
    assert card.cost.judged_unit_tests == (n_rungs - 1) * 10 * 8 * 3 * len(card.test_sets)
    assert card.cost.seconds_per_1000_unit_tests > 0
    assert format_table(card, tests="find") in (folder / "README.md").read_text()


@pytest.mark.parametrize("name", SHIPPED_CARDS)
def test_the_card_code_rewrites_the_shipped_cards(name, tmp_path):
    """The statistics and the writer reproduce the shipped README.md byte for byte and
    judge_card.json key for key and number for number (byte for byte for a card with ``tests``;
    an older one wrote ``cache_entries_before`` last).

    A card made before the gaming probes (no ``tests`` key, the six ladder rungs only) goes
    through the same code as a new one: its per-function results give its numbers again, and
    the writer writes its files as they were."""
    from findbench import stats
    from findbench.judge.card import _summaries

    folder = shipped_card(name)
    card = read_card(folder)
    resamples = card.settings.bootstrap.resamples
    cats = card.settings.categories
    for tests in card.test_sets:
        suffix = "" if tests == "find" else "_near"
        probes = tuple(card.table("accuracy", tests)["all"])[len(RUNGS) :]
        tables = _summaries(card.results, cats, RUNGS, probes, tests, resamples)
        assert tables == {k: getattr(card, k) for k in tables}
        assert ("accuracy" + suffix, "auroc" + suffix) == tuple(tables)[:2]
        assert ("probes" + suffix in tables) == bool(probes)
    for group in card.accuracy:  # and by hand, for the ladder on FIND's tests

        def per_function(rung, group=group):
            return [
                v
                for r in card.results
                if r.rung == rung and group in ("all", r.category) and r.test_set == "find"
                for v in r.per_function
            ]

        for rung in RUNGS:
            assert stats.mean_ci(per_function(rung), n_resamples=resamples) == card.accuracy[group][rung].to_json()
            if rung != "true":
                assert (
                    auroc_ci(per_function("true"), per_function(rung), n_resamples=resamples)
                    == card.auroc[group][rung].to_json()
                )
    write_card(card, tmp_path / "card")
    assert (tmp_path / "card" / "README.md").read_bytes() == (folder / "README.md").read_bytes()
    written, shipped = ((f / "judge_card.json").read_text() for f in (tmp_path / "card", folder))
    assert json.loads(written) == json.loads(shipped)
    if card.tests is not None:
        assert written == shipped


def test_the_shipped_judge_card_links_its_instrument_card():
    from findbench.models import shipped_judge_dir

    model_card = (shipped_card("embedded-evaluator").parents[1] / "embedded-evaluator-v2" / "README.md").read_text()
    assert shipped_judge_dir() is not None
    assert "cards/embedded-evaluator/README.md" in model_card


# ----------------------------------------------------------------------------- the embedded judges


@pytest.mark.slow
@pytest.mark.parametrize("judge", ["embedded", "embedded-evaluator"])
def test_embedded_judges_rank_the_true_description_first_on_entities(judge):
    cfg = JudgeCardConfig(
        judge=judge,
        out=None,
        judge_mode="pmi",
        categories="neurons_entities",
        functions_per_category=8,
        n_resamples=1000,
        rungs=list(RUNGS),
    )
    card = judge_card(cfg, progress=False)
    acc = {r: s.mean for r, s in card.accuracy["neurons_entities"].items()}
    assert all(acc["true"] > acc[r] for r in RUNGS[1:]), acc
    assert all(card.auroc["neurons_entities"][r].auroc > 0.5 for r in RUNGS[1:])
