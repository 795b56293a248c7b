"""Training data for FIND's judge: simulated unit tests answered with ground-truth descriptions.

FIND (appendix F1) trained its judge on ~30K unit tests, uniform over the categories: a
ground-truth description and three items, one from the function. Rows use exactly the judge's
prompt and target. Functions are split into ``train`` and ``heldout`` by group before any row
is drawn (strings: the function; relations: a base relation with its corrupted variants;
entities: concepts, a function mixing held-out and trained concepts is ``excluded``).
Distractors come from functions of the same split sharing no group, and never from what the
function itself produces.

Training functions also get rows that only a rule answers (:func:`build_judge_rows`' ``n_near``):
their near-miss unit tests (``unit_tests_near``: the same input with the outputs of near misses of
the function). With ``negatives``, every training row carries the descriptions that must lose to
the truth on its unit test (:data:`NEGATIVE_KINDS`), which train-judge's comparative term reads.
Strings can add training functions from other seeds of the generator (``extra_rows``), never one
whose code or description is a split function's.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from findbench._checks import integer
from findbench._io import atomic_dir, cache_dir, cache_lock
from findbench._version import __version__
from findbench.constants import CONSTANT_DESCRIPTIONS, UsageError
from findbench.find import load_function, load_rows
from findbench.find.rows import generator_fingerprint
from findbench.find.strings import describe, make_function, near_miss_steps, validate_params
from findbench.judge.config import JudgeCardConfig, JudgeDataConfig, _fraction
from findbench.judge.scoring import (
    N_OPTIONS,
    judge_category,
    normalize_unit_test,
    render_judge_prompt,
    render_judge_target,
)

log = logging.getLogger(__name__)

#: Bumped when the rows change for the same arguments.
DATA_VERSION = "3"
SPLIT_FILE = "function_splits.json"
#: The descriptions that must lose to the truth on a training row (column ``negatives``): a near miss's
#: own description (for strings, of the near misses that give the test's wrong outputs), the function's
#: observed pairs on other inputs with no rule, the truth hedged among 1, 2 or 4 other functions'
#: descriptions or with its near miss, and the category-generic description.
NEGATIVE_KINDS = ("near_miss", "examples_only", "hedged_1", "hedged_2", "hedged_4", "hedged_near", "constant")
#: Near-miss descriptions a row carries at most.
_NEAR_PER_TEST = 2


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
    rows: Sequence[Mapping[str, Any]], *, seed: int = 0, heldout_fraction: float
) -> dict[str, str]:
    """``function_id -> "train" | "heldout" | "excluded"`` for one category's rows: a seeded
    ``heldout_fraction`` of the groups is held out, at least one group on each side."""
    integer("seed", seed)
    _fraction("heldout_fraction", heldout_fraction)
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
    inside = {r["function_id"]: [g in held for g in _groups(r)] for r in rows}
    return {f: "heldout" if all(i) else "excluded" if any(i) else "train" for f, i in inside.items()}


def function_items(row: Mapping[str, Any]) -> list[str | tuple[str, str]]:
    """The function's correct items from its unit tests: words or ``(input, output)`` pairs, without repeats."""
    items = [(ut["inputs"][k], ut["outputs"][k]) if ut.get("outputs") is not None else ut["inputs"][k]
             for ut in row["unit_tests"] for k in [int(ut["correct"]) - 1]]
    return list(dict.fromkeys(items))


def _input(item: str | tuple[str, str]) -> str:
    """The input of an item: the word itself, or a pair's input."""
    return item if isinstance(item, str) else item[0]


def _consistency_check(row: Mapping[str, Any]) -> Callable[[Any], bool] | None:
    """Whether an ``(input, output)`` item is what ``row`` itself gives (no distractor); None for entities."""
    if row["category"] == "neurons_entities":
        return None
    fn = load_function(dict(row))
    return lambda item: _gives(fn, item[0]) == str(item[1])


def _judge_row(row: Mapping[str, Any], unit_test: dict, split: str, test_set: str, negatives: list[dict]) -> dict:
    """One judge row: ``row``'s truth shown with ``unit_test`` (of the test set ``find`` or ``near``)."""
    return {
        "messages": render_judge_prompt(row["description"], unit_test, row["category"]),
        "target": render_judge_target(unit_test),
        "description": row["description"],
        "category": row["category"],
        "function_id": row["function_id"],
        "correct": int(unit_test["correct"]),
        "split": split,
        "unit_test": json.dumps(unit_test, ensure_ascii=False, sort_keys=True),
        "test_set": test_set,
        "negatives": json.dumps(negatives, ensure_ascii=False),
    }


