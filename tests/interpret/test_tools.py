"""The ``tools`` protocol: native ``call_function(inputs)`` tool calls on Inspect.

Episodes are driven by Inspect's ``mockllm/model`` with scripted outputs holding tool calls
(every output carries its usage, so mockllm never counts tokens with tiktoken, which would
download its encoding); the ``oracle`` interpreter answers without a model. The text protocol
runs beside it on the same inputs (reference turns through the same solver).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import (  # noqa: E402
    ChatCompletionChoice,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.tool import ToolCall  # noqa: E402

from findbench.interpret import prompts  # noqa: E402
from findbench.interpret.calls import FunctionRunner  # noqa: E402
from findbench.interpret.config import EvaluateConfig
from findbench.interpret.episode import Episode  # noqa: E402
from findbench.interpret.evaluate import evaluate_run  # noqa: E402
from findbench.interpret.protocol import (  # noqa: E402
    MAX_COMMANDS_PER_MESSAGE,
    MAX_INPUT_CHARS,
    MAX_INPUTS_PER_COMMAND,
    TOOL_NAME,
    TOOL_UNRECOGNIZED_REPLY,
    Command,
    format_answer,
)
from findbench.interpret.references import oracle_answer  # noqa: E402
from findbench.interpret.run import episode_dir  # noqa: E402
from findbench.interpret.solver import ANSWERED_CALL, DROPPED_CALL, STORE_KEY, call_function_tool, transcript  # noqa: E402
from findbench.interpret.task import find_interpret  # noqa: E402
from tests.interpret.fakes import KnowingJudge, interpret  # noqa: E402
from tests.interpret.scripted import run_episode  # noqa: E402

# Inspect's own retry set-up warns on every model call (a tenacity deprecation).
pytestmark = pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning")

#: The scripted experiment per function: the tool's inputs (numbers as JSON numbers) and the
#: same values as a text command. numeric/f00001 is noisy: the noise must be the same too.
INPUTS = {
    "strings/f00000": (["hello", "two words", "it's"], 'PYTHON(function.py hello "two words" "it\'s")'),
    "numeric/f00000": ([1, 2.5, -3, "7"], "PYTHON(function.py 1 2.5 -3 7)"),
    "numeric/f00001": ([0, 1.5, -10, 42], "PYTHON(function.py 0 1.5 -10 42)"),
}


def oracle_text(row) -> str:
    answer = oracle_answer(row)
    return format_answer(answer.description, answer.domain, answer.code)


def with_usage(output: ModelOutput) -> ModelOutput:
    output.usage = ModelUsage(input_tokens=11, output_tokens=5, total_tokens=16)
    return output


def tool_calls(*arguments, content="", ids=None) -> ModelOutput:
    """An assistant output calling the tool once per ``arguments`` dict (in order)."""
    ids = ids or [f"call-{i}" for i in range(len(arguments))]
    calls = [ToolCall(id=i, function=TOOL_NAME, arguments=a) for i, a in zip(ids, arguments)]
    message = ChatMessageAssistant(content=content, tool_calls=calls, model="mockllm/model", source="generate")
    return with_usage(
        ModelOutput(model="mockllm/model", choices=[ChatCompletionChoice(message=message, stop_reason="tool_calls")])
    )


def text(content: str) -> ModelOutput:
    return with_usage(ModelOutput.from_content("mockllm/model", content))


def function_of(by_id, ids, input) -> str:
    """Which of ``ids`` a conversation is on, from its task message (samples run concurrently,
    so no fixed order); the ids must have different task messages (categories)."""
    prompt_of = {prompts.task_prompt(by_id[f], "aia", protocol="tools"): f for f in ids}
    assert len(prompt_of) == len(ids)
    return prompt_of[input[1].text]


def text_protocol_reply(row, command: str) -> str:
    """The text protocol's reply to ``command`` on ``row`` (seed 0), from a whole text episode."""
    with tempfile.TemporaryDirectory() as log_dir:
        episode = run_episode(row, None, reference=[command, "[DESCRIPTION]: done"], log_dir=Path(log_dir))
    return episode.messages[3]["content"]


# ----------------------------------------------------------------- episodes on mockllm, scored


