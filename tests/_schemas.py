"""The typed outputs' schemas as the tests use them: ``scripts/generate_json_schemas.py`` loaded as a
module, and a context in which every document of its classes is checked against its shipped
schema as it is serialized (``to_json``), so each file a test writes fits the pinned schema."""

from __future__ import annotations

import contextlib
import importlib.util
import json
from collections.abc import Iterator
from types import ModuleType

import pytest

from tests._paths import REPO


def generator() -> ModuleType:
    """``scripts/generate_json_schemas.py`` as a module."""
    path = REPO / "scripts" / "generate_json_schemas.py"
    spec = importlib.util.spec_from_file_location("generate_json_schemas", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shipped_schema(name: str) -> dict:
    """The shipped ``<name>.schema.json``."""
    return json.loads((generator().schemas_dir() / f"{name}.schema.json").read_text(encoding="utf-8"))


@contextlib.contextmanager
def documents_checked() -> Iterator[None]:
    """Within: ``to_json`` of each class of :data:`SCHEMAS` raises ``jsonschema.ValidationError``
    for a document that does not fit its shipped schema."""
    import jsonschema

    gen = generator()
    with pytest.MonkeyPatch.context() as mp:
        for name in gen.SCHEMAS:
            cls = gen.document_class(name)
            validator = jsonschema.Draft202012Validator(shipped_schema(name))

            def to_json(self, _original=cls.to_json, _validator=validator):
                obj = _original(self)
                _validator.validate(obj)
                return obj

            mp.setattr(cls, "to_json", to_json)
        yield
