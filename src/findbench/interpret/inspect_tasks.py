"""FIND's interpreter harness on Inspect (registered via :mod:`findbench.interpret._inspect_registry`).

- task ``findbench/find_interpret``: one sample per FIND function (metadata: the row and the method),
  solved by :func:`find_agent` and scored by :func:`nmse_success`, :func:`exact_match`,
  :func:`domain_iou` and :func:`unit_test_accuracy` (views of
  :func:`findbench.interpret.evaluate.score_interpretations`)::

      inspect eval findbench/find_interpret -T configs=strings -T limit=2 --model findbench/embedded

- solver :func:`find_agent`: one episode in the ``text`` protocol (FIND's ``PYTHON(...)`` commands, any
  model) or the ``tools`` protocol (``call_function(inputs)`` tool calls), the loops of
  :mod:`findbench.interpret.agent`; the record is per-sample state (``store_as(EpisodeState)``).
- model API ``findbench``: ``--model findbench/<spec>`` answers with a findbench LM
  (``-M cache=<file>``: sqlite request cache; ``-M lm=<instance>`` from Python)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspect_ai import Task, task, task_with
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessage, GenerateConfig, ModelAPI, ModelOutput, ModelUsage, get_model, modelapi
from inspect_ai.scorer import Score, Target, mean, scorer, stderr
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.tool import ToolChoice, ToolInfo

from findbench import _checks
from findbench._version import __version__
from findbench.constants import UsageError
from findbench.interpret.agent import text_episode, tools_episode, transcript
from findbench.interpret.config import DEFAULT_MAX_TOKENS, DEFAULT_ROUNDS, InterpretConfig, check_selection
from findbench.interpret.episode import STORE_PREFIX, EpisodeState, count_tokens
from findbench.interpret.floors import DEFAULT_OBSERVED_CALLS, observed_turns
from findbench.interpret.log_scores import judge_explanation
from findbench.interpret.prompts import MILAN_TURNS, check_method, turn_grammar
from findbench.interpret.protocol import (
    NEURON_CATEGORIES,
    PROTOCOL,
    format_answer,
)
from findbench.interpret.references import REFERENCE_INTERPRETERS, reference_answer
from findbench.interpret.roles import JUDGE_ROLE
from findbench.interpret.truth import UNVERIFIED_NOTE, json_row
from findbench.judge.scoring import JUDGE_MODES
from findbench.lm.base import Constraint, use_structured_outputs
from findbench.lm.inspect_lm import check_models, eval_models, is_inspect_provider, task_arguments
from findbench.schema import CATEGORIES, parse_function_id

#: The task's registry name (``inspect eval findbench/find_interpret``).
TASK_NAME = "findbench/find_interpret"


def _rows(data: Any, category: str, seed: int) -> list[dict]:
    from findbench.find import load_rows

    if data is None or isinstance(data, (str, os.PathLike)):
        return load_rows(category, seed=seed, data=data)
    return [dict(r) for r in data if r.get("category") == category]


def default_configs(data: Any, methods: Sequence[str], functions: Sequence[str] | None) -> list[str]:
    """The categories a run covers when none are named: those ``data`` (a folder, rows or None:
    procedural) holds, only the neuron ones when a MILAN method is asked, only those of ``functions``."""
    present = set(CATEGORIES)
    if functions:
        present = {f.split("/", 1)[0] for f in functions}
    elif isinstance(data, (str, os.PathLike)):
        present = {c for c in CATEGORIES if (Path(data) / c).is_dir()}
    elif data is not None:
        present = {r.get("category") for r in data}
    if any(m != "aia" for m in methods):
        present &= set(NEURON_CATEGORIES)
    return [c for c in CATEGORIES if c in present]


def find_samples(
    configs: Sequence[str] | str | None = None,
    method: str = "aia",
    *,
    limit: int | None = None,
    sample: int | None = None,
    functions: Sequence[str] | str | None = None,
    data: Any = None,
    seed: int = 0,
    interpreter: str | None = None,
    observed_calls: int = DEFAULT_OBSERVED_CALLS,
) -> list[Sample]:
    """One sample per FIND function: id the function id, metadata ``{"row", "method", "unverified"}``
    (``unverified``: the row came from in-memory rows, which no data checks).

    ``data``: a dataset folder, rows or None (procedural rows of ``seed``); ``configs`` default to
    :func:`default_configs`; ``sample`` is seeded and stratified by subcategory (after ``limit``).
    A reference ``interpreter`` (``oracle``, ``random``, ...) adds its turns to the metadata
    (``reference_turns``; ``observed`` calls ``observed_calls`` inputs first)."""
    from findbench.find.rows import sample_rows

    _, config_list, function_list = check_selection(method, configs, functions, limit, sample, seed)
    if config_list is None:
        config_list = default_configs(data, [method], function_list)
    if not config_list:
        raise UsageError(
            f"configs: nothing to run for method {method!r} (MILAN methods need {', '.join(NEURON_CATEGORIES)})"
        )
    for c in config_list:
        try:
            check_method(method, c)
        except ValueError as exc:
            raise UsageError(f"methods: {exc}; drop {c!r} from configs or run it with method 'aia'") from None
    stray = sorted(f for f in function_list or [] if parse_function_id(f)[0] not in config_list)
    if stray:
        raise UsageError(f"functions: {stray} are not in configs {config_list}")

    wanted = set(function_list or [])
    samples: list[Sample] = []
    found: set[str] = set()
    for category in config_list:
        pool = _rows(data, category, seed)
        rows = [r for r in pool if not wanted or r["function_id"] in wanted]
        if limit is not None:
            rows = rows[:limit]
        if sample is not None:
            rows = sample_rows(rows, sample, seed=seed)
        for row in rows:
            found.add(row["function_id"])
            metadata: dict[str, Any] = {
                "row": json_row(row),
                "method": method,
                "unverified": data is not None and not isinstance(data, (str, os.PathLike)),
            }
            if interpreter == "observed":
                metadata["reference_turns"] = observed_turns(row, pool, calls=observed_calls, seed=seed)
            elif interpreter is not None:
                answer = reference_answer(interpreter, row, pool, seed=seed)
                metadata["reference_turns"] = [format_answer(answer.description, answer.domain, answer.code)]
            samples.append(
                Sample(
                    input=f"Interpret the FIND function {row['function_id']} (method {method}).",
                    target=str(row.get("description") or ""),
                    id=row["function_id"],
                    metadata=metadata,
                )
            )
    missing = sorted(wanted - found)
    if missing:
        where = (
            f"data folder {data}"
            if isinstance(data, (str, os.PathLike))
            else "rows given"
            if data
            else f"procedural data (seed {seed})"
        )
        raise UsageError(f"functions: {missing} are not in the {where}")
    return samples


@solver
def find_agent(
    rounds: int = DEFAULT_ROUNDS,
    max_tokens: int | None = None,
    seed: int = 0,
    protocol: str = PROTOCOL,
    episode_tokens: int | None = None,
    structured_outputs: str = "auto",
):
    """One FIND episode per sample with the task's model (or the sample's reference answer) in
    ``protocol``; the record goes to the store (``store_as(EpisodeState)``), the parsed answer to the output.
    ``structured_outputs`` (``auto``/``on``/``off``): each ``text`` turn follows
    :func:`~findbench.interpret.prompts.turn_grammar` (``auto``: where
    :func:`~findbench.lm.base.use_structured_outputs` says so for a findbench model)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        row, method = state.metadata["row"], state.metadata["method"]
        reference = state.metadata.get("reference_turns")
        if protocol == "tools":
            episode = await tools_episode(
                state,
                rounds=rounds,
                max_tokens=max_tokens,
                seed=seed,
                episode_tokens=episode_tokens,
                reference=reference,
            )
        else:
            grammar = (
                None if reference is not None else _turn_grammar(row["category"], method, rounds, structured_outputs)
            )
            episode = await text_episode(
                state,
                generate,
                rounds=rounds,
                max_tokens=max_tokens,
                seed=seed,
                episode_tokens=episode_tokens,
                grammar=grammar,
                reference=reference,
            )
        answer = (
            format_answer(episode.description, episode.answer.domain, episode.answer.code) if episode.answer else ""
        )
        state.output = ModelOutput.from_content(model=str(state.model), content=answer)
        return state

    return solve


