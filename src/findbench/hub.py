"""Publishing to the Hugging Face Hub: dataset folders, metric Spaces and checkpoints.

Everything is validated and staged in temporary directories *before* the first network call,
so a bad card or a missing file fails fast and nothing half-published is left on the Hub.
``plan_*`` functions stage and validate (offline, testable); :func:`publish` uploads a plan.
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

logger = logging.getLogger(__name__)

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass
class Upload:
    """One staged repository upload."""

    repo_id: str
    repo_type: str  # "dataset" | "space" | "model"
    folder: Path  # staged copy
    space_sdk: str | None = None
    files: list[str] = field(default_factory=list)


def _front_matter(readme: Path) -> dict:
    text = readme.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        raise ValueError(f"{readme}: card has no YAML front matter")
    end = text.find("\n---", 4)
    if end < 0:
        raise ValueError(f"{readme}: card front matter is not closed by '---'")
    meta = yaml.safe_load(text[4:end]) or {}
    if not isinstance(meta, dict):
        raise ValueError(f"{readme}: card front matter is not a mapping")
    return meta


def _stage(src: Path, repo_id: str, repo_type: str, space_sdk: str | None = None,
           ignore: Sequence[str] = ("__pycache__", ".cache", "*.pyc", ".*")) -> Upload:
    """The upload of a staged copy of ``src``, once ``repo_id`` is checked."""
    if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id):
        raise ValueError(f"repo_id must look like 'org/name', got {repo_id!r}")
    staged = Path(tempfile.mkdtemp(prefix="findbench-hub-")) / src.name
    shutil.copytree(src, staged, ignore=shutil.ignore_patterns(*ignore))
    return Upload(repo_id, repo_type, staged, space_sdk,
                  files=sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file()))


def plan_dataset(folder: str | Path, repo_id: str) -> Upload:
    """Stage a dataset folder written by ``findbench build`` (or ``build-neuron-tests``)."""
    folder = Path(folder)
    readme = folder / "README.md"
    if not readme.is_file():
        raise FileNotFoundError(f"folder: {folder} has no README.md dataset card (build it with findbench)")
    meta = _front_matter(readme)
    configs = meta.get("configs")
    if not configs:
        raise ValueError(f"{readme}: card lists no 'configs'")
    for cfg in configs:
        name = cfg.get("config_name")
        if not name or not list(folder.glob(f"{name}/*.parquet")):
            raise ValueError(f"{readme}: config {name!r} has no parquet files under {folder / str(name)}")
    if "license" not in meta:
        raise ValueError(f"{readme}: card has no 'license'")
    return _stage(folder, repo_id, "dataset")


def plan_metric(metric_dir: str | Path, repo_id: str) -> Upload:
    """Stage an evaluate metric folder (``metrics/<name>``) as a Gradio Space."""
    metric_dir = Path(metric_dir)
    for needed in (f"{metric_dir.name}.py", "README.md", "app.py", "requirements.txt"):
        if not (metric_dir / needed).is_file():
            raise FileNotFoundError(f"metric_dir: {metric_dir} lacks {needed}")
    meta = _front_matter(metric_dir / "README.md")
    if meta.get("sdk") != "gradio" or meta.get("app_file") != "app.py":
        raise ValueError(f"{metric_dir / 'README.md'}: a metric card needs 'sdk: gradio' and 'app_file: app.py'")
    return _stage(metric_dir, repo_id, "space", space_sdk="gradio")


def plan_checkpoint(checkpoint_dir: str | Path, repo_id: str) -> Upload:
    """Stage a trained judge (peft adapter or merged weights) with its model card."""
    checkpoint_dir = Path(checkpoint_dir)
    for patterns, lacking in ((("*.safetensors", "*.bin"), "no weights (*.safetensors)"),
                              (("adapter_config.json", "config.json"), "neither adapter_config.json nor config.json"),
                              (("README.md",), "no README.md model card")):
        if not any(p.is_file() for pattern in patterns for p in checkpoint_dir.glob(pattern)):
            raise FileNotFoundError(f"checkpoint_dir: {checkpoint_dir} has {lacking}")
    _front_matter(checkpoint_dir / "README.md")
    return _stage(checkpoint_dir, repo_id, "model",
                  ignore=("__pycache__", "*.pyc", ".*", "checkpoint-*", "optimizer*", "scheduler*", "rng_state*"))


def publish(
    uploads: Sequence[Upload], *, private: bool = False, token: str | None = None, api: Any = None
) -> list[str]:
    """Create the repositories and upload every staged folder (the only step that touches the network); the repo
    URLs."""
    from huggingface_hub import HfApi

    api = api or HfApi(token=token)
    urls = []
    for up in uploads:
        url = api.create_repo(
            up.repo_id, repo_type=up.repo_type, private=private, exist_ok=True, space_sdk=up.space_sdk
        )
        api.upload_folder(
            repo_id=up.repo_id,
            repo_type=up.repo_type,
            folder_path=str(up.folder),
            commit_message=f"Upload {up.repo_type} with findbench",
        )
        logger.info("published %s (%s, %d files)", up.repo_id, up.repo_type, len(up.files))
        urls.append(str(url))
    return urls
