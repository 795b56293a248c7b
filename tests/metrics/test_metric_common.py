"""What every evaluate metric module shipped with findbench must do, checked for all of
:data:`findbench.resources.METRICS`: runnable doc examples, evaluate's own shape (no
``compute`` override, explicit keyword arguments), loading from any folder, and imports that
stay light where the scoring is pure Python."""

from __future__ import annotations

import ast
import doctest
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

import findbench
from findbench.resources import METRICS
from tests._paths import REPO

#: Every metric's configurations (evaluate's ``config_name``).
CONFIGS = {"explanation_f1": ("default", "probe"), "iia": ("default", "token_ids")}


@pytest.fixture(scope="module")
def evaluate():
    import evaluate

    return evaluate


def _load(evaluate, name: str, config: str = "default"):
    return evaluate.load(findbench.metric_path(name), config)


def _module_of(metric):
    return sys.modules[type(metric).__module__]


# ------------------------------------------------------------------------- doc examples


@pytest.mark.parametrize("name", METRICS)
def test_doc_examples_run(evaluate, name):
    """The examples in the module's docstrings (the class docstring carries
    ``_KWARGS_DESCRIPTION``) run and print what they say, from the module evaluate loaded."""
    module = _module_of(_load(evaluate, name))
    tests = doctest.DocTestFinder().find(module, module.__name__, globs={})
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    for test in tests:
        runner.run(test, out=report.append)
    results = runner.summarize(verbose=False)
    assert results.attempted > 0, f"{name}: no doc example found"
    assert results.failed == 0, "".join(report)
    # the examples are the inputs description itself, not a copy somewhere else
    assert ">>> " in module._KWARGS_DESCRIPTION
    assert "+SKIP" not in module._KWARGS_DESCRIPTION


# ---------------------------------------------------------------------- evaluate's shape


#: Metrics whose ``add_batch``/``add`` check items before evaluate writes them to Arrow and
#: then call evaluate's own: find_unit_test (a lone surrogate fails Arrow's encoding for the
#: whole batch; Arrow casts ``correct="2"`` to 2 and a missing ``correct`` to None).
CHECKS_BEFORE_ARROW = {"find_unit_test"}


@pytest.mark.parametrize("name", METRICS)
def test_compute_is_evaluates_own(evaluate, name):
    """Inputs are checked in ``_compute``: no subclass replaces the public ``compute``, nor
    ``add_batch`` or ``add`` (but for :data:`CHECKS_BEFORE_ARROW`, which call evaluate's), so
    evaluate's own input handling runs for every metric."""
    cls = type(_load(evaluate, name))
    own = [klass for klass in cls.__mro__ if issubclass(klass, evaluate.Metric) and klass is not evaluate.Metric]
    for klass in own:
        for method in ("compute",) if name in CHECKS_BEFORE_ARROW else ("compute", "add_batch", "add"):
            assert method not in vars(klass), f"{klass.__name__} overrides {method}"
    assert cls.compute is evaluate.EvaluationModule.compute


@pytest.mark.parametrize("name", METRICS)
def test_compute_arguments_are_explicit(evaluate, name):
    metric = _load(evaluate, name)
    params = list(inspect.signature(type(metric)._compute).parameters.values())[1:]  # past self
    kinds = {p.name: p.kind for p in params}
    assert inspect.Parameter.VAR_KEYWORD not in kinds.values(), f"{name}._compute takes **kwargs"
    assert inspect.Parameter.VAR_POSITIONAL not in kinds.values(), f"{name}._compute takes *args"
    assert inspect.Parameter.POSITIONAL_ONLY not in kinds.values(), f"{name}._compute has positional-only arguments"
    # the feature columns come first and have no default (evaluate always passes them)
    assert [p.name for p in params[:2]] == ["predictions", "references"]
    assert all(p.default is inspect.Parameter.empty for p in params[:2])
    assert all(p.default is not inspect.Parameter.empty for p in params[2:]), (
        f"{name}: optional arguments need defaults"
    )
    # every argument is documented in the inputs description
    described = metric.info.inputs_description
    for p in params:
        assert f"{p.name} (" in described, f"{name}: argument {p.name} is not described"


