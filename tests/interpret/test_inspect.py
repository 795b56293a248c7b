"""The harness on Inspect: the task, solver, scorers, the findbench model API, the registry
entry point and the run folder ``run_interpretations`` exports from the logs.

No LM is loaded: episodes are driven by Inspect's ``mockllm/model`` with scripted outputs,
by a scripted findbench LM behind ``findbench/...``, or by the ``oracle`` interpreter; the
unit-test judge is a scripted stand-in. Logs go to tmp_path and Inspect's display is off.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, ModelOutput, ModelUsage, get_model  # noqa: E402

from findbench import cli  # noqa: E402
from findbench.constants import UsageError  # noqa: E402
from findbench.interpret import prompts  # noqa: E402
from findbench.interpret.config import DEFAULT_API_MAX_TOKENS, EvaluateConfig, InterpretConfig  # noqa: E402
from findbench.interpret.evaluate import evaluate_run  # noqa: E402
from findbench.interpret.logs import log_episodes, read_log, sample_episode  # noqa: E402
from findbench.interpret.protocol import UNRECOGNIZED_REPLY, format_answer  # noqa: E402
from findbench.interpret.references import oracle_answer  # noqa: E402
from findbench.interpret.run import LM_CACHE, episode_dir, write_episode  # noqa: E402
from findbench.interpret.task import TASK_NAME, find_interpret, find_samples, interpreter_model  # noqa: E402
from findbench.lm.base import DEFAULT_MAX_TOKENS  # noqa: E402
from tests.interpret.fakes import GenerationLM, KnowingJudge, interpret
from tests.interpret.test_run import EPISODE_FILES  # noqa: E402

# Inspect's own retry set-up warns on every model call (a tenacity deprecation).
pytestmark = pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning")

#: The scripted experiment per function: its command's inputs.
INPUTS = {"numeric/f00000": ["1", "2.5", "-3"], "strings/f00000": ["hello", "two words"]}


def oracle_text(row) -> str:
    answer = oracle_answer(row)
    return format_answer(answer.description, answer.domain, answer.code)


def command(function_id: str) -> str:
    return "PYTHON(function.py " + " ".join(f'"{x}"' for x in INPUTS[function_id]) + ")"


def findbench_call(capsys, data_dir, function_id, values) -> str:
    capsys.readouterr()
    assert cli.main(["call", function_id, *values, "--data", str(data_dir)]) == 0
    return capsys.readouterr().out.rstrip("\n")


def scripted_outputs(by_id):
    """mockllm outputs as a function of the conversation: the function's command on the first
    turn, its ground truth on the second (samples run concurrently, so no fixed order)."""
    prompt_of = {prompts.task_prompt(by_id[f], "aia", protocol="text"): f for f in INPUTS}

    def outputs(input, tools, tool_choice, config):
        fid = prompt_of[input[1].text]
        text = command(fid) if len(input) == 2 else oracle_text(by_id[fid])
        output = ModelOutput.from_content("mockllm/model", text)
        output.usage = ModelUsage(input_tokens=10 * len(input), output_tokens=7, total_tokens=10 * len(input) + 7)
        return output

    return outputs


# ------------------------------------------------------------------- a whole episode on mockllm


@pytest.fixture(scope="module")
def mock_log(data_dir, by_id, tmp_path_factory):
    """One eval of numeric/f00000 and strings/f00000 with scripted mockllm outputs."""
    logs_dir = tmp_path_factory.mktemp("inspect-logs")
    rows = [by_id[f] for f in INPUTS]
    model = get_model("mockllm/model", custom_outputs=scripted_outputs(by_id))
    task = find_interpret(
        configs="numeric,strings", functions=list(INPUTS), data=str(data_dir), judge=KnowingJudge(rows)
    )
    [log] = inspect_eval(task, model=model, log_dir=str(logs_dir), display="none")
    return log


def test_episode_on_mockllm_transcript_and_replies(mock_log, data_dir, capsys):
    assert mock_log.status == "success" and mock_log.eval.task == TASK_NAME
    assert sorted(s.id for s in mock_log.samples) == sorted(INPUTS)
    log = read_eval_log(mock_log.location)  # what is on disk
    for sample in log.samples:
        fid = sample.id
        expected = "Response: " + findbench_call(capsys, data_dir, fid, INPUTS[fid])
        # the transcript: two model calls, the second one sent the function's reply
        calls = [e for e in sample.events if e.event == "model"]
        assert len(calls) == 2
        assert calls[1].input[-1].text == expected and calls[1].input[-2].text == command(fid)
        # the sample's conversation is the episode's
        assert [m.role for m in sample.messages] == ["system", "user", "assistant", "user", "assistant"]
        assert sample.messages[3].text == expected
        episode = sample_episode(sample)
        assert episode["answer"] is not None and episode["rounds"] == 2
        assert episode["calls"][0]["inputs"] == INPUTS[fid]
        # token usage summed over the two calls, as Inspect counted it
        used = sample.model_usage["mockllm/model"]
        assert (used.input_tokens, used.output_tokens, used.total_tokens) == (20 + 40, 14, 74)
        assert sample.output.completion.startswith("[DESCRIPTION]:")
    assert log.stats.model_usage["mockllm/model"].input_tokens == 2 * 60


def test_scorers_give_ground_truth_full_marks(mock_log):
    scores = {s.id: {k: v.value for k, v in s.scores.items()} for s in mock_log.samples}
    assert scores["numeric/f00000"] == {"nmse_success": 1.0, "domain_iou": 1.0}
    assert scores["strings/f00000"] == {"exact_match": 1.0, "unit_test_accuracy": 1.0}
    numeric = next(s for s in mock_log.samples if s.id == "numeric/f00000")
    assert numeric.scores["nmse_success"].metadata["nmse"] == 0.0
    strings = next(s for s in mock_log.samples if s.id == "strings/f00000")
    assert strings.scores["unit_test_accuracy"].metadata["truncated"] is False  # within the judge's limit
    # the judge's decisions, test by test, in the explanation and the metadata
    decisions = strings.scores["unit_test_accuracy"].metadata["decisions"]
    assert len(decisions) == 10 and all(d["right"] and d["chosen"] == d["correct"] for d in decisions)
    explanation = strings.scores["unit_test_accuracy"].explanation.splitlines()
    assert explanation[0].startswith("judge (logprob): 10/10 unit tests right")
    assert len(explanation) == 11 and explanation[1].startswith("1. right: chose ") and "margin +5" in explanation[1]
    results = {s.name: s.metrics["mean"].value for s in mock_log.results.scores}
    assert results == {"nmse_success": 1.0, "domain_iou": 1.0, "exact_match": 1.0, "unit_test_accuracy": 1.0}


def test_run_folder_from_the_log_is_scored_by_evaluate(mock_log, data_dir, by_id, tmp_path):
    out = tmp_path / "run"
    episodes = log_episodes(read_log(mock_log.location))
    assert sorted(e.function_id for e in episodes) == sorted(INPUTS)
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"interpreter": "mockllm/model", "seed": 0, "data": str(data_dir)}))
    for e in episodes:  # FIND's layout, without the logs
        write_episode(out, e.function_id, e.method, e.record["answer"])
    for function_id in INPUTS:
        assert sorted(p.name for p in episode_dir(out, function_id, "aia").iterdir()) == sorted(EPISODE_FILES)
    config = EvaluateConfig(out, data=data_dir, judge=KnowingJudge([by_id[f] for f in INPUTS]), out=tmp_path / "scores")
    result = evaluate_run(config, progress=False)  # --data: run.json's folder alone would leave the scores unverified
    assert result["scores"]["numeric"]["aia"]["nmse_success"] == 1.0
    assert result["scores"]["numeric"]["aia"]["domain_iou"] == 1.0
    expected = {
        "exact_match": 1.0,
        "exact_match_ci": [1.0, 1.0],
        "exact_match_n": 1,
        "unit_test_accuracy": 1.0,
        "unit_test_accuracy_ci": [1.0, 1.0],
        "unit_test_accuracy_n": 1,
        "unverified": False,
    }
    assert {k: result["scores"]["strings"]["aia"].get(k) for k in expected} == expected


# ------------------------------------------------------------------ the findbench model provider


class ScriptedLM(GenerationLM):
    """A findbench LM: a command on the first turn, an answer after; records its calls."""

    name = "scripted-lm"

    def __init__(self, answer="[DESCRIPTION]: adds a letter"):
        self.answer = answer
        self.limits: list[int] = []

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        self.limits += [max_new_tokens] * len(conversations)
        return ["PYTHON(function.py abc)" if len(c) == 2 else self.answer for c in conversations]


def test_findbench_model_api_answers_through_a_findbench_lm(data_dir, tmp_path):
    lm, cache = ScriptedLM(), tmp_path / "cache.sqlite"
    task = find_interpret(configs="strings", limit=1, data=str(data_dir), max_tokens=37, judge=None)
    model = get_model("findbench/scripted-lm", lm=lm, cache=str(cache), memoize=False)
    [log] = inspect_eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success" and log.eval.model == "findbench/scripted-lm"
    [sample] = log.samples
    episode = sample_episode(sample)
    assert episode["answer"]["description"] == "adds a letter"
    assert lm.limits == [37, 37]  # max_tokens reached the LM through GenerateConfig
    usage = sample.model_usage["findbench/scripted-lm"]
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert cache.is_file()
    # a new model over the same cache: every request is answered from it, the LM is not called
    again = get_model("findbench/scripted-lm", lm=lm, cache=str(cache), memoize=False)
    [log2] = inspect_eval(task, model=again, log_dir=str(tmp_path / "logs"), display="none")
    assert log2.status == "success" and lm.limits == [37, 37]
    assert sample_episode(log2.samples[0])["answer"] == episode["answer"]


def test_findbench_model_api_loads_its_lm_on_first_use(tmp_path):
    import asyncio

    # Inspect builds providers to look up model information: that must not load weights
    model = get_model("findbench/no-such-model-folder", memoize=False)
    assert model.api._lm is None
    lm = ScriptedLM()
    model = get_model("findbench/scripted-lm", lm=lm, memoize=False)
    output = asyncio.run(model.generate([ChatMessageSystem(content="s"), ChatMessageUser(content="u")]))
    assert output.completion == "PYTHON(function.py abc)" and lm.limits == [DEFAULT_MAX_TOKENS]
    assert output.usage.input_tokens == 1 and output.usage.output_tokens == 6  # 4 characters a token


@pytest.mark.parametrize(
    "interpreter, model",
    [
        ("oracle", "none/oracle"),
        ("random", "none/random"),
        ("embedded", "findbench/embedded"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "findbench/HuggingFaceTB/SmolLM2-135M-Instruct"),
        ("http://127.0.0.1:8000/v1", "findbench/http://127.0.0.1:8000/v1"),
        ("hf/local", "hf/local"),
        ("mockllm/model", "mockllm/model"),
        ("openai-api/lab/some-model", "openai-api/lab/some-model"),
        ("vllm/Qwen/Qwen2.5-7B-Instruct", "vllm/Qwen/Qwen2.5-7B-Instruct"),
        ("findbench/embedded", "findbench/embedded"),
    ],
)
def test_interpreter_to_inspect_model(interpreter, model):
    assert interpreter_model(interpreter) == model


def test_samples_and_their_arguments(data_dir):
    samples = find_samples(InterpretConfig(configs="strings,numeric", limit=2, data=str(data_dir)), "aia")
    assert [s.id for s in samples] == ["strings/f00000", "strings/f00001", "numeric/f00000", "numeric/f00001"]
    assert samples[0].metadata["method"] == "aia" and samples[0].metadata["row"]["function_id"] == "strings/f00000"
    json.dumps([s.metadata for s in samples])  # the log stores them as JSON
    milan = find_samples(InterpretConfig(method="milan", data=str(data_dir)), "milan")
    assert {s.metadata["row"]["category"] for s in milan} == {
        "neurons_entities",
        "neurons_relations",
    }
    for kwargs, field in [
        ({"configs": "images"}, "configs"),
        ({"configs": "numeric", "method": "milan"}, "method"),
        ({"limit": 0}, "limit"),
        ({"functions": "strings/f99999"}, "functions"),
    ]:
        with pytest.raises(ValueError, match=field):
            cfg = InterpretConfig(data=str(data_dir), **kwargs)
            find_samples(cfg, cfg.method[0])


def test_milan_on_inspect(data_dir, tmp_path):
    task = find_interpret(
        configs="neurons_relations", method="milan", limit=1, data=str(data_dir), interpreter="oracle", judge=None
    )
    [log] = inspect_eval(task, model="none", log_dir=str(tmp_path / "logs"), display="none")
    episode = sample_episode(log.samples[0])
    assert log.status == "success" and log.samples[0].metadata["method"] == "milan" and episode["rounds"] <= 2
    assert log.eval.model == "none/oracle"  # what Inspect shows for a reference interpreter
    assert episode["calls"][0]["command"] == "exemplars" and episode["answer"] is not None


# ---------------------------------------------------------------- run_interpretations on Inspect


def test_run_folder_is_exported_from_the_logs_and_resumed(data_dir, by_id, tmp_path):
    out = tmp_path / "run"
    kwargs = dict(configs="numeric,strings", limit=2, out=out, max_connections=2, display="none")
    interpret(data_dir, "oracle", **kwargs)
    info = json.loads((out / "run.json").read_text())
    assert info["protocol"] == "text" and info["interpreter"] == "oracle"
    assert (
        info["inspect_model"] == "none/oracle"
        and info["configs"] == ["numeric", "strings"]
        and info["data"] == str(data_dir.resolve())
    )
    assert len(list((out / "logs").glob("*.eval"))) == 1
    folders = sorted(p.relative_to(out).as_posix() for p in out.glob("*/*/f*"))
    assert folders == ["numeric/aia/f00000", "numeric/aia/f00001", "strings/aia/f00000", "strings/aia/f00001"]
    judge = KnowingJudge([by_id[f"strings/f0000{i}"] for i in range(2)])
    result = evaluate_run(EvaluateConfig(out, data=data_dir, judge=judge, out=tmp_path / "scores"), progress=False)
    assert result["scores"]["numeric"]["aia"]["nmse_success"] == 1.0
    expected = {
        "exact_match": 1.0,
        "exact_match_ci": [1.0, 1.0],
        "exact_match_n": 2,
        "unit_test_accuracy": 1.0,
        "unit_test_accuracy_ci": [1.0, 1.0],
        "unit_test_accuracy_n": 2,
        "unverified": False,
    }
    assert {k: result["scores"]["strings"]["aia"].get(k) for k in expected} == expected
    # evaluate wrote each episode's scores into its sample of the log, named as the task's scorers, with the judge
    [path] = (out / "logs").glob("*.eval")
    log = read_eval_log(str(path))
    scores = {s.id: s.scores for s in log.samples}
    assert sorted(scores["numeric/f00000"]) == ["domain_iou", "nmse_success"]
    assert scores["numeric/f00000"]["nmse_success"].value == 1.0
    assert scores["numeric/f00000"]["nmse_success"].metadata["nmse"] == 0.0
    assert sorted(scores["strings/f00001"]) == ["exact_match", "unit_test_accuracy", "unit_test_accuracy_near"]
    judged = scores["strings/f00001"]["unit_test_accuracy"]
    assert judged.value == 1.0 and judged.metadata["judge"] == "knowing-judge"
    assert judged.explanation.startswith("judge knowing-judge (logprob): 10/10 unit tests right")
    assert len(judged.metadata["decisions"]) == 10 and judged.history[-1].provenance.author == "findbench evaluate"
    assert {s.name: s.metrics["accuracy"].value for s in log.results.scores}["unit_test_accuracy"] == 1.0
    # scoring again changes nothing: the log is not rewritten
    before = path.stat().st_mtime_ns
    evaluate_run(EvaluateConfig(out, judge=judge, out=tmp_path / "scores"), progress=False)
    assert path.stat().st_mtime_ns == before
    # a rerun runs nothing; a lost episode is exported again from the log, which runs nothing
    interpret(data_dir, "oracle", **kwargs)
    assert len(list((out / "logs").glob("*.eval"))) == 1
    record = (episode_dir(out, "strings/f00001", "aia") / "description.txt").read_text()
    shutil.rmtree(episode_dir(out, "strings/f00001", "aia"))
    interpret(data_dir, "oracle", **kwargs)
    [log] = (out / "logs").glob("*.eval")
    assert read_eval_log(str(log)).status == "success"
    assert (episode_dir(out, "strings/f00001", "aia") / "description.txt").read_text() == record
    with pytest.raises(ValueError, match="other settings: rounds=20 \\(now 3\\)"):
        interpret(data_dir, "oracle", rounds=3, **kwargs)
    with pytest.raises(ValueError, match="model: the served model name"):
        interpret(data_dir, "mockllm/model", model="x", configs="strings", limit=1, out=tmp_path / "other")


def test_an_inspect_providers_model_gets_a_default_max_tokens(data_dir, tmp_path):
    limits = []

    def outputs(input, tools, tool_choice, config):
        limits.append(config.max_tokens)
        output = ModelOutput.from_content("mockllm/model", "[DESCRIPTION]: adds a letter")
        output.usage = ModelUsage(input_tokens=3, output_tokens=2, total_tokens=5)  # mockllm would count with tiktoken
        return output

    kwargs = dict(functions="strings/f00000", display="none", model_args={"custom_outputs": outputs})
    out = interpret(data_dir, "mockllm/model", out=tmp_path / "run", **kwargs)
    assert json.loads((out / "run.json").read_text())["max_tokens"] == DEFAULT_API_MAX_TOKENS == limits[0]
    interpret(data_dir, "mockllm/model", out=tmp_path / "run", **kwargs)  # resuming with nothing given agrees
    with pytest.raises(ValueError, match=f"max_tokens={DEFAULT_API_MAX_TOKENS} \\(now 50\\)"):
        interpret(data_dir, "mockllm/model", out=tmp_path / "run", max_tokens=50, **kwargs)
    out = interpret(data_dir, "mockllm/model", out=tmp_path / "given", max_tokens=50, **kwargs)
    assert json.loads((out / "run.json").read_text())["max_tokens"] == 50 == limits[-1] and len(limits) == 2
    # the references generate nothing: no limit recorded
    out = interpret(data_dir, "oracle", functions="strings/f00000", out=tmp_path / "oracle", display="none")
    assert json.loads((out / "run.json").read_text())["max_tokens"] is None


def test_engine_inspect_with_a_findbench_lm_and_its_cache(data_dir, tmp_path, monkeypatch):
    import findbench.lm

    lm, real_load_lm = ScriptedLM(), findbench.lm.load_lm

    def load_lm(spec, *, cache=None, **kwargs):
        return real_load_lm(lm, cache=cache) if spec == "scripted-lm" else real_load_lm(spec, cache=cache, **kwargs)

    monkeypatch.setattr(findbench.lm, "load_lm", load_lm)
    monkeypatch.setattr("findbench.models.check_spec", lambda spec, **kw: spec)  # a made-up spec that load_lm knows
    out = tmp_path / "run"
    kwargs = dict(configs="strings", limit=3, out=out, max_tokens=21, display="none")
    interpret(data_dir, "scripted-lm", **kwargs)
    info = json.loads((out / "run.json").read_text())
    assert (info["interpreter"], info["inspect_model"], info["max_tokens"]) == (
        "scripted-lm",
        "findbench/scripted-lm",
        21,
    )
    assert (out / LM_CACHE).is_file()
    # the first turn is the same request for every string function: the cache answers it twice
    assert lm.limits == [21] * 4
    shutil.rmtree(episode_dir(out, "strings/f00002", "aia"))
    interpret(data_dir, "scripted-lm", **kwargs)
    assert lm.limits == [21] * 4  # redone from the request cache
    assert (episode_dir(out, "strings/f00002", "aia") / "description.txt").read_text() == "adds a letter\n"


# ------------------------------------------------------------------- the episode's token budget


def test_episode_tokens_on_inspect_stop_the_episode(data_dir, tmp_path):
    limits = []

    def outputs(input, tools, tool_choice, config):
        limits.append(config.max_tokens)
        output = ModelOutput.from_content("mockllm/model", "Let me think.")  # never a command nor an answer
        output.usage = ModelUsage(input_tokens=3, output_tokens=7, total_tokens=10)
        return output

    model = get_model("mockllm/model", custom_outputs=outputs, memoize=False)
    task = find_interpret(functions="strings/f00000", data=str(data_dir), judge=None, episode_tokens=20)
    assert task.metadata["episode_tokens"] == 20
    [log] = inspect_eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success"
    episode = sample_episode(log.samples[0])
    # 7 tokens a turn as Inspect reported them, turns not capped: the third passes 20 and stops the episode, without it
    assert limits == [None, None, None]
    assert (episode["stop_reason"], episode["rounds"]) == ("token_limit", 2)
    assert log.samples[0].model_usage["mockllm/model"].output_tokens == 21  # the sample's usage counts the third
    assert log.samples[0].output.completion == "" and [m.role for m in log.samples[0].messages].count("assistant") == 2


def test_findbench_model_api_counts_for_the_budget(data_dir, tmp_path):
    # findbench/<spec> counts a turn's output as the native engine does (here: 4 characters a token)
    lm = ScriptedLM(answer="Not yet, still thinking.")  # 24 characters: 6 tokens
    model = get_model("findbench/scripted-lm", lm=lm, memoize=False)
    task = find_interpret(configs="strings", limit=1, data=str(data_dir), judge=None, max_tokens=10, episode_tokens=20)
    [log] = inspect_eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    episode = sample_episode(log.samples[0])
    # "PYTHON(function.py abc)" is 23 characters (6 tokens), then 6 a turn: 6, 12, 18, then 24 passes 20
    assert lm.limits == [10, 10, 10, 10]
    assert (episode["stop_reason"], episode["rounds"]) == ("token_limit", 3)
    assert log.samples[0].model_usage["findbench/scripted-lm"].output_tokens == 24


# ---------------------------------------------------------------------------- the entry point


#: Inspect's mockllm counts tokens with tiktoken's o200k_base encoding when an output has no
#: usage, and tiktoken downloads that encoding on first use. This stand-in keeps the
#: subprocess offline (the count only feeds mockllm's made-up usage).
TIKTOKEN_STANDIN = """
class _Encoding:
    def encode(self, text, **kwargs):
        return text.split()