class _Losers:
    """The descriptions that must lose to each function's truth (:data:`NEGATIVE_KINDS`), from the
    probes' and the card ladder's builders over ``rows`` (one category, one split: the only pool)."""

    def __init__(self, rows: Sequence[Mapping[str, Any]], seed: int, encoder: Any = None):
        from findbench.judge.ladder import _default_encoder, _near_misses
        from findbench.judge.probes import hedged_description, observed_pairs, probe_ladder

        category = rows[0]["category"]
        encoder = _default_encoder(encoder, category)
        seen = [i for i, r in enumerate(rows) if observed_pairs(r, rows, seed=seed)]  # the probes need observations
        probes, _ = probe_ladder([rows[i] for i in seen], category, rows, seed=seed) if seen else ({}, [])
        kinds = ("examples_only", "hedged_1", "hedged_2", "hedged_4")
        fixed = {i: [(kind, probes[kind][j]) for kind in kinds] for j, i in enumerate(seen)}
        near = [text for text, _ in _near_misses(rows, category, rows, seed, encoder)]  # the card's near_miss rung
        self.rows, self.near = rows, near
        self.fixed = [
            fixed.get(i, [])
            + [("hedged_near", hedged_description(r["description"], [near[i]], random.Random(f"{seed}:{i}:hedge"))),
               ("constant", CONSTANT_DESCRIPTIONS[category])]
            for i, r in enumerate(rows)
        ]
        self.misses = [_string_misses(r, seed) if category == "strings" else [] for r in rows]

    def __call__(self, i: int, unit_test: Mapping[str, Any]) -> list[dict]:
        """``[{"kind", "description"}]`` for function ``i`` on ``unit_test``: each text once, never the truth."""
        near = [self.near[i]]
        if self.misses[i]:  # strings: the near misses giving the wrong options, then others wrong on the truth's
            k = int(unit_test["correct"]) - 1
            x, y = unit_test["inputs"][k], unit_test["outputs"][k]
            wrong = [(a, b) for j, (a, b) in enumerate(zip(unit_test["inputs"], unit_test["outputs"])) if j != k]
            ok = [(g, d) for g, d in self.misses[i] if _gives(g, x) not in (None, y)]
            near = [d for a, b in wrong for g, d in ok if _gives(g, a) == b][:_NEAR_PER_TEST]
            near += [d for _, d in ok if d not in near][: _NEAR_PER_TEST - len(near)]
        truth, first_kind = str(self.rows[i]["description"]).strip(), {}
        for kind, text in [("near_miss", d) for d in near] + self.fixed[i]:
            first_kind.setdefault(text, kind)
        return [{"kind": kind, "description": text} for text, kind in first_kind.items()
                if text.strip() and text.strip() != truth]


def _gives(fn: Callable[[str], Any], x: str) -> str | None:
    """``fn(x)`` as text (a list's first item), None where ``fn`` fails on ``x`` (it gives no output there)."""
    try:
        got = fn(x)
    except Exception:  # noqa: BLE001 - a function failing on an input gives no output there
        return None
    return str(got[0] if got else None) if isinstance(got, list) else str(got)


def _string_misses(row: Mapping[str, Any], seed: int) -> list[tuple[Callable[[str], str], str]]:
    """The near misses of a strings function (:func:`findbench.find.strings.near_miss_steps`, the
    machinery of ``unit_tests_near``): each as its function and its own description."""
    misses = near_miss_steps(validate_params(row["params"]), random.Random(f"{seed}:{row['function_id']}:misses"))
    return [(make_function({"ops": [{"op": s.name, "params": p} for s, p in m]}), describe(m)) for m in misses]


def _draw_near_rows(rows: Sequence[Mapping[str, Any]], n: int, split: str, rng: random.Random,
                    losers: _Losers | None) -> list[dict]:
    """``n`` judge rows of the functions' near-miss unit tests, visiting the functions in turn."""
    have = [i for i, r in enumerate(rows) if r.get("unit_tests_near")]
    if n <= 0 or not have:
        if n > 0 and rows:
            log.warning("%s/%s: no function has unit_tests_near: no near-miss rows", rows[0]["category"], split)
        return []
    return [_judge_row(rows[i], unit_test, split, "near", losers(i, unit_test) if losers else [])
            for i in _cycle(have, n, rng)
            for unit_test in [normalize_unit_test(rng.choice(rows[i]["unit_tests_near"]))]]


