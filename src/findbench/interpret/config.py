"""The settings of ``findbench interpret`` / ``evaluate`` / ``report`` / ``compare``, each written
once: the library functions take these configs (:func:`~findbench.interpret.run.run_interpretations`,
:func:`~findbench.interpret.evaluate.evaluate_run`), the command line makes a flag of every field
and Inspect's ``find_interpret`` task builds the same :class:`InterpretConfig` from its ``-T``
arguments. ``__post_init__`` checks every field before any data, model or judge is touched and
names the flag in its one-line :class:`~findbench.constants.UsageError`."""

from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from findbench import _checks
from findbench._config import Csv, arg, flag
from findbench.constants import UsageError, UsageTypeError
from findbench.interpret.floors import DEFAULT_OBSERVED_CALLS, MAX_OBSERVED_CALLS
from findbench.interpret.protocol import (
    ACCESS,
    MAX_COMMANDS_PER_MESSAGE,
    MAX_INPUTS_PER_COMMAND,
    METHODS,
    PROTOCOL,
    PROTOCOLS,
)
from findbench.interpret.references import REFERENCE_INTERPRETERS
from findbench.judge.scoring import JUDGE_MODES
from findbench.lm.base import DEFAULT_MAX_TOKENS, STRUCTURED_OUTPUTS
from findbench.schema import CONFIGS, RASP, parse_function_id

#: FIND's cap on model turns per episode.
DEFAULT_ROUNDS = 20
#: Tokens an Inspect provider's model may generate per turn when ``findbench interpret`` is given no
#: ``max_tokens`` (without one, a provider lets a turn run to tens of thousands of tokens).
DEFAULT_API_MAX_TOKENS = 1024

_BUILT = "dataset folder written by `findbench build` (default: regenerate from --seed)"
_RUN_DATA = "dataset folder written by `findbench build` (default: run.json's data, else procedural with its seed)"
_MODE = "the judge's scoring mode (default: the mode a trained judge folder records, else logprob)"


def _positive(name: str, value: Any, *, optional: bool = False) -> Any:
    """``_checks.positive_int`` naming the flag."""
    return _checks.positive_int(flag(name), value, optional=optional)


def _csv(name: str, value: Any, choices: tuple[str, ...] | None = None, *, optional: bool = False) -> list[str] | None:
    """A comma-separated setting as a list, each item one of ``choices``."""
    items = _checks.str_list(flag(name), value, optional=optional)
    for item in items if choices is not None and items else ():
        _checks.one_of(flag(name), item, choices)
    return items


def inspect_provider(name: str) -> bool:
    """Whether Inspect has a model provider ``name`` (``--interpreter <provider>/<model>``)."""
    from findbench.lm.inspect_provider import is_inspect_provider

    return is_inspect_provider(name)


