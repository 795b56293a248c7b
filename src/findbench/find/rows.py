"""FIND function families and the one entry point to build or call any of them.

- :func:`generate_rows` makes the rows of one config (``numeric``, ``strings``,
  ``neurons_entities``, ``neurons_relations``) from a source: ``procedural`` (findbench's
  seeded generators) or ``find-v1`` (import of the original release).
- :func:`load_function` turns a function id or a dataset row into a callable.

Procedural rows are cached on disk per (package version, category, seed), so
``findbench call numeric/f00155 1 2 3`` regenerates a category once, then answers at once; a
numeric function other than an MLP approximation is made alone, without the others, and an id
past the category's size (:func:`procedural_size`) is refused before anything is generated.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from findbench import _checks, _io, schema
from findbench.schema import CONFIGS, RASP, SOURCES, parse_function_id

logger = logging.getLogger(__name__)

#: Functions the procedural ``numeric`` and ``strings`` generators make (FIND's sizes).
N_GENERATED = 1000
#: The configs whose module (``generate``, ``make_function``) is ``findbench.find.<config>``.
_MODULES = ("numeric", "strings")


def generate_rows(
    category: str,
    *,
    seed: int = 0,
    source: str = "procedural",
    data_dir: str | os.PathLike | None = None,
    progress: bool = True,
) -> list[dict]:
    """All rows of one config (:data:`findbench.schema.CONFIGS`), freshly made (no cache).

    ``seed`` drives ``procedural`` rows (same seed, identical rows); ``data_dir`` is the original
    release folder for ``find-v1`` (``None`` downloads it).
    """
    _checks.one_of("category", category, CONFIGS)
    _checks.one_of("source", source, SOURCES)
    _checks.integer("seed", seed)
    if category == RASP:
        from findbench.find.rasp import rows as rasp_rows

        if source != "procedural":
            raise ValueError("source: the rasp config is procedural only")
        return rasp_rows.generate(seed, progress=progress)
    if source == "find-v1":
        from findbench.find import find_v1

        return find_v1.load_rows(category, data_dir)
    if category in _MODULES:
        return importlib.import_module(f"findbench.find.{category}").generate(N_GENERATED, seed=seed, progress=progress)
    from findbench.find import synthetic_neurons as neurons

    if category == "neurons_entities":
        return neurons.generate_entities(seed=seed, progress=progress)
    return neurons.generate_relations(seed=seed)


def procedural_size(category: str) -> int:
    """How many functions the procedural generator makes for ``category`` (ids ``f00000`` up to
    ``f{n-1}``), read off the generators' constants and data without generating anything."""
    _checks.one_of("category", category, CONFIGS)
    if category == RASP:
        from findbench.find.rasp import store

        return len(store.read_store()["programs"])
    if category in ("numeric", "strings"):
        return N_GENERATED
    if category == "neurons_entities":
        from findbench.find.synthetic_neurons.entities import N_COMPOSITIONS
        from findbench.find.synthetic_neurons.entity_words import ENTITY_CONCEPTS

        return len(ENTITY_CONCEPTS) + N_COMPOSITIONS
    from findbench.find.synthetic_neurons.relation_tables import read_json
    from findbench.find.synthetic_neurons.relations import VARIANTS

    return len(read_json("relations.json")["relations"]) * len(VARIANTS)


def load_rows(category: str, *, seed: int = 0, data: str | os.PathLike | None = None) -> list[dict]:
    """Rows of one config: from a built / imported dataset folder ``data`` (as written by
    ``findbench build``) or else regenerated procedurally from ``seed`` (cached on disk)."""
    _checks.one_of("category", category, CONFIGS)
    if data is not None:
        import pyarrow.parquet as pq

        root = Path(data)
        files = sorted((root / category).glob("test-*.parquet"))
        if not files:
            raise FileNotFoundError(f"data: no config {category!r} in {root} (run `findbench build --out {root}`)")
        # The files themselves: datasets.load_dataset keys its cache by the folder's name and card,
        # so a rebuilt ./find, or another folder of the same name, would be served stale rows.
        return [row for f in files for row in pq.read_table(f).to_pylist()]
    return _cached_procedural_rows(category, seed)


def sample_rows(rows: Sequence[Mapping[str, Any]], k: int, *, seed: int = 0) -> list:
    """``k`` representative rows: a seeded sample stratified by ``subcategory`` (one per
    subcategory while ``k`` allows, largest first, the rest in proportion by the largest
    remainder), in their original order. ``limit`` keeps the first rows instead, and the first
    rows of a config are often all of one kind (numeric starts with 150 MLP fits)."""
    import random

    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"sample must be a positive integer, got {k!r}")
    if k >= len(rows):
        return list(rows)
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(str(row.get("subcategory") or ""), []).append(i)
    order = sorted(groups, key=lambda g: (-len(groups[g]), g))
    share = {g: int(n < k) for n, g in enumerate(order)}
    rest = k - sum(share.values())
    extra = {g: rest * len(groups[g]) / len(rows) for g in order}
    share = {g: min(len(groups[g]), share[g] + int(extra[g])) for g in order}
    for g in sorted(order, key=lambda g: -(extra[g] - int(extra[g]))):  # the largest remainders
        if sum(share.values()) < k and share[g] < len(groups[g]):
            share[g] += 1
    for g in order:  # groups too small for their share leave room in the others
        while sum(share.values()) < k and share[g] < len(groups[g]):
            share[g] += 1
    rng = random.Random(f"{seed}:sample")
    return [rows[i] for i in sorted(i for g in order for i in rng.sample(groups[g], share[g]))]


