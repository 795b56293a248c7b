"""Which SAE an AutoInterp run explains: the one shipped in the package, a local sae_lens
folder, or a sae_lens release from the Hub.

``EMBEDDED_SAE`` is a TopK SAE (3072 latents, k=32) on ``blocks.6.hook_resid_post`` of the
embedded SmolLM2-135M-Instruct, trained by ``findbench train-sae`` on WordNet glosses (7 MB, fp16).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from findbench import _checks
from findbench.resources import data_path

#: Folder name of the SAE shipped under ``findbench/data/sae/``.
EMBEDDED_SAE = "smollm2-135m-instruct-L6-resid_post-topk"


def embedded_sae_dir() -> Path:
    """Folder of the shipped SAE (FileNotFoundError when the package lacks it)."""
    path = data_path("sae", EMBEDDED_SAE)
    if not (path / "cfg.json").is_file():
        raise FileNotFoundError(f"the shipped SAE {EMBEDDED_SAE!r} is missing from the installed package ({path})")
    return path


def _from_folder(path: str | os.PathLike, device: str) -> Any:
    from sae_lens import SAE

    return SAE.load_from_disk(str(path), device=device, dtype="float32")


def load_sae(spec: Any, *, device: str, sae_id: str | None = None, model: Any = None,
             tokenizer: Any = None) -> Any:
    """A sae_lens ``SAE`` in float32, eval mode, from ``spec``: an SAE object (returned as it is);
    ``"embedded"`` (:data:`EMBEDDED_SAE`); ``"synthetic"`` (:class:`~findbench.autointerp.synthetic.SyntheticSAE`
    on ``model``'s input embeddings, with ``tokenizer``); a folder written by ``SAE.save_model``;
    or a sae_lens release (``"gpt2-small-res-jb"``) or Hub repo with ``sae_id`` (``"blocks.8.hook_resid_pre"``).
    """
    if not isinstance(spec, (str, os.PathLike)) and hasattr(spec, "cfg") and callable(getattr(spec, "encode", None)):
        return spec
    _checks.instance("spec", spec, (str, os.PathLike), "a string or path")
    if not isinstance(device, str) or not device:
        raise ValueError(f"device must be a non-empty string, got {device!r}")
    _checks.instance("sae_id", sae_id, (str, type(None)), "a string")
    if not (text := os.fspath(spec)):
        raise ValueError("spec must not be empty")
    if text == "embedded":
        sae = _from_folder(embedded_sae_dir(), device)
    elif text == "synthetic":
        if model is None or tokenizer is None:
            raise ValueError("the synthetic SAE is built for a model: pass model= and tokenizer=")
        from findbench.autointerp.synthetic import SyntheticSAE

        sae = SyntheticSAE.for_model(model, tokenizer)
    elif Path(text).is_dir():
        if not (Path(text) / "cfg.json").is_file():
            raise FileNotFoundError(f"spec: {text} is a folder without a sae_lens cfg.json")
        sae = _from_folder(text, device)
    elif text.startswith((".", "/", "~")):
        raise FileNotFoundError(f"spec: no SAE folder at {text!r}")
    else:
        if not sae_id:
            raise ValueError(
                f"sae_id is required to load release {text!r} from the Hub (e.g. sae_id='blocks.8.hook_resid_pre')"
            )
        from sae_lens import SAE

        sae = SAE.from_pretrained(release=text, sae_id=sae_id, device=device, dtype="float32")
    return sae.eval()