@pytest.mark.parametrize("name", METRICS)
def test_unknown_argument_names_itself(evaluate, name):
    """A misspelt option is refused by ``_compute``'s signature, naming the option, instead of
    being swallowed by a ``**kwargs``."""
    metric = _load(evaluate, name)
    inputs = {
        "autointerp": ([[1, 3], None], [[1, 2], [1]]),
        "explanation_f1": ([True, False], [[0.5], [-0.5]]),
        "find_domain": (
            ["[DOMAIN]: none"],
            [{"domain_low": -100.0, "domain_high": 100.0, "corruption_type": None, "corruption_params": None}],
        ),
        "find_circuit": (["[]"], ["[]"]),
        "find_exact_match": (["def f(x):\n    return x\n"], ["def function(x):\n    return x\n"]),
        "find_nmse": (["def f(x):\n    return x\n"], ["def function(x):\n    return x\n"]),
        "find_unit_test": (["d"], [[{"inputs": ["a", "b", "c"], "outputs": None, "correct": 1}]]),
        "iia": (["7"], ["7"]),
    }[name]
    with pytest.raises(TypeError, match="tresholdd"):
        metric.compute(predictions=inputs[0], references=inputs[1], tresholdd=1)


# ------------------------------------------------------------------ loading from anywhere


@pytest.mark.parametrize(("name", "config"), [(n, c) for n in METRICS for c in CONFIGS.get(n, ("default",))])
def test_loads_from_an_empty_folder(evaluate, name, config, tmp_path, monkeypatch):
    import datasets

    monkeypatch.chdir(tmp_path)
    assert not any(tmp_path.iterdir())
    metric = _load(evaluate, name, config)
    features = metric.info.features
    assert isinstance(features, datasets.Features)
    assert set(features) == {"predictions", "references"}
    assert metric.name == name and metric.config_name == config
    assert metric.info.citation.strip() and metric.info.description.strip()


def test_unknown_config_is_refused(evaluate):
    with pytest.raises(ValueError, match="config_name"):
        _load(evaluate, "iia", "tokens")


# ----------------------------------------------------------------- errors name the field


class _PickOne:
    name = "pick-one"

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        return ["[ANSWER]: 1"] * len(conversations)

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        return [[0.0 if c == "1" else -3.0 for c in candidates] for _ in conversations]


ENTITY_TEST = {"inputs": ["NBA", "tulip", "cat"], "outputs": None, "correct": 1}


@pytest.mark.parametrize(
    ("kwargs", "exc", "field"),
    [
        # checked by evaluate against the features before _compute runs
        ({"predictions": [1], "references": [[ENTITY_TEST]]}, ValueError, r"Input predictions: \[1\]"),
        (
            {"predictions": ["a", "b"], "references": [[ENTITY_TEST]]},
            ValueError,
            r"predictions \(2\) and references \(1\)",
        ),
        # checked in _compute
        ({"predictions": ["a", None], "references": [[ENTITY_TEST]] * 2}, TypeError, r"predictions\[1\]"),
        (
            {"predictions": ["a"], "references": [[dict(ENTITY_TEST, correct=4)]]},
            ValueError,
            r"references\[0\]\[0\]\['correct'\]",
        ),
        (
            {"predictions": ["a"], "references": [[ENTITY_TEST]], "category": "strings"},
            ValueError,
            r"references\[0\]\[0\]\['outputs'\]",
        ),
        ({"predictions": ["a"], "references": [[]]}, ValueError, r"references\[0\]"),
        ({"predictions": ["a"], "references": [[ENTITY_TEST]], "mode": "vote"}, ValueError, "mode"),
        ({"predictions": ["a"], "references": [[ENTITY_TEST]], "category": None}, ValueError, "category is required"),
    ],
)
def test_unit_test_errors_name_the_field(evaluate, kwargs, exc, field):
    metric = _load(evaluate, "find_unit_test")
    kwargs = {"category": "neurons_entities", "judge": _PickOne(), **kwargs}
    with pytest.raises(exc, match=field):
        metric.compute(**kwargs)


