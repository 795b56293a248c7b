"""Training data for FIND's judge: simulated unit tests answered with ground-truth descriptions.

FIND (appendix F1) trained its judge on ~30K unit tests, uniform over the categories: a
ground-truth description and three items, one from the function. Rows use exactly the judge's
prompt and target. Functions are split into ``train`` and ``heldout`` by group before any row
is drawn (strings: the function; relations: a base relation with its corrupted variants;
entities: concepts, a function mixing held-out and trained concepts is ``excluded``).
Distractors come from functions of the same split sharing no group, and never from what the
function itself produces.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from findbench._checks import integer, positive_int, str_list
from findbench.constants import JUDGE_CATEGORIES
from findbench.judge.scoring import judge_category

log = logging.getLogger(__name__)

#: Bumped when the rows change for the same arguments.
DATA_VERSION = "2"
SPLIT_FILE = "function_splits.json"
_N_OPTIONS = 3


def _groups(row: Mapping[str, Any]) -> list[str]:
    """The group keys of a function (see module docstring)."""
    category = row["category"]
    if category == "strings":
        return [row["function_id"]]
    if category == "neurons_relations":
        return [str(row.get("name") or row["function_id"]).split("~", 1)[0]]
    concepts = [c for c in (row.get("concept1"), row.get("concept2")) if c]
    return concepts or [row["function_id"]]


def split_functions(
    rows: Sequence[Mapping[str, Any]], *, seed: int = 0, heldout_fraction: float = 0.2
) -> dict[str, str]:
    """``function_id -> "train" | "heldout" | "excluded"`` for one category's rows: a seeded
    ``heldout_fraction`` of the groups is held out, at least one group on each side."""
    integer("seed", seed)
    if not isinstance(heldout_fraction, (int, float)) or not 0.0 < heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must be in (0, 1), got {heldout_fraction!r}")
    if not rows:
        raise ValueError("rows is empty")
    ids = [r["function_id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("rows: function_id values must be unique")
    groups = sorted({g for r in rows for g in _groups(r)})
    if len(groups) < 2:
        raise ValueError(f"rows: need at least two function groups to split, got {len(groups)}")
    rng = random.Random(f"{seed}:{rows[0]['category']}")
    rng.shuffle(groups)
    n_held = min(len(groups) - 1, max(1, round(heldout_fraction * len(groups))))
    held = set(groups[:n_held])
    out = {}
    for r in rows:
        g = _groups(r)
        inside = sum(x in held for x in g)
        out[r["function_id"]] = "heldout" if inside == len(g) else "train" if inside == 0 else "excluded"
    return out


def function_items(row: Mapping[str, Any]) -> list[str | tuple[str, str]]:
    """The function's correct items from its unit tests: words or ``(input, output)`` pairs, without repeats."""
    seen: dict[Any, None] = {}
    for ut in row["unit_tests"]:
        k = int(ut["correct"]) - 1
        if ut.get("outputs") is None:
            item: Any = ut["inputs"][k]
        else:
            item = (ut["inputs"][k], ut["outputs"][k])
        seen.setdefault(item, None)
    return list(seen)


def _consistency_check(row: Mapping[str, Any]) -> Callable[[Any], bool] | None:
    """Whether an ``(input, output)`` item is what ``row`` itself gives (no distractor); None for entities."""
    if row["category"] == "neurons_entities":
        return None
    from findbench.find import load_function

    fn = load_function(dict(row))

    def produces(item: Any) -> bool:
        inp, out = item
        try:
            got = fn(inp)
        except Exception:  # noqa: BLE001 - a function failing on an input does not produce the item
            return False
        if isinstance(got, list):
            got = got[0] if got else None
        return str(got) == str(out)

    return produces


