"""The settings of the ``findbench`` AutoInterp commands beside :class:`~findbench.autointerp.config.AutoInterpConfig`
and :class:`~findbench.autointerp.config.TrainSAEConfig` (which hold what decides a result): where the
SAE, the model and the LMs come from, where the results go. Each field is a flag, written once; the
model, SAE and LM names are resolved in ``__post_init__``, before anything is loaded."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any

from findbench import _checks
from findbench._config import Csv, arg, flag_fields
from findbench.autointerp.config import MAX_EXPLANATION_TOKENS, PROBES, SCORERS, AutoInterpConfig, TrainSAEConfig
from findbench.autointerp.results import RUN_ID_PATTERN
from findbench.constants import UsageError
from findbench.lm.base import STRUCTURED_OUTPUTS


def check_run_id(run_id: Any) -> None:
    """UsageError unless ``run_id`` is None or letters, digits, ``_``, ``.`` and ``-`` (it names files)."""
    if run_id is not None and (not isinstance(run_id, str) or not re.fullmatch(RUN_ID_PATTERN, run_id)):
        raise UsageError(f"--run-id must be letters, digits, '_', '.' or '-', got {run_id!r}")


def check_encoder(spec: str, name: str) -> None:
    """``check_spec`` of a model that an encoder alias (``minilm``) may also name: the aliases
    (whose module imports torch) are read only when the spec names nothing else."""
    from findbench.models import check_spec

    try:
        check_spec(spec, flag=f"--{name}")
    except UsageError:
        from findbench.autointerp.activations import MINILM_ALIASES

        check_spec(spec, flag=f"--{name}", names=MINILM_ALIASES)


def parse_shard(shard: str | None, name: str = "--shard") -> tuple[int, int] | None:
    """``"I/N"`` as ``(I, N)`` with ``0 <= I < N`` (None: unsharded); a UsageError naming ``name`` otherwise."""
    if shard is None:
        return None
    m = re.fullmatch(r"(\d+)/(\d+)", shard.strip()) if isinstance(shard, str) else None
    if not m or not int(m[1]) < int(m[2]):
        raise UsageError(f"{name} must be I/N with 0 <= I < N (e.g. 0/4), got {shard!r}")
    return int(m[1]), int(m[2])


def _sae_releases() -> tuple[str, ...]:
    """The releases of sae_lens' registry, read from its YAML file without importing sae_lens (torch)."""
    spec = importlib.util.find_spec("sae_lens")
    if spec is None or not spec.submodule_search_locations:
        return ()
    registry = Path(next(iter(spec.submodule_search_locations))) / "pretrained_saes.yaml"
    return tuple(re.findall(r"^([^\s#:][^:]*):\s*$", registry.read_text(encoding="utf-8") if registry.is_file() else "",
                            flags=re.M))


def format_score(key: str, values: dict) -> str:
    """One line per scorer: mean [interval] (n), the floors and the margin over the best one."""
    line = f"{key}: {values[f'{key}_score']:.3f}"
    if "ci" in values:
        low, high = values["ci"]
        line += (f" [{low:.3f}, {high:.3f}] (n={values['n']}); floors: "
                 + ", ".join(f"{k} {v:.3f}" for k, v in values["floors"].items())
                 + f"; margin over {values['best_floor']}: {values['margin']:+.3f}")
    if "n_unparsed" in values:
        line += f"; unparsed answers: {values['n_unparsed']}"
    if values.get("n_degenerate"):
        line += f"; degenerate explanations: {values['n_degenerate']} of {values.get('n', '?')}"
    if values.get("n_explanation_truncated"):
        line += f"; explanations cut to the length cap: {values['n_explanation_truncated']}"
    return line


@dataclass
class TrainSAECommand:
    """train a sae_lens SAE (TopK or standard) on one layer of a model over a text corpus; writes a folder
    SAE.load_from_disk reads, with a model card and held-out metrics"""

    out: str = arg("sae", "SAE folder to write")
    resume: bool = arg(True, "reuse cached activations and the last checkpoint of an interrupted run",
                       no_help="start over: ignore cached activations and checkpoints")
    keep_activations: bool = arg(False, "keep the cached model activations for later runs on the same hook (GBs in "
                                        "~/.cache/findbench)")
    #: What decides the SAE (its fields are flags too).
    config: TrainSAEConfig = field(default_factory=TrainSAEConfig)

    def __post_init__(self) -> None:
        _checks.instance("config", self.config, TrainSAEConfig, "a TrainSAEConfig")
        if not isinstance(self.out, (str, os.PathLike)) or not os.fspath(self.out):
            raise UsageError(f"--out must be a folder path, got {self.out!r}")