def _cycle(indices: Sequence[int], n: int, rng: random.Random) -> list[int]:
    """``n`` of ``indices``: the whole list in a fresh shuffled order, again and again."""
    order: list[int] = []
    while len(order) < n:
        block = list(indices)
        rng.shuffle(block)
        order.extend(block)
    return order[:n]


def _draw_rows(rows: Sequence[Mapping[str, Any]], n: int, split: str, rng: random.Random,
               losers: _Losers | None = None) -> list[dict]:
    """``n`` judge rows from ``rows`` (all of one category and one split)."""
    if n <= 0:
        return []
    category = rows[0]["category"]
    items = [function_items(r) for r in rows]
    groups = [set(_groups(r)) for r in rows]
    checks = [_consistency_check(r) for r in rows]
    # balanced correct positions; the function order cycles through every function
    positions = [1 + (i % N_OPTIONS) for i in range(n)]
    rng.shuffle(positions)
    out = []
    for pos, i in zip(positions, _cycle(range(len(rows)), n, rng)):
        correct = rng.choice(items[i])
        others = [j for j in range(len(rows)) if j != i and not (groups[j] & groups[i])]
        if not others:
            raise ValueError(f"{category}/{split}: no function to draw distractors from for {rows[i]['function_id']}")
        chosen, tries = [correct], 0
        while len(chosen) < N_OPTIONS:
            tries += 1
            if tries > 200:
                raise ValueError(f"{category}/{split}: cannot draw distinct distractors for {rows[i]['function_id']}")
            cand = rng.choice(items[rng.choice(others)])
            # a distinct item on a distinct input, that the function itself does not produce
            if not (cand in chosen or _input(cand) in map(_input, chosen) or (checks[i] and checks[i](cand))):
                chosen.append(cand)
        options = chosen[1:]
        options.insert(pos - 1, correct)
        unit_test = {"inputs": list(map(_input, options)),
                     "outputs": None if isinstance(correct, str) else [o[1] for o in options], "correct": pos}
        out.append(_judge_row(rows[i], unit_test, split, "find", losers(i, unit_test) if losers else []))
    return out


def _apart(extra: list[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]], category: str) -> list[Mapping]:
    """The extra training functions of ``category`` that are none of ``rows`` (by id, code or description)."""
    ids = {r["function_id"] for r in rows}
    texts = {str(r.get(k) or "").strip() for r in rows for k in ("code", "description")} - {""}
    kept, seen = [], set()
    for r in extra:
        if r.get("category") != category or not r.get("unit_tests") or not str(r.get("description") or "").strip():
            raise ValueError(f"extra_rows[{category!r}]: {r.get('function_id')} is no {category} function with "
                             "a description and unit tests")
        own = {str(r.get(k) or "").strip() for k in ("code", "description")} - {""}
        if r["function_id"] not in ids | seen and not own & texts:
            kept.append(r)
            seen.add(r["function_id"])
            texts |= own
    if len(kept) < len(extra):
        log.info("%s: %d extra functions left out (a split function's id, code or description)",
                 category, len(extra) - len(kept))
    return kept


def extra_string_rows(n: int, rows: Sequence[Mapping[str, Any]], *, function_seed: int) -> list[dict]:
    """``n`` strings functions from the generator's next seeds (``function_seed + 1``, ...), renamed
    ``strings/seed<s>-fNNNNN``, none with the code or description of ``rows`` (the evaluation rows)."""
    out: list[dict] = []
    for seed in range(function_seed + 1, function_seed + 51):
        fresh = [{**r, "function_id": f"strings/seed{seed}-{r['function_id'].split('/')[-1]}"}
                 for r in load_rows("strings", seed=seed)]
        out.extend(_apart(fresh, [*rows, *out], "strings")[: n - len(out)])
        if len(out) >= n:
            return out
    raise ValueError(f"extra_string_functions: fewer than {n} new functions in 50 generator seeds")


