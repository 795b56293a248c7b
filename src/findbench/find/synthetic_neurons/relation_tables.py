"""Knowledge tables for FIND's 25 synthetic relation neurons (FIND §2.3, Table A2).

Each FIND relation neuron maps an input of one kind (``concept1``, e.g. "a country") to an
attribute of it (``concept2``, e.g. "the capital of that country"); its two corrupted
variants answer "undefined" on a subdomain named by an exception clause ("the input
country is in Asia"). This module holds the data model (:class:`Entry`,
:class:`RelationTable`, :class:`RelationException`) and loads the tables that let such a
neuron be evaluated without a language model: every :class:`Entry` carries the canonical
answer, other acceptable answers and the attributes the exception clauses test.

The tables are package data in ``findbench/data/relations``: ``relations.json`` names each
relation's table, output column and exceptions; hand-written tables and the tables built from
GeoNames, pycountry, countryinfo, gender-guesser and WordNet (with the kind recognizers, check
sets and provenance) are JSON files that ``scripts/build_relation_tables.py`` regenerates.

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
import numbers
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType
from typing import Any

OPS = ("eq", "ne", "in", "gt", "lt", "startswith")
"""Comparison operators an exception clause may use."""

COVERAGE = ("served", "coverage_miss", "out_of_domain")
"""What :meth:`RelationTable.coverage` says about an input."""

_SCALARS = (str, int, float, bool, type(None))
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bb": "'", "`": "'", "\u00b4": "'"})
_OUTER = " \t\"'.,;:!?"


@functools.lru_cache(maxsize=1 << 19)
def normalize_text(text: str) -> str:
    """The matching key of ``text``: case-folded, accents and outer punctuation removed
    (``"  Côte d’Ivoire. "`` and ``"cote d'ivoire"`` give the same key)."""
    text = text.translate(_APOSTROPHES)
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text)
        text = "".join(ch for ch in text if not unicodedata.combining(ch))
    return " ".join(text.casefold().split()).strip(_OUTER)


def spelling(text: str) -> str:
    """``text`` as written, for exact matching: capitals and accents kept (NFC), only spaces,
    apostrophes and outer punctuation evened out (``"Çat"`` and ``"cat"`` share a key, not a spelling)."""
    text = unicodedata.normalize("NFC", text.translate(_APOSTROPHES))
    return " ".join(text.split()).strip(_OUTER)


def unique_texts(items: Iterable[str], *, skip: Iterable[str] = ()) -> list[str]:
    """``items`` without blanks and repeats (normalized), first spelling kept, in order."""
    seen = {normalize_text(s) for s in skip}
    out = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            continue
        key = normalize_text(item)
        if key and key not in seen:
            seen.add(key)
            out.append(item.strip())
    return out


def read_json(name: str) -> dict[str, Any]:
    """A JSON file of ``findbench/data/relations``."""
    return json.loads((resources.files("findbench") / "data" / "relations" / name).read_text(encoding="utf-8"))


@functools.cache
def table_rows(name: str) -> tuple[dict[str, Any], ...]:
    """The rows of table ``name`` (``{name}.json``): one object per row, or, in the built tables,
    ``columns`` and one list per row whose ``lookups`` columns hold a key into a shared value."""
    data = read_json(f"{name}.json")
    if "columns" not in data:
        return tuple(data["rows"])
    lookups = data.get("lookups", {})
    return tuple({c: lookups[c][v] if c in lookups and v is not None else v for c, v in zip(data["columns"], row)}
                 for row in data["rows"])


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
            "orange"; the common-word rule of ``scripts/build_relation_tables.py``).
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
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
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
def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _render(value: Any, fmt: str | None) -> str:
    if fmt is not None and isinstance(value, numbers.Real) and not isinstance(value, bool):
        return fmt.format(int(value) if fmt == "{:d}" else value)
    return str(value)


def _join_phrase(items: Sequence[str], oxford: bool = True) -> str:
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + ("," if oxford else "") + " and " + items[-1]


def _build_entry(row: Mapping[str, Any], spec: Mapping[str, Any], attrs: Mapping[str, Any]) -> Entry | None:
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
    return Entry(input=row["name"], output=output, alternatives=_alternatives(output, tuple(alternatives)), attrs=attrs,
                 aliases=tuple(row.get("aliases", ())), exact=tuple(row.get("exact", ())))


@functools.lru_cache(maxsize=1 << 14)
def _alternatives(output: str, alternatives: tuple[str, ...]) -> tuple[str, ...]:
    # memoized: thousands of city entries share their country's names or their zone's labels
    return tuple(unique_texts(alternatives, skip=[output]))


def _build_table(spec: Mapping[str, Any]) -> RelationTable:
    rows = table_rows(spec["table"])
    built = [(r, _build_entry(r, spec, a)) for r, a in zip(rows, _row_attrs(spec["table"]))]
    entries = tuple(e for _r, e in built if e is not None)
    core = tuple(e for r, e in built if e is not None and r.get("core", False))
    keys = _recognizers().get(spec["concept1"])
    return RelationTable(key=spec["key"], concept1=spec["concept1"], concept2=spec["concept2"], entries=entries,
                         exceptions=tuple(RelationException(**e) for e in spec["exceptions"]),  # type: ignore[arg-type]
                         source=_provenance_records()[spec["key"]]["source_text"], core=core,
                         recognizer=keys.__contains__ if keys is not None else None)


@functools.cache
def _row_attrs(name: str) -> tuple[Mapping[str, Any], ...]:
    """The frozen attributes of each row of table ``name`` (shared by the relations on it)."""
    out = tuple(_freeze({k: v for k, v in r.items() if k not in ("name", "aliases", "exact")}) for r in table_rows(name))
    _FROZEN_ATTRS.update(id(a) for a in out)
    return out


@functools.cache
def _recognizers() -> dict[str, frozenset[str]]:
    """Normalized inputs known to be of each kind (``concept1``), served or not (``recognizers.json``)."""
    return {concept: frozenset(keys) for concept, keys in read_json("recognizers.json").items()}


@functools.cache
def _provenance_records() -> dict[str, dict[str, Any]]:
    return read_json("provenance.json")["relations"]


@functools.lru_cache(maxsize=1)
def _load() -> tuple[RelationTable, ...]:
    return tuple(_build_table(spec) for spec in read_json("relations.json")["relations"])


def load_relation_tables() -> list[RelationTable]:
    """The relation tables in FIND's order (Table A2), loaded once per process."""
    return list(_load())