def tools_eval(by_id, ids, data_dir, log_dir):
    """One eval of the ``tools`` protocol on ``ids``: a tool call on the first turn, the ground
    truth after."""

    def outputs(input, tools, tool_choice, config):
        assert [t.name for t in tools] == [TOOL_NAME]
        fid = function_of(by_id, ids, input)
        if len(input) == 2:
            call = ModelOutput.for_tool_call(
                "mockllm/model", TOOL_NAME, {"inputs": INPUTS[fid][0]}, content="Let me try."
            )
            return with_usage(call)
        return text("I am done.\n" + oracle_text(by_id[fid]))

    model = get_model("mockllm/model", custom_outputs=outputs, memoize=False)
    task = find_interpret(
        functions=ids, data=str(data_dir), judge=KnowingJudge([by_id[f] for f in ids]), protocol="tools"
    )
    [log] = inspect_eval(task, model=model, log_dir=str(log_dir), display="none")
    return log


@pytest.fixture(scope="module")
def tools_logs(data_dir, by_id, tmp_path_factory):
    """Two evals (numeric/f00000 and numeric/f00001 have the same task message): the clean
    functions, then the noisy one."""
    log_dir = tmp_path_factory.mktemp("tools-logs")
    return [
        tools_eval(by_id, ["strings/f00000", "numeric/f00000"], data_dir, log_dir),
        tools_eval(by_id, ["numeric/f00001"], data_dir, log_dir),
    ]


def test_tool_calls_reply_as_the_text_protocol_does(tools_logs, by_id):
    assert [log.status for log in tools_logs] == ["success", "success"]
    assert tools_logs[0].eval.metadata["protocol"] == "tools"
    samples = [s for log in tools_logs for s in read_eval_log(log.location).samples]  # what is on disk
    assert sorted(s.id for s in samples) == sorted(INPUTS)
    for sample in samples:
        fid = sample.id
        expected = text_protocol_reply(by_id[fid], INPUTS[fid][1])
        assert expected.startswith("Response: Function input - output pairs: (")
        # Inspect's conversation: the tool call and its result, then the answer
        assert [m.role for m in sample.messages] == ["system", "user", "assistant", "tool", "assistant"]
        assert sample.messages[0].text == prompts.system_prompt("tools")
        assert sample.messages[2].tool_calls[0].function == TOOL_NAME
        assert sample.messages[3].text == expected and sample.messages[3].error is None
        assert [e.function for e in sample.events if e.event == "tool"] == [TOOL_NAME]
        # the second model call saw the tool's result
        calls = [e for e in sample.events if e.event == "model"]
        assert len(calls) == 2 and calls[1].input[-1].text == expected
        episode = Episode.from_dict(sample.store[STORE_KEY])
        assert (
            episode.protocol == "tools" and episode.finished and episode.stop_reason == "answer" and episode.rounds == 2
        )
        assert episode.malformed_commands == 0
        [call] = episode.calls
        assert call["round"] == 1 and call["inputs"] == [str(x) for x in INPUTS[fid][0]]
        assert call["command"] == f"{TOOL_NAME}(inputs={json.dumps(INPUTS[fid][0])})"
        # the record's transcript is text: the call as a line after the assistant's text, the result as a tool message
        assert [m["role"] for m in episode.messages] == ["system", "user", "assistant", "tool", "assistant"]
        assert all(isinstance(m["content"], str) for m in episode.messages)
        assert episode.messages[2]["content"] == "Let me try.\n" + call["command"]
        assert episode.messages[3]["content"] == expected
        assert episode.usage == {"input_tokens": 22, "output_tokens": 10, "total_tokens": 32}
        assert sample.output.completion.startswith("[DESCRIPTION]:")


def test_the_answer_is_scored(tools_logs):
    scores = {s.id: {k: v.value for k, v in s.scores.items()} for log in tools_logs for s in log.samples}
    assert scores["numeric/f00000"] == {"nmse_success": 1.0, "domain_iou": 1.0}
    assert scores["strings/f00000"] == {"exact_match": 1.0, "unit_test_accuracy": 1.0}
    assert scores["numeric/f00001"]["nmse_success"] == 1.0


def scripted_episode(data_dir, tmp_path, outputs, **task_args):
    """``(log, sample, episode)`` of one tools-protocol episode on strings/f00000 with a mock model
    answering ``outputs`` (an iterator of turns or a function of the request)."""
    model = get_model("mockllm/model", custom_outputs=outputs, memoize=False)
    task = find_interpret(functions="strings/f00000", data=str(data_dir), judge=None, protocol="tools", **task_args)
    [log] = inspect_eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    [sample] = log.samples
    return log, sample, Episode.from_dict(sample.store[STORE_KEY])