@dataclass
class AutoInterpCommand:
    __doc__ = ("explain SAE latents in words and score the explanations (SAEBench AutoInterp + more scorers); the "
               "defaults run in minutes on the embedded model, SAEBench's values: " + ", ".join(
                   f"--{k.replace('_', '-')} {','.join(v) if isinstance(v, list) else v}"
                   for k, v in ((k, getattr(AutoInterpConfig(), k)) for k in AutoInterpConfig.QUICK))
               + "; `findbench autointerp merge DIR... --out OUT` joins the folders of --shard runs")

    model: str = arg("embedded", "model the SAE reads: embedded (SmolLM2), minilm, a folder or a Hub id")
    sae: Any = arg("embedded", "embedded (the SAE shipped with findbench), synthetic (planted rules), a sae_lens "
                               "folder, or a release")
    sae_id: str | None = arg(None, "SAE id within a sae_lens release")
    layer: int | None = arg(None, "layer the SAE reads (default: the SAE's own hook)")
    hook: str | None = arg(None, "resid_post, resid_pre, mlp_post, hook_embed or a full hook name (default: the "
                                 "SAE's own)")
    explainer: Any = arg("embedded", "LM spec writing explanations: embedded, a folder, an HF id or a vLLM URL")
    scorer: Any = arg(None, "LM spec of the scorers (default: the explainer)")
    lm_model: str | None = arg(None, "served model name, for server-URL --explainer / --scorer")
    batch_size: int = arg(32, "corpus rows per forward pass")
    device: str = arg("cpu", "where the model and the SAE run: cpu, cuda, cuda:N (e.g. one GPU per --token-shard "
                             "process) or mps")
    max_connections: int = arg(8, "requests in flight for a server-URL LM")
    cache: str | None = arg(None, "sqlite LM request cache (default: <out>/lm_cache.sqlite)")
    out: str = arg("outputs/autointerp", "results folder (a rerun resumes there and overwrites its results)")
    run_id: str | None = arg(None, "name this run's result files (<sae>_eval_results_<id>.json, "
                                   "..._features_summary_<id>.csv) instead of overwriting the plain ones")
    report: bool = arg(False, "then write report.html in --out: every latent's windows shaded by activation, "
                              "explanation, scorers' picks")
    shard: str | None = arg(None, "I/N: explain and score only the selected latents at positions p with p %% N == I "
                                  "(evidence is still collected for all, or read with --activations); "
                                  "`findbench autointerp merge` joins the N --out folders")
    token_shard: str | None = arg(None, "I/N: run the model and SAE on this shard's corpus rows only (whole "
                                        "--batch-size batches), save every latent's activations in --out and stop; "
                                        "one GPU or machine per shard, then a run with --activations")
    activations: list[str] | None = arg(None, "the --out folders of the N --token-shard runs: count firings and "
                                              "collect evidence from their activations instead of running the model "
                                              "and SAE (same --batch-size and corpus)", nargs="+", metavar="DIR")
    #: What decides the result (its fields are flags too; default :meth:`AutoInterpConfig.quick`).
    config: AutoInterpConfig = field(default_factory=AutoInterpConfig.quick)
    #: From Python: latent -> explanation, scored instead of asking the explainer.
    explanations: dict[int, str] | None = None
    #: From Python: progress bars (the Inspect task turns them off).
    progress: bool = True

    def __post_init__(self) -> None:
        from findbench.models import check_spec

        _checks.instance("config", self.config, AutoInterpConfig, "an AutoInterpConfig")
        _checks.positive_int("--batch-size", self.batch_size)
        if not isinstance(self.device, str) or not re.fullmatch(r"cpu|cuda(:\d+)?|mps", self.device):
            raise UsageError(f"--device must be cpu, cuda, cuda:N or mps, got {self.device!r}")
        parse_shard(self.token_shard, "--token-shard")
        if isinstance(self.activations, str):
            self.activations = [self.activations]
        if self.activations is not None:
            if not self.activations or not all(isinstance(d, str) and d for d in self.activations):
                raise UsageError(f"--activations must be folders, got {self.activations!r}")
            if missing := [folder for folder in self.activations if not Path(folder).is_dir()]:
                raise UsageError(f"--activations: {missing[0]} is not a folder")
            if self.token_shard is not None:
                raise UsageError("--token-shard: it writes the activations that --activations reads; give one")
        if self.token_shard is not None and self.shard is not None:
            raise UsageError("--token-shard: it stops before any latent is explained; --shard does not apply")
        _checks.positive_int("--max-connections", self.max_connections)
        check_run_id(self.run_id)
        parse_shard(self.shard)
        check_encoder(self.model, "model")
        for name in ("explainer", "scorer"):  # a spec, or from Python an LM
            if isinstance(getattr(self, name), str):
                check_spec(getattr(self, name), flag=f"--{name}")
        if isinstance(self.sae, str):  # a spec, or from Python an SAE
            try:
                check_spec(self.sae, flag="--sae", names=("embedded", "synthetic"), hub=False)
            except UsageError:
                check_spec(self.sae, flag="--sae", names=("embedded", "synthetic", *_sae_releases()), hub=False)


LATENTS_EXCLUSIVE = "--latents and --n-latents are mutually exclusive: give one"


