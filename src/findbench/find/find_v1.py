"""Import of the original FIND release ("arxiv v1", Schwettmann et al. 2023) into findbench's schema.

:func:`load_rows` reads one config of the release's ``src/find-dataset`` folder (downloaded once
from :data:`FIND_V1_URL` when ``data_dir`` is None) and returns :mod:`findbench.schema` rows with
``source="find-v1"``: ``numeric`` (1000, via :func:`row_from_find_v1`,
MLP weights from ``fNNNNN/mlp_approx_model.pt``), ``strings`` (1000; code only when ``data_dir``
holds the Zenodo ``function_code.py`` files), ``neurons_entities`` (200) and
``neurons_relations`` (75; the release's key ``exeption``). Unit tests become 10
``{"inputs": [3], "outputs": [3] | None, "correct": 1-based}``; inputs are kept verbatim,
relation outputs lose the leading space of the release's LM answers. ``unit_tests_near`` stays
empty: near misses come from findbench's generators (a function's operations and parameters, a
relation's tables and exceptions, the concepts' word lists and probes), which the release's
functions are not made of.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from findbench import _checks
from findbench._io import atomic_dir, cache_dir
from findbench.find import numeric as nm
from findbench.schema import CATEGORIES, dumps, empty_row, function_id

log = logging.getLogger(__name__)

#: Commit of github.com/multimodal-interpretability/FIND the importer was written against.
FIND_V1_COMMIT = "670d837a27cfd39e82d8eefd82976657f3b46a58"
#: Raw-file base URL of the release folder at that commit.
FIND_V1_URL = f"https://raw.githubusercontent.com/multimodal-interpretability/FIND/{FIND_V1_COMMIT}/src/find-dataset"
#: Functions per config in the release.
EXPECTED_COUNTS = {"numeric": 1000, "strings": 1000, "neurons_entities": 200, "neurons_relations": 75}
#: Files each config needs, relative to the release folder.
RELEASE_FILES: dict[str, list[str]] = {
    "numeric": ["numeric/data.json", "numeric/func_name_dict.json"]
    + [f"numeric/f{i:05d}/mlp_approx_model.pt" for i in range(5)],
    "strings": ["strings/test_data.json", "strings/unit_test_data.json"],
    "neurons_entities": ["neurons_entities/data.json", "neurons_entities/unit_test_data.json"],
    "neurons_relations": ["neurons_relations/data.json", "neurons_relations/unit_test_data.json"],
}

_QUOTES = {"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"}


def download_release(category: str, dest: str | os.PathLike | None = None) -> Path:
    """Download the release files of ``category`` from :data:`FIND_V1_URL` (once) and return the
    release folder. ``dest`` defaults to findbench's cache (``find-v1/<commit>``)."""
    import requests

    _checks.one_of("category", category, CATEGORIES)
    root = Path(dest) if dest is not None else cache_dir("find-v1", FIND_V1_COMMIT)
    target = root / category
    if (target / ".complete").is_file():
        return root
    with atomic_dir(target) as tmp:
        for rel in RELEASE_FILES[category]:
            url = f"{FIND_V1_URL}/{rel}"
            log.info("downloading %s", url)
            r = requests.get(url, timeout=120)
            if r.status_code != 200:
                raise ConnectionError(f"could not download {url}: HTTP {r.status_code}")
            out = tmp / Path(rel).relative_to(category)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(r.content)
        (tmp / ".complete").write_text(FIND_V1_COMMIT + "\n")
    return root


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: data_dir must be the release's src/find-dataset folder")
    return json.loads(path.read_text(encoding="utf-8"))