def test_bad_tool_inputs_are_counted_as_malformed_and_a_turn_without_a_call_as_unrecognized(data_dir, by_id, tmp_path):
    long = "x" * (MAX_INPUT_CHARS + 1)
    turns = [
        tool_calls({"inputs": []}),  # 1: empty
        tool_calls({"inputs": "abc"}, {"inputs": ["abc"]}),  # 2: not a list (Inspect's schema), then a good one
        tool_calls({"inputs": ["a"] * (MAX_INPUTS_PER_COMMAND + 1)}),  # 3: too many
        tool_calls(
            {"inputs": [long]}, {"inputs": [True]}, {"values": ["a"]}
        ),  # 4: too long, a boolean, a wrong argument
        text("Let me think about PYTHON(function.py abc) for a moment."),  # 5: neither a tool call nor an answer
        text("[DESCRIPTION]: adds a letter"),  # 6: the answer
    ]
    log, sample, episode = scripted_episode(data_dir, tmp_path, iter(turns))
    assert log.status == "success"
    assert episode.finished and episode.rounds == 6 and episode.answer.description == "adds a letter"
    # six refused calls; the message with no call is an unrecognized turn, as in the text protocol
    assert episode.malformed_commands == 6 and episode.unrecognized_turns == 1
    assert [(c["round"], bool(c.get("error"))) for c in episode.calls] == [
        (1, True),
        (2, True),
        (2, False),
        (3, True),
        (4, True),
        (4, True),
        (4, True),
    ]
    good = episode.calls[2]
    assert good["inputs"] == ["abc"] and good["errors"] == [None]
    assert "no inputs" in episode.calls[0]["error"] and "not of type 'array'" in episode.calls[1]["error"]
    assert f"at most {MAX_INPUTS_PER_COMMAND}" in episode.calls[3]["error"]
    assert f"longer than {MAX_INPUT_CHARS}" in episode.calls[4]["error"]
    assert "True is not valid" in episode.calls[5]["error"]  # refused by the tool's schema, before the tool runs
    assert episode.calls[6]["command"] == 'call_function(values=["a"])'
    # the model read each refusal as a tool error; the transcript shows it as a malformed command's reply
    tool_messages = [m for m in sample.messages if m.role == "tool"]
    assert [m.error is not None for m in tool_messages] == [True, True, False, True, True, True, True]
    lines = [m["content"] for m in episode.messages if m["role"] == "tool"]
    assert (
        lines[0]
        == "Response: Error in call_function(inputs=[]): no inputs: "
        "call call_function with a list of one or more inputs."
    )
    assert lines[2] == text_protocol_reply(by_id["strings/f00000"], "PYTHON(function.py abc)")
    assert [m["content"] for m in episode.messages if m["role"] == "user"][-1] == TOOL_UNRECOGNIZED_REPLY
    assert TOOL_UNRECOGNIZED_REPLY.startswith("Response: Unrecognized command")


def test_tool_calls_past_the_cap_do_not_run(data_dir, tmp_path):
    n = MAX_COMMANDS_PER_MESSAGE + 3
    turns = [tool_calls(*({"inputs": [f"w{i}"]} for i in range(n))), text("[DESCRIPTION]: adds a letter")]
    log, sample, episode = scripted_episode(data_dir, tmp_path, iter(turns))
    assert log.status == "success"
    assert episode.finished and (episode.dropped_commands, episode.malformed_commands) == (3, 0)
    assert [c["inputs"] for c in episode.calls] == [[f"w{i}"] for i in range(MAX_COMMANDS_PER_MESSAGE)]
    # every call has its result (the provider needs one per call id); the dropped ones a limit error
    tool_messages = [m for m in sample.messages if m.role == "tool"]
    assert [m.tool_call_id for m in tool_messages] == [f"call-{i}" for i in range(n)]
    assert [m.error.message if m.error else None for m in tool_messages] == [None] * MAX_COMMANDS_PER_MESSAGE + [
        DROPPED_CALL
    ] * 3
    lines = [m["content"] for m in episode.messages if m["role"] == "tool"]
    assert lines[-1] == (
        f'Response: Error in call_function(inputs=["w{n - 1}"]): not run: at most '
        f"{MAX_COMMANDS_PER_MESSAGE} call_function calls per message."
    )