def generator_fingerprint() -> str:
    """What the procedurally generated rows depend on, hashed: every ``findbench/find/**/*.py``
    file (a comment included) and the data files it reads (word lists, associations, relation
    tables). The on-disk row cache is keyed by it, so rows of an older generator or other data are
    never served (the package version alone does not change between commits)."""
    from importlib import resources

    root = Path(str(resources.files("findbench")))
    data = root / "data"
    files = [*(root / "find").rglob("*.py"), data / "entities.json", *data.glob("entity_associations_*.json"),
             *(data / "relations").glob("*.json")]
    return _io.files_digest(files, root)[:16]


def _cached_procedural_rows(category: str, seed: int) -> list[dict]:
    import datasets

    from findbench._version import __version__

    folder = _io.cache_dir("rows", __version__)
    path = folder / f"{category}-seed{seed}-{generator_fingerprint()}.parquet"
    with _io.cache_lock(path, f"generating {category} (seed {seed})"):
        if not path.exists():
            logger.info("generating %s (seed %d) once; cached at %s", category, seed, path)
            rows = generate_rows(category, seed=seed)
            tmp = path.with_suffix(f".tmp-{os.getpid()}")
            try:
                datasets.Dataset.from_list(rows, features=schema.features(category)).to_parquet(str(tmp))
                os.replace(tmp, path)
            finally:  # Ctrl-C or an error: no half-written file left in the cache
                tmp.unlink(missing_ok=True)
    return datasets.Dataset.from_parquet(str(path)).to_list()


def load_function(
    function: str | Mapping[str, Any],
    *,
    seed: int = 0,
    data: str | os.PathLike | None = None,
    backend: str | None = None,
    lm: Any = None,
) -> Callable:
    """A callable for one FIND function: a function id (``"numeric/f00042"``) or a dataset row.

    ``seed`` picks the procedural rows when ``function`` is an id and ``data`` (a folder written by
    ``findbench build``) is None; ``backend`` / ``lm`` choose a neuron's backbone (``embedding`` /
    ``table`` / ``lm``) and its LM. Numeric functions map floats (or arrays) to floats, string
    functions str -> str; entity neurons return a score in [0, 1], relation neurons an answer.
    """
    if isinstance(function, str):
        row = _row_by_id(function, seed=seed, data=data)
    elif isinstance(function, Mapping):
        row = dict(function)
        if "function_id" not in row or "category" not in row:
            raise ValueError("function: a row needs 'function_id' and 'category'")
    else:
        raise TypeError(f"function must be a function id or a row mapping, got {type(function).__name__}")
    category = _checks.one_of("category", row["category"], CONFIGS)
    if category == RASP:
        from findbench.find.rasp import store

        return store.compiled_function(row)
    if category in _MODULES:
        return importlib.import_module(f"findbench.find.{category}").make_function(row)
    from findbench.find import synthetic_neurons as neurons

    return neurons.make_function(row, backend=backend, lm=lm)


def _row_by_id(fid: str, *, seed: int, data: str | os.PathLike | None) -> dict:
    """The row of the function id ``fid``: from ``data``, else procedural. An id past the
    category's size is refused (naming the valid range) before anything is generated."""
    category, index = parse_function_id(fid)
    if data is None and category == RASP and seed == 0:  # the shipped store: no rows needed
        from findbench.find.rasp import store

        record = store.program_record(fid)
        return {"function_id": fid, "category": RASP, "domain": record["domain"]}
    if data is None:
        n = procedural_size(category)
        if index >= n:
            raise ValueError(f"function: no function {fid!r}: {category} has {n} functions, "
                             f"{category}/f00000 to {category}/f{n - 1:05d}")
        if category == "numeric":
            from findbench.find import numeric

            row = numeric.generate_row(index, N_GENERATED, seed)
            if row is not None:  # an MLP approximation needs the joint fit of them all
                return row
    rows = load_rows(category, seed=seed, data=data)
    matches = [r for r in rows if r["function_id"] == fid]
    if not matches:
        span = f", {rows[0]['function_id']} to {rows[-1]['function_id']}" if rows else ""
        where = "" if data is None else f" of {data}"
        raise ValueError(f"function: no function {fid!r} in {category}{where} ({len(rows)} functions{span})")
    return matches[0]