def _dir_name(value: Any, what: str) -> str:
    """``"f00042"`` from a release ``dir`` / ``name`` (absolute paths keep only their basename)."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string like 'f00042', got {value!r}")
    base = value.rstrip("/").rsplit("/", 1)[-1]
    if not re.fullmatch(r"f\d+", base):
        raise ValueError(f"{what} must end in a folder name like 'f00042', got {value!r}")
    return base


def parse_test_inputs(text: str) -> list[str]:
    """The test inputs of a string function from the release's single listing string.

    Handles the release's formats: ``': "a", "b, c", ...'`` (quoted, commas inside quotes
    kept), ``': a, b, c'`` (bare, split on commas), curly quotes, a whole list inside one
    pair of quotes, items separated by a newline, a trailing comma, and stray quotes around
    bare items (``'"!Hello"'`` -> ``'!Hello'``).
    """
    _checks.instance("test_inputs", text, str, "a str")
    s = text.strip().removeprefix(":").strip().translate(str.maketrans(_QUOTES))
    if not s:
        return []
    if s[0] in "\"'":
        q = s[0]
        body = s[1:-1] if len(s) > 1 and s.endswith(q) else s[1:]
        items = re.split(re.escape(q) + r"\s*[,\n]\s*" + re.escape(q), body)
        if len(items) == 1 and "," in items[0]:  # the whole list inside one pair of quotes
            items = [p.strip() for p in items[0].split(",")]
        return items
    parts = [p.strip() for p in s.split(",")]
    if parts and parts[-1] == "":  # trailing comma
        parts = parts[:-1]
    # stray quotes: a matching pair around an item goes, else any double quote at its ends
    return [p[1:-1] if len(p) >= 2 and p[0] == p[-1] and p[0] in "\"'" else p.strip('"') for p in parts]


def convert_unit_tests(record: Mapping[str, Any], category: str) -> list[dict]:
    """The release's ``{test_vec, correct_inx}`` as findbench unit tests (1-based ``correct``)."""
    vec, correct = record.get("test_vec"), record.get("correct_inx")
    where = f"unit tests of {record.get('name')!r}"
    if not isinstance(vec, list) or not isinstance(correct, list) or len(vec) != len(correct):
        raise ValueError(f"{where}: test_vec and correct_inx must be lists of equal length")
    tests = []
    for k, (tv, c) in enumerate(zip(vec, correct)):
        if category == "neurons_entities":
            inputs, outputs = [str(w) for w in tv], None
        else:
            if not (isinstance(tv, list) and len(tv) == 2 and len(tv[0]) == len(tv[1])):
                raise ValueError(f"{where}: test_vec[{k}] must be [[inputs], [outputs]] of equal length")
            inputs = [str(x) for x in tv[0]]
            outputs = [str(x).strip() if category == "neurons_relations" else str(x) for x in tv[1]]
        c = int(c)
        if not 1 <= c <= len(inputs):
            raise ValueError(f"{where}: correct_inx[{k}] = {c} is outside 1..{len(inputs)}")
        tests.append({"inputs": inputs, "outputs": outputs, "correct": c})
    return tests


def _unit_tests_by_index(path: Path, category: str) -> dict[int, list[dict]]:
    return {int(_dir_name(rec["name"], "unit test name")[1:]): convert_unit_tests(rec, category)
            for rec in _read_json(path)}


def _numeric_rows(root: Path) -> list[dict]:
    records = _read_json(root / "numeric" / "data.json")
    served = _read_json(root / "numeric" / "func_name_dict.json")
    rows = []
    n_mlp = n_missing = 0
    for rec in records:
        name = _dir_name(rec.get("dir"), "numeric record dir")
        if name not in served:
            raise ValueError(f"numeric/func_name_dict.json has no entry for {name}")
        variant = served[name]
        state = None
        if variant == "load_mlp.py":
            n_mlp += 1
            pt = root / "numeric" / name / "mlp_approx_model.pt"
            if pt.is_file():
                import torch

                state = torch.load(pt, map_location="cpu", weights_only=True)
            else:
                n_missing += 1
        rows.append(row_from_find_v1(rec, variant, state, int(name[1:])))
    if n_missing:
        log.info(
            "numeric: %d of %d MLP functions have no weights in %s (only in the Zenodo archive)", n_missing, n_mlp, root
        )
    return rows


def _strings_rows(root: Path) -> list[dict]:
    records = _read_json(root / "strings" / "test_data.json")
    unit = _unit_tests_by_index(root / "strings" / "unit_test_data.json", "strings")
    rows = []
    for rec in records:
        name = _dir_name(rec.get("name"), "strings record name")
        i = int(name[1:])
        desc = str(rec.get("description") or "").strip().removeprefix(":").strip()
        code_file = root / "strings" / name / "function_code.py"
        code = code_file.read_text(encoding="utf-8") if code_file.is_file() else ""
        rows.append(
            empty_row(
                function_id=function_id("strings", i),
                category="strings",
                subcategory=None,
                name=name,
                params=dumps({"find_v1": {"name": name, "code_available": bool(code)}}),
                code=code,
                description=desc,
                source="find-v1",
                test_inputs=parse_test_inputs(rec.get("test_inputs") or ""),
                unit_tests=unit.get(i, []),
            )
        )
    return rows


def _clean(text: Any) -> str | None:
    return None if text is None else str(text).strip() or None