@dataclass
class InterpretConfig:
    """run an interpreter agent on FIND functions (FIND §3): <out>/<category>/<method>/fNNNNN/ per episode"""

    interpreter: Any = arg("embedded", "a reference (oracle, random, constant, empty, observed) or an LM: embedded, "
                                       "a folder, a Hub id, a server URL (with --model) or an Inspect model (hf/local, "
                                       "mockllm/model, openai-api/..., vllm/...)")
    model: str | None = arg(None, "served model name, for a server-URL --interpreter")
    method: Csv = arg("aia", "comma-separated: aia, milan, aia+milan (the MILAN ones for neuron configs only)")
    configs: Csv = arg(None, "comma-separated configs (default: all available; neuron configs for MILAN methods)")
    limit: int | None = arg(None, "first N functions per config")
    sample: int | None = arg(None, "N functions per config, seeded by --seed and stratified by subcategory (after "
                                   "--limit)", metavar="N")
    functions: Csv = arg(None, "comma-separated function ids, e.g. strings/f00007,numeric/f00042")
    rounds: int = arg(DEFAULT_ROUNDS, "most model turns per episode")
    max_tokens: int | None = arg(None, f"tokens the interpreter may generate per turn (default: {DEFAULT_MAX_TOKENS} "
                                       f"for findbench's own models, {DEFAULT_API_MAX_TOKENS} for an Inspect "
                                       "provider's model)")
    episode_tokens: int | None = arg(None, "tokens the interpreter may generate over one episode, all turns "
                                           "together; an episode that spends them without answering stops "
                                           "(default: no limit)", metavar="N")
    data: str | None = arg(None, _BUILT)
    seed: int = arg(0, "procedural rows, numeric noise, the random interpreter's picks")
    out: str = arg("outputs/interpret", "run folder; rerunning resumes it")
    max_connections: int = arg(4, "episodes in flight at once")
    observed_calls: int = arg(DEFAULT_OBSERVED_CALLS, "calls of the observed interpreter's plan (evenly spaced "
                                                      "numeric inputs; other categories' test inputs for strings "
                                                      f"and neurons), at most {MAX_OBSERVED_CALLS}", metavar="K")
    structured_outputs: str = arg("auto", "each text-protocol turn follows FIND's command / answer grammar: auto "
                                          "for models running in this process, on for any model, off never",
                                  choices=STRUCTURED_OUTPUTS)
    protocol: str = arg(PROTOCOL, "text: FIND's PYTHON(function.py ...) commands; tools: call_function tool calls "
                                  "(a model whose provider supports tools)", choices=PROTOCOLS)
    access: str = arg("black", "rasp only: black (calls only), white (tools over the aligned weights), rotated (over "
                               "the rotated variant), localized (white plus the components that matter)",
                      choices=ACCESS)

    def __post_init__(self) -> None:
        self.method = _csv("method", self.method, METHODS)
        if not self.method:
            raise UsageError(f"--method: give at least one of {', '.join(METHODS)}")
        self.configs = _csv("configs", self.configs, CONFIGS, optional=True)
        self.functions = _csv("functions", self.functions, optional=True)
        for function_id in self.functions or ():
            try:
                parse_function_id(function_id)
            except ValueError as exc:
                raise UsageError(f"--functions: {exc}") from None
        for name in ("limit", "sample", "max_tokens", "episode_tokens"):
            _positive(name, getattr(self, name), optional=True)
        _checks.integer("--seed", self.seed)
        for name in ("rounds", "max_connections", "observed_calls"):
            _positive(name, getattr(self, name))
        if self.observed_calls > MAX_OBSERVED_CALLS:
            raise UsageError(f"--observed-calls: at most {MAX_OBSERVED_CALLS} (the plan is one message of at most "
                             f"{MAX_COMMANDS_PER_MESSAGE} commands of {MAX_INPUTS_PER_COMMAND} inputs), got "
                             f"{self.observed_calls}")
        for name, choices in (("structured_outputs", STRUCTURED_OUTPUTS), ("protocol", PROTOCOLS), ("access", ACCESS)):
            _checks.one_of(flag(name), getattr(self, name), choices)
        chosen = self.configs or sorted({f.split("/", 1)[0] for f in self.functions or ()})
        if self.access != "black" and (not chosen or set(chosen) != {RASP}):
            raise UsageError(f"--access {self.access}: only rasp configs open the model; give --configs {RASP} "
                             f"(got {','.join(chosen) if chosen else 'all configs'})")
        if self.interpreter == "attribution" and self.access == "black":
            raise UsageError("--interpreter attribution reads the model's weights: give --access white, rotated or "
                             "localized (with --configs rasp)")
        if isinstance(self.data, (str, os.PathLike)) and not Path(self.data).is_dir():
            raise FileNotFoundError(
                f"--data: data folder {self.data} does not exist (run `findbench build --out {self.data}`)"
            )
        if isinstance(self.interpreter, str):  # resolved before anything is written: a typo is one line
            from findbench.models import check_spec

            check_spec(self.interpreter, flag="--interpreter", names=REFERENCE_INTERPRETERS, providers=inspect_provider)
        elif not callable(getattr(self.interpreter, "generate", None)):
            raise UsageTypeError(f"--interpreter must be one of {REFERENCE_INTERPRETERS}, an LM spec or an LM, "
                                 f"got {type(self.interpreter).__name__}")

    @property
    def reference(self) -> str | None:
        """The reference interpreter (no model), or None for an LM."""
        name = self.interpreter
        return name if isinstance(name, str) and name in REFERENCE_INTERPRETERS else None

    def agent(self, **resolved: Any) -> AgentConfig:
        """The agent's part of the settings (what the episode loop reads), ``resolved`` replacing
        fields the run worked out (``max_tokens``)."""
        return AgentConfig(**{f.name: getattr(self, f.name) for f in fields(AgentConfig)} | resolved)


