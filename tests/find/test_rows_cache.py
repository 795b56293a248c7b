"""The on-disk cache of procedurally generated rows is keyed by what the rows depend on; a function id
is checked against its category before anything is generated, and one numeric function is made alone."""

from __future__ import annotations

import time

import pytest

from findbench.find import rows


def test_row_cache_is_keyed_by_the_generators_and_their_data(tmp_path, monkeypatch):
    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path))
    calls = []

    def fake_generate(category, *, seed=0, progress=False):
        calls.append((category, seed))
        from findbench import schema

        return [schema.empty_row(function_id=f"{category}/f00000", category=category, subcategory="atomic", name="x",
                                 params="{}", code="", description=f"v{len(calls)}", source="procedural")]

    monkeypatch.setattr(rows, "generate_rows", fake_generate)
    first = rows.load_rows("neurons_relations")
    assert rows.load_rows("neurons_relations") == first and len(calls) == 1  # served from the cache
    before = rows.generator_fingerprint()
    monkeypatch.setattr("findbench._io.files_digest", lambda paths, root: "0" * 64)
    assert rows.generator_fingerprint() != before  # another generator or data file: other rows
    again = rows.load_rows("neurons_relations")
    assert len(calls) == 2 and again[0]["description"] == "v2"  # regenerated, not the stale rows
    assert len(list((tmp_path).rglob("neurons_relations-seed0-*.parquet"))) == 2


def test_procedural_sizes_are_known_without_generating(monkeypatch):
    monkeypatch.setattr(rows, "generate_rows", _must_not_generate)
    sizes = {c: rows.procedural_size(c) for c in ("numeric", "strings", "neurons_entities", "neurons_relations")}
    assert sizes == {"numeric": 1000, "strings": 1000, "neurons_entities": 200, "neurons_relations": 75}


def _must_not_generate(*args, **kwargs):
    raise AssertionError("generated rows")


@pytest.mark.parametrize("fid, last", [("numeric/f99999", "numeric/f00999"), ("strings/f01000", "strings/f00999"),
                                       ("neurons_entities/f00200", "neurons_entities/f00199"),
                                       ("neurons_relations/f00075", "neurons_relations/f00074")])
def test_an_id_past_the_category_is_refused_before_generating(fid, last, monkeypatch, tmp_path):
    from findbench.find import load_function, numeric

    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(rows, "generate_rows", _must_not_generate)
    monkeypatch.setattr(rows, "load_rows", _must_not_generate)
    monkeypatch.setattr(numeric, "generate_row", _must_not_generate)
    started = time.perf_counter()
    with pytest.raises(ValueError) as exc:
        load_function(fid)
    assert time.perf_counter() - started < 1.0  # the category's size is read, not generated
    category = fid.split("/")[0]
    assert str(exc.value) == (
        f"function: no function {fid!r}: {category} has {rows.procedural_size(category)} functions, "
        f"{category}/f00000 to {last}"
    )


def test_one_numeric_function_is_made_alone_unless_it_is_an_mlp(monkeypatch, tmp_path):
    from findbench.find import load_function, numeric

    # row k alone is row k of the whole generation (here 12 functions: two MLPs first)
    whole = numeric.generate(12, seed=3, progress=False)
    alone = [numeric.generate_row(i, 12, 3) for i in range(12)]
    assert [r is None for r in alone] == [r["subcategory"] == "mlp" for r in whole] and alone[:2] == [None, None]
    assert [r for r in alone if r is not None] == [r for r in whole if r["subcategory"] != "mlp"]

    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(rows, "generate_rows", _must_not_generate)
    row = numeric.generate_row(500, 1000, 0)
    fn = load_function("numeric/f00500")  # made alone: no generation of the category
    assert row is not None and fn(3.0) == numeric.make_function(row)(3.0)
    loaded = []

    def fake_load_rows(category, *, seed=0, data=None):
        loaded.append((category, seed, data))
        return [row | {"function_id": "numeric/f00000"}]

    monkeypatch.setattr(rows, "load_rows", fake_load_rows)
    assert load_function("numeric/f00000")(3.0) == fn(3.0)  # an MLP: from the whole (cached) category
    assert loaded == [("numeric", 0, None)]


def test_rows_of_a_dataset_folder_are_read_from_its_files(tmp_path):
    """Two folders of the same name (or one rebuilt) are each read as they are now: no cache
    keyed by the folder's name serves the other's rows."""
    import datasets

    from findbench import schema
    from findbench.find import numeric

    names = []
    for k, parent in ((501, tmp_path / "a"), (503, tmp_path / "b")):
        folder = parent / "find" / "numeric"
        folder.mkdir(parents=True)
        row = numeric.generate_row(k, 1000, 0)
        datasets.Dataset.from_list([row], features=schema.features()).to_parquet(
            str(folder / "test-00000-of-00001.parquet")
        )
        (parent / "find" / "README.md").write_text(
            "---\nconfigs:\n- config_name: numeric\n  data_files:\n  - split: test\n    path: numeric/test-*\n---\n",
            encoding="utf-8",
        )
        got = rows.load_rows("numeric", data=parent / "find")
        assert got == [row]
        names.append(got[0]["name"])
    assert names == ["constant", "polynomial"]
    with pytest.raises(FileNotFoundError, match="data: no config 'strings' in"):
        rows.load_rows("strings", data=tmp_path / "a" / "find")
