"""Tests for the curated relation tables behind FIND's 25 relation neurons."""

from __future__ import annotations

import json

import pytest

from findbench.find.synthetic_neurons.relation_tables import (
    Entry,
    RelationException,
    RelationTable,
    get_relation_table,
    load_relation_tables,
    normalize_text,
)

#: The FIND v1 relation neurons, under the anchor root (reached through the ``anchor`` fixture).
ANCHOR = "find-v1/neurons_relations/data.json"

KEYS = [
    "country_capital", "city_country", "head_of_state_country", "monument_country",
    "monument_continent", "us_city_state", "country_language", "person_occupation",
    "name_gender", "country_continent", "opera_composer", "book_author", "country_border",
    "politician_party", "river_continent", "city_timezone", "opera_language", "animal_food",
    "animal_habitat", "gemstone_color", "country_flag_color", "river_length",
    "country_max_elevation", "country_tallest_skyscraper", "country_male_height",
]
#: Relations that every UN member answers (the 193 sampled countries).
ALL_COUNTRIES = {"country_capital", "country_continent", "country_language", "country_flag_color",
                 "country_male_height", "country_max_elevation"}
#: Relations whose tables come from data packages (the rest are hand-written).
PACKAGED = {"country_capital", "country_continent", "country_language", "country_border", "city_country",
            "city_timezone", "us_city_state", "name_gender"}


@pytest.fixture(scope="module")
def tables() -> dict[str, RelationTable]:
    return {t.key: t for t in load_relation_tables()}


def test_order_and_keys(tables):
    assert [t.key for t in load_relation_tables()] == KEYS
    assert list(tables) == KEYS


def test_concepts_match_find_anchor(anchor):
    rows = json.loads(anchor(ANCHOR).read_text())
    atomic = [r for r in rows if not r.get("exeption")]
    corrupted = [r for r in rows if r.get("exeption")]
    assert len(atomic) == 25
    for table in load_relation_tables():
        i = KEYS.index(table.key)
        assert table.concept1 == atomic[i]["concept1"].strip()
        assert table.concept2 == atomic[i]["concept2"].strip()
        assert table.exceptions[0].text == corrupted[i]["exeption"].strip()
        assert table.exceptions[1].text == corrupted[25 + i]["exeption"].strip()


def test_sizes(tables):
    for key, table in tables.items():
        if key in ALL_COUNTRIES:
            assert len(table.sample_entries) == 193, key
            assert len(table.entries) == 193 if key not in PACKAGED else len(table.entries) >= 240, key
        else:
            assert len(table.sample_entries) >= 40, (key, len(table.sample_entries))
    # the package-backed domains are far larger than what unit tests sample
    assert len(tables["city_country"].entries) > 30000 and 400 < len(tables["city_country"].sample_entries) < 2000
    assert len(tables["us_city_state"].entries) > 3000 and len(tables["name_gender"].entries) > 30000
    for key, table in tables.items():
        assert (len(table.sample_entries) < len(table.entries)) == (key in PACKAGED), key


def test_subdomains_large_enough(tables):
    for key, table in tables.items():
        for which in (0, 1):
            exc = table.exceptions[which]
            inside = [e for e in table.sample_entries if exc.matches(e)]  # what unit tests draw from
            assert len(inside) >= 4, (key, which, len(inside))
            assert len(table.sample_entries) - len(inside) >= 20, (key, which)


def test_no_duplicate_inputs(tables):
    for key, table in tables.items():
        inputs = [normalize_text(e.input) for e in table.entries]
        assert len(inputs) == len(set(inputs)), key
        for entry in table.entries:
            assert table.lookup(entry.input) is entry
            for alias in entry.aliases:
                assert table.lookup(alias) is entry, (key, alias)


def test_outputs_are_plain_strings(tables):
    for key, table in tables.items():
        for entry in table.entries:
            assert entry.output.strip() == entry.output and entry.output, (key, entry.input)
            assert entry.output not in entry.alternatives