def _neuron_rows(root: Path, category: str) -> list[dict]:
    records = _read_json(root / category / "data.json")
    from findbench.find.synthetic_neurons import DEFAULT_BACKENDS, render_prompt
    from findbench.find.synthetic_neurons.entities import describe_entity
    from findbench.find.synthetic_neurons.relations import describe_relation

    unit = _unit_tests_by_index(root / category / "unit_test_data.json", category)
    rows = []
    for rec in records:
        name = _dir_name(rec.get("dir"), f"{category} record dir")
        i = int(name[1:])
        c1, c2 = _clean(rec.get("concept1")), _clean(rec.get("concept2"))
        if c1 is None:
            raise ValueError(f"{category}/{name}: concept1 is empty")
        exemplars = [w.strip() for w in rec.get("initial") or [] if str(w).strip()]
        if category == "neurons_entities":
            exception = None
            sub = "atomic" if c2 is None else "composition"
            fname = c1 if c2 is None else f"{c1} OR {c2}"
            desc = describe_entity([c1] if c2 is None else [c1, c2])
        else:
            if c2 is None:
                raise ValueError(f"{category}/{name}: concept2 (the relation's output) is empty")
            exception = _clean(rec.get("exeption", rec.get("exception")))  # the release spells it "exeption"
            sub = "atomic" if exception is None else "corruption"
            fname = f"{c1} -> {c2}" + ("" if exception is None else f" except {exception}")
            desc = describe_relation(c1, c2, exception)
        rows.append(
            empty_row(
                function_id=function_id(category, i),
                category=category,
                subcategory=sub,
                name=fname,
                params=dumps(
                    {"find_v1": {"dir": name}, "concepts": [c for c in (c1, c2) if c], "exception": exception}
                ),
                code="",
                description=desc,
                source="find-v1",
                unit_tests=unit.get(i, []),
                exemplars=exemplars,
                concept1=c1,
                concept2=c2,
                exception=exception,
                backbone=DEFAULT_BACKENDS[category],
                prompt=render_prompt(category, c1, c2, exception),
            )
        )
    return rows