def _turn_grammar(category: str, method: str, rounds: int, setting: str) -> Any:
    """The turn grammar of an episode on the task's model, or None where structured outputs do not apply."""
    applied = structured_outputs_applied(get_model(), setting)
    return turn_grammar(category, min(rounds, MILAN_TURNS) if method == "milan" else rounds) if applied else None


def structured_outputs_applied(model: Any, setting: str) -> bool:
    """Whether ``text`` turns on ``model`` follow the turn grammar: a findbench model as
    :func:`~findbench.lm.base.use_structured_outputs` says, any other with ``on``."""
    api = getattr(model, "api", None)
    return use_structured_outputs(api.lm, setting) if isinstance(api, FindbenchModelAPI) else setting == "on"


def _episode(state: TaskState) -> EpisodeState:
    if not any(key.startswith(STORE_PREFIX) for key in state.store.keys()):
        raise ValueError(f"sample {state.sample_id}: no episode in the store (solve it with find_agent)")
    return state.store_as(EpisodeState)


def _scored(state: TaskState, metric: str, **judge: Any) -> dict[str, Any]:
    """The sample's episode scored on ``metric`` by :func:`~findbench.interpret.evaluate.score_interpretations`."""
    from findbench.interpret.evaluate import score_interpretations

    ep, row = _episode(state), state.metadata["row"]
    record = {
        "function_id": row["function_id"],
        "category": row["category"],
        "method": state.metadata["method"],
        "description": ep.description,
        "domain": ep.domain,
        "code": ep.code,
    }
    return score_interpretations([record], [row], metrics=(metric,), **judge)[0]


