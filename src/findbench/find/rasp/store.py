"""Compiled weights: the compile cache, validation by execution, the shipped copy, ``load_model``.

A store (shipped under ``findbench/data/rasp/seed<N>/``, or written to the cache for another seed)
is two files: ``weights.npz`` (arrays named ``<function_id>/<array>``, float32, compressed: the
weights are mostly zeros) and ``models.json`` (per program: its spec, domain, tier, residual
labels, sha256 of weights + labels, the number of inputs it was validated on; plus the programs
dropped by validation and why).
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from findbench import _io
from findbench.find.rasp import programs as P
from findbench.find.rasp.model import RaspTransformer, digest, rotate
from findbench.resources import data_path

#: Validation checks the whole domain when it has at most this many inputs, else this many samples.
VALIDATION_INPUTS = 1000
VARIANTS = ("aligned", "rotated")
SHIPPED_SEED = 0


def compile_cache(seed: int) -> Path:
    """The compile cache (``$FINDBENCH_CACHE/rasp/compiled``; keyed by spec, so seeds share it)."""
    del seed
    return _io.cache_dir("rasp", "compiled")


def store_dir(seed: int) -> Path:
    """Where the store of ``seed`` lives: in the package for the shipped seed, else in the cache."""
    if seed == SHIPPED_SEED:
        return data_path("rasp", f"seed{seed}")
    return _io.cache_dir("rasp", f"seed{seed}")


def matches(got: list, want: list, numerical: bool, tolerance: float) -> bool:
    if len(got) != len(want):
        return False
    if numerical:
        return all(abs(float(g) - float(w)) <= tolerance for g, w in zip(got, want))
    return all(g == w for g, w in zip(got, want))


def validate(item: dict, model: RaspTransformer, tracr_checks: dict | None) -> tuple[str | None, int]:
    """Why the compiled model is not the program (``None`` when it is), and how many inputs were run:
    the whole domain (or ``VALIDATION_INPUTS`` seeded samples) against the reference, and the
    inputs tracr's own forward was recorded on against that record."""
    dom = item["domain"]
    inputs = P.domain_inputs(dom, VALIDATION_INPUTS, np.random.default_rng([3]))
    got = []
    for start in range(0, len(inputs), 512):
        got += model.run_batch(inputs[start : start + 512])
    for x, g in zip(inputs, got):
        want = P.run(item["program"], x)
        if not matches(g, want, model.numerical, dom["tolerance"]):
            return f"compiled != reference on {x}: {g} vs {want}", len(inputs)
    if tracr_checks:
        for x, want in zip(tracr_checks["inputs"], tracr_checks["outputs"]):
            if not matches(model.run(x), want, model.numerical, 1e-4):
                return f"torch != tracr on {x}", len(inputs)
    return None, len(inputs)


def validated(item: dict, base: Path, arrays: dict, meta: dict) -> tuple[str | None, int]:
    """:func:`validate`, remembered beside the compiled weights (``<key>.validated``, keyed by their digest)."""
    path = base.with_suffix(".validated")
    key = digest(arrays, meta["labels"]) + f":{VALIDATION_INPUTS}"
    if path.is_file():
        known = json.loads(path.read_text())
        if known["key"] == key:
            return known["reason"], known["n"]
    reason, n = validate(item, RaspTransformer(arrays, meta), meta.get("tracr_checks"))
    _io.atomic_write_text(path, json.dumps({"key": key, "reason": reason, "n": n}))
    return reason, n


def ship(items: list[dict], cache: str | os.PathLike, seed: int, dest: str | os.PathLike | None = None) -> dict:
    """Validate every compiled item of ``cache`` and write the store of ``seed`` (ids in catalog order)."""
    from tqdm.auto import tqdm

    from findbench.find.rasp.compile import cache_key

    dest = Path(dest) if dest else store_dir(seed)
    arrays_out, programs, dropped = {}, [], []
    for item in tqdm(items, desc="validating compiled RASP programs"):
        base = Path(cache) / cache_key(item["program"], item["domain"])
        if base.with_suffix(".failed").exists():
            dropped.append({"name": item["name"], "tier": item["tier"], "stage": "compile",
                            "reason": base.with_suffix(".failed").read_text()})
            continue
        if not base.with_suffix(".json").exists():
            dropped.append({"name": item["name"], "tier": item["tier"], "stage": "compile", "reason": "not compiled"})
            continue
        meta = json.loads(base.with_suffix(".json").read_text())
        with np.load(base.with_suffix(".npz")) as z:
            arrays = {k: z[k] for k in z.files}
        meta["bos"] = item["domain"]["bos"]
        reason, n = validated(item, base, arrays, meta)
        if reason:
            dropped.append({"name": item["name"], "tier": item["tier"], "stage": "validation", "reason": reason})
            continue
        fid = f"rasp/f{len(programs):05d}"
        arrays_out.update({f"{fid}/{k}": v for k, v in arrays.items()})
        meta.pop("compile_seconds", None)
        meta.pop("tracr_checks", None)
        programs.append({"function_id": fid, **{k: item[k] for k in ("name", "tier", "family", "description")},
                         "program": item["program"], "domain": item["domain"], "meta": meta,
                         "weights_sha256": digest(arrays, meta["labels"]), "validated_inputs": n})
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=dest, suffix=".npz", delete=False) as f:
        np.savez_compressed(f, **arrays_out)
    os.chmod(f.name, 0o644)
    os.replace(f.name, dest / "weights.npz")
    _io.atomic_write_text(dest / "models.json", json.dumps({"seed": seed, "programs": programs, "dropped": dropped},
                                                            indent=1, sort_keys=True) + "\n")
    return {"shipped": len(programs), "dropped": len(dropped), "bytes": (dest / "weights.npz").stat().st_size}