def _shares(n: int, k: int) -> list[int]:
    return [n // k + (1 if i < n % k else 0) for i in range(k)]


def build_judge_rows(
    rows_by_category: Mapping[str, Sequence[Mapping[str, Any]]],
    cfg: JudgeDataConfig,
    *,
    extra_rows: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    encoder: Any = None,
) -> tuple[list[dict], list[dict], dict[str, str]]:
    """``(train_rows, heldout_rows, function_splits)`` from function rows, in memory, with the settings
    ``cfg`` (its ``out`` is not read): ``n`` training rows split evenly across the categories,
    ``n_heldout`` (default ``n // 10``) from held-out functions.

    ``n_near`` (default ``n // 2``) more training rows are the training functions' near-miss unit tests; with
    ``negatives`` each training row lists the descriptions that must lose to its truth (``encoder``:
    the card ladder's, for entity and relation near misses). ``extra_rows`` (per category) are more
    training functions, none of them split: one whose id, code or description is a split row's is left out.
    """
    n, seed = cfg.n, cfg.seed
    n_near = n // 2 if cfg.n_near is None else cfg.n_near
    n_heldout = n // 10 if cfg.n_heldout is None else cfg.n_heldout
    if not isinstance(rows_by_category, Mapping) or not rows_by_category:
        raise ValueError("rows_by_category must be a non-empty mapping category -> rows")
    cats = [judge_category(c) for c in rows_by_category]
    if len(set(cats)) != len(cats):
        raise ValueError(f"rows_by_category: duplicate categories {list(rows_by_category)}")
    train: list[dict] = []
    held: list[dict] = []
    splits: dict[str, str] = {}
    for (key, rows), cat, n_c, h_c, near_c in zip(
        rows_by_category.items(), cats, _shares(n, len(cats)), _shares(n_heldout, len(cats)),
        _shares(n_near, len(cats)),
    ):
        for i, r in enumerate(rows):
            if r.get("category") != cat:
                raise ValueError(f"rows_by_category[{key!r}][{i}]['category'] is {r.get('category')!r}, not {cat!r}")
            if not isinstance(r.get("description"), str) or not r["description"].strip():
                raise ValueError(f"rows_by_category[{key!r}][{i}] has no ground-truth 'description'")
            if not r.get("unit_tests"):
                raise ValueError(f"rows_by_category[{key!r}][{i}] has no 'unit_tests'")
        cat_split = split_functions(rows, seed=seed, heldout_fraction=cfg.heldout_fraction)
        splits.update(cat_split)
        rng = random.Random(f"{seed}:{cat}:rows")
        by_split = {s: [r for r in rows if cat_split[r["function_id"]] == s] for s in ("train", "heldout", "excluded")}
        extra = _apart(list((extra_rows or {}).get(key) or (extra_rows or {}).get(cat) or []), rows, cat)
        splits.update({r["function_id"]: "train" for r in extra})
        by_split["train"].extend(extra)
        log.info(
            "%s: %d train (%d extra) / %d held-out / %d excluded functions",
            cat,
            len(by_split["train"]),
            len(extra),
            len(by_split["heldout"]),
            len(by_split["excluded"]),
        )
        losers = _Losers(by_split["train"], seed, encoder) if cfg.negatives and by_split["train"] else None
        train.extend(_draw_rows(by_split["train"], n_c, "train", rng, losers))
        train.extend(_draw_near_rows(by_split["train"], near_c, "train", rng, losers))
        if h_c and len(by_split["heldout"]) >= 2:
            held.extend(_draw_rows(by_split["heldout"], h_c, "heldout", rng))
    random.Random(f"{seed}:shuffle").shuffle(train)
    return train, held, splits


def _fill_card(template: str, header: Mapping[str, Any], values: Mapping[str, str]) -> str:
    """A Hub card: ``header`` as YAML front matter, then the card template ``template`` with each ``{key}``
    of ``values`` replaced by its value (the judge data's card and the trained judge's)."""
    import yaml

    from findbench.resources import card_template

    body = card_template(template)
    for k, v in values.items():
        body = body.replace("{" + k + "}", v)
    return "---\n" + yaml.safe_dump(dict(header), sort_keys=False) + "---\n\n" + body


def _card(meta: Mapping[str, Any]) -> str:
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
    fields = {k: str(v) for k, v in meta.items() if not isinstance(v, (dict, list))}
    fields["counts_table"] = "\n".join(
        f"| {cat} | {c['train_functions']} | {c['heldout_functions']} | {c['excluded_functions']} "
        f"| {c['train_rows']} | {c['heldout_rows']} |"
        for cat, c in meta["per_category"].items()
    )
    return _fill_card("evaluator_data_card.md", header, fields)


def build_judge_data(cfg: JudgeDataConfig, *,
                     rows_by_category: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> Path:
    """Write the judge's training data to the folder ``cfg.out`` (replaced atomically) and return it.

    ``cfg``: the settings (``findbench judge-data``'s flags). The folder holds
    ``data/{train,validation}-00000-of-00001.parquet``, a README card that makes
    ``datasets.load_dataset(out)`` work offline, and ``function_splits.json``. The functions come
    from ``rows_by_category`` (in-memory rows), else the ``findbench build`` folder ``cfg.data``, else
    the procedural rows of ``cfg.function_seed``.
    """
    import datasets

    if rows_by_category is None:  # the config's categories are judge_category's names
        rows_by_category = {c: load_rows(c, seed=cfg.function_seed, data=cfg.data) for c in cfg.categories}
    extra = {}
    if cfg.extra_string_functions:
        strings = [rows for key, rows in rows_by_category.items() if judge_category(key) == "strings"]
        if not strings:
            raise UsageError("--extra-string-functions needs the strings category")
        extra["strings"] = extra_string_rows(cfg.extra_string_functions, strings[0], function_seed=cfg.function_seed)
    train, held, splits = build_judge_rows(rows_by_category, cfg, extra_rows=extra)
    per_category: dict[str, dict[str, int]] = {}
    for cat, rows in rows_by_category.items():
        cat = judge_category(cat)
        ids = [r["function_id"] for r in rows]
        per_category[cat] = {
            "train_functions": sum(splits[i] == "train" for i in ids) + len(extra.get(cat, ())),
            "heldout_functions": sum(splits[i] == "heldout" for i in ids),
            "excluded_functions": sum(splits[i] == "excluded" for i in ids),
            "train_rows": sum(r["category"] == cat for r in train),
            "heldout_rows": sum(r["category"] == cat for r in held),
            "near_rows": sum(r["category"] == cat and r["test_set"] == "near" for r in train),
        }
    meta = {
        "findbench_version": __version__,
        "data_version": DATA_VERSION,
        "n": cfg.n,
        "n_heldout": len(held),
        "seed": cfg.seed,
        "heldout_fraction": cfg.heldout_fraction,
        "n_near": cfg.n // 2 if cfg.n_near is None else cfg.n_near,
        "negatives": cfg.negatives,
        "extra_string_functions": cfg.extra_string_functions,
        "function_seed": cfg.function_seed,
        "function_source": str(cfg.data) if cfg.data is not None else "procedural",
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
            "test_set": text,
            "negatives": text,
        }
    )
    with atomic_dir(cfg.out) as tmp:
        (tmp / "data").mkdir()
        for name, rows in (("train", train), ("validation", held)):
            ds = (datasets.Dataset.from_list(rows, features=features) if rows
                  else datasets.Dataset.from_dict({k: [] for k in features}, features=features))
            ds.to_parquet(str(tmp / "data" / f"{name}-00000-of-00001.parquet"))
        (tmp / SPLIT_FILE).write_text(
            json.dumps({"meta": meta, "functions": dict(sorted(splits.items()))}, indent=1) + "\n"
        )
        (tmp / "README.md").write_text(_card(meta), encoding="utf-8")
    log.info("wrote %d train + %d validation judge rows to %s", len(train), len(held), cfg.out)
    return Path(cfg.out)


def default_data_dir(*, n: int, seed: int) -> Path:
    """The cached judge data folder for ``(n, seed)`` from the procedural functions, built on first
    use; its name carries the generators' fingerprint, so stale data is never reused."""
    path = cache_dir("evaluator-data") / f"n{n}-seed{seed}-v{DATA_VERSION}-{generator_fingerprint()}"
    with cache_lock(path, f"building the judge data (n={n}, seed {seed})"):
        if not (path / SPLIT_FILE).is_file():
            build_judge_data(JudgeDataConfig(out=str(path), n=n, seed=seed))
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


def heldout_rows(cfg: JudgeCardConfig, category: str, rows: Sequence[dict]) -> list[dict]:
    """The held-out functions of ``category`` with a description and unit tests: of its ``rows`` (those
    of ``cfg.data`` / ``cfg.function_seed``), those the judge-data split holds out
    (``cfg.evaluator_data``'s recorded split, else :func:`split_functions` with ``cfg.data_seed`` and
    ``cfg.heldout_fraction``). ValueError when fewer than two are left."""
    splits = (json.loads((Path(cfg.evaluator_data) / SPLIT_FILE).read_text())["functions"]
              if cfg.evaluator_data is not None
              else split_functions(rows, seed=cfg.data_seed, heldout_fraction=cfg.heldout_fraction))
    held = [r for r in rows
            if splits.get(r["function_id"]) == "heldout" and r.get("description") and r.get("unit_tests")]
    if len(held) < 2:
        raise ValueError(f"{category}: fewer than two held-out functions with descriptions and unit tests")
    return held