def _marked(state: TaskState, score: Score | None) -> Score | None:
    """``score`` with :data:`~findbench.interpret.truth.UNVERIFIED_NOTE` opening its explanation
    when the sample's row came from in-memory rows."""
    if score is not None and state.metadata.get("unverified"):
        score.explanation = UNVERIFIED_NOTE + (f"\n{score.explanation}" if score.explanation else "")
    return score


def _metric_scorer(category: str, metric: str, to_score: Any) -> Any:
    """A scorer of ``category``'s samples: ``to_score(value, episode)`` of the episode's ``metric``."""

    async def score(state: TaskState, target: Target) -> Score | None:
        if state.metadata["row"]["category"] != category:
            return None
        return _marked(state, to_score((await asyncio.to_thread(_scored, state, metric))[metric], _episode(state)))

    return score


@scorer(metrics=[mean(), stderr()])
def nmse_success():
    """Numeric functions: 1.0 when the answer's code has NMSE below FIND's threshold, else 0.0 (NMSE in the
    metadata)."""
    from findbench.find.code_scoring import NMSE_THRESHOLD

    return _metric_scorer(
        "numeric",
        "nmse",
        lambda value, ep: Score(
            value=float(value < NMSE_THRESHOLD),
            answer=ep.code,
            explanation=f"NMSE {value}",
            metadata={"nmse": value if math.isfinite(value) else None},
        ),
    )


@scorer(metrics=[mean(), stderr()])
def exact_match():
    """String functions: the share of the row's test inputs on which the answer's code is right."""
    return _metric_scorer(
        "strings", "exact_match", lambda value, ep: None if value is None else Score(value=value, answer=ep.code)
    )


@scorer(metrics=[mean(), stderr()])
def domain_iou():
    """Numeric functions: IoU of the answer's ``[DOMAIN]`` with the corrupted interval."""
    return _metric_scorer("numeric", "domain_iou", lambda value, ep: Score(value=value, answer=ep.domain))


@scorer(metrics=[mean(), stderr()])
def unit_test_accuracy(
    judge: Any = "embedded-evaluator",
    judge_mode: str | None = None,
    judge_model: str | None = None,
    judge_cache: str | None = None,
):
    """Strings and neurons: the share of the row's unit tests the judge answers right from the answer's
    description; the metadata holds ``truncated`` and ``decisions`` (the rows of ``unit_tests.csv``).

    The judge is the eval's ``judge`` model role (``--model-role judge=…``) where it names one, else
    ``judge`` (a :func:`findbench.lm.load_lm` spec or an LM), both loaded on the first score and read
    as :func:`findbench.interpret.roles.role_judge` says."""
    from inspect_ai.model import model_roles

    from findbench.interpret.roles import judge_model_of, role_judge

    default = judge_model_of(judge, judge_model=judge_model, judge_cache=judge_cache)
    resolving, lock = asyncio.Lock(), threading.Lock()
    judges: list[tuple[Any, Any, str]] = []  # (Inspect model, findbench LM, mode)

    async def judge_of(model: Any) -> tuple[Any, str]:
        async with resolving:
            for known, lm, mode in judges:
                if known is model:
                    return lm, mode
            lm, mode = await role_judge(model, judge_mode=judge_mode, judge_cache=judge_cache)
            judges.append((model, lm, mode))
            return lm, mode

    def run(state: TaskState, lm: Any, mode: str) -> dict[str, Any]:
        with lock:
            return _scored(state, "unit_test_accuracy", judge=lm, mode=mode)

    async def score(state: TaskState, target: Target) -> Score | None:
        row = state.metadata["row"]
        if row["category"] == "numeric" or not row.get("unit_tests"):
            return None
        role = model_roles().get(JUDGE_ROLE) or default
        lm, mode = await judge_of(role[0] if isinstance(role, list) else role)
        record = await asyncio.to_thread(run, state, lm, mode)
        rows = record["unit_test_rows"]
        return _marked(
            state,
            Score(
                value=record["unit_test_accuracy"],
                answer=record["description"],
                explanation=judge_explanation(rows, mode),
                metadata={"judge_mode": mode, "truncated": bool(rows[0]["truncated"]), "decisions": rows},
            ),
        )

    return score