def setting_names() -> dict[str, str]:
    """``findbench autointerp``'s settings (its flags, aliases such as ``latents`` too) by name: the field each sets."""
    return {name: f.name for f in flag_fields(AutoInterpCommand)
            for name in (f.name, *(a.lstrip("-").replace("-", "_") for a in f.metadata.get("aliases", ())))}


def autointerp_command(settings: dict[str, Any]) -> AutoInterpCommand:
    """``findbench autointerp``'s config from settings named as its flags (a field name, or an alias such as
    ``latents``, ``seed`` or ``context_size``), with the command line's defaults (:meth:`AutoInterpConfig.quick`):
    how the Inspect task reads its ``-T`` settings. UsageError naming an unknown setting."""
    names = setting_names()
    if unknown := sorted(set(settings) - set(names)):
        raise UsageError(f"unknown settings {unknown}: the settings are findbench autointerp's flags, e.g. "
                         "sae, model, n_latents, latents, scorers, out")
    given = {names[k]: v for k, v in settings.items()}
    if "override_latents" in given and "n_latents" in given:
        raise UsageError(LATENTS_EXCLUSIVE)
    own = {f.name for f in dataclasses.fields(AutoInterpConfig)}
    return AutoInterpCommand(**{k: v for k, v in given.items() if k not in own},
                             config=AutoInterpConfig.quick(**{k: v for k, v in given.items() if k in own}))


@dataclass
class AutoInterpMergeCommand:
    """join the --out folders of `findbench autointerp --shard I/N` runs (each of 0..N-1 once, the same settings)
    into the files one unsharded run writes (also: `findbench autointerp merge DIR... --out OUT`)"""

    dirs: list[str] = arg(MISSING, "the shards' --out folders", positional=True, nargs="+", metavar="DIR")
    out: str = arg(MISSING, "folder to write (replaced whole, atomically)")
    run_id: str | None = arg(None, "the shards' --run-id")

    def __post_init__(self) -> None:
        check_run_id(self.run_id)


@dataclass
class AutoInterpValidateCommand:
    """score planted features (the synthetic SAE) with each AutoInterp scorer: the true explanation against a wrong,
    an empty and the gaming probes (everything, hedged, examples_only, stuffed, padded), a paired-bootstrap verdict
    per probe"""

    model: Any = arg("embedded", "model whose input embeddings the planted-rule SAE reads: embedded (SmolLM2), "
                                 "minilm, a folder or a Hub id")
    scorer: Any = arg("embedded", "LM spec of the detection, fuzz and likelihood scorers")
    scorers: Csv = arg(",".join(SCORERS), "comma-separated scorers")
    probes: Csv = arg(",".join(PROBES), "comma-separated gaming probes")
    rules: Csv = arg(None, "comma-separated planted rules (default: the eight of synthetic.DEFAULT_RULES)")
    total_tokens: int = arg(200_000, "corpus tokens (WordNet glosses)")
    seed: int = arg(42, "seed of the windows, the wrong explanations and the probes")
    max_explanation_tokens: int = arg(MAX_EXPLANATION_TOKENS, "explanations are cut to this many "
                                                                                "tokens before scoring (0: no cap)")
    structured_outputs: str = arg("auto", "detection answers under their grammar: auto, on or off",
                                  choices=STRUCTURED_OUTPUTS)
    cache: str | None = arg(None, "sqlite LM request cache (a rerun repeats no LM call)")
    out: str | None = arg("outputs/autointerp/planted_validation.json", "result JSON")
    #: From Python: the evidence settings (default: ``total_tokens``, ``seed``, ``scorers``, ``structured_outputs``).
    config: AutoInterpConfig | None = None
    #: From Python: the corpus rows (default: the config's corpus, tokenized).
    tokens: Any = None
    #: From Python: the ``embedding`` scorer's sentence encoder (default: the embedded MiniLM).
    encoder: Any = None
    #: From Python: progress bars.
    progress: bool = True

    def __post_init__(self) -> None:
        from findbench.models import check_spec

        _checks.integer("--max-explanation-tokens", self.max_explanation_tokens, 0)
        self.scorers = _checks.str_list("--scorers", self.scorers)
        self.probes = _checks.str_list("--probes", self.probes)
        for name, values, known in (("--scorers", self.scorers, SCORERS), ("--probes", self.probes, PROBES)):
            for value in values:
                _checks.one_of(name, value, known)
            if len(set(values)) != len(values) or name == "--scorers" and not values:
                raise UsageError(f"{name} must be distinct names from {', '.join(known)}, got {values!r}")
        self.rules = _checks.str_list("--rules", self.rules, optional=True)
        if isinstance(self.model, str):  # a spec, or from Python a (model, tokenizer) pair
            check_encoder(self.model, "model")
        if isinstance(self.scorer, str):  # a spec, or from Python an LM (None: none)
            check_spec(self.scorer, flag="--scorer")