def _draw_rows(rows: Sequence[Mapping[str, Any]], n: int, split: str, rng: random.Random) -> list[dict]:
    """``n`` judge rows from ``rows`` (all of one category and one split)."""
    from findbench.judge.scoring import render_judge_prompt, render_judge_target

    if n <= 0:
        return []
    category = rows[0]["category"]
    items = [function_items(r) for r in rows]
    groups = [set(_groups(r)) for r in rows]
    checks = [_consistency_check(r) for r in rows]
    # balanced correct positions; the function order cycles through every function
    positions = [1 + (i % _N_OPTIONS) for i in range(n)]
    rng.shuffle(positions)
    order: list[int] = []
    while len(order) < n:
        block = list(range(len(rows)))
        rng.shuffle(block)
        order.extend(block)
    out = []
    for pos, i in zip(positions, order[:n]):
        correct = rng.choice(items[i])
        others = [j for j in range(len(rows)) if j != i and not (groups[j] & groups[i])]
        if not others:
            raise ValueError(f"{category}/{split}: no function to draw distractors from for {rows[i]['function_id']}")
        chosen = [correct]
        tries = 0
        while len(chosen) < _N_OPTIONS:
            tries += 1
            if tries > 200:
                raise ValueError(f"{category}/{split}: cannot draw distinct distractors for {rows[i]['function_id']}")
            cand = rng.choice(items[rng.choice(others)])
            key_inputs = [c if isinstance(c, str) else c[0] for c in chosen]
            cand_input = cand if isinstance(cand, str) else cand[0]
            if cand in chosen or cand_input in key_inputs:
                continue
            if checks[i] is not None and checks[i](cand):
                continue
            chosen.append(cand)
        options = chosen[1:]
        options.insert(pos - 1, correct)
        if isinstance(correct, str):
            unit_test = {"inputs": list(options), "outputs": None, "correct": pos}
        else:
            unit_test = {"inputs": [o[0] for o in options], "outputs": [o[1] for o in options], "correct": pos}
        out.append(
            {
                "messages": render_judge_prompt(rows[i]["description"], unit_test, category),
                "target": render_judge_target(unit_test),
                "description": rows[i]["description"],
                "category": category,
                "function_id": rows[i]["function_id"],
                "correct": pos,
                "split": split,
                "unit_test": json.dumps(unit_test, ensure_ascii=False, sort_keys=True),
            }
        )
    return out


