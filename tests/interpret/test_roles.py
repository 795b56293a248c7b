"""The judge as an Inspect model role: ``--model-role judge=…`` and the task's ``judge`` argument
(``findbench evaluate --judge``) reach one judging path and give the same decisions.

No LM is loaded: the interpreter is the ``oracle`` reference (Inspect model ``none``) and the
judges are scripted stand-ins (:class:`tests.interpret.fakes.KnowingJudge`)."""

from __future__ import annotations

import asyncio
import csv
import json

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.model import get_model  # noqa: E402

from findbench.interpret.config import EvaluateConfig
from findbench.interpret.evaluate import evaluate_run  # noqa: E402
from findbench.interpret.logs import log_episodes, read_log  # noqa: E402
from findbench.interpret.roles import JUDGE_ROLE, judge_model_of, role_judge  # noqa: E402
from findbench.interpret.run import write_episode  # noqa: E402
from findbench.interpret.task import find_interpret  # noqa: E402
from findbench.judge import judge_mode_of  # noqa: E402
from tests.interpret.fakes import KnowingJudge

pytestmark = pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning")

FUNCTIONS = ["strings/f00000", "strings/f00001", "neurons_relations/f00000"]


def decisions(log) -> dict[str, list[int]]:
    """The judge's pick per unit test, per sample."""
    return {s.id: [d["chosen"] for d in s.scores["unit_test_accuracy"].metadata["decisions"]] for s in log.samples}


def run(data_dir, tmp_path, judge, roles=None):
    task = find_interpret(functions=FUNCTIONS, data=str(data_dir), interpreter="oracle", judge=judge)
    [log] = inspect_eval(task, model="none", model_roles=roles, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    return log


def test_the_judge_role_and_the_judge_argument_reach_the_same_decisions(data_dir, by_id, tmp_path):
    knowing = KnowingJudge([by_id[f] for f in FUNCTIONS])
    first = KnowingJudge([])  # knows nothing: picks option 1 everywhere
    by_argument = decisions(run(data_dir, tmp_path / "argument", knowing))
    assert all(all(c == d["correct"] for c, d in zip(by_argument[f], by_id[f]["unit_tests"])) for f in FUNCTIONS)
    calls = knowing.calls
    # the role wins over the task's judge argument, which is never asked
    log = run(
        data_dir, tmp_path / "role", first, {JUDGE_ROLE: get_model("findbench/knowing", lm=knowing, memoize=False)}
    )
    assert decisions(log) == by_argument and first.calls == 0 and knowing.calls > calls
    # the argument alone is a different judge, so the comparison above can fail
    assert decisions(run(data_dir, tmp_path / "first", first)) != by_argument
    # findbench evaluate --judge on the same episodes: the same decisions, test by test
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"interpreter": "oracle", "seed": 0, "data": str(data_dir)}))
    episodes = log_episodes(read_log(log.location))
    assert sorted(e.function_id for e in episodes) == sorted(FUNCTIONS)
    for e in episodes:  # FIND's layout: the answers without the log
        write_episode(out, e.function_id, e.method, e.record["answer"])
    evaluate_run(EvaluateConfig(out, judge=knowing, out=tmp_path / "scores"), progress=False)
    by_evaluate: dict[str, list[int]] = {}
    with open(tmp_path / "scores" / "unit_tests.csv", newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["tests"] == "find":  # FIND's unit tests (near misses are evaluate's second set)
                by_evaluate.setdefault(row["function_id"], []).append(int(row["chosen"]))
    assert by_evaluate == by_argument


def test_a_role_gets_the_mode_its_judge_records():
    assert judge_mode_of("http://127.0.0.1:8000/v1", judge_model="embedded-evaluator") == "pmi"  # the served LoRA
    assert judge_mode_of("http://127.0.0.1:8000/v1", judge_model="embedded") == "logprob"  # a base model: no record
    lm, mode = asyncio.run(role_judge(judge_model_of("http://127.0.0.1:8000/v1", judge_model="embedded-evaluator")))
    assert mode == "pmi" and (lm.base_url, lm.model) == ("http://127.0.0.1:8000/v1", "embedded-evaluator")
    lm, mode = asyncio.run(role_judge(judge_model_of(KnowingJudge([])), judge_mode="generate"))
    assert mode == "generate" and isinstance(lm, KnowingJudge)


def test_a_role_without_log_probabilities_is_refused():
    with pytest.raises(ValueError, match="--model-role judge=mockllm/model: findbench's judge reads log-probabilities"):
        asyncio.run(role_judge(get_model("mockllm/model", memoize=False)))


def test_a_vllm_lora_role_is_read_at_its_server_under_the_adapters_name(monkeypatch):
    """``vllm/<base>:<adapter>`` (Inspect's vLLM provider, stood in for here; the real one against the
    real server: tests/lm/test_vllm_lora.py): the judge is the adapter's served name at ``base_url``
    or ``$VLLM_BASE_URL``."""
    from types import SimpleNamespace

    from findbench.lm.inspect_lm import served_at

    def vllm(base_url, adapter):
        api = SimpleNamespace(
            base_url=base_url,
            base_model="embedded",
            model_name=f"embedded:{adapter}",
            adapter=SimpleNamespace(name=adapter) if adapter else None,
        )
        return SimpleNamespace(api=api)

    monkeypatch.delenv("VLLM_BASE_URL", raising=False)
    assert served_at(vllm(None, "embedded-evaluator")) is None  # not connected yet: role_judge asks Inspect once
    assert served_at(vllm("http://b:8001/v1", "embedded-evaluator")) == ("http://b:8001/v1", "embedded-evaluator")
    monkeypatch.setenv("VLLM_BASE_URL", "http://b:8001/v1")
    assert served_at(vllm(None, "embedded-evaluator")) == ("http://b:8001/v1", "embedded-evaluator")
    assert served_at(vllm(None, None)) == ("http://b:8001/v1", "embedded")
