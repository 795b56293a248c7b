"""findbench's JSON documents on pydantic: :func:`document` makes a pydantic dataclass of one, and
:class:`JsonDoc` gives it ``to_json`` / ``from_json`` and its JSON schema.

A document writes its fields in declaration order (a field made with :func:`omit_none` is left out
while None) and reads a JSON object back strictly, as JSON (an int is a number, a string is not;
unknown keys are refused), raising a one-line ValueError that names the field's path
(``judge_card.json.cost.tokens: expected a valid integer, got str``). Its schema is pydantic's
(``TypeAdapter(T).json_schema()``, draft 2020-12, nested documents under ``$defs``), without the
per-property titles pydantic derives from the names; ``findbench/data/schemas/`` pins them.
A file whose JSON is not a document's fields one to one (keys built from a name) is described by its
:func:`json_form`, a ``TypedDict`` of its keys (``interpret/scores.py``, ``autointerp/results.py``)."""

from __future__ import annotations

import functools
import json
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic.json_schema import GenerateJsonSchema
from typing_extensions import TypedDict

#: The JSON schema dialect of the generated schemas.
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: Every document: unknown keys refused; NaN and infinities kept as floats (``json.dumps`` writes them or refuses).
CONFIG = ConfigDict(extra="forbid", ser_json_inf_nan="constants")


#: ``@document`` (or ``@document(frozen=True, ...)``): the class as a pydantic dataclass with :data:`CONFIG`.
document = functools.partial(pydantic_dataclass, config=CONFIG)


def omit_none(description: str | None = None) -> Any:
    """A field that defaults to None and is left out of the JSON while None (an absent key reads as None)."""
    return Field(default=None, description=description, exclude_if=lambda value: value is None)


def json_form(name: str, keys: dict[str, Any], doc: str, **config: Any) -> Any:
    """The JSON form of an object whose keys are built from names: a TypedDict ``name`` of ``keys`` (key → type,
    ``NotRequired[...]`` where it may be absent), described by ``doc``; unknown keys refused."""
    form = TypedDict(name, keys)  # type: ignore[operator]
    form.__doc__, form.__pydantic_config__ = doc, ConfigDict(**CONFIG, **config)  # type: ignore[attr-defined]
    return form


def _one_line(exc: ValidationError, where: str) -> str:
    """The first error of ``exc`` in one line, naming the key's path from ``where``."""
    err = exc.errors(include_url=False)[0]
    steps = [where, *(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])]
    path, parent, last = "".join(steps), "".join(steps[:-1]), err["loc"][-1] if err["loc"] else None
    if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        return f"{parent}: unknown key {last!r}"
    if err["type"].startswith("missing"):
        return f"{parent}: missing {'item' if isinstance(last, int) else 'key'} {last!r}"
    if err["type"] in ("value_error", "assertion_error"):
        return f"{path}: {err['ctx']['error']}"
    got = "null" if err["input"] is None else type(err["input"]).__name__
    return f"{path}: {err['msg'].replace('Input should be', 'expected')}, got {got}"


def validate(adapter: Any, obj: Any, where: str) -> Any:
    """``obj`` (parsed JSON) read strictly as JSON through ``adapter`` (a TypeAdapter, or a pydantic dataclass's
    ``__pydantic_validator__``); a ValueError naming ``where`` and the key otherwise."""
    try:
        return adapter.validate_json(json.dumps(obj, allow_nan=True), strict=True)
    except ValidationError as exc:
        raise ValueError(_one_line(exc, where)) from None


class _Schema(GenerateJsonSchema):
    """Pydantic's JSON schema without the titles it derives from field names (the names say it)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def json_schema(adapter: TypeAdapter) -> dict[str, Any]:
    """The draft 2020-12 JSON schema of ``adapter``'s type, as pinned in ``findbench/data/schemas``."""
    return {"$schema": SCHEMA_DIALECT, **adapter.json_schema(schema_generator=_Schema)}


class JsonDoc:
    """Base of the :func:`document` dataclasses written as JSON objects (see the module docstring)."""

    #: What a document is called in error messages when read without a ``where``.
    JSON_NAME: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:
        """The document as a JSON object (plain dicts, lists and scalars), keys in field order."""
        return self.__pydantic_serializer__.to_python(self, mode="json")  # type: ignore[attr-defined]

    @classmethod
    def from_json(cls, obj: Any, where: str | None = None) -> Any:
        """The document read from a parsed JSON object; ValueError naming the field otherwise."""
        return validate(cls.__pydantic_validator__, obj, where or cls.JSON_NAME or cls.__name__)  # type: ignore

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON schema (draft 2020-12) of the document, nested documents under ``$defs``."""
        return json_schema(TypeAdapter(cls))
