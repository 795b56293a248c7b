"""Access conditions and the white-box tools of a ``rasp`` episode in both protocols (issue 43)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re

import numpy as np
import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.model import ChatMessageAssistant, execute_tools  # noqa: E402
from inspect_ai.tool import ToolCall  # noqa: E402
from inspect_ai.tool import ToolError as InspectToolError  # noqa: E402

from findbench.constants import UsageError  # noqa: E402
from findbench.find.rasp import circuit, store, tools, truth  # noqa: E402
from findbench.find.rasp import programs as P  # noqa: E402
from findbench.interpret.config import InterpretConfig  # noqa: E402
from findbench.interpret.episode import EpisodeState  # noqa: E402
from findbench.interpret.protocol import ACCESS, CODE_TOOL, format_answer, parse_answer  # noqa: E402
from findbench.interpret.whitebox import (  # noqa: E402
    CIRCUIT_METRICS,
    WhiteBox,
    answer_entries,
    circuit_scores,
    component_map,
    reference_components,
    tool_commands,
    tool_floor,
)

RECORDS = {r["name"]: r for r in store.read_store(0)["programs"].values()}


def _row(name: str) -> dict:
    rec = RECORDS[name]
    xs = P.domain_inputs(rec["domain"], 5, np.random.default_rng(3))
    comps = truth.components(rec["program"], store.load_arrays(rec["function_id"]), rec["meta"])
    return {"function_id": rec["function_id"], "category": "rasp", "domain": json.dumps(rec["domain"]),
            "test_inputs": [json.dumps(x) for x in xs], "components": json.dumps(comps),
            "program": json.dumps(rec["program"])}


def _episode(row: dict) -> EpisodeState:
    from inspect_ai.util import Store

    return EpisodeState(store=Store())


@pytest.mark.parametrize("settings", [{"access": "grey"}, {"access": "white"},
                                      {"access": "rotated", "configs": "strings"},
                                      {"access": "localized", "functions": "numeric/f00001"}])
def test_access_outside_rasp_is_refused_in_one_line(settings):
    with pytest.raises(UsageError, match=r"^--access") as err:
        InterpretConfig(interpreter="oracle", **settings)
    assert "\n" not in str(err.value)


def test_access_is_an_agent_setting():
    assert InterpretConfig(interpreter="oracle").agent().access == "black"
    assert ACCESS == ("black", "white", "rotated", "localized")
    with pytest.raises(UsageError, match="--access white"):
        InterpretConfig(interpreter="oracle", access="white", configs="strings,numeric")


def test_tool_commands_read_json_arguments_and_refuse_the_rest():
    text = ('look: TOOL(run, {"tokens": [1, 2]}) then TOOL( weights , {"component": "blocks.0.mlp"})\n'
            'TOOL(run, {"tokens": [1, 2}) TOOL(run, {"tokens": []} TOOL(ablate, ' + "[" * 5000 + ")")
    got = tool_commands(text)
    assert [name for name, _ in got] == ["run", "weights", "run", "run", "ablate"]
    assert got[0][1] == {"tokens": [1, 2]} and got[1][1] == {"component": "blocks.0.mlp"}
    assert all(isinstance(args, ValueError) for _, args in got[2:])


@pytest.mark.parametrize("access", ["white", "rotated"])
def test_text_commands_are_counted_bounded_and_refused_in_one_line(access):
    row = _row("sort")
    box = WhiteBox(row, access)
    episode = _episode(row)
    vocab = json.loads(row["domain"])["vocab"]
    x = json.dumps(vocab[:3])
    message = (f'TOOL(run, {{"tokens": {x}}})\n'
               f'TOOL(run_with_cache, {{"tokens": {x}, "hooks": ["blocks.0.attn.hook_pattern"]}})\n'
               'TOOL(weights, {"component": "blocks.0.attn.head0"})\n'
               f'TOOL(ablate, {{"component": "blocks.0.mlp", "tokens": {x}, "mode": "zero"}})\n'
               f'TOOL(patch, {{"component": "blocks.0.mlp", "source_tokens": {x}, "target_tokens": {x}}})\n'
               'TOOL(nope, {})\nTOOL(run, {"tokens": ["@@"]})\nTOOL(run_with_cache, {"tokens": [' + "1" * 9 + '], '
               '"hooks": ["blocks.9.bad"]})\nTOOL(weights, {"component": "blocks.7.attn.head0"})\nTOOL(run, {oops})')
    lines = asyncio.run(box.text_replies(message, episode))
    assert len(lines) == 10 and all(line.startswith("Response: ") and "\n" not in line for line in lines)
    out = json.loads(lines[0].split(": ", 2)[2])
    assert out["output"] == box.tools.model.run(vocab[:3])
    shape = json.loads(lines[1].split(": ", 2)[2])["blocks.0.attn.hook_pattern"]["shape"]
    assert shape[-2:] == [4, 4]
    assert [line.startswith("Response: Error in ") for line in lines] == [False] * 5 + [True] * 5
    assert "tool" in lines[5] and "tokens" in lines[6] and "component" in lines[8] and "arguments" in lines[9]
    assert box.tools.calls == 10 and len(episode.tool_calls) == 10
    assert [c["error"] is None for c in episode.tool_calls] == [True] * 5 + [False] * 5
    assert all(len(line) < box.tools.max_chars + 100 for line in lines)
    box.tools.budget = 11
    more = asyncio.run(box.text_replies(message, episode))
    assert "budget" in more[1] and "budget" in more[-1] and box.tools.calls == 20
    assert json.loads(json.dumps(episode.model_dump()))["tool_calls"] == episode.tool_calls


def test_inspect_tools_from_the_spec_table_reply_refuse_and_count():
    row = _row("sort")
    box = WhiteBox(row, "rotated")
    episode = _episode(row)
    defs = box.inspect_tools(episode)
    assert [d.name for d in defs] == [t["name"] for t in tools.TOOLS] + ["python"]
    by_name = {d.name: d for d in defs}
    vocab = json.loads(row["domain"])["vocab"]
    reply = asyncio.run(by_name["run"].tool(tokens=vocab[:2]))
    assert json.loads(reply)["output"] == box.tools.model.run(vocab[:2])
    with pytest.raises(InspectToolError, match="component"):
        asyncio.run(by_name["weights"].tool(component="blocks.99.mlp"))
    calls = [ToolCall(id="a", function="ablate", arguments={"component": "blocks.0.mlp", "tokens": vocab[:2],
                                                            "mode": "mean"}),
             ToolCall(id="b", function="ablate", arguments={"component": "blocks.0.mlp", "tokens": vocab[:2],
                                                            "mode": "sideways"}),
             ToolCall(id="c", function="patch", arguments={"component": "blocks.0.attn.head0"})]
    messages = [ChatMessageAssistant(content="", tool_calls=calls)]
    result = asyncio.run(execute_tools(messages, [d.as_tool() for d in defs]))
    messages += result.messages
    box.settle(messages, episode)
    errors = [m.error for m in result.messages]
    assert errors[0] is None and errors[1] is not None and errors[2] is not None  # a reply each: no stop
    assert box.tools.calls == 5 and [c["tool"] for c in episode.tool_calls] == ["run", "weights", "ablate", "ablate",
                                                                               "patch"]


@pytest.mark.parametrize("access", ["white", "rotated", "localized"])
@pytest.mark.parametrize("name", ["sort_freq", "frac_prevs_0"])
def test_no_ground_truth_in_the_prompt_or_the_replies(access, name):
    rec, row = RECORDS[name], _row(name)
    box = WhiteBox(row, access)
    episode = _episode(row)
    x = json.dumps(rec["domain"]["vocab"][:3])
    message = "\n".join(f'TOOL(weights, {{"component": "{c}"}})\nTOOL(ablate, {{"component": "{c}", "tokens": {x}, '
                        f'"mode": "mean"}})' for c in box.tools.components())
    message += f'\nTOOL(run_with_cache, {{"tokens": {x}, "hooks": {json.dumps(box.tools.hooks)}}})'
    box.tools.budget = 1000
    replies = "\n".join(asyncio.run(box.text_replies(message, episode)))
    text = box.prompt("text") + box.prompt("tools") + replies
    labels = [label for label in rec["meta"]["labels"] if ":" in label]
    assert labels and not [label for label in labels if label in text]
    assert not [op["name"] for op in rec["program"]["ops"] if re.search(rf"\b{re.escape(op['name'])}\b", text)]
    assert not [r for r in truth.ROLES if re.search(rf"\b{r}\b", replies)]  # the prompt lists the taxonomy only
    assert "TOOL(run_with_cache" in box.prompt("text") and "TOOL(" not in box.prompt("tools")
    comps = json.loads(row["components"])
    active = [f"blocks.{c['layer']}.attn.head{c['head']}" for c in comps if c["role"] != "inactive" and
              c["head"] is not None]
    said = "The components that matter" in text
    assert said == (access == "localized") and (not said or all(a in text for a in active))


def _all_units(comps: list[dict]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for c in comps:
        out.setdefault(c["hook"], []).extend(c["units"])
    return out


@pytest.mark.parametrize("access", ["white", "rotated"])
def test_the_oracle_map_scores_1_and_survives_the_answer_format(access):
    row = _row("sort_freq")
    text = format_answer("", code="def function(x):\n    return x\n",
                         components=reference_components("oracle", row, access))
    answer = parse_answer(text)
    assert answer.code.startswith("def function") and answer.components.startswith("[")
    variant = "rotated" if access == "rotated" else "aligned"
    comps = truth.for_variant(json.loads(row["components"]), row["function_id"], variant)
    pred = component_map(answer.components, _all_units(comps))
    scores = circuit.score_function(pred, comps)
    assert scores["role_accuracy"] == scores["role_f1"] == scores["node_precision"] == scores["node_recall"] == 1.0
    assert scores["node_auroc"] in (1.0,) or np.isnan(scores["node_auroc"])
    floor = circuit.score_function(component_map(answer_entries(circuit.floor_predictions(comps, "majority_role")),
                                                 _all_units(comps)), comps)
    assert floor["role_f1"] < 1.0


def test_attribution_answers_a_map_that_finds_the_components_that_matter():
    row = _row("sort")
    answer = parse_answer(format_answer("", components=reference_components("attribution", row, "white")))
    comps = json.loads(row["components"])
    pred = component_map(answer.components, _all_units(comps))
    assert pred and circuit.score_function(pred, comps)["node_recall"] == 1.0
    with pytest.raises(UsageError, match="--interpreter attribution"):
        InterpretConfig(interpreter="attribution")


@pytest.mark.parametrize("text", [
    "", "{", "[" * 100_000, json.dumps({"component": "blocks.0.mlp"}), json.dumps([1, None, "x", []]),
    json.dumps([{"component": "blocks.0.attn.head0", "role": "boss"}, {"component": "../etc", "role": "map"},
                {"component": ["blocks.0.mlp"], "role": "map"}, {"component": "blocks.0.mlp", "role": ["map"]}]),
])
def test_a_hostile_component_map_reads_as_nothing(text):
    assert component_map(text, {"blocks.0.mlp.hook_post": [0, 1]}) == []


def test_a_component_map_keeps_well_formed_fields_within_caps():
    entries = [{"component": "blocks.1.mlp", "units": [3, 2, 2], "role": "map", "reads": ["tokens"] * 50,
                "code": "x" * 10_000, "score": float("inf")},
               {"component": "blocks.0.mlp.unit4", "role": "counter", "reads": "tokens", "score": 0.5},
               {"component": "blocks.0.mlp", "units": ["a"], "role": "map"}] * 100
    pred = component_map(json.dumps(entries), {"blocks.0.mlp.hook_post": [0, 1]})
    assert len(pred) == 200
    assert pred[0] == {"hook": "blocks.1.mlp.hook_post", "units": [2, 3], "role": "map", "reads": ["tokens"] * 20,
                       "code": "x" * 4000}
    assert pred[1] == {"hook": "blocks.0.mlp.hook_post", "units": [4], "role": "counter", "score": 0.5}
    assert pred[2]["units"] == [0, 1]


def test_circuit_scores_of_a_record_follow_its_access_and_answer():
    row = _row("sort_freq")

    def record(access, components):
        answer = {"description": "", "domain": None, "code": None, "components": components}
        return {"access": access, "answer": answer}

    truth_map = reference_components("oracle", row, "rotated")
    scores = circuit_scores(record("rotated", truth_map), row)
    assert set(scores) == {f"{m}{k}" for m in CIRCUIT_METRICS for k in ("", "_observed", "_margin")}
    assert scores["role_f1"] == scores["node_recall"] == 1.0
    assert circuit_scores(record("white", truth_map), row)["role_f1"] < 1.0  # the rotated unit order is not the aligned
    assert circuit_scores(record("black", truth_map), row) is None
    assert circuit_scores(record("../rotated", truth_map), row) is None
    assert circuit_scores(record("white", None), row)["node_recall"] == 0.0


def test_the_inspect_task_takes_access_and_refuses_it_off_rasp():
    from findbench.interpret.task import find_interpret
    from findbench.lm.inspect_lm import TaskArgumentError

    with pytest.raises(TaskArgumentError, match=r"^-T access") as err:
        find_interpret(interpreter="oracle", configs="strings", access="rotated", judge=None)
    assert "\n" not in str(err.value)


def test_the_turn_grammar_takes_tool_commands_and_the_component_map_under_white_box_access():
    from findbench.interpret.prompts import turn_constraint

    command = 'TOOL(run_with_cache, {"tokens": [1, 2], "hooks": ["blocks.0.attn.hook_pattern"]})'
    answer = format_answer("d", code="def function(x):\n    return x", components='[{"component": "blocks.0.mlp", '
                           '"role": "map"}]')
    white, black = turn_constraint("strings", white_box=True).regex, turn_constraint("strings").regex
    assert re.fullmatch(white, f"Let me look.\n{command}\nPYTHON(function.py 1 2)")
    assert re.fullmatch(white, answer) and parse_answer(answer).components.startswith("[{")
    assert not re.fullmatch(black, command) and not re.fullmatch(black, answer)
    assert not re.fullmatch(white, 'TOOL(rm, {"x": 1})')
    assert re.fullmatch(turn_constraint("strings", white_box=True, answer_only=True).regex, answer)


# ----------------------------------------------------------------- whole episodes on rasp rows (Inspect)

IDS = ("rasp/f00030", "rasp/f00200")


@pytest.fixture(scope="module")
def rasp_rows():
    from findbench.find import load_rows

    by_id = {r["function_id"]: r for r in load_rows("rasp", seed=0)}
    return [by_id[f] for f in IDS]


def _no_truth(row, text):
    rec = store.program_record(row["function_id"], 0)
    labels = [label for label in rec["meta"]["labels"] if ":" in label]
    assert labels and not [label for label in labels if label in text]
    assert row["program"] not in text and row["code"] not in text


def test_a_text_episode_runs_tool_commands_beside_calls_and_answers_a_map(tmp_path, rasp_rows):
    from tests.interpret.scripted import Script, run_episodes

    row = rasp_rows[0]
    x = json.loads(row["domain"])["vocab"][:2]
    first = (f'TOOL(run, {{"tokens": {json.dumps(x)}}})\nTOOL(ablate, {{"component": "blocks.0.mlp", "tokens": '
             f'{json.dumps(x)}, "mode": "sideways"}})\nPYTHON(function.py "{" ".join(map(str, x))}")\n'
             f'TOOL(python, {json.dumps({"code": f"print(run({x!r}))"})})')
    answer = format_answer("d", code="def function(x):\n    return list(x)",
                           components=reference_components("oracle", row, "rotated"))
    script = Script([first, answer])
    [ep] = run_episodes([row], script, log_dir=tmp_path, configs="rasp", access="rotated")
    assert ep.access == "rotated" and ep.stop_reason == "answer" and len(ep.calls) == 1
    assert [c["tool"] for c in ep.tool_calls] == ["run", "ablate", "python", "run"]
    assert "mode" in ep.tool_calls[1]["error"] and ep.tool_calls[3]["round"] == 1
    reply = ep.messages[3]["content"]
    assert "Response: run: {" in reply and "Response: Error in ablate: mode" in reply
    assert "Response: python: {'output': " in reply
    task = script.seen[0][0][1]["content"]
    assert "TOOL(run_with_cache" in task and "components that matter" not in task
    _no_truth(row, json.dumps([m for m, _ in script.seen]))
    assert circuit_scores({"access": ep.access, "answer": dataclasses.asdict(ep.answer)}, row)["role_f1"] == 1.0


def test_a_tools_episode_gets_one_inspect_tool_per_spec(tmp_path, rasp_rows):
    from inspect_ai.model import ChatCompletionChoice, ModelOutput, ModelUsage

    from tests.interpret.scripted import output, run_episodes

    row = rasp_rows[1]
    x = json.loads(row["domain"])["vocab"][:2]
    seen = []

    def model(input, tools, tool_choice, config):
        seen.append(([t.name for t in tools], transcript_text(input)))
        if len(seen) > 1:
            return output("[DESCRIPTION]: d")
        calls = [ToolCall(id="a", function="run", arguments={"tokens": x}),
                 ToolCall(id="b", function="ablate", arguments={"component": "blocks.0.mlp", "tokens": x,
                                                                "mode": "sideways"}),
                 ToolCall(id="c", function="weights", arguments={"component": "blocks.9.mlp"})]
        message = ChatMessageAssistant(content="", tool_calls=calls, model="mockllm/model", source="generate")
        out = ModelOutput(model="mockllm/model", choices=[ChatCompletionChoice(message=message,
                                                                               stop_reason="tool_calls")])
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return out

    [ep] = run_episodes([row], model, log_dir=tmp_path, configs="rasp", access="localized", protocol="tools")
    assert seen[0][0] == ["call_function"] + [t["name"] for t in tools.TOOLS] + ["python"]
    assert sorted(c["tool"] for c in ep.tool_calls) == ["ablate", "run", "weights"]
    assert sum(c["error"] is not None for c in ep.tool_calls) == 2 and ep.malformed_commands == 0 and not ep.calls
    assert "components that matter" in seen[0][1] and "TOOL(" not in seen[0][1]
    _no_truth(row, seen[1][1])


def transcript_text(messages) -> str:
    return "\n".join(m.text for m in messages)


def test_a_run_records_its_access_and_resumes_only_with_it(tmp_path):
    from findbench.interpret.run import run_interpretations

    cfg = dict(interpreter="oracle", configs="rasp", functions=IDS[0], out=str(tmp_path / "run"))
    run_interpretations(InterpretConfig(**cfg, access="white"), progress=False)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["access"] == "white"
    with pytest.raises(UsageError, match="access"):
        run_interpretations(InterpretConfig(**cfg, access="rotated"), progress=False)


@pytest.fixture(scope="module")
def scored(rasp_rows, tmp_path_factory):
    from findbench.interpret.config import EvaluateConfig
    from findbench.interpret.evaluate import evaluate_run
    from findbench.interpret.run import run_interpretations
    from tests.interpret.fakes import KnowingJudge

    root, out = tmp_path_factory.mktemp("white-box-runs"), {}
    for name, access in (("oracle", "rotated"), ("attribution", "white"), ("empty", "white"), ("oracle", "black")):
        run = root / f"{name}-{access}"
        run_interpretations(InterpretConfig(interpreter=name, configs="rasp", functions=",".join(IDS), access=access,
                                            out=str(run)), progress=False)
        out[name, access] = evaluate_run(EvaluateConfig(run_dir=str(run), judge=KnowingJudge(rasp_rows)),
                                         progress=False)
    return out


def test_evaluate_scores_component_maps_with_find_circuit(scored):
    oracle = scored["oracle", "rotated"]["scores"]["rasp"]["aia"]
    for metric in CIRCUIT_METRICS:
        assert oracle[metric] == 1.0 and oracle[f"{metric}_n"] == 2 and len(oracle[f"{metric}_ci"]) == 2, metric
    # no tool call: the white-box floor is the fixed maps' (all marked: recall 1; majority role: below 1)
    assert oracle["node_recall_observed"] == 1.0 and oracle["node_recall_margin"] == 0.0
    assert 0 < oracle["role_accuracy_observed"] < 1 and oracle["role_accuracy_margin"] > 0
    attribution = scored["attribution", "white"]["scores"]["rasp"]["aia"]
    assert 0.5 < attribution["node_auroc"] <= 1.0 and attribution["role_f1_n"] == 2
    empty = scored["empty", "white"]["scores"]["rasp"]["aia"]
    assert empty["role_accuracy"] == 0.0 and empty["node_recall"] == 0.0
    black = scored["oracle", "black"]["scores"]["rasp"]["aia"]
    assert black["role_f1_n"] == 0 and black["exact_match"] == 1.0


def test_the_inspect_task_on_rasp_scores_the_map_under_white_box_access(tmp_path):
    from inspect_ai import eval as inspect_eval

    from findbench.interpret.task import find_interpret

    task = find_interpret(interpreter="oracle", configs="rasp", functions=IDS[0], access="rotated", judge=None)
    [log] = inspect_eval(task, log_dir=str(tmp_path), display="none")
    assert log.status == "success" and log.eval.metadata["access"] == "rotated"
    names = {s.name: s for s in log.results.scores}
    assert names["role_f1"].metrics["mean"].value == 1.0 and names["node_recall"].metrics["mean"].value == 1.0
    black = find_interpret(interpreter="oracle", configs="rasp", functions=IDS[0], judge=None)
    [log] = inspect_eval(black, log_dir=str(tmp_path), display="none")
    assert "role_f1" not in {s.name for s in log.results.scores}


def test_the_white_box_floor_replays_the_episodes_ablations_and_never_reads_their_replies():
    row = _row("sort_freq")
    box = tools.RaspTools.for_row(row, "aligned")
    x = P.domain_inputs(json.loads(row["domain"]), 1, np.random.default_rng(5))[0]
    effect = {name: bool(box.ablate(name, x, "zero")["changed_positions"]) for name in box.components()}
    changed = next(n for n, e in effect.items() if e)
    idle = next((n for n, e in effect.items() if not e), None)

    def call(component, **extra):
        return {"round": 1, "tool": "ablate", "error": None, "reply_chars": 9,
                "arguments": json.dumps({"component": component, "tokens": x, "mode": "zero"})} | extra

    def floor(calls):
        return {e["component"]: (e["role"], e["score"]) for e in json.loads(tool_floor(
            {"access": "white", "tool_calls": calls}, row, json.loads(row["components"])))}

    majority = circuit.floor_predictions(json.loads(row["components"]), "majority_role")[0]["role"]
    assert floor([]) == {}
    calls = [call(changed)] + ([call(idle, changed_positions=[0], reply='{"changed_positions":[0]}')] if idle else [])
    assert floor(calls) == {changed: (majority, 1.0)} | ({idle: ("inactive", 0.0)} if idle else {})
    # edited, cut or refused records show nothing; a recorded reply never counts
    hostile = [call(changed, error="budget"), call(changed, arguments='{"component": "' + changed),
               call(changed, arguments="[1, 2]"), call("blocks.99.mlp"), {"tool": "ablate"}, "x"]
    assert floor(hostile) == {}

    def scores(calls, components=None):
        answer = {"description": "", "domain": None, "code": None, "components": components}
        return circuit_scores({"access": "white", "answer": answer, "tool_calls": calls}, row)

    # the floor is the best of the tool-reply map and the fixed maps (majority role, all marked)
    comps = truth.for_variant(json.loads(row["components"]), row["function_id"], "aligned")
    fixed = [circuit.score_function(circuit.floor_predictions(comps, f), comps) for f in circuit.FLOORS]
    none = scores([])
    for m in CIRCUIT_METRICS:
        assert none[f"{m}_observed"] == max(f[m] for f in fixed), m
    assert none["node_recall_observed"] == 1.0 and none["node_auroc_observed"] == 0.5
    assert scores(calls)["node_auroc_observed"] > 0.5  # the ablation separates a component that matters
    truth_map = reference_components("oracle", row, "white")
    full = scores(calls, truth_map)
    for m in CIRCUIT_METRICS:
        if full[f"{m}_observed"] is not None:
            assert full[f"{m}_margin"] == pytest.approx(full[m] - full[f"{m}_observed"]), m
    assert full["role_f1_margin"] > 0


# ------------------------------------------------------------------ the code tool (python in the sandbox)


def _python(box: WhiteBox, episode: EpisodeState, code: str) -> str:
    return asyncio.run(box.text_replies(f"TOOL(python, {json.dumps({'code': code})})", episode))[0]


@pytest.mark.parametrize("access", ["white", "rotated"])
def test_the_code_tool_calls_the_tools_in_the_sandbox_and_each_call_counts(access):
    row = _row("sort")
    box, episode = WhiteBox(row, access), _episode(row)
    vocab = json.loads(row["domain"])["vocab"][:3]
    code = (f"x = {vocab!r}\nout = run(x)['output']\nprint(out)\n"
            "hit = [c for c in ['blocks.0.mlp', 'blocks.0.attn.head0'] if ablate(c, x, mode='zero')]\n"
            "print(len(hit))\ntry:\n    weights('blocks.99.mlp')\nexcept ToolError as e:\n    print('refused', e)\n"
            "import os\nprint(os.getcwd().startswith('/tmp') or os.getcwd())")
    try:
        reply = _python(box, episode, code)
        lines = reply.removeprefix("Response: python: ").splitlines()
        assert lines[0] == str(box.tools.model.run(vocab)) and lines[2].startswith("refused component: 'blocks.99")
        assert [c["tool"] for c in episode.tool_calls] == ["python", "run", "ablate", "ablate", "weights"]
        assert box.tools.calls == 5 and [c["error"] is None for c in episode.tool_calls] == [True] * 4 + [False]
        assert json.loads(episode.tool_calls[2]["arguments"]) == {"component": "blocks.0.mlp", "tokens": vocab,
                                                                  "mode": "zero"}
        box.tools.budget = 7  # the program's second call passes the budget: refused inside, counted, uncaught
        reply = _python(box, episode, code)
        assert "refused budget" not in reply and "ToolError: budget: all 7 tool calls" in reply
        assert box.tools.calls == 8 and episode.tool_calls[-1]["error"].startswith("budget")
        assert "budget" in _python(box, episode, "print(1)") and box.tools.calls == 9
        box.tools.budget = 12  # a program that keeps calling past the budget is counted, its records capped
        spam = _python(box, episode, f"for _ in range(5000):\n    try:\n        run({vocab!r})\n    except ToolError:\n"
                                     "        pass\nprint('done')")
        assert spam == "Response: python: done" and box.tools.calls == 9 + 1 + 5000
        assert len(episode.tool_calls) == 8 + 1 + 1 + 12 + 1
    finally:
        box.close()


def test_the_code_tool_reaches_no_ground_truth_and_a_hostile_program_only_fails_itself():
    rec, row = RECORDS["sort_freq"], _row("sort_freq")
    box, episode = WhiteBox(row, "rotated"), _episode(row)
    box.tools.budget = 1000
    secret = str(store.store_dir(0) / "models.json")  # every program, its labels and roles
    try:
        probes = [
            f"print(open({secret!r}, 'rb').read(50))",
            "import findbench",
            "import torch",
            "print(sorted(k for k in globals() if not k.startswith('__')))",
            "print([type(c.cell_contents).__name__ for c in run.__closure__])",
            "while True:\n    pass",
            "print('x' * 100_000)",
        ]
        replies = [_python(box, episode, p) for p in probes]
        assert all(r.startswith("Response: python: ") for r in replies)
        assert replies[0].startswith("Response: python: error: line 1: ")
        assert "No module named 'findbench'" in replies[1] and "error: line 1: " in replies[2]
        assert replies[3].endswith("['ToolError', 'ablate', 'patch', 'run', 'run_with_cache', 'weights']")
        assert "RaspTransformer" not in replies[4] and "timeout:" in replies[5]
        assert len(replies[6]) <= box.tools.max_chars + len("Response: python: ")
        _no_truth_in(rec, "\n".join(replies))
        x = rec["domain"]["vocab"][:2]
        after = _python(box, episode, f"print(list(run_with_cache({x!r}, ['blocks.0.attn.hook_pattern'])))")
        assert after == "Response: python: ['blocks.0.attn.hook_pattern']"  # the tool still serves
    finally:
        box.close()


def _no_truth_in(rec: dict, text: str) -> None:
    labels = [label for label in rec["meta"]["labels"] if ":" in label]
    assert labels and not [label for label in labels if label in text]


def test_the_code_tool_is_a_tool_in_both_protocols_and_the_grammar():
    from findbench.interpret.prompts import turn_constraint

    row = _row("sort")
    box = WhiteBox(row, "white")
    assert "- python(code): Runs a Python program in a sandbox" in box.prompt("text")
    example = re.search(r"TOOL\(python, (\{.*?\})\)\.", box.prompt("text")).group(1)
    assert json.loads(example)["code"].startswith("print(run([")
    regex = turn_constraint("rasp", white_box=True).regex
    assert re.fullmatch(regex, 'TOOL(python, {"code": "print(1)"})') is not None
    python = next(d for d in box.inspect_tools(_episode(row)) if d.name == CODE_TOOL["name"])
    try:
        x = json.loads(row["domain"])["vocab"][:2]
        assert asyncio.run(python.tool(code=f"print(run({x!r})['output'])")) == str(box.tools.model.run(x))
        with pytest.raises(InspectToolError, match="code"):
            asyncio.run(python.tool(code=5))
    finally:
        box.close()


def test_the_white_box_floor_counts_the_ablations_a_program_made():
    row = _row("sort")
    comps = truth.for_variant(circuit.parse_json_list(row["components"], "components"), row["function_id"], "aligned")
    vocab = json.loads(row["domain"])["vocab"][:3]
    direct, coded = WhiteBox(row, "white"), WhiteBox(row, "white")
    e1, e2 = _episode(row), _episode(row)
    names = direct.tools.components()
    asyncio.run(direct.text_replies("\n".join(
        f'TOOL(ablate, {{"component": "{c}", "tokens": {json.dumps(vocab)}, "mode": "zero"}})' for c in names), e1))
    try:
        _python(coded, e2, f"for c in {names!r}:\n    ablate(c, {vocab!r}, 'zero')")
    finally:
        coded.close()
    floor = [tool_floor({"access": "white", "tool_calls": e.tool_calls}, row, comps) for e in (e1, e2)]
    assert json.loads(floor[0]) and floor[0] == floor[1]
