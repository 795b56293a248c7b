"""The settings of ``findbench build``, ``build-neuron-tests`` and ``call`` (which reads a built
folder), each written once: :func:`findbench.builders.find.build` takes :class:`BuildConfig`, the
command line makes a flag of every field, and ``__post_init__`` checks each one (naming the flag)
before anything is built or called."""

from __future__ import annotations

import logging
from dataclasses import MISSING, dataclass
from pathlib import Path

from findbench import _checks
from findbench._config import Csv, arg
from findbench.constants import UsageError
from findbench.models import check_spec
from findbench.schema import CONFIGS, SOURCES, parse_function_id

logger = logging.getLogger("findbench.cli")


@dataclass
class BuildConfig:
    """write the FIND dataset folder (parquet per config + README card)"""

    out: str = arg("find", "dataset folder to write")
    seed: int = arg(0, "procedural generator seed")
    configs: Csv = arg(None, f"comma-separated configs (default: all of {','.join(CONFIGS)}; find-v1: not rasp)")
    source: str = arg("procedural", "our generator or an import of the original release", choices=SOURCES)
    data_dir: str | None = arg(None, "find-v1: folder of the original release (src/find-dataset layout)")

    def __post_init__(self) -> None:
        self.configs = _checks.str_list("--configs", self.configs, optional=True)
        for config in self.configs or ():
            _checks.one_of("--configs", config, CONFIGS)
        _checks.one_of("--source", self.source, SOURCES)
        _checks.integer("--seed", self.seed)
        if self.source != "procedural" and "rasp" in (self.configs or ()):
            raise UsageError("--configs: the rasp config has no find-v1 release; it is procedural only")


@dataclass
class BuildNeuronTestsConfig:
    """write the neuron test sets (huang2023, observational, intervention_tasks)"""

    out: str = arg("neuron_test_sets", "dataset folder to write")
    configs: Csv = arg(None, "comma-separated configs (default: huang2023,intervention_tasks, + observational with "
                             "--layer/--neuron/--explanation)")
    data_dir: str | None = arg(None, "huang2023: folder of the release, with eval_data.tar.gz (default: download it)")
    model: str = arg("embedded", "model under study (observational, intervention_tasks)")
    generator: str | None = arg(None, "observational: LM spec writing strings and judging (default: --model)")
    layer: int | None = arg(None, "observational: the neuron's layer")
    neuron: int | None = arg(None, "observational: the neuron's index")
    explanation: str | None = arg(None, "observational: the explanation to test")
    span_judge: str = arg("lm", "observational: what marks the spans an explanation predicts, 'lm' (the "
                                "--generator) or 'regex:<pattern>'")
    corpus: str | None = arg(None, "observational: text file, one sentence per line (default: shipped corpus)")
    tasks: Csv = arg(None, "intervention_tasks: comma-separated task names (default: all)")
    n_strings: int = arg(20, "observational: strings the generator writes in the explanation's denotation")
    n_activating: int = arg(20, "observational: top-activating corpus spans judged")

    def __post_init__(self) -> None:
        self.configs = _checks.str_list("--configs", self.configs, optional=True)
        for config in self.configs or ():
            _checks.one_of("--configs", config, ("huang2023", "observational", "intervention_tasks"))
        self.tasks = _checks.str_list("--tasks", self.tasks, optional=True)
        _checks.positive_int("--n-strings", self.n_strings)
        _checks.positive_int("--n-activating", self.n_activating)
        if self.span_judge != "lm" and not self.span_judge.startswith("regex:"):
            raise UsageError(f"--span-judge: 'lm' or 'regex:<pattern>', got {self.span_judge!r}")
        for name in ("model", "generator"):
            if getattr(self, name) is not None:
                check_spec(getattr(self, name), flag=f"--{name}")


@dataclass
class CallConfig:
    """call a FIND function: prints 'Function input - output pairs: (x, y) ...'"""

    function_id: str = arg(MISSING, 'e.g. "numeric/f00042"', positional=True)
    inputs: list[str] = arg(MISSING, "inputs (numbers for numeric functions)", positional=True, nargs="+")
    data: str | None = arg(None, "dataset folder written by `findbench build` (default: ./find when it holds "
                                 "the config built with --seed, else regenerate from --seed)")
    seed: int = arg(0, "procedural generator seed")
    backend: str | None = arg(None, "neurons: embedding / table / lm (default: the row's backbone)")
    model: str | None = arg(None, "neurons with --backend lm: LM spec (default: embedded)")

    def __post_init__(self) -> None:
        try:
            self.category = parse_function_id(self.function_id)[0]
        except ValueError as exc:
            raise UsageError(f"function_id: {exc}") from None
        if self.category == "numeric":
            for text in self.inputs:
                try:
                    float(text)
                except ValueError:
                    raise UsageError(f"inputs: numeric functions take numbers, got {text!r}") from None
        if self.model is not None and self.backend == "lm":
            check_spec(self.model, flag="--model")

    def folder(self, built: str = "find") -> str | None:
        """--data, else ``./find`` (``findbench build``'s default --out) when its sidecar lists the
        function's category, built from --seed or imported; None (regenerate) otherwise. A log line says which."""
        from findbench._io import read_json_object
        from findbench.builders.folder import SIDECAR_NAME

        sidecar, category = Path(built) / SIDECAR_NAME, self.category
        if self.data is not None or not sidecar.is_file():
            return self.data
        try:
            configs = read_json_object(sidecar, "dataset sidecar").get("configs")
            prov = dict(configs[category]["provenance"]) if isinstance(configs, dict) and category in configs else None
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("call: not reading ./%s (%s); regenerating %s", built, exc, category)
            return None
        if prov is None:
            logger.info("call: ./%s holds no %s config; regenerating it from --seed %d", built, category, self.seed)
        elif prov.get("source", "procedural") == "procedural" and prov.get("seed") != self.seed:
            logger.info("call: ./%s holds %s of seed %s, not --seed %d; regenerating", built, category,
                        prov.get("seed"), self.seed)
        else:
            logger.info("call: reading %s from ./%s (written by `findbench build`; --data picks another)", category,
                        built)
            return built
        return None
