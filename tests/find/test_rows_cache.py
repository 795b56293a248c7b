"""The on-disk cache of procedurally generated rows is keyed by what the rows depend on."""

from __future__ import annotations

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