@task
@task_arguments(TASK_NAME, [f.name for f in dataclasses.fields(InterpretConfig)])
def find_interpret(
    judge: Any = "embedded-evaluator",
    judge_mode: str | None = None,
    judge_model: str | None = None,
    judge_cache: str | None = None,
    **settings: Any,
) -> Task:
    """FIND's interpretation task (FIND §3, Table 2) for one method (``-T name=value``).

    ``settings``: ``findbench interpret``'s (:class:`~findbench.interpret.config.InterpretConfig`,
    which checks them), for one ``method``; rows as :func:`find_samples`, the episode as
    :func:`find_agent`; a reference ``interpreter`` answers without a model. ``judge``
    (``None``/``"none"``: descriptions unscored) as ``findbench evaluate``'s; the ``judge`` model role
    (``--model-role judge=…``) replaces it. Arguments, the eval's findbench models and the judge are
    checked here, each refusal one line naming its ``-T`` argument or option (:func:`task_arguments`)."""
    settings.pop("model", None)  # Inspect passes its --model to every task: that model is the interpreter
    if settings.get("interpreter") is None:
        settings.pop("interpreter", None)
    cfg = InterpretConfig(**settings)
    if len(cfg.method) != 1:
        raise UsageError(f"method: the task runs one method, got {','.join(cfg.method)}")
    if judge_mode is not None:
        _checks.one_of("--judge-mode", judge_mode, JUDGE_MODES)
    models = eval_models()
    check_models([JUDGE_ROLE], models)
    samples = find_samples(
        cfg.configs,
        cfg.method[0],
        limit=cfg.limit,
        sample=cfg.sample,
        functions=cfg.functions,
        data=cfg.data,
        seed=cfg.seed,
        interpreter=cfg.reference,
        observed_calls=cfg.observed_calls,
    )
    present = {s.metadata["row"]["category"] for s in samples}
    judged = judge not in (None, "none") and bool(present - {"numeric"})
    if judged:
        from findbench.interpret.roles import check_judge, check_role_judge

        role = models.get(f"--model-role {JUDGE_ROLE}")
        if role is not None:
            check_role_judge(role)
        else:
            check_judge(judge)
    scorers = [
        s
        for s, wanted in (
            (nmse_success(), "numeric" in present),
            (domain_iou(), "numeric" in present),
            (exact_match(), "strings" in present),
        )
        if wanted
    ]
    if judged:
        scorers.append(
            unit_test_accuracy(judge, judge_mode=judge_mode, judge_model=judge_model, judge_cache=judge_cache)
        )
    built = interpret_task(
        samples,
        scorers,
        rounds=cfg.rounds,
        max_tokens=cfg.max_tokens,
        seed=cfg.seed,
        protocol=cfg.protocol,
        episode_tokens=cfg.episode_tokens,
        structured_outputs=cfg.structured_outputs,
        interpreter=cfg.reference,
    )
    # a reference answers without a model: Inspect shows the run's model as none/<reference>
    return task_with(built, model=inspect_model_name(cfg.reference)) if cfg.reference else built


def interpret_task(
    samples: list[Sample],
    scorers: list | None = None,
    *,
    rounds: int,
    max_tokens: int | None,
    seed: int,
    protocol: str,
    episode_tokens: int | None,
    structured_outputs: str,
    interpreter: str | None = None,
) -> Task:
    """The task over ``samples`` (of one method), solved by :func:`find_agent`; its metadata records
    ``interpreter`` (the run's name for it; None: the model), which ``findbench evaluate`` checks."""
    return Task(
        dataset=MemoryDataset(samples, name="find"),
        solver=find_agent(
            rounds=rounds,
            max_tokens=max_tokens,
            seed=seed,
            protocol=protocol,
            episode_tokens=episode_tokens,
            structured_outputs=structured_outputs,
        ),
        scorer=scorers or None,
        metadata={
            "findbench_version": __version__,
            "protocol": protocol,
            "episode_tokens": episode_tokens,
            "structured_outputs": structured_outputs,
            "interpreter": interpreter,
        },
    )


def _thread_safe(lm: Any) -> bool:
    from findbench.lm.cache import CachedLM
    from findbench.lm.openai_lm import OpenAILM

    return isinstance(lm.inner if isinstance(lm, CachedLM) else lm, OpenAILM)