def _shares(n: int, k: int) -> list[int]:
    return [n // k + (1 if i < n % k else 0) for i in range(k)]


def build_judge_rows(
    rows_by_category: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    n: int = 30000,
    n_heldout: int | None = None,
    seed: int = 0,
    heldout_fraction: float = 0.2,
) -> tuple[list[dict], list[dict], dict[str, str]]:
    """``(train_rows, heldout_rows, function_splits)`` from function rows, in memory: ``n`` training
    rows split evenly across the categories, ``n_heldout`` (default ``n // 10``) from held-out functions."""
    positive_int("n", n)
    n_heldout = n // 10 if n_heldout is None else integer("n_heldout", n_heldout, 0)
    if not isinstance(rows_by_category, Mapping) or not rows_by_category:
        raise ValueError("rows_by_category must be a non-empty mapping category -> rows")
    cats = [judge_category(c) for c in rows_by_category]
    if len(set(cats)) != len(cats):
        raise ValueError(f"rows_by_category: duplicate categories {list(rows_by_category)}")
    train: list[dict] = []
    held: list[dict] = []
    splits: dict[str, str] = {}
    for (key, rows), cat, n_c, h_c in zip(
        rows_by_category.items(), cats, _shares(n, len(cats)), _shares(n_heldout, len(cats))
    ):
        for i, r in enumerate(rows):
            if r.get("category") != cat:
                raise ValueError(f"rows_by_category[{key!r}][{i}]['category'] is {r.get('category')!r}, not {cat!r}")
            if not isinstance(r.get("description"), str) or not r["description"].strip():
                raise ValueError(f"rows_by_category[{key!r}][{i}] has no ground-truth 'description'")
            if not r.get("unit_tests"):
                raise ValueError(f"rows_by_category[{key!r}][{i}] has no 'unit_tests'")
        cat_split = split_functions(rows, seed=seed, heldout_fraction=heldout_fraction)
        splits.update(cat_split)
        rng = random.Random(f"{seed}:{cat}:rows")
        by_split = defaultdict(list)
        for r in rows:
            by_split[cat_split[r["function_id"]]].append(r)
        log.info(
            "%s: %d train / %d held-out / %d excluded functions",
            cat,
            len(by_split["train"]),
            len(by_split["heldout"]),
            len(by_split["excluded"]),
        )
        train.extend(_draw_rows(by_split["train"], n_c, "train", rng))
        if h_c and len(by_split["heldout"]) >= 2:
            held.extend(_draw_rows(by_split["heldout"], h_c, "heldout", rng))
    random.Random(f"{seed}:shuffle").shuffle(train)
    return train, held, splits


def _card(meta: Mapping[str, Any]) -> str:
    from findbench.resources import card_template

    body = card_template("evaluator_data_card.md")
    header = {
        "pretty_name": "FIND judge training data (simulated unit tests)",
        "license": "mit",
        "task_categories": ["text-generation"],
        "tags": ["interpretability", "find", "judge"],
        "configs": [
            {
                "config_name": "default",
                "data_files": [
                    {"split": "train", "path": "data/train-*.parquet"},
                    {"split": "validation", "path": "data/validation-*.parquet"},
                ],
            }
        ],
    }
    import yaml

    fields = {k: str(v) for k, v in meta.items() if not isinstance(v, (dict, list))}
    fields["counts_table"] = "\n".join(
        f"| {cat} | {c['train_functions']} | {c['heldout_functions']} | {c['excluded_functions']} "
        f"| {c['train_rows']} | {c['heldout_rows']} |"
        for cat, c in meta["per_category"].items()
    )
    for k, v in fields.items():
        body = body.replace("{" + k + "}", v)
    return "---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n\n" + body


def build_judge_data(
    cfg: Any = None,
    /,
    *,
    categories: Sequence[str] = JUDGE_CATEGORIES,
    function_seed: int = 0,
    rows_by_category: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    **settings: Any,
) -> Path:
    """Write the judge's training data to the folder ``cfg.out`` (replaced atomically) and return it.

    ``cfg``: :class:`~findbench.judge.config.JudgeDataConfig` (``findbench judge-data``'s flags:
    ``out``, ``n``, ``n_heldout``, ``seed``, ``heldout_fraction``, ``data``); the keyword form
    ``build_judge_data(out, n=..., ...)`` builds the same config. The folder holds
    ``data/{train,validation}-00000-of-00001.parquet``, a README card that makes
    ``datasets.load_dataset(out)`` work offline, and ``function_splits.json``. The functions come
    from ``rows_by_category``, else the ``findbench build`` folder ``data``, else ``function_seed``.
    """
    import datasets

    from findbench._config import config_of
    from findbench._io import atomic_dir
    from findbench._version import __version__
    from findbench.find import load_rows
    from findbench.judge.config import JudgeDataConfig

    cfg = config_of(JudgeDataConfig, cfg, settings, function="build_judge_data", first="out")
    out, n, n_heldout, seed, heldout_fraction, data = (cfg.out, cfg.n, cfg.n_heldout, cfg.seed, cfg.heldout_fraction,
                                                       cfg.data)

    if rows_by_category is None:
        cats = [judge_category(c) for c in str_list("categories", categories)]
        rows_by_category = {c: load_rows(c, seed=function_seed, data=data) for c in cats}
    train, held, splits = build_judge_rows(
        rows_by_category, n=n, n_heldout=n_heldout, seed=seed, heldout_fraction=heldout_fraction
    )
    per_category: dict[str, dict[str, int]] = {}
    for cat, rows in rows_by_category.items():
        cat = judge_category(cat)
        ids = [r["function_id"] for r in rows]
        per_category[cat] = {
            "train_functions": sum(splits[i] == "train" for i in ids),
            "heldout_functions": sum(splits[i] == "heldout" for i in ids),
            "excluded_functions": sum(splits[i] == "excluded" for i in ids),
            "train_rows": sum(r["category"] == cat for r in train),
            "heldout_rows": sum(r["category"] == cat for r in held),
        }
    meta = {
        "findbench_version": __version__,
        "data_version": DATA_VERSION,
        "n": n,
        "n_heldout": len(held),
        "seed": seed,
        "heldout_fraction": heldout_fraction,
        "function_seed": function_seed,
        "function_source": str(data) if data is not None else "procedural",
        "per_category": per_category,
    }
    text = datasets.Value("string")
    features = datasets.Features(
        {
            "messages": [{"role": text, "content": text}],
            "target": text,
            "description": text,
            "category": text,
            "function_id": text,
            "correct": datasets.Value("int32"),
            "split": text,
            "unit_test": text,
        }
    )
    with atomic_dir(out) as tmp:
        (tmp / "data").mkdir()
        for name, rows in (("train", train), ("validation", held)):
            ds = (
                datasets.Dataset.from_list(rows, features=features)
                if rows
                else datasets.Dataset.from_dict({k: [] for k in features}, features=features)
            )
            ds.to_parquet(str(tmp / "data" / f"{name}-00000-of-00001.parquet"))
        (tmp / SPLIT_FILE).write_text(
            json.dumps({"meta": meta, "functions": dict(sorted(splits.items()))}, indent=1) + "\n"
        )
        (tmp / "README.md").write_text(_card(meta), encoding="utf-8")
    log.info("wrote %d train + %d validation judge rows to %s", len(train), len(held), out)
    return Path(out)


def default_data_dir(*, n: int = 30000, seed: int = 0) -> Path:
    """The cached judge data folder for ``(n, seed)`` from the procedural functions, built on first
    use; its name carries the generators' fingerprint, so stale data is never reused."""
    from findbench._io import cache_dir, cache_lock
    from findbench.find.rows import generator_fingerprint

    root = cache_dir("evaluator-data")
    path = root / f"n{n}-seed{seed}-v{DATA_VERSION}-{generator_fingerprint()}"
    with cache_lock(path, f"building the judge data (n={n}, seed {seed})"):
        if not (path / SPLIT_FILE).is_file():
            build_judge_data(path, n=n, seed=seed)
    return path


def load_judge_data(path: str | os.PathLike) -> Any:
    """The ``DatasetDict`` (train / validation) of a folder written by :func:`build_judge_data`."""
    import datasets
    import pyarrow.parquet as pq

    root = Path(path)
    if not (root / SPLIT_FILE).is_file():
        raise FileNotFoundError(
            f"path: {root} is not a judge data folder (no {SPLIT_FILE}); run `findbench judge-data`"
        )
    # parquet read directly: datasets' cache, keyed by path, would load a rebuilt folder's old rows
    return datasets.DatasetDict(
        {
            split: datasets.Dataset(pq.read_table(root / "data" / f"{split}-00000-of-00001.parquet"))
            for split in ("train", "validation")
        }
    )


def _read_splits(path: str | os.PathLike) -> dict[str, str]:
    return json.loads((Path(path) / SPLIT_FILE).read_text())["functions"]


def heldout_rows(
    category: str,
    *,
    source: str = "procedural",
    data: Any = None,
    data_dir: Any = None,
    function_seed: int = 0,
    data_seed: int = 0,
    heldout_fraction: float = 0.2,
    evaluator_data: Any = None,
    rows: Sequence[dict] | None = None,
) -> list[dict]:
    """The held-out functions of ``category`` with a description and unit tests: find-v1's rows, or the
    procedural rows (``rows`` if loaded) the judge-data split holds out (``evaluator_data``'s recorded
    split, else :func:`split_functions`). ValueError when fewer than two are left."""
    if source == "find-v1":
        from findbench.find import find_v1

        held = find_v1.load_rows(category, data_dir)
    else:
        from findbench.find import load_rows

        rows = load_rows(category, seed=function_seed, data=data) if rows is None else rows
        splits = (
            _read_splits(evaluator_data)
            if evaluator_data is not None
            else split_functions(rows, seed=data_seed, heldout_fraction=heldout_fraction)
        )
        held = [r for r in rows if splits.get(r["function_id"]) == "heldout"]
    held = [r for r in held if r.get("description") and r.get("unit_tests")]
    if len(held) < 2:
        raise ValueError(f"{category}: fewer than two held-out functions with descriptions and unit tests")
    return held
