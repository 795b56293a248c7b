"""Curated knowledge tables for FIND's 25 synthetic relation neurons (FIND §2.3, Table A2).

Each FIND relation neuron maps an input of one kind (``concept1``, e.g. "a country") to an
attribute of it (``concept2``, e.g. "the capital of that country"); its two corrupted
variants answer "undefined" on a subdomain named by an exception clause ("the input
country is in Asia"). This module loads hand-written tables that let such a neuron be
evaluated without a language model: every :class:`Entry` carries the canonical answer,
other acceptable answers and the attributes the exception clauses test.

The data live in ``findbench/data/relations/``: shared entity tables (``countries.json``,
``cities.json``, ``operas.json`` …, each ``{"table": name, "rows": [...]}`` with a
``name``, optional ``aliases`` and attribute columns) and ``relations.json``, which names for
each relation its table, the output column, how to render it and the two exceptions.

Example:
    >>> tables = load_relation_tables()
    >>> capital = get_relation_table("country_capital")
    >>> capital.lookup("france").output
    'Paris'
    >>> capital.exceptions[0].matches(capital.lookup("Japan"))
    True
"""

from __future__ import annotations

import functools
import json
import logging
import numbers
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType
from typing import Any

__all__ = [
    "OPS",
    "RelationException",
    "Entry",
    "RelationTable",
    "load_relation_tables",
    "get_relation_table",
    "normalize_text",
]

logger = logging.getLogger(__name__)

OPS = ("eq", "ne", "in", "gt", "lt", "startswith")
"""Comparison operators an exception clause may use."""

_OUTPUT_MODES = ("first", "join")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bb": "'", "`": "'", "\u00b4": "'"})


