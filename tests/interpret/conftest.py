"""Fixtures for the interpreter harness tests: a small dataset folder with every config.

Building the full configs costs minutes (1000 numeric functions with 150 MLP fits; entity
probes fitted on the packaged word lists), so the folder holds hand-made numeric rows, 12
procedural string rows, entity rows from four small word lists and the packaged relation
rows. It is written like ``findbench build`` writes a folder, so ``findbench call --data``
reads the same rows the harness runs on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from findbench.schema import CATEGORIES
from tests._words import ENTITY_WORDS


def numeric_params(family, variant="clean", *, noise=None, corruption=None, mlp=None, **params):
    return {
        "structure": "atomic",
        "op": None,
        "terms": [{"family": family, "params": params}],
        "domain": [-100.0, 100.0],
        "variant": variant,
        "noise": noise,
        "corruption": corruption,
        "mlp": mlp,
    }


#: numeric/f00000 clean, f00001 noisy, f00002 corrupted inside (10, 20), f00003 an MLP (|x|).
NUMERIC_PARAMS = [
    numeric_params("linear", slope=2.0, intercept=-1.0),
    numeric_params("relu", "noise", noise={"type": "normal", "seed": 7}, scale=2.0, bias=1.0, leak=0.1),
    numeric_params(
        "polynomial",
        "corruption",
        corruption={"type": "inside", "boundary": [10.0, 20.0], "mean": 5.0, "std": 0.1, "seed": 3},
        coeffs=[1.0, 0.0, 1.0],
    ),
    numeric_params(
        "absolute", "mlp", mlp={"w1": [1.0, -1.0], "b1": [0.0, 0.0], "w2": [1.0, 1.0], "b2": 0.0}, scale=1.0, bias=0.0
    ),
]


def write_data_folder(root: Path, rows_by_category: dict[str, list[dict]]) -> Path:
    """A dataset folder readable by ``findbench.find.load_rows(data=root)``."""
    import datasets

    from findbench import schema

    lines = ["---", "configs:"]
    for category, rows in rows_by_category.items():
        folder = root / category
        folder.mkdir(parents=True)
        datasets.Dataset.from_list(rows, features=schema.features()).to_parquet(
            str(folder / "test-00000-of-00001.parquet")
        )
        lines += [f"- config_name: {category}", "  data_files:", "  - split: test", f"    path: {category}/test-*"]
    (root / "README.md").write_text("\n".join(lines + ["---", ""]), encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    from findbench.find import numeric, strings
    from findbench.find.synthetic_neurons import generate_entities, generate_relations
    from findbench.lm.encoder import EMBEDDED_ENCODER

    rows = {
        "numeric": [numeric.row_from_params(p, i) for i, p in enumerate(NUMERIC_PARAMS)],
        "strings": strings.generate(12, seed=0, progress=False),
        # MiniLM alone: the harness tests need entity neurons, not the embedded LM's features
        "neurons_entities": generate_entities(0, words=ENTITY_WORDS, n_compositions=2, encoder=EMBEDDED_ENCODER),
        "neurons_relations": generate_relations(0),
    }
    return write_data_folder(tmp_path_factory.mktemp("find-small"), rows)


@pytest.fixture(scope="session")
def rows(data_dir) -> dict[str, list[dict]]:
    """``{category: rows}`` as read back from :func:`data_dir`."""
    from findbench.find import load_rows

    return {c: load_rows(c, data=data_dir) for c in CATEGORIES}


@pytest.fixture(scope="session")
def by_id(rows) -> dict[str, dict]:
    return {r["function_id"]: r for rs in rows.values() for r in rs}