@pytest.mark.parametrize(
    "key, text, expected",
    [
        ("country_capital", "France", "Paris"),
        ("country_capital", "japan", "Tokyo"),
        ("country_capital", "Australia", "Canberra"),
        ("country_capital", "Ivory Coast", "Yamoussoukro"),
        ("country_continent", "Japan", "Asia"),
        ("country_continent", "Brazil", "South America"),
        ("country_continent", "Kenya", "Africa"),
        ("country_language", "Brazil", "Portuguese"),
        ("country_language", "Mexico", "Spanish"),
        ("country_flag_color", "Japan", "white and red"),
        ("country_max_elevation", "Nepal", "8.85"),
        ("country_max_elevation", "Argentina", "6.96"),
        ("country_max_elevation", "Tanzania", "5.89"),
        ("country_tallest_skyscraper", "United Arab Emirates", "828"),
        ("country_tallest_skyscraper", "USA", "541"),
        ("country_male_height", "Netherlands", "1.84"),
        ("city_country", "Tokyo", "Japan"),
        ("city_country", "Guadalajara", "Mexico"),
        ("city_country", "nyc", "United States"),
        ("head_of_state_country", "Abraham Lincoln", "United States"),
        ("head_of_state_country", "Queen Victoria", "United Kingdom"),
        ("head_of_state_country", "Nelson Mandela", "South Africa"),
        ("monument_country", "Eiffel Tower", "France"),
        ("monument_country", "Taj Mahal", "India"),
        ("monument_continent", "Machu Picchu", "South America"),
        ("monument_continent", "Sydney Opera House", "Oceania"),
        ("us_city_state", "Austin", "Texas"),
        ("us_city_state", "Sacramento", "California"),
        ("us_city_state", "Chicago", "Illinois"),
        ("person_occupation", "Albert Einstein", "physicist"),
        ("person_occupation", "Serena Williams", "tennis player"),
        ("name_gender", "Thomas", "male"),
        ("name_gender", "sarah", "female"),
        ("opera_composer", "Don Giovanni", "Wolfgang Amadeus Mozart"),
        ("opera_composer", "La traviata", "Giuseppe Verdi"),
        ("opera_composer", "Die Zauberflöte", "Wolfgang Amadeus Mozart"),
        ("opera_language", "Carmen", "French"),
        ("opera_language", "Peter Grimes", "English"),
        ("book_author", "Pride and Prejudice", "Jane Austen"),
        ("book_author", "1984", "George Orwell"),
        ("politician_party", "Margaret Thatcher", "Conservative Party"),
        ("politician_party", "Barack Obama", "Democratic Party"),
        ("river_continent", "Nile", "Africa"),
        ("river_continent", "the Amazon River", "South America"),
        ("river_continent", "Danube", "Europe"),
        ("river_length", "Nile", "6650"),
        ("river_length", "Thames", "346"),
        ("city_timezone", "Tokyo", "Asia/Tokyo"),
        ("city_timezone", "Chicago", "America/Chicago"),
        ("animal_food", "giant panda", "bamboo"),
        ("animal_food", "Koala", "eucalyptus leaves"),
        ("animal_habitat", "camel", "deserts"),
        ("gemstone_color", "Emerald", "green"),
        ("gemstone_color", "ruby", "red"),
        ("gemstone_color", "sapphire", "blue"),
    ],
)
def test_spot_checks(tables, key, text, expected):
    entry = tables[key].lookup(text)
    assert entry is not None, (key, text)
    assert entry.output == expected


def test_alternatives(tables):
    assert tables["country_capital"].lookup("Bolivia").accepts("La Paz")
    assert tables["country_capital"].lookup("South Africa").accepts("Cape Town")
    border = tables["country_border"].lookup("France")
    assert border.accepts("Germany") and border.accepts("Spain") and not border.accepts("Portugal")
    assert tables["country_continent"].lookup("Russia").accepts("Asia")
    assert tables["country_continent"].lookup("Australia").accepts("Australia")
    flag = tables["country_flag_color"].lookup("France")
    assert flag.output == "blue, white, and red" and flag.accepts("Blue, white and red")


def test_alternatives_other_tables(tables):
    assert tables["opera_composer"].lookup("Don Giovanni").accepts("Mozart")
    assert tables["city_country"].lookup("Paris").accepts("france")
    assert tables["head_of_state_country"].lookup("Barack Obama").accepts("USA")
    assert tables["us_city_state"].lookup("Kansas City").accepts("Missouri")  # the most populous one
    assert tables["us_city_state"].lookup("Kansas City, Kansas").accepts("Kansas")
    assert tables["city_timezone"].lookup("Chicago").accepts("Central Standard Time")
    assert tables["city_timezone"].lookup("Mumbai").accepts("UTC+5:30")
    assert tables["city_timezone"].lookup("Mumbai").accepts("IST")
    assert tables["river_length"].lookup("Amazon").accepts("6992")
    assert tables["name_gender"].lookup("Tiffany").accepts("woman")
    assert tables["book_author"].lookup("Oliver Twist").accepts("Dickens")


