"""Run a ``datasets`` builder and write the folder layout the Hub uses.

``<out>/<config>/test-00000-of-00001.parquet`` per config, a README.md card whose YAML front
matter carries ``configs:`` and ``dataset_info:``, and a ``findbench.json`` provenance sidecar;
``datasets.load_dataset(out, config)`` reads it offline, the Hub after ``push_to_hub.py``. The
folder is written atomically, byte-identical for the same inputs (no timestamps).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from findbench._io import atomic_dir
from findbench._version import __version__

logger = logging.getLogger(__name__)

PARQUET_NAME = "test-00000-of-00001.parquet"
SIDECAR_NAME = "findbench.json"


def build_dataset_folder(
    out: str | Path,
    builder_cls: type,
    configs: Mapping[str, Mapping[str, Any]],
    *,
    provenance: Mapping[str, Mapping[str, Any]] | None = None,
    card_header: Mapping[str, Any],
    card_body: Callable[[Mapping[str, Mapping[str, Any]]], str],
    progress: bool = True,
) -> Path:
    """Build ``configs`` with ``builder_cls`` into the dataset folder ``out`` (replaced atomically).

    ``configs`` maps config name -> builder-config keyword arguments; ``provenance`` maps it to what
    the sidecar records (default: those arguments); ``card_header`` adds YAML front-matter fields;
    ``card_body`` renders the card's Markdown from the sidecar's per-config entries. Configs in ``out``
    and not rebuilt are kept.
    """
    from datasets.exceptions import DatasetGenerationError
    from tqdm.auto import tqdm

    if not configs:
        raise ValueError("configs: nothing to build")
    out = Path(out)
    sidecar = out / SIDECAR_NAME
    previous = json.loads(sidecar.read_text()) if sidecar.is_file() else {}
    entries: dict[str, dict] = {}
    with atomic_dir(out) as tmp:
        for name, entry in previous.get("configs", {}).items():
            if name not in configs and (out / name / PARQUET_NAME).is_file():
                shutil.copytree(out / name, tmp / name)
                entries[name] = entry
        cache = tmp / ".cache"
        for name in tqdm(list(configs), desc="configs", disable=not progress):
            kwargs = dict(configs[name] if provenance is None else provenance[name])
            logger.info("building config %s (%s)", name, kwargs)
            builder = builder_cls(config_name=name, cache_dir=str(cache), **configs[name])
            try:
                builder.download_and_prepare()
            except DatasetGenerationError as exc:  # datasets wraps generator errors; surface the real one
                raise (exc.__cause__ or exc.__context__ or exc) from exc
            ds = builder.as_dataset(split="test")
            (tmp / name).mkdir()
            ds.to_parquet(str(tmp / name / PARQUET_NAME))
            entries[name] = {
                "dataset_info": {
                    "config_name": name,
                    "features": builder.info._to_yaml_dict()["features"],
                    "splits": [{"name": "test", "num_bytes": int(ds.data.nbytes), "num_examples": len(ds)}],
                    "dataset_size": int(ds.data.nbytes),
                },
                "provenance": {"builder": builder_cls.__name__, "findbench_version": __version__, **kwargs},
            }
            del ds, builder
        shutil.rmtree(cache, ignore_errors=True)
        ordered = {name: entries[name] for name in sorted(entries)}
        header = {**card_header,
                  "configs": [{"config_name": n, "data_files": [{"split": "test", "path": f"{n}/test-*.parquet"}]}
                              for n in ordered],
                  "dataset_info": [e["dataset_info"] for e in ordered.values()]}
        front = yaml.safe_dump(header, sort_keys=False, allow_unicode=True)
        (tmp / "README.md").write_text(f"---\n{front}---\n\n{card_body(ordered)}", encoding="utf-8")
        (tmp / SIDECAR_NAME).write_text(json.dumps({"configs": ordered}, indent=2, sort_keys=True) + "\n")
    return out