def test_round_limit_stops_a_model_that_never_answers(data_dir, tmp_path):
    def outputs(input, tools, tool_choice, config):
        return tool_calls({"inputs": ["abc"]})

    _, sample, episode = scripted_episode(data_dir, tmp_path, outputs, rounds=3)
    assert (episode.finished, episode.stop_reason, episode.rounds, episode.max_rounds) == (False, "round_limit", 3, 3)
    assert [c["round"] for c in episode.calls] == [1, 2, 3] and episode.answer is None
    assert len([e for e in sample.events if e.event == "model"]) == 3
    assert sample.output.completion == "" and sample.scores["exact_match"].value == 0.0


def test_token_budget_stops_a_model_that_never_answers(data_dir, tmp_path):
    limits = []

    def outputs(input, tools, tool_choice, config):
        limits.append(config.max_tokens)
        return tool_calls({"inputs": ["abc"]})  # 5 output tokens each

    _, sample, episode = scripted_episode(data_dir, tmp_path, outputs, max_tokens=100, episode_tokens=12)
    # turns are not capped at what is left: the third passes the budget (15 > 12) and stops the episode, without it
    assert limits == [100, 100, 100]
    assert (episode.finished, episode.stop_reason, episode.rounds, episode.answer) == (False, "token_limit", 2, None)
    assert (episode.max_episode_tokens, episode.generated_tokens) == (12, 15)
    assert [c["round"] for c in episode.calls] == [1, 2] and sample.messages[-1].role == "tool"
    assert [m.role for m in sample.messages].count("assistant") == 2
    assert sample.output.completion == ""


def test_an_answer_ends_the_episode_before_its_tool_calls_run(data_dir, tmp_path):
    _, sample, episode = scripted_episode(
        data_dir, tmp_path, iter([tool_calls({"inputs": ["abc"]}, content="[DESCRIPTION]: adds a letter")])
    )
    assert episode.finished and episode.rounds == 1 and episode.calls == [] and episode.description == "adds a letter"
    # react gives every call its result: here a refusal, neither a call, a malformed command nor a dropped one
    assert [m.error.message for m in sample.messages if m.role == "tool"] == [ANSWERED_CALL]
    assert (episode.malformed_commands, episode.dropped_commands) == (0, 0)


def test_a_last_turn_without_a_call_gets_the_reply_and_the_round_limit_stops(data_dir, tmp_path):
    _, sample, episode = scripted_episode(
        data_dir, tmp_path, iter([tool_calls({"inputs": ["abc"]}), text("hmm")]), rounds=2
    )
    assert (episode.stop_reason, episode.rounds, episode.unrecognized_turns, len(episode.calls)) == (
        "round_limit",
        2,
        1,
        1,
    )
    assert [m.role for m in sample.messages] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sample.messages[-1].text == TOOL_UNRECOGNIZED_REPLY


def test_the_tool_on_its_own(by_id):
    """The tool's execute, outside an eval: the reply line and the record, or a ToolError."""
    from inspect_ai.tool import ToolError

    row = by_id["numeric/f00001"]
    episode = Episode(function_id=row["function_id"], category="numeric", method="aia", protocol="tools", rounds=4)
    tool = call_function_tool(FunctionRunner(row), episode)
    assert tool.name == TOOL_NAME and not tool.parallel and list(tool.parameters.properties) == ["inputs"]
    line = asyncio.run(tool.tool(inputs=[1.5, "x"]))
    assert line == FunctionRunner(row).run(Command("t", ("1.5", "x")))[0]
    assert episode.calls[0]["round"] == 4 and episode.calls[0]["errors"] == [None, "not a number"]
    with pytest.raises(ToolError, match="no inputs"):
        asyncio.run(tool.tool(inputs=[]))
    assert episode.malformed_commands == 1 and episode.calls[1]["error"].startswith("no inputs")


def test_milan_with_tools_and_the_oracle(data_dir, tmp_path):
    task = find_interpret(
        configs="neurons_relations",
        method="milan",
        limit=1,
        data=str(data_dir),
        interpreter="oracle",
        judge=None,
        protocol="tools",
    )
    [log] = inspect_eval(task, model="none", log_dir=str(tmp_path / "logs"), display="none")
    episode = log.samples[0].store[STORE_KEY]
    assert log.status == "success" and episode["protocol"] == "tools" and episode["max_rounds"] == 2
    assert episode["calls"][0]["command"] == "exemplars" and episode["finished"]
    assert episode["messages"][0]["content"] == prompts.system_prompt("tools")