def test_attribute_exceptions(tables):
    def inside(key, which, text):
        table = tables[key]
        return table.exceptions[which].matches(table.lookup(text))

    assert inside("city_country", 0, "Monterrey") and not inside("city_country", 0, "Houston")
    assert inside("city_country", 1, "Houston")
    assert inside("head_of_state_country", 0, "Charles de Gaulle")
    assert inside("head_of_state_country", 1, "Catherine the Great")
    assert inside("monument_country", 0, "Statue of Liberty") and not inside(
        "monument_country", 0, "Golden Gate Bridge"
    )
    assert inside("monument_country", 1, "Eiffel Tower")
    assert inside("monument_continent", 1, "Uluru") and not inside("monument_continent", 1, "Sky Tower")
    assert inside("us_city_state", 0, "San Diego") and inside("us_city_state", 1, "Dallas")
    assert inside("name_gender", 0, "Thomas") and inside("name_gender", 1, "Sophia")
    assert not inside("name_gender", 1, "Thomas")
    assert inside("opera_composer", 0, "Tosca") and inside("opera_composer", 1, "Parsifal")
    assert not inside("opera_composer", 0, "Carmen") and not inside("opera_composer", 1, "Carmen")
    assert inside("book_author", 0, "1984") and inside("book_author", 1, "Moby-Dick")
    oz = tables["book_author"].lookup("The Wonderful Wizard of Oz")  # 1900: neither before nor after
    assert not any(e.matches(oz) for e in tables["book_author"].exceptions)
    assert inside("politician_party", 1, "Angela Merkel") and inside("politician_party", 0, "Tony Blair")
    assert inside("river_continent", 0, "Congo") and inside("river_continent", 1, "Rhine")
    assert inside("river_length", 0, "Mississippi") and inside("river_length", 1, "Volga")
    assert inside("city_timezone", 0, "Toronto") and inside("city_timezone", 1, "Seoul")
    assert inside("opera_language", 0, "Porgy and Bess") and inside("opera_language", 1, "Aida")
    assert inside("animal_food", 0, "lion") and inside("animal_food", 1, "zebra")
    assert not inside("animal_food", 0, "brown bear") and not inside("animal_food", 1, "brown bear")
    assert inside("animal_habitat", 0, "giraffe") and inside("animal_habitat", 1, "blue whale")
    assert inside("gemstone_color", 0, "garnet") and inside("gemstone_color", 1, "aquamarine")
    assert inside("country_tallest_skyscraper", 0, "Canada") and inside("country_tallest_skyscraper", 1, "China")


def test_numeric_outputs_parse(tables):
    for key in ("river_length", "country_tallest_skyscraper"):
        assert all(e.output.isdigit() for e in tables[key].entries), key
    for key, low, high in (("country_max_elevation", 0.0, 8.9), ("country_male_height", 1.55, 1.9)):
        for e in tables[key].entries:
            assert low < float(e.output) <= high and len(e.output.split(".")[1]) == 2, (key, e)


def test_border_is_symmetric_and_landlocked_islands_absent(tables):
    border = tables["country_border"]
    for entry in border.entries:
        for other in (entry.output, *entry.alternatives):
            assert entry.input in border.lookup(other).attrs["neighbors"], (entry.input, other)
    for island in ("Japan", "Iceland", "Australia", "Madagascar", "New Zealand"):
        assert border.lookup(island) is None


def test_skyscraper_only_where_known(tables):
    sky = tables["country_tallest_skyscraper"]
    assert sky.lookup("Tuvalu") is None and sky.lookup("Nepal") is None
    assert all(int(e.output) >= 100 for e in sky.entries)


def test_exception_subdomains(tables):
    cap = tables["country_capital"]
    assert cap.exceptions[0].matches(cap.lookup("Japan"))
    assert not cap.exceptions[0].matches(cap.lookup("France"))
    assert cap.exceptions[1].matches(cap.lookup("Peru"))
    un_members = {
        "Argentina",
        "Bolivia",
        "Brazil",
        "Chile",
        "Colombia",
        "Ecuador",
        "Guyana",
        "Paraguay",
        "Peru",
        "Suriname",
        "Uruguay",
        "Venezuela",
    }
    assert {e.input for e in cap.sample_entries if cap.exceptions[1].matches(e)} == un_members
    assert {e.input for e in cap.entries if cap.exceptions[1].matches(e)} == un_members | {
        "French Guiana",
        "Falkland Islands",
    }


def _entry(**attrs):
    return Entry(input="Tamara", output="x", alternatives=(), attrs=attrs)


