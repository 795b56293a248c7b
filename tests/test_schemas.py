"""The JSON schemas of findbench's typed outputs (findbench/data/schemas) are what the dataclasses
generate now (scripts/generate_json_schemas.py), valid draft 2020-12, and enforced on what the
tests write (tests/conftest.py checks every document as it is serialized)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from findbench.autointerp.results import AutoInterpResults
from findbench.interpret.scores import Cell, Estimate, Scores
from tests._paths import REPO
from tests._schemas import generator, shipped_schema

GEN = generator()


@pytest.mark.parametrize("name", list(GEN.SCHEMAS))
def test_shipped_schema_is_what_the_dataclass_generates(name):
    path = GEN.schemas_dir() / f"{name}.schema.json"
    assert path.read_text(encoding="utf-8") == GEN.schema_text(name), \
        f"{path.name} is stale: run python scripts/generate_json_schemas.py"
    jsonschema.Draft202012Validator.check_schema(shipped_schema(name))


def test_every_schema_file_has_its_dataclass():
    shipped = sorted(p.name for p in GEN.schemas_dir().glob("*.schema.json"))
    assert shipped == sorted(f"{n}.schema.json" for n in GEN.SCHEMAS)


@pytest.mark.parametrize(("name", "cls", "path"), [
    ("scores", Scores, REPO / "tests" / "interpret" / "data" / "scores.json"),
    ("autointerp_results", AutoInterpResults, REPO / "tests" / "autointerp" / "data" / "synthetic_eval_results.json"),
])
def test_files_written_before_the_types_fit_their_schema(name, cls, path):
    obj = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.validate(obj, shipped_schema(name), cls=jsonschema.Draft202012Validator)
    assert cls.from_json(obj).to_json() == obj


def test_a_document_that_does_not_fit_its_schema_is_refused_when_written():
    good = Scores({"strings": {"aia": Cell(exact_match=Estimate(0.5, (0.0, 1.0), 2), n_degenerate=1)}})
    assert good.to_json()["strings"]["aia"]["n_degenerate"] == 1
    with pytest.raises(jsonschema.ValidationError, match="-1 is less than the minimum of 0"):
        Scores({"strings": {"aia": Cell(n_degenerate=-1)}}).to_json()
    schema = jsonschema.Draft202012Validator(shipped_schema("scores"))
    cell = good.to_json()["strings"]["aia"]
    del cell["exact_match_n"]  # a mean without its n
    assert not schema.is_valid({"strings": {"aia": cell}})
    assert not schema.is_valid({"strings": {"gpt": good.to_json()["strings"]["aia"]}})  # no such method


def test_scores_name_their_judge_in_the_schema():
    from findbench.models import JudgeIdentity

    judge = JudgeIdentity("local", "judge-x", path="/j/judge-x", steps=12, trained="2026-11-28T12:00:00Z", mode="pmi")
    scores = Scores({"strings": {"aia": Cell(n_degenerate=0)}}, judge)
    obj = scores.to_json()
    assert list(obj) == ["judge", "strings"] and Scores.from_json(obj) == scores
    schema = jsonschema.Draft202012Validator(shipped_schema("scores"))
    assert schema.is_valid(obj)
    assert not schema.is_valid({**obj, "judge": {**obj["judge"], "source": "somewhere"}})
    assert not schema.is_valid({**obj, "judge": {"source": "shipped"}})  # a judge without its name
    with pytest.raises(ValueError, match="scores.json.judge: unknown key 'colour'"):
        Scores.from_json({**obj, "judge": {**obj["judge"], "colour": "red"}})