class FindbenchModelAPI(ModelAPI):
    """Inspect's view of a findbench LM (``--model findbench/<spec>``).

    Model args (``-M``): ``cache`` (sqlite file), ``model`` (served name, for URL specs), ``lm`` (an LM
    instance) and options of :func:`findbench.lm.load_lm`. Token usage uses the backend's tokenizer
    where it has one, else 4 characters a token. The LM is loaded on the first ``generate`` (Inspect
    also builds providers only to look up model information)."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),
        **model_args: Any,
    ) -> None:
        super().__init__(model_name, base_url, api_key, [], config)
        self._cache = model_args.pop("cache", None)
        lm = model_args.pop("lm", None)
        if base_url is not None:
            model_args.setdefault("model", model_name)
        self.spec = lm if lm is not None else (base_url or model_name)  #: the findbench LM spec (or LM)
        self._options = model_args
        self._lm: Any = None
        self._load_lock = threading.Lock()
        self._lock: Any = contextlib.nullcontext()  # a threading.Lock once a non-thread-safe LM is loaded

    @property
    def loaded(self) -> bool:
        """Whether the findbench LM is loaded."""
        return self._lm is not None

    @property
    def lm(self) -> Any:
        """The findbench LM (loaded on first use)."""
        with self._load_lock:
            if self._lm is None:
                from findbench.lm import load_lm

                self._lm = load_lm(self.spec, cache=self._cache, **self._options)
                if not _thread_safe(self._lm):
                    self._lock = threading.Lock()
            return self._lm

    def max_tokens(self) -> int | None:
        return DEFAULT_MAX_TOKENS

    def close(self) -> None:
        close = getattr(self._lm, "close", None)
        if callable(close):
            close()

    def _count(self, text: str) -> int:
        lm = self.lm
        with self._lock:
            return count_tokens(lm, text)

    async def count_text_tokens(self, text: str) -> int:
        return await asyncio.to_thread(self._count, text)

    def _generate(
        self, messages: list[dict[str, str]], limit: int, temperature: float, constraint: Any
    ) -> tuple[str, int, int]:
        lm = self.lm
        kwargs = {"constraint": constraint} if constraint is not None else {}
        with self._lock:
            text = lm.generate([messages], max_new_tokens=limit, temperature=temperature, **kwargs)[0]
            return text, count_tokens(lm, conversation=messages), count_tokens(lm, text)

    async def generate(
        self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice, config: GenerateConfig
    ) -> ModelOutput:
        if tools or any(m.role == "tool" or getattr(m, "tool_calls", None) for m in input):
            raise ValueError(
                f"findbench/{self.model_name} takes FIND's text protocol only: findbench's own models do not "
                "support tool calls; run the text protocol (-T protocol=text, findbench interpret --protocol text) "
                "or, for the tools protocol, an Inspect provider whose models support tool calls"
            )
        messages = transcript(input)
        limit = config.max_tokens or DEFAULT_MAX_TOKENS
        field = (config.extra_body or {}).get("structured_outputs")
        constraint = None
        if field:  # vLLM's request field, as the text loop (or a caller) sends it
            constraint = Constraint(regex=field["regex"]) if "regex" in field else Constraint(json_schema=field["json"])
            if not getattr(self.lm, "supports_constraints", False):
                raise ValueError(f"structured_outputs: findbench/{self.model_name} cannot constrain generation")
        text, n_in, n_out = await asyncio.to_thread(
            self._generate, messages, limit, float(config.temperature or 0.0), constraint
        )
        output = ModelOutput.from_content(model=self.model_name, content=text)
        output.usage = ModelUsage(input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out)
        return output


@modelapi(name="findbench")
def findbench_model_api() -> type[ModelAPI]:
    """The ``findbench`` model API (``--model findbench/<spec>``)."""
    return FindbenchModelAPI


def inspect_model_name(interpreter: str) -> str:
    """The Inspect model for an interpreter: ``none/<name>`` for the references (no model; Inspect
    shows the name); ``<provider>/<model>`` as
    is when Inspect knows the provider; any other spec (``embedded``, a folder, a Hub id, a URL) as
    ``findbench/<spec>``."""
    if interpreter in REFERENCE_INTERPRETERS:
        return f"none/{interpreter}"
    head, sep, _ = interpreter.partition("/")
    if sep and head and not interpreter.startswith(("http://", "https://")) and not Path(interpreter).exists():
        if is_inspect_provider(head):
            return interpreter
    return f"findbench/{interpreter}"