def test_matches_ops():
    e = _entry(continent="Asia", year=1949, gender="woman", tags=["a", "b"])
    assert RelationException("t", "continent", "eq", "asia").matches(e)
    assert not RelationException("t", "continent", "eq", "Europe").matches(e)
    assert RelationException("t", "continent", "ne", "Europe").matches(e)
    assert not RelationException("t", "continent", "ne", "Asia").matches(e)
    assert RelationException("t", "continent", "in", ["Europe", "Asia"]).matches(e)
    assert not RelationException("t", "continent", "in", ("Europe", "Africa")).matches(e)
    assert RelationException("t", "year", "gt", 1900).matches(e)
    assert not RelationException("t", "year", "gt", 1949).matches(e)
    assert RelationException("t", "year", "lt", 1950).matches(e)
    assert not RelationException("t", "year", "lt", 1900).matches(e)
    assert RelationException("t", "input", "startswith", "T").matches(e)
    assert RelationException("t", "input", "startswith", "t").matches(e)
    assert not RelationException("t", "input", "startswith", "S").matches(e)
    assert not RelationException("t", "missing", "eq", "x").matches(e)
    assert not RelationException("t", "continent", "gt", 3).matches(e)


def test_exception_validation():
    with pytest.raises(ValueError, match="op"):
        RelationException("t", "a", "contains", "x")
    with pytest.raises(TypeError, match="value"):
        RelationException("t", "year", "gt", "1900")
    with pytest.raises(TypeError, match="value"):
        RelationException("t", "a", "in", "Asia")
    with pytest.raises(ValueError, match="text"):
        RelationException("", "a", "eq", "x")
    with pytest.raises(TypeError, match="entry"):
        RelationException("t", "a", "eq", "x").matches("France")


def test_entry_validation():
    with pytest.raises(ValueError, match="output"):
        Entry(input="a", output="", alternatives=(), attrs={})
    with pytest.raises(ValueError, match="input"):
        Entry(input=" ", output="b", alternatives=(), attrs={})
    with pytest.raises(TypeError, match="attrs"):
        Entry(input="a", output="b", alternatives=(), attrs=[1])


def test_lookup_normalization(tables):
    cap = tables["country_capital"]
    assert cap.lookup("  FRANCE ") is cap.lookup("france") is cap.lookup("France.")
    assert cap.lookup("Cote d’Ivoire") is cap.lookup("Côte d'Ivoire")
    assert cap.lookup("the Netherlands") is cap.lookup("Holland")
    assert cap.lookup("Atlantis") is None
    with pytest.raises(TypeError, match="text"):
        cap.lookup(None)


def test_duplicate_input_rejected():
    exc = RelationException("t", "a", "eq", "x")
    with pytest.raises(ValueError, match="duplicate"):
        RelationTable("k", "c1", "c2", (Entry("A", "b"), Entry("a ", "c")), (exc, exc))


def test_get_relation_table():
    assert get_relation_table("country_capital").concept2 == "the capital of that country"
    with pytest.raises(ValueError, match="key"):
        get_relation_table("nope")
    assert load_relation_tables() is not load_relation_tables()
    assert load_relation_tables()[0] is load_relation_tables()[0]


# ------------------------------------------------------------------------ exact spellings
def test_exact_names_match_only_as_spelled():
    """An entry's ``exact`` names (common words) match only spelled as written: capitals and
    accents kept, spaces, apostrophes, outer punctuation and a leading "the" still evened out."""
    exc = RelationException("t", "a", "eq", "x")
    orange = Entry("Orange", "United States", aliases=("Orange City",), exact=("Orange",))
    cat = Entry("Çat", "Turkey", exact=("Çat",))
    paris = Entry("Paris", "France")
    table = RelationTable("k", "c1", "c2", (orange, cat, paris), (exc, exc), recognizer=lambda key: key == "orange")
    for text in ("Orange", " Orange. ", "the Orange", "orange city", "Çat", "C\u0327at"):
        assert table.lookup(text) is not None, text  # "C\u0327at": a decomposed Ç is the same spelling
    for text in ("orange", "ORANGE", "the orange", "cat", "Cat", "CAT"):
        assert table.lookup(text) is None, text
        assert table.coverage(text) == "out_of_domain", text  # a word, even where the recognizer knows the key
    assert table.lookup("paris") is paris and table.coverage("Orange") == "served"
    with pytest.raises(ValueError, match="exact"):
        Entry("Orange", "United States", exact=("Orangeville",))
    assert Entry("Orange", "US", exact=("Orange",)).to_dict()["exact"] == ["Orange"]
    assert "exact" not in paris.to_dict()  # tables without the rule keep their fingerprints