def get_relation_table(key: str) -> RelationTable:
    """The relation table with slug ``key`` (e.g. ``"country_capital"``)."""
    for table in _load():
        if table.key == key:
            return table
    known = ", ".join(t.key for t in _load())
    raise ValueError(f"key {key!r} is not a relation table; known: {known}")


# --------------------------------------------------------------------------------- provenance
def table_fingerprint(table: RelationTable) -> str:
    """sha256 of the canonical JSON of ``table``'s entries (inputs, answers, aliases, attributes):
    a data package release that changes any answer changes the fingerprint."""
    digest = hashlib.sha256()
    for entry in table.entries:
        digest.update(json.dumps(entry.to_dict(), sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def data_packages() -> dict[str, dict[str, str]]:
    """``{distribution: {"version", "licence"}}`` of the data packages the shipped tables were built from."""
    return read_json("provenance.json")["packages"]


def relation_provenance() -> dict[str, dict[str, Any]]:
    """Per relation: ``source`` ("package" / "hand-written"), ``table``, ``packages``
    ({distribution: version} it was built from), ``licence``, ``note``, ``n_entries`` (served),
    ``n_core`` (sampled), ``fingerprint`` (:func:`table_fingerprint`), for city_timezone
    ``tz_database`` (the IANA release of the build) and, for the tables applying the
    common-word rule, ``wordnet``. For dataset cards."""
    records = _provenance_records()
    return {t.key: {**{k: v for k, v in records[t.key].items() if k != "source_text"}, "n_entries": len(t.entries),
                    "n_core": len(t.sample_entries), "fingerprint": table_fingerprint(t)} for t in _load()}


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


@functools.cache
def relation_check(key: str) -> RelationCheck:
    """The independent check set of relation ``key`` (``checks.json``, see :class:`RelationCheck`).

    Package-backed relations are checked against another source: countries against
    countryinfo, cities against WordNet's city instances and the hand-written city tables,
    names against the hand-written name table. Hand-written relations are checked on their
    held-out entries; their coverage is measured on countryinfo's countries (country
    relations) or WordNet's rivers (river relations) where those exist.
    """
    get_relation_table(key)  # validates the key
    check = read_json("checks.json")[key]
    return RelationCheck(source=check["source"], items=tuple((text, tuple(answers)) for text, answers in check["items"]),
                         held_out=check["held_out"])