@functools.lru_cache(maxsize=4)
def read_store(seed: int = SHIPPED_SEED) -> dict:
    """``models.json`` of ``seed`` keyed by function id (``ValueError`` naming the folder when absent)."""
    path = store_dir(seed) / "models.json"
    if not path.is_file():
        raise ValueError(f"rasp: no compiled weights for seed {seed} ({path}); "
                         f"run `findbench build --configs rasp --seed {seed}` with findbench[rasp] installed")
    data = json.loads(path.read_text())
    return {"seed": seed, "dropped": data["dropped"], "programs": {p["function_id"]: p for p in data["programs"]}}


def program_record(function_id: str, seed: int = SHIPPED_SEED) -> dict:
    programs = read_store(seed)["programs"]
    if function_id not in programs:
        raise ValueError(f"function_id: unknown rasp function {function_id!r} "
                         f"(rasp/f00000 to rasp/f{len(programs) - 1:05d})")
    return programs[function_id]


def load_arrays(function_id: str, seed: int = SHIPPED_SEED) -> dict:
    """The aligned weights of one program, checked against their recorded sha256."""
    record = program_record(function_id, seed)
    with np.load(store_dir(seed) / "weights.npz") as z:
        prefix = f"{function_id}/"
        arrays = {name[len(prefix):]: z[name] for name in z.files if name.startswith(prefix)}
    if digest(arrays, record["meta"]["labels"]) != record["weights_sha256"]:
        raise ValueError(f"weights of {function_id}: sha256 does not match models.json (the store was altered)")
    return arrays


def load_model(row_or_id: dict | str, variant: str = "aligned", seed: int | None = None) -> RaspTransformer:
    """The compiled torch module of a ``rasp`` row or function id; ``variant`` ``aligned`` (tracr's
    weights) or ``rotated`` (same function, seeded rotation of the residual basis)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: {variant!r} is not one of {VARIANTS}")
    if isinstance(row_or_id, dict):
        function_id = row_or_id["function_id"]
        seed = seed if seed is not None else json.loads(row_or_id.get("params") or "{}").get("seed", SHIPPED_SEED)
    else:
        function_id = row_or_id
    seed = SHIPPED_SEED if seed is None else seed
    record = program_record(function_id, seed)
    arrays = load_arrays(function_id, seed)
    meta = {**record["meta"], "bos": record["domain"]["bos"]}
    if variant == "rotated":
        arrays = rotate(arrays, meta["n_layers"], seed=rotation_seed(record))
    return RaspTransformer(arrays, meta, variant=variant)


def rotation_seed(record: dict) -> int:
    """The seed of a program's ``rotated`` variant (from its weights' digest)."""
    return int(record["weights_sha256"][:8], 16)


def unit_permutations(function_id: str, seed: int = SHIPPED_SEED) -> list[np.ndarray]:
    """Per layer, the permutation of MLP hidden units in the ``rotated`` variant (rotated unit ``j``
    is aligned unit ``perm[j]``); ground-truth side only."""
    record = program_record(function_id, seed)
    perms: list = []
    rotate(load_arrays(function_id, seed), record["meta"]["n_layers"], seed=rotation_seed(record), perms=perms)
    return perms


def compiled_function(row: dict):
    """``function(tokens)`` that runs the row's compiled model (aligned): tokens are checked against
    the domain first (vocabulary, length, preconditions), one line naming the problem otherwise."""
    model = load_model(row)
    dom = row["domain"] if isinstance(row["domain"], dict) else json.loads(row["domain"])

    def function(tokens):
        return model.run(P.check_input(dom, list(tokens)))

    function.check = lambda tokens: P.check_input(dom, list(tokens))
    return function


def ensure_store(seed: int, jobs: int = 1, progress: bool = True) -> None:
    """Compile, validate and write the store of an unshipped ``seed`` (needs ``findbench[rasp]``);
    a second process waits for the first (the cache lock)."""
    if (store_dir(seed) / "models.json").is_file():
        return
    try:
        import tracr  # noqa: F401
    except ImportError:
        raise ValueError(f"--seed {seed}: the rasp weights of this seed are not shipped; compiling them needs "
                         "tracr: pip install 'findbench[rasp]'") from None
    from findbench.find.rasp import catalog
    from findbench.find.rasp.compile import compile_all

    with _io.cache_lock(store_dir(seed), f"compiling the rasp programs of seed {seed}"):
        if (store_dir(seed) / "models.json").is_file():
            return
        items, _ = catalog.catalog(seed)
        compile_all(items, compile_cache(seed), jobs=jobs, progress=progress)
        ship(items, compile_cache(seed), seed)
        read_store.cache_clear()