def test_transcript_renders_tool_traffic_as_text():
    from inspect_ai.model import ChatMessageTool
    from inspect_ai.tool import ToolCallError

    call = ToolCall(id="c1", function=TOOL_NAME, arguments={"inputs": ["a", 2]})
    messages = [
        ChatMessageSystem(content="s"),
        ChatMessageUser(content="u"),
        ChatMessageAssistant(content="", tool_calls=[call]),
        ChatMessageTool(content="", tool_call_id="c1", function=TOOL_NAME, error=ToolCallError("parsing", "bad")),
        ChatMessageAssistant(content="[DESCRIPTION]: x"),
    ]
    assert transcript(messages) == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": 'call_function(inputs=["a", 2])'},
        {"role": "tool", "content": 'Response: Error in call_function(inputs=["a", 2]): bad.'},
        {"role": "assistant", "content": "[DESCRIPTION]: x"},
    ]


# ----------------------------------------------------------------------- run folders and the CLI


def test_engine_inspect_with_tools_writes_and_checks_run_json(data_dir, by_id, tmp_path):
    def outputs(input, tools, tool_choice, config):
        fid = function_of(by_id, ["strings/f00000", "numeric/f00000"], input)
        if len(input) == 2:
            return tool_calls({"inputs": INPUTS[fid][0]})
        return text(oracle_text(by_id[fid]))

    out = tmp_path / "run"
    kwargs = dict(functions="strings/f00000,numeric/f00000", out=out, display="none", protocol="tools")
    interpret(data_dir, "mockllm/model", model_args={"custom_outputs": outputs}, **kwargs)
    info = json.loads((out / "run.json").read_text())
    assert info["protocol"] == "tools" and info["inspect_model"] == "mockllm/model"
    for fid in ("strings/f00000", "numeric/f00000"):
        ep = json.loads((episode_dir(out, fid, "aia") / "episode.json").read_text())
        assert (
            ep["protocol"] == "tools"
            and ep["finished"]
            and ep["calls"][0]["inputs"] == [str(x) for x in INPUTS[fid][0]]
        )
        assert [m["role"] for m in ep["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    config = EvaluateConfig(out, judge=KnowingJudge([by_id["strings/f00000"]]), out=tmp_path / "scores")
    result = evaluate_run(config, progress=False)
    assert (
        result["scores"]["numeric"]["aia"]["nmse_success"] == 1.0
        and result["scores"]["strings"]["aia"]["exact_match"] == 1.0
    )
    # a folder holds one protocol
    with pytest.raises(ValueError, match="protocol='tools' \\(now 'text'\\)"):
        interpret(data_dir, "mockllm/model", **{**kwargs, "protocol": "text"})


def test_references_answer_in_the_tools_protocol(data_dir, tmp_path):
    out = interpret(
        data_dir, "oracle", configs="strings", limit=1, out=tmp_path / "run", protocol="tools", display="none"
    )
    assert json.loads((out / "run.json").read_text())["protocol"] == "tools"
    assert json.loads((episode_dir(out, "strings/f00000", "aia") / "episode.json").read_text())["protocol"] == "tools"
    with pytest.raises(ValueError, match="protocol"):
        interpret(data_dir, "oracle", configs="strings", limit=1, out=tmp_path / "x", protocol="json")


def test_findbench_models_refuse_tools(data_dir, tmp_path):
    with pytest.raises(ValueError, match="findbench's own models.*text protocol only"):
        interpret(data_dir, "embedded", configs="strings", limit=1, out=tmp_path / "run", protocol="tools")
    assert not (tmp_path / "run").exists()
    from tests.interpret.test_inspect import ScriptedLM

    model = get_model("findbench/scripted-lm", lm=ScriptedLM(), memoize=False)
    episode = Episode(function_id="strings/f00000", category="strings", method="aia")
    tool = call_function_tool(FunctionRunner({"function_id": "strings/f00000", "category": "strings"}), episode)
    with pytest.raises(ValueError, match="does not support tool calls|do not support tool calls"):
        asyncio.run(model.generate([ChatMessageSystem(content="s"), ChatMessageUser(content="u")], tools=[tool]))