def load_rows(category: str, data_dir: str | os.PathLike | None = None) -> list[dict]:
    """All rows of one config of the FIND v1 release, in function order.

    Args:
        category: ``numeric``, ``strings``, ``neurons_entities`` or ``neurons_relations``.
        data_dir: the release's ``src/find-dataset`` folder (or the unpacked Zenodo archive
            with the same layout); ``None`` downloads the GitHub files (see :func:`download_release`).

    Raises:
        FileNotFoundError: a release file is missing under ``data_dir``.
        ValueError: a record does not follow the release format (names the record).
    """
    _checks.one_of("category", category, CATEGORIES)
    if data_dir is None:
        root = download_release(category)
    else:
        root = Path(data_dir)
        if not root.is_dir():
            raise FileNotFoundError(f"data_dir {root} is not a folder")
    readers = {"numeric": _numeric_rows, "strings": _strings_rows}
    rows = readers[category](root) if category in readers else _neuron_rows(root, category)
    rows.sort(key=lambda r: r["function_id"])
    ids = [r["function_id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{category}: duplicate function ids in the release")
    if len(rows) != EXPECTED_COUNTS[category]:
        log.warning("%s: %d functions, the release has %d", category, len(rows), EXPECTED_COUNTS[category])
    return rows


_V1_VARIANTS = {
    "load_mlp.py": "mlp",
    "function_code.py": "clean",
    "noised_function_code.py": "noise",
    "corrupted_function_code.py": "corruption",
}
_V1_CORRUPTION = {"interval_smaller": "below", "interval_larger": "above", "interval_inside": "inside"}
_V1_OPS = {"sum_two": "sum", "multiply_two": "product"}
_V1_SIGN = {"family": "step", "params": {"scale": 2.0, "bias": -1.0, "value_at_zero": 0.0}}


def _v1_parse_name(record: Mapping) -> tuple[str, list[str], str | None]:
    name = record.get("name")
    if not isinstance(name, str) or "(" not in name:
        raise ValueError(f"record['name'] must look like 'relu((...))' or 'f1;f2;op(...)', got {name!r}")
    parts = name.split("(", 1)[0].split(";")
    if len(parts) == 1:
        fam = parts[0]
        if fam not in nm.ATOMIC_FAMILIES:
            raise ValueError(f"record['name'] has unknown family {fam!r}")
        return "atomic", [fam], None
    if len(parts) != 3 or parts[2] not in _V1_OPS or not all(f in nm.COMPOSABLE_FAMILIES for f in parts[:2]):
        raise ValueError(
            f"record['name'] must be 'f1;f2;sum_two|multiply_two(...)' with composable f1, f2, got {name!r}"
        )
    return "composition", parts[:2], _V1_OPS[parts[2]]


def row_from_find_v1(
    record: dict,
    variant: str,
    mlp_state_dict: dict | None = None,
    index: int | None = None,
    *,
    release_quirks: bool = True,
) -> dict:
    """Convert one record of FIND v1's ``numeric/data.json`` into a schema row (source "find-v1").

    Args:
        variant: the served file from ``func_name_dict.json`` (``load_mlp.py``,
            ``function_code.py``, ``noised_function_code.py``, ``corrupted_function_code.py``) or
            ``mlp`` / ``clean`` / ``noise`` / ``corruption``.
        mlp_state_dict: the function's ``mlp_approx_model.pt`` state dict; without it an MLP row is
            marked ``params["mlp_weights_missing"]`` and cannot be served.
        index: the ``function_id`` number; defaults to the number in ``record["dir"]``.
        release_quirks: serve what the release served (default: ``absolute`` without its bias,
            ``square_wave`` as ``1 if x > 0 else -1`` in compositions and noisy/corrupted files;
            listed in ``params.find_v1.quirks``); ``False`` serves the function the name states.

    The release's noise is unseeded; here noisy and corrupted rows draw from ``default_rng(index)``.
    """
    _checks.instance("record", record, Mapping, "a dict (one element of data.json)")
    served = _V1_VARIANTS.get(variant, variant)
    if served not in nm.VARIANTS:
        raise ValueError(f"variant must be one of {sorted(_V1_VARIANTS)} (or {nm.VARIANTS}), got {variant!r}")
    dir_name = _dir_name(record.get("dir"), "record['dir']")
    index = int(dir_name[1:]) if index is None else index
    _checks.integer("index", index, 0)
    structure, fams, op = _v1_parse_name(record)
    raw = record.get("params")
    raw_terms = [raw] if structure == "atomic" else raw
    if structure == "composition" and not (isinstance(raw, (list, tuple)) and len(raw) == 2):
        raise ValueError(f"record['params'] of a composition must be [params1, params2], got {raw!r}")
    terms = []
    for k, (fam, rp) in enumerate(zip(fams, raw_terms)):
        try:
            terms.append({"family": fam, "params": nm._FAMILIES[fam].from_v1(rp)})
        except ValueError as exc:
            raise ValueError(f"record['params'] (term {k}): {exc}") from None
    domain = record.get("domain")
    if not (isinstance(domain, (list, tuple)) and len(domain) == 2 and all(nm._is_num(v) for v in domain)):
        raise ValueError(f"record['domain'] must be [low, high], got {domain!r}")

    quirks: list[str] = []
    if release_quirks and served != "mlp":
        for k, t in enumerate(terms):
            where = "f" if structure == "atomic" else ("g" if k == 0 else "h")
            if t["family"] == "absolute" and t["params"]["bias"] != 0:
                quirks.append(f"the bias {nm._num(t['params']['bias'])} of absolute term {where} is dropped")
                t["params"] = {**t["params"], "bias": 0.0}
            if t["family"] == "square_wave" and (structure == "composition" or served != "clean"):
                quirks.append(
                    f"the square wave {where} (period {nm._num(t['params']['period'])}, "
                    f"shift {nm._num(t['params']['shift'])}) "
                    "is replaced by 1 if x > 0 else -1, written as the step 2*H(x) - 1 with H(0) = 0"
                )
                terms[k] = {"family": "step", "params": dict(_V1_SIGN["params"])}

    p: dict[str, Any] = {
        "structure": structure,
        "op": op,
        "terms": terms,
        "domain": [float(domain[0]), float(domain[1])],
        "variant": served,
        "noise": None,
        "corruption": None,
        "mlp": None,
        "find_v1": {
            "dir": dir_name,
            "name": record.get("name"),
            "served_file": variant if variant in _V1_VARIANTS else None,
            "approx_mse_error": record.get("approx_mse_error"),
            "quirks": quirks,
        },
    }
    if served == "noise":
        p["noise"] = {"type": _checks.one_of("record['noise_type']", record.get("noise_type"), nm.NOISE_TYPES),
                      "seed": index}
    elif served == "corruption":
        ct = _checks.one_of("record['corruption_type']", record.get("corruption_type"), sorted(_V1_CORRUPTION))
        cp = record.get("corruption_params")
        if not isinstance(cp, Mapping) or not nm._is_num(cp.get("std")) or not isinstance(cp.get("boundary"), list):
            raise ValueError(f"record['corruption_params'] must hold 'std' (the mean of f) and 'boundary', got {cp!r}")
        p["corruption"] = {
            "type": _V1_CORRUPTION[ct],
            "boundary": [float(b) for b in cp["boundary"]],
            # FIND v1 stores the mean of f under the key "std"; the spread is always 0.1
            "mean": float(cp["std"]),
            "std": nm._CORRUPTION_STD,
            "seed": index,
        }
    elif served == "mlp":
        if mlp_state_dict is None:
            p["mlp_weights_missing"] = True
        else:
            w = nm._mlp.weights_from_state_dict(mlp_state_dict)
            ame = record.get("approx_mse_error")
            p["mlp"] = {
                "hidden": len(w["w1"]),
                **w,
                "mse": float(ame) if nm._is_num(ame) else None,
                "train_points": nm.MLP_TRAIN_POINTS,
            }
    return nm.row_from_params(p, index, source="find-v1")