def test_unit_test_references_from_add_batch_are_checked(evaluate):
    """Data given through ``add_batch`` or ``add`` goes through the same checks as data given
    to ``compute`` (the old ``compute`` override skipped them), before it is written."""
    metric = _load(evaluate, "find_unit_test")
    with pytest.raises(ValueError, match=r"references\[0\]\[0\]\['correct'\]"):
        metric.add_batch(predictions=["a"], references=[[dict(ENTITY_TEST, correct=4)]])
    with pytest.raises(ValueError, match=r"reference\[0\]\['correct'\]"):
        metric.add(prediction="a", reference=[dict(ENTITY_TEST, correct="1")])
    metric.add_batch(predictions=["a", "b"], references=[[ENTITY_TEST], [dict(ENTITY_TEST, correct=2)]])
    metric.add(prediction="c\ud800", reference=[ENTITY_TEST])
    out = metric.compute(category="neurons_entities", judge=_PickOne())
    assert out == {
        "unit_test_accuracy": 2 / 3,
        "unit_test_accuracy_ci": [0.0, 1.0],
        "n": 3,
        "per_function": [1.0, 0.0, 1.0],
        "truncated": [False] * 3,
        "judge": "pick-one",
    }


def test_code_metrics_check_items_in_compute(evaluate):
    """A missing program past the first item reaches ``_compute`` (evaluate checks only the
    first item's type) and is refused there, naming its index, before anything runs."""
    gt = "def function(x):\n    return x\n"
    with pytest.raises(TypeError, match=r"predictions\[1\]"):
        _load(evaluate, "find_nmse").compute(predictions=[gt, None], references=[gt, gt])
    with pytest.raises(TypeError, match=r"references\[1\]"):
        _load(evaluate, "find_exact_match").compute(
            predictions=[gt, gt], references=[gt, None], test_inputs=[["a"], ["b"]]
        )
    with pytest.raises(ValueError, match="test_inputs"):
        _load(evaluate, "find_exact_match").compute(predictions=[gt], references=[gt], test_inputs=[["a"], ["b"]])


# ---------------------------------------------------------------------- light imports


def _modules_after_import(*modules: str) -> dict[str, bool]:
    code = (
        "import importlib, json, sys\n"
        f"for m in {list(modules)!r}:\n"
        "    importlib.import_module(m)\n"
        "print(json.dumps({k: k in sys.modules for k in "
        "('torch', 'transformers', 'findbench.neuron_explanations.interventions')}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_iia_scoring_and_resources_import_without_torch():
    loaded = _modules_after_import("findbench.resources", "findbench.neuron_explanations.iia")
    assert loaded == {"torch": False, "transformers": False, "findbench.neuron_explanations.interventions": False}


def _findbench_imports(name: str) -> list[str]:
    """The findbench modules a metric module imports (``from findbench.x import y`` -> ``findbench.x``)."""
    tree = ast.parse(Path(findbench.metric_path(name)).read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "findbench":
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "findbench"]
    return found


@pytest.mark.parametrize("name", ["iia", "explanation_f1"])
def test_pure_metrics_import_findbench_without_torch(name):
    """The findbench side of the pure-Python metrics (their scoring functions) needs no torch;
    evaluate itself may still import it."""
    modules = _findbench_imports(name)
    assert any(m.startswith("findbench.neuron_explanations.") for m in modules), modules
    loaded = _modules_after_import(*modules)
    assert loaded["torch"] is False, f"{name} imports torch through {modules}"
