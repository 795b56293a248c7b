"""findbench._typed: pydantic dataclasses as JSON documents, read back strictly with the failing key named,
fields made with ``omit_none`` left out while None, and their schema."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal

import jsonschema
import pytest
from pydantic import Field

from findbench._typed import JsonDoc, document, omit_none


@document(frozen=True)
class Inner(JsonDoc):
    """An inner document."""

    x: int
    tags: list[str] = field(default_factory=list)


@document(frozen=True)
class Doc(JsonDoc):
    """A document with one field of each kind."""

    kind: Literal["doc"]
    mean: float | None
    ci: tuple[float, float] | None
    inner: Inner
    by_name: dict[str, Inner]
    extra: Any = Field(default=None, description="anything")
    note: str | None = omit_none()
    flag: bool = False


def _doc(**kw) -> Doc:
    return Doc(**{"kind": "doc", "mean": 0.5, "ci": (0.25, 0.75), "inner": Inner(1, ["a"]), "by_name": {"b": Inner(2)},
                  **kw})


def test_a_document_writes_its_fields_in_order_and_reads_back_equal():
    doc = _doc()
    obj = doc.to_json()
    assert list(obj) == ["kind", "mean", "ci", "inner", "by_name", "extra", "flag"]  # note: None, left out
    assert obj["ci"] == [0.25, 0.75] and obj["inner"] == {"x": 1, "tags": ["a"]} and obj["extra"] is None
    assert Doc.from_json(obj) == doc
    noted = _doc(note="hi", mean=float("nan"))
    assert noted.to_json()["note"] == "hi" and Doc.from_json(noted.to_json()).note == "hi"
    assert Doc.from_json({**obj, "mean": 1}).mean == 1.0  # a JSON int is a number


@pytest.mark.parametrize(("change", "message"), [
    ({"kind": "other"}, r"^Doc\.kind: expected 'doc', got str$"),
    ({"mean": "0.5"}, r"^Doc\.mean: expected a valid number, got str$"),
    ({"mean": True}, r"^Doc\.mean: expected a valid number, got bool$"),
    ({"ci": [0.1]}, r"^Doc\.ci: missing item 1$"),
    ({"inner": {"x": 1.5}}, r"^Doc\.inner\.x: expected a valid integer, got float$"),
    ({"by_name": {"b": {"x": 1, "tags": [3]}}}, r"^Doc\.by_name\.b\.tags\[0\]: expected a valid string, got int$"),
    ({"inner": {"x": 1, "y": 2}}, r"^Doc\.inner: unknown key 'y'$"),
    ({"surprise": 1}, r"^Doc: unknown key 'surprise'$"),
    ({"flag": 1}, r"^Doc\.flag: expected a valid boolean, got int$"),
])
def test_reading_names_the_field_that_does_not_fit(change, message):
    obj = {**_doc().to_json(), **change}
    with pytest.raises(ValueError, match=message):
        Doc.from_json(obj)


def test_a_missing_required_key_is_named():
    obj = _doc().to_json()
    del obj["inner"]
    with pytest.raises(ValueError, match=r"^Doc: missing key 'inner'$"):
        Doc.from_json(obj)
    del obj["flag"], obj["extra"]  # fields with a default may be left out
    obj["inner"] = {"x": 3}
    assert Doc.from_json(obj, "here") == _doc(inner=Inner(3))
    with pytest.raises(ValueError, match="^here: expected an object, got list$"):
        Doc.from_json([], "here")


def test_the_schema_accepts_what_is_written_and_refuses_what_reading_refuses():
    schema = Doc.json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == "Doc" and schema["description"] == "A document with one field of each kind."
    assert schema["required"] == ["kind", "mean", "ci", "inner", "by_name"]
    assert schema["properties"]["extra"]["description"] == "anything" and "title" not in schema["properties"]["extra"]
    assert schema["$defs"]["Inner"]["required"] == ["x"]
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid(_doc().to_json()) and validator.is_valid(_doc(note="n").to_json())
    for change, _ in test_reading_names_the_field_that_does_not_fit.pytestmark[0].args[1]:
        assert not validator.is_valid({**_doc().to_json(), **change}), change
