"""The settings of an AutoInterp run, with SAEBench's defaults."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from findbench.lm.base import check_structured_outputs

__all__ = ["AutoInterpConfig", "SCORERS", "LM_ONLY_FIELDS", "QUICK_DEFAULTS"]

#: Scorers an AutoInterp run can apply to each explanation (see :mod:`findbench.autointerp.scorers`).
SCORERS = ("detection", "fuzz", "embedding", "likelihood")

#: What ``findbench autointerp`` changes from SAEBench's settings when not told otherwise, so a
#: first run on the embedded model takes minutes, not hours: 10 latents instead of 1,000,
#: 100,000 corpus tokens instead of 2M, and beside SAEBench's detection scorer the two that
#: separate true from wrong explanations of planted features with the embedded SmolLM2 as
#: scorer (likelihood; embedding has the largest mean gap), see the README.
QUICK_DEFAULTS: dict[str, Any] = {"n_latents": 10, "total_tokens": 100_000, "scorers": ["detection", "embedding", "likelihood"]}

#: Settings that change only the LM calls (answers come from the request cache), not the
#: corpus, the latents or their evidence; a run's saved evidence is reused across them.
LM_ONLY_FIELDS = ("scorers", "use_demos_in_explanation", "max_tokens_in_explanation", "max_tokens_in_prediction",
                  "llm_batch_size", "structured_outputs")


@dataclass
class AutoInterpConfig:
    """Everything that decides an AutoInterp result (SAEBench's values by default).

    Corpus: rows of ``llm_context_size`` tokens (BOS at column 0), ``total_tokens`` in all.
    Latents: ``override_latents`` when given, else ``n_latents`` drawn with ``random_seed``
    among latents that fire more than ``dead_latent_threshold`` times over the corpus.
    Evidence per latent, windows of ``2 * buffer + 1`` tokens centred on a position: the
    ``n_top_ex`` top-activating windows (no centre inside another top window of the same
    row), ``n_iw_sampled_ex`` windows drawn with probability proportional to the squared
    activation among positions below the smallest top-window centre, and ``n_random_ex``
    random windows, labelled inactive. Generation sees ``n_top_ex_for_generation`` top and
    ``n_iw_sampled_ex_for_generation`` importance-weighted windows; scoring sees the rest of
    both plus the random windows, shuffled.

    ``structured_outputs`` (not in SAEBench): whether the explainer's and the detection
    scorer's answers are constrained by their grammars (:func:`~findbench.autointerp.prompts.explanation_constraint`,
    :func:`~findbench.autointerp.prompts.detection_constraint`): ``auto`` where the LM runs in
    process (a small local model such as the embedded SmolLM2), ``on`` always (vLLM's
    structured outputs on a server), ``off`` never (SAEBench's free answers).
    """

    llm_context_size: int = 128
    total_tokens: int = 2_000_000
    dead_latent_threshold: float = 15
    n_latents: int | None = 1000
    override_latents: list[int] | None = None
    random_seed: int = 42
    buffer: int = 10
    n_top_ex: int = 12
    n_top_ex_for_generation: int = 10
    n_iw_sampled_ex: int = 7
    n_iw_sampled_ex_for_generation: int = 5
    n_random_ex: int = 10
    act_threshold_frac: float = 0.01
    use_demos_in_explanation: bool = True
    max_tokens_in_explanation: int = 30
    max_tokens_in_prediction: int = 200
    scorers: list[str] = field(default_factory=lambda: ["detection"])
    llm_batch_size: int = 32
    dataset: str = "wordnet"
    structured_outputs: str = "auto"

    def __post_init__(self) -> None:
        ints = {
            "llm_context_size": 2 * self.buffer + 2,
            "total_tokens": self.llm_context_size,
            "random_seed": 0,
            "buffer": 0,
            "n_top_ex": 1,
            "n_top_ex_for_generation": 0,
            "n_iw_sampled_ex": 0,
            "n_iw_sampled_ex_for_generation": 0,
            "n_random_ex": 0,
            "max_tokens_in_explanation": 1,
            "max_tokens_in_prediction": 1,
            "llm_batch_size": 1,
        }
        for name, low in ints.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {value!r}")
            if value < low:
                raise ValueError(f"{name} must be >= {low}, got {value}")
        if self.n_top_ex_for_generation > self.n_top_ex:
            raise ValueError(f"n_top_ex_for_generation ({self.n_top_ex_for_generation}) must be <= n_top_ex ({self.n_top_ex})")
        if self.n_iw_sampled_ex_for_generation > self.n_iw_sampled_ex:
            raise ValueError(
                f"n_iw_sampled_ex_for_generation ({self.n_iw_sampled_ex_for_generation}) must be <= n_iw_sampled_ex ({self.n_iw_sampled_ex})"
            )
        if self.n_scoring_examples < 1:
            raise ValueError("the scoring windows (top + importance-weighted left for scoring, plus random) must not be empty")
        if not isinstance(self.act_threshold_frac, (int, float)) or not 0 <= self.act_threshold_frac < 1:
            raise ValueError(f"act_threshold_frac must be in [0, 1), got {self.act_threshold_frac!r}")
        if not isinstance(self.dead_latent_threshold, (int, float)) or self.dead_latent_threshold < 0:
            raise ValueError(f"dead_latent_threshold must be a non-negative number, got {self.dead_latent_threshold!r}")
        if self.override_latents is None:
            if isinstance(self.n_latents, bool) or not isinstance(self.n_latents, int) or self.n_latents < 1:
                raise ValueError(f"n_latents must be a positive int when override_latents is not given, got {self.n_latents!r}")
        elif isinstance(self.override_latents, (str, bytes)) or not all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in self.override_latents
        ) or not self.override_latents:
            raise ValueError(f"override_latents must be a non-empty list of non-negative ints, got {self.override_latents!r}")
        if isinstance(self.scorers, str) or not self.scorers or any(s not in SCORERS for s in self.scorers):
            raise ValueError(f"scorers must be a non-empty list drawn from {SCORERS}, got {self.scorers!r}")
        if len(set(self.scorers)) != len(self.scorers):
            raise ValueError(f"scorers must not repeat a scorer, got {self.scorers!r}")
        if not isinstance(self.dataset, str) or not self.dataset:
            raise ValueError(f"dataset must be a non-empty string, got {self.dataset!r}")
        check_structured_outputs(self.structured_outputs)

    @property
    def window(self) -> int:
        """Tokens per window (``2 * buffer + 1``)."""
        return 2 * self.buffer + 1

    @property
    def n_scoring_examples(self) -> int:
        """Windows the scorer sees per latent (14 with the defaults)."""
        return (
            self.n_top_ex - self.n_top_ex_for_generation
            + self.n_iw_sampled_ex - self.n_iw_sampled_ex_for_generation
            + self.n_random_ex
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