def normalize_text(text: str) -> str:
    """Return the matching key of ``text``: case-folded, accents and outer punctuation removed.

    ``"  Côte d’Ivoire. "`` and ``"cote d'ivoire"`` give the same key.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    text = unicodedata.normalize("NFKD", text.translate(_APOSTROPHES))
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = re.sub(r"\s+", " ", text.casefold()).strip()
    return text.strip(" \t\"'.,;:!?")


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    return value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return normalize_text(a) == normalize_text(b)
    return a == b


@dataclass(frozen=True)
class RelationException:
    """One exception clause of a corrupted relation neuron.

    ``attr`` names a key of :attr:`Entry.attrs`, or ``"input"`` for the input string itself;
    ``op`` is one of :data:`OPS`: ``eq``/``ne`` compare (strings case- and accent-insensitively),
    ``in`` tests membership of the attribute in the collection ``value``, ``gt``/``lt`` compare
    numbers, ``startswith`` tests the attribute's text prefix (case-insensitively).
    """

    text: str
    attr: str
    op: str
    value: object

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError("text must be a non-empty string")
        if not isinstance(self.attr, str) or not self.attr:
            raise ValueError("attr must be a non-empty string")
        if self.op not in OPS:
            raise ValueError(f"op must be one of {OPS}, got {self.op!r}")
        if self.op in ("gt", "lt") and (
            not isinstance(self.value, numbers.Real) or isinstance(self.value, bool)
        ):
            raise TypeError(f"value must be a number for op {self.op!r}, got {self.value!r}")
        if self.op == "startswith" and (not isinstance(self.value, str) or not self.value):
            raise TypeError(f"value must be a non-empty string for op 'startswith', got {self.value!r}")
        if self.op == "in":
            if isinstance(self.value, (str, bytes)) or not isinstance(self.value, Iterable):
                raise TypeError(f"value must be a collection for op 'in', got {self.value!r}")
            object.__setattr__(self, "value", tuple(self.value))

    def matches(self, entry: Entry) -> bool:
        """Whether ``entry`` lies in this exception's subdomain (a missing attribute never does)."""
        if not isinstance(entry, Entry):
            raise TypeError(f"entry must be an Entry, got {type(entry).__name__}")
        if self.attr == "input":
            got: Any = entry.input
        elif self.attr in entry.attrs:
            got = entry.attrs[self.attr]
        else:
            return False
        if got is None:
            return False
        if self.op == "eq":
            return _same(got, self.value)
        if self.op == "ne":
            return not _same(got, self.value)
        if self.op == "in":
            return any(_same(got, v) for v in self.value)  # type: ignore[union-attr]
        if self.op == "startswith":
            return normalize_text(str(got)).startswith(normalize_text(str(self.value)))
        if not isinstance(got, numbers.Real) or isinstance(got, bool):
            return False
        return got > self.value if self.op == "gt" else got < self.value  # type: ignore[operator]

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (``in`` values as lists)."""
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"text": self.text, "attr": self.attr, "op": self.op, "value": value}


@dataclass(frozen=True)
class Entry:
    """One input of a relation with its canonical answer, accepted alternatives and attributes."""

    input: str
    output: str
    alternatives: tuple[str, ...] = ()
    attrs: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("input", "output"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        for name in ("alternatives", "aliases"):
            value = tuple(getattr(self, name))
            if not all(isinstance(v, str) and v.strip() for v in value):
                raise ValueError(f"{name} must hold non-empty strings, got {value!r}")
            object.__setattr__(self, name, value)
        if not isinstance(self.attrs, Mapping):
            raise TypeError(f"attrs must be a mapping, got {type(self.attrs).__name__}")
        object.__setattr__(self, "attrs", _freeze(dict(self.attrs)))

    def accepts(self, answer: str) -> bool:
        """Whether ``answer`` equals the output or an alternative (normalized comparison)."""
        key = normalize_text(answer)
        return any(key == normalize_text(a) for a in (self.output, *self.alternatives))


@dataclass(frozen=True)
class RelationTable:
    """A FIND relation (``concept1`` → ``concept2``) with its entries and two exception clauses."""

    key: str
    concept1: str
    concept2: str
    entries: tuple[Entry, ...]
    exceptions: tuple[RelationException, RelationException]
    _index: Mapping[str, Entry] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", tuple(self.entries))
        object.__setattr__(self, "exceptions", tuple(self.exceptions))
        if len(self.exceptions) != 2 or not all(isinstance(e, RelationException) for e in self.exceptions):
            raise ValueError(f"{self.key}: exceptions must be two RelationException objects")
        if not self.entries:
            raise ValueError(f"{self.key}: entries must not be empty")
        index: dict[str, Entry] = {}
        for entry in self.entries:
            key = normalize_text(entry.input)
            if key in index:
                raise ValueError(f"{self.key}: duplicate input {entry.input!r}")
            index[key] = entry
        for entry in self.entries:
            for alias in entry.aliases:
                key = normalize_text(alias)
                if key in index and index[key] is not entry:
                    raise ValueError(f"{self.key}: alias {alias!r} of {entry.input!r} collides with {index[key].input!r}")
                index[key] = entry
        object.__setattr__(self, "_index", MappingProxyType(index))

    def lookup(self, text: str) -> Entry | None:
        """The entry whose input or alias equals ``text`` (case/space/accent-insensitive), else None.

        A leading "the " is ignored when the text itself is not found ("the Nile" → "Nile").
        """
        key = normalize_text(text)
        hit = self._index.get(key)
        if hit is None and key.startswith("the "):
            hit = self._index.get(key[4:])
        return hit

    def subdomain(self, which: int) -> tuple[Entry, ...]:
        """Entries inside exception ``which`` (0 or 1), i.e. those its corruption maps to "undefined"."""
        exc = self._exception(which)
        return tuple(e for e in self.entries if exc.matches(e))

    def complement(self, which: int) -> tuple[Entry, ...]:
        """Entries outside exception ``which`` (0 or 1)."""
        exc = self._exception(which)
        return tuple(e for e in self.entries if not exc.matches(e))

    def _exception(self, which: int) -> RelationException:
        if which not in (0, 1) or isinstance(which, bool):
            raise ValueError(f"which must be 0 or 1, got {which!r}")
        return self.exceptions[which]


def _data_dir():
    return resources.files("findbench") / "data" / "relations"


def _read_json(name: str) -> dict[str, Any]:
    path = _data_dir() / name
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise FileNotFoundError(f"relation data file missing: {name}") from err


def _render(value: Any, fmt: str | None) -> str:
    if fmt is not None and isinstance(value, numbers.Real) and not isinstance(value, bool):
        return fmt.format(int(value) if fmt == "{:d}" else value)
    return str(value)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _join_phrase(items: Sequence[str], oxford: bool = True) -> str:
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + ("," if oxford else "") + " and " + items[-1]


def _build_entry(row: Mapping[str, Any], spec: Mapping[str, Any]) -> Entry | None:
    values = [v for v in _as_list(row.get(spec["output"])) if v is not None and v != ""]
    if not values:
        return None
    fmt = spec.get("format")
    rendered = [_render(v, fmt) for v in values]
    if spec.get("output_mode", "first") == "join":
        output = _join_phrase(rendered)
        alternatives = [_join_phrase(rendered, oxford=False), *rendered]
    else:
        output, alternatives = rendered[0], rendered[1:]
    alt_field = spec.get("alternatives_field")
    if alt_field:
        alternatives += [_render(v, fmt) for v in _as_list(row.get(alt_field))]
    seen = {normalize_text(output)}
    unique: list[str] = []
    for alt in alternatives:
        if normalize_text(alt) not in seen:
            seen.add(normalize_text(alt))
            unique.append(alt)
    attrs = {k: v for k, v in row.items() if k not in ("name", "aliases")}
    return Entry(input=row["name"], output=output, alternatives=tuple(unique), attrs=attrs,
                 aliases=tuple(row.get("aliases", ())))


def _build_table(spec: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> RelationTable:
    mode = spec.get("output_mode", "first")
    if mode not in _OUTPUT_MODES:
        raise ValueError(f"{spec['key']}: output_mode must be one of {_OUTPUT_MODES}, got {mode!r}")
    entries = tuple(e for e in (_build_entry(r, spec) for r in rows) if e is not None)
    exceptions = tuple(RelationException(**e) for e in spec["exceptions"])
    columns = {k for r in rows for k in r}
    for exc in exceptions:
        if exc.attr != "input" and exc.attr not in columns:
            raise ValueError(f"{spec['key']}: exception attr {exc.attr!r} is not a column of {spec['table']}")
    return RelationTable(key=spec["key"], concept1=spec["concept1"], concept2=spec["concept2"],
                         entries=entries, exceptions=exceptions)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=1)
def _load() -> tuple[RelationTable, ...]:
    specs = _read_json("relations.json")["relations"]
    rows_by_table: dict[str, list[dict[str, Any]]] = {}
    tables = []
    for spec in specs:
        name = spec["table"]
        if name not in rows_by_table:
            data = _read_json(f"{name}.json")
            if data.get("table") != name:
                raise ValueError(f"{name}.json: 'table' field is {data.get('table')!r}, expected {name!r}")
            rows_by_table[name] = data["rows"]
        tables.append(_build_table(spec, rows_by_table[name]))
    logger.debug("loaded %d relation tables", len(tables))
    return tuple(tables)


def load_relation_tables() -> list[RelationTable]:
    """The relation tables in FIND's order (Table A2), loaded once and cached."""
    return list(_load())


def get_relation_table(key: str) -> RelationTable:
    """The relation table with slug ``key`` (e.g. ``"country_capital"``)."""
    for table in _load():
        if table.key == key:
            return table
    known = ", ".join(t.key for t in _load())
    raise ValueError(f"key {key!r} is not a relation table; known: {known}")