def get_encoding(name):
    return _Encoding()


def encoding_for_model(name):
    return _Encoding()
"""


def test_inspect_cli_finds_the_task_through_the_entry_point(data_dir, tmp_path):
    inspect_cli = Path(sys.executable).with_name("inspect")
    if not inspect_cli.is_file():
        pytest.skip("the inspect command is not installed beside this Python")
    empty, shim, logs = tmp_path / "empty", tmp_path / "shim", tmp_path / "logs"
    empty.mkdir()
    (shim / "tiktoken").mkdir(parents=True)
    (shim / "tiktoken" / "__init__.py").write_text(TIKTOKEN_STANDIN)
    env = {**os.environ, "PYTHONPATH": str(shim), "INSPECT_DISPLAY": "none"}
    cmd = [
        str(inspect_cli),
        "eval",
        "findbench/find_interpret",
        "-T",
        "configs=strings",
        "-T",
        "limit=2",
        "-T",
        "rounds=2",
        "-T",
        "judge=none",
        "-T",
        f"data={data_dir}",
        "-T",
        "episode_tokens=1000",
        "--model",
        "mockllm/model",
        "--log-dir",
        str(logs),
    ]
    proc = subprocess.run(cmd, cwd=empty, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(empty.iterdir()) == []
    [path] = logs.glob("*.eval")
    log = read_eval_log(str(path))
    assert log.status == "success" and log.eval.task == TASK_NAME
    assert sorted(s.id for s in log.samples) == ["strings/f00000", "strings/f00001"]
    for sample in log.samples:
        episode = sample_episode(sample)
        # mockllm's default reply is no command: the harness says so until the round limit
        assert episode["stop_reason"] == "round_limit" and episode["rounds"] == 2
        [agent] = [step.params for step in log.plan.steps if step.solver == "findbench/find_agent"]
        assert agent["episode_tokens"] == 1000  # -T episode_tokens=1000 reached the solver as an int
        assert episode["messages"][3]["content"] == UNRECOGNIZED_REPLY
        assert sample.scores["exact_match"].value == 0.0


def test_a_missing_judge_fails_before_any_episode(data_dir, monkeypatch):
    import findbench.models

    def resolve(name):
        raise FileNotFoundError(f"{name} is not trained yet")

    monkeypatch.setattr(findbench.models, "resolve", resolve)
    with pytest.raises(UsageError, match="^-T judge: embedded-evaluator is not trained yet.*judge=none"):
        find_interpret(configs="strings", limit=1, data=str(data_dir))
    find_interpret(configs="numeric", limit=1, data=str(data_dir))  # numeric functions need no judge
    find_interpret(configs="strings", limit=1, data=str(data_dir), judge="none")


def _inspect_eval_cli(tmp_path, *args):
    """``inspect eval findbench/find_interpret …`` in a subprocess (offline: the tiktoken stand-in)."""
    inspect_cli = Path(sys.executable).with_name("inspect")
    if not inspect_cli.is_file():
        pytest.skip("the inspect command is not installed beside this Python")
    shim = tmp_path / "shim"
    (shim / "tiktoken").mkdir(parents=True, exist_ok=True)
    (shim / "tiktoken" / "__init__.py").write_text(TIKTOKEN_STANDIN)
    # display "none" would quiet the console Inspect prints a refusal on
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim), os.environ.get("PYTHONPATH", "")]),
           "INSPECT_DISPLAY": "plain"}
    cmd = [str(inspect_cli), "eval", *args, "--log-dir", str(tmp_path / "logs")]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    "args, says",
    [
        (["-T", "rounds=0"], "-T rounds: must be ≥ 1, got 0"),
        (["-T", "roundz=3"], "-T roundz: findbench/find_interpret has no such argument; did you mean 'rounds'?"),
        (["--model-role", "judge=findbench/embeded"], "--model-role judge=findbench/embeded: unknown model 'embeded'"),
    ],
)
def test_inspect_eval_refuses_bad_arguments_in_one_message(data_dir, tmp_path, args, says):
    proc = _inspect_eval_cli(tmp_path, "findbench/find_interpret", "-T", f"data={data_dir}", "-T", "configs=strings",
                             *args, "--model", "mockllm/model")
    output = " ".join((proc.stdout + proc.stderr).split())  # Inspect wraps the message to the terminal's width
    assert proc.returncode != 0, output
    assert says in output and "Traceback" not in output and len((proc.stdout + proc.stderr).splitlines()) <= 8
    assert not (tmp_path / "logs").exists()  # refused before any eval started


@pytest.mark.parametrize(
    "settings, says",
    [
        ({"rounds": "abc"}, "^-T rounds: must be an integer, got 'abc'$"),
        ({"max_tokens": 0}, "^-T max_tokens: must be ≥ 1"),
        ({"structured_outputs": "maybe"}, "^-T structured_outputs: unknown value 'maybe'"),
        ({"configs": "images"}, "^-T configs: unknown value 'images'"),
        ({"interpreter": "orcle"}, "^-T interpreter: unknown model 'orcle'.*did you mean 'oracle'"),
        ({"judge_mode": "pmii"}, "^-T judge_mode: unknown value 'pmii'; did you mean 'pmi'"),
        ({"judge": "embeded-evaluator"}, "^-T judge: unknown model 'embeded-evaluator'.*'embedded-evaluator'"),
        ({"method": "aia,milan"}, "^-T method: the task runs one method"),
        ({"data": "no/such/folder"}, "^-T data: data folder no/such/folder does not exist .run `findbench build --out"),
        ({"bogus": 1}, "^-T bogus: findbench/find_interpret has no such argument .its arguments: access, configs,"),
    ],
)
def test_task_arguments_are_checked_as_the_flags_are(data_dir, settings, says):
    from inspect_ai._util.error import PrerequisiteError

    with pytest.raises(UsageError, match=says) as refused:
        find_interpret(**{"data": str(data_dir), **settings})
    assert isinstance(refused.value, PrerequisiteError)  # what `inspect eval` prints as one message


def test_a_judge_role_findbench_cannot_read_is_refused_before_any_episode(data_dir, tmp_path):
    mock = get_model("mockllm/model", memoize=False)
    with pytest.raises(UsageError, match="^--model-role judge=mockllm/model: findbench's judge reads log-prob"):
        inspect_eval("findbench/find_interpret", task_args={"data": str(data_dir), "configs": "strings"},
                     model=mock, model_roles={"judge": mock}, log_dir=str(tmp_path / "logs"), display="none")
    with pytest.raises(UsageError, match="^--model-role jduge: the task has no such role; did you mean 'judge'"):
        inspect_eval("findbench/find_interpret", task_args={"data": str(data_dir), "configs": "strings"},
                     model=mock, model_roles={"jduge": mock}, log_dir=str(tmp_path / "logs"), display="none")
    assert not (tmp_path / "logs").exists()