@dataclass(frozen=True)
class AgentConfig:
    """The settings of one episode loop (:func:`~findbench.interpret.solver.find_agent`): those of
    :class:`InterpretConfig` of the same names, as :meth:`InterpretConfig.agent` takes them."""

    rounds: int
    max_tokens: int | None
    seed: int
    protocol: str
    episode_tokens: int | None
    structured_outputs: str
    access: str = "black"


@dataclass
class EvaluateConfig:
    """score a run of interpretations (findbench interpret, or FIND's results layout) into FIND's Table 2"""

    run_dir: str = arg(MISSING, "<run>/<category>/<method>/fNNNNN/ (findbench interpret) or "
                                "<dir>/<category>/fNNNNN/ (FIND)", positional=True)
    data: str | None = arg(None, _RUN_DATA)
    judge: Any = arg("embedded-evaluator", "unit-test judge: embedded-evaluator, embedded, a folder, a Hub id or a "
                                           "server URL")
    judge_model: str | None = arg(None, "served model name, for a server-URL --judge")
    judge_mode: str | None = arg(None, _MODE, choices=JUDGE_MODES)
    method: str | None = arg(None, "FIND-layout folders: the method of every episode (default aia); runs: score "
                                   "only this method", choices=METHODS)
    judge_cache: str | None = arg(None, "sqlite file caching the judge's answers (resumable)")
    out: str | None = arg(None, "folder for scores.json, per_function.csv, table.md (default <run_dir>/scores)")
    report: bool = arg(False, "then write report.html and its figures into the scores folder")

    def __post_init__(self) -> None:
        for name, choices in (("judge_mode", JUDGE_MODES), ("method", METHODS)):
            if getattr(self, name) is not None:
                _checks.one_of(flag(name), getattr(self, name), choices)
        if isinstance(self.judge, str):  # a judge named by a string must name a model (an LM object is taken as it is)
            from findbench.models import check_spec

            check_spec(self.judge, flag="--judge")
        if self.out is None:
            self.out = str(Path(self.run_dir) / "scores")


@dataclass
class ReportConfig:
    """write report.html for a scored run: Table 2, figures (FIND Figure 3 style), transcripts; or, for a
    `findbench autointerp` output folder, its per-latent dashboard"""

    run_dir: str = arg(MISSING, "the run folder that `findbench evaluate` scored, or a `findbench autointerp "
                                "--out` folder", positional=True)
    scores: str | None = arg(None, "folder `findbench evaluate` wrote (default <run_dir>/scores)")
    data: str | None = arg(None, _RUN_DATA)
    out: str | None = arg(None, "folder for report.html and its PNG figures (default: the scores folder)")


@dataclass
class CompareConfig:
    """whether two scored runs differ, per Table 2 column: a paired bootstrap over the functions both scored"""

    run_a: str = arg(MISSING, "folder written by `findbench evaluate` (its per_function.csv), or a run holding one "
                              "as scores/", positional=True)
    run_b: str = arg(MISSING, "the run to compare it with (same form as RUN_A)", positional=True)
    seed: int = arg(0, "seed of the bootstrap resamples")
    n_resamples: int = arg(10_000, "bootstrap resamples")
    out: str | None = arg(None, "also write the comparison as JSON to this file (default: print only)")

    def __post_init__(self) -> None:
        _positive("n_resamples", self.n_resamples)
