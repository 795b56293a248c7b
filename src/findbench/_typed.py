"""Dataclasses as JSON documents: ``to_json`` / ``from_json`` and a JSON schema from the type hints.

A :class:`JsonDoc` dataclass writes its fields in declaration order (a field with metadata
``{"omit_none": True}`` is left out while None) and reads a JSON object back with every field
checked against its type hint: a one-line ValueError names the field's path and what it should
hold; unknown keys are refused. :meth:`JsonDoc.json_schema` generates the draft 2020-12 schema of
the same JSON (nested documents under ``$defs``), the form pinned in ``findbench/data/schemas/``.
A document whose JSON is not its fields one to one (keys built from a name) overrides
``to_json``, ``from_json`` and ``_object_schema``.

Types understood: ``bool``, ``int``, ``float`` (an int is accepted and kept as written), ``str``,
``Any``, ``None``, ``Literal[...]``, unions, ``list[X]``, ``tuple[X, Y]`` (a JSON array of that
length), ``dict[str, X]`` and :class:`JsonDoc` subclasses."""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from typing import Any, ClassVar, Literal, Union

#: The JSON schema dialect of the generated schemas.
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: Field metadata: leave the key out of the JSON while the value is None (an absent key reads as None).
OMIT_NONE = {"omit_none": True}

_SIMPLE = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}
_WORDS = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", type(None): "null"}


def _what(tp: Any) -> str:
    """A type hint in words, for error messages."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp in _WORDS:
        return _WORDS[tp]
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(_what(a) for a in args)
    if origin is list:
        return f"a list of {_what(args[0])}"
    if origin is tuple:
        return f"a list of {len(args)} ({', '.join(_what(a) for a in args)})"
    if origin is dict:
        return f"an object of {_what(args[1])}"
    if isinstance(tp, type) and issubclass(tp, JsonDoc):
        return f"an object ({tp.__name__})"
    return "any JSON value"


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def decode(tp: Any, value: Any, where: str) -> Any:
    """``value`` (parsed JSON) checked against the type hint ``tp``; ValueError naming ``where`` otherwise."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if isinstance(tp, type) and issubclass(tp, JsonDoc):
        return tp.from_json(value, where)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arm in (a for a in args if a is not type(None)):
            try:
                return decode(arm, value, where)
            except ValueError as exc:
                errors.append(exc)
        deeper = [e for e in errors if not str(e).startswith(f"{where}: expected ")]
        if len(errors) == 1 and deeper:  # the one arm fitted but a field inside it did not: name that field
            raise errors[0]
    elif origin is Literal:
        if any(type(value) is type(a) and value == a for a in args):
            return value
    elif origin is list:
        if isinstance(value, list):
            return [decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    elif origin is tuple:
        if isinstance(value, list) and len(value) == len(args):
            return tuple(decode(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    elif origin is dict:
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {k: decode(args[1], v, f"{where}.{k}") for k, v in value.items()}
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value  # kept as written: 0 stays 0, so a document reads back to the same text
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp in _SIMPLE:
        if isinstance(value, tp):
            return value
    else:
        raise TypeError(f"{where}: type {tp!r} has no JSON form")
    raise ValueError(f"{where}: expected {_what(tp)}, got {_type_name(value)}")


def encode(value: Any) -> Any:
    """The JSON form of a field's value (documents through their ``to_json``, tuples as lists)."""
    if isinstance(value, JsonDoc):
        return value.to_json()
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    return value


def schema_of(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of the type hint ``tp``; nested documents are added to ``defs`` and referenced."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return {}
    if tp in _SIMPLE:
        return {"type": _SIMPLE[tp]}
    if isinstance(tp, type) and issubclass(tp, JsonDoc):
        if tp.__name__ not in defs:
            defs[tp.__name__] = {}  # reserved first: a document may refer to itself
            defs[tp.__name__] = tp._object_schema(defs)
        return {"$ref": f"#/$defs/{tp.__name__}"}
    if origin is Literal:
        return {"const": args[0]} if len(args) == 1 else {"enum": list(args)}
    if origin in (Union, types.UnionType):
        arms = [schema_of(a, defs) for a in args]
        if all(set(a) == {"type"} for a in arms):
            return {"type": [a["type"] for a in arms]}
        return {"anyOf": arms}
    if origin is list:
        return {"type": "array", "items": schema_of(args[0], defs)}
    if origin is tuple:
        return {"type": "array", "prefixItems": [schema_of(a, defs) for a in args], "items": False,
                "minItems": len(args), "maxItems": len(args)}
    if origin is dict:
        return {"type": "object", "additionalProperties": schema_of(args[1], defs)}
    raise TypeError(f"type {tp!r} has no JSON schema")


def doc_summary(cls: type) -> str:
    """The first paragraph of a class's docstring, on one line."""
    doc = inspect.getdoc(cls) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


def _required(f: dataclasses.Field) -> bool:
    """Whether a field's key must be in the JSON: no default, and not left out while None."""
    has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    return not has_default and not f.metadata.get("omit_none")


class JsonDoc:
    """Base of dataclasses written as JSON objects (see the module docstring)."""

    #: What a document is called in error messages when read without a ``where``.
    JSON_NAME: ClassVar[str] = ""

    @classmethod
    def _hints(cls) -> dict[str, Any]:
        hints = typing.get_type_hints(cls)
        return {f.name: hints[f.name] for f in dataclasses.fields(cls)}  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        """The document as a JSON object (plain dicts, lists and scalars), keys in field order."""
        out = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is None and f.metadata.get("omit_none"):
                continue
            out[f.name] = encode(value)
        return out

    @classmethod
    def from_json(cls, obj: Any, where: str | None = None) -> Any:
        """The document read from a parsed JSON object; ValueError naming the field otherwise."""
        where = where or cls.JSON_NAME or cls.__name__
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected a JSON object, got {_type_name(obj)}")
        fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = [k for k in obj if k not in fields]
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(fields)})")
        values = {}
        for name, tp in cls._hints().items():
            f = fields[name]
            if name in obj:
                values[name] = decode(tp, obj[name], f"{where}.{name}")
            elif _required(f):
                raise ValueError(f"{where}: missing key {name!r}")
        return cls(**values)

    @classmethod
    def _object_schema(cls, defs: dict[str, Any]) -> dict[str, Any]:
        """The schema of one such object: its fields, those without a default (or ``omit_none``) required."""
        props, required = {}, []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            props[f.name] = schema_of(cls._hints()[f.name], defs)
            doc = f.metadata.get("doc")
            if doc:
                props[f.name] = {"description": doc, **props[f.name]}
            if _required(f):
                required.append(f.name)
        out = {"type": "object", "description": doc_summary(cls), "properties": props, "required": required,
               "additionalProperties": False}
        return out if out["description"] else {k: v for k, v in out.items() if k != "description"}

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON schema (draft 2020-12) of the document, nested documents under ``$defs``."""
        defs: dict[str, Any] = {}
        body = cls._object_schema(defs)
        head = {"$schema": SCHEMA_DIALECT, "title": cls.__name__}
        return head | body | ({"$defs": dict(sorted(defs.items()))} if defs else {})
