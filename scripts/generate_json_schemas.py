"""Regenerate the JSON schemas of findbench's typed outputs (a maintainer step, not run by findbench).

Each document findbench writes as JSON is a pydantic dataclass (:class:`findbench._typed.JsonDoc`), or a
class whose JSON form is a pydantic ``TypedDict`` (:func:`findbench._typed.json_form`), whose schema
pydantic generates (``TypeAdapter(T).json_schema()``), as SAEBench ships ``eval_output_schema_<type>.json``. This
script writes them to ``src/findbench/data/schemas/<name>.schema.json``; ``tests/test_schemas.py``
checks that the shipped files equal what it generates now and that every such file the tests
write fits its schema. Run it after changing one of the dataclasses in :data:`SCHEMAS`::

    python scripts/generate_json_schemas.py
"""

from __future__ import annotations

import importlib
import json
from importlib import resources
from pathlib import Path

#: Schema name → the dataclass (``module:Class``) whose JSON it describes.
SCHEMAS = {
    "scores": "findbench.interpret.scores:Scores",
    "autointerp_results": "findbench.autointerp.results:AutoInterpResults",
    "judge_card": "findbench.judge.card_doc:JudgeCard",
}


def document_class(name: str) -> type:
    """The dataclass of schema ``name``."""
    module, _, cls = SCHEMAS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def schema_text(name: str) -> str:
    """The text of ``<name>.schema.json``: the class's generated schema, indented, with a final newline."""
    return json.dumps(document_class(name).json_schema(), indent=2, ensure_ascii=False) + "\n"


def schemas_dir() -> Path:
    """``findbench/data/schemas`` of the findbench imported (the checkout's, installed editable)."""
    return Path(str(resources.files("findbench").joinpath("data", "schemas")))


def main() -> None:
    out = schemas_dir()
    out.mkdir(parents=True, exist_ok=True)
    for name in SCHEMAS:
        path = out / f"{name}.schema.json"
        path.write_text(schema_text(name), encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
