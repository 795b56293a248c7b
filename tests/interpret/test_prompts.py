"""Task messages: the answer format per category, the MLP variant, MILAN additions."""

from __future__ import annotations

import pytest

from findbench.interpret import prompts

PARTS = {
    "numeric": ("[DESCRIPTION]:", "[DOMAIN]:", "[CODE]:"),
    "strings": ("[DESCRIPTION]:", "[CODE]:"),
    "neurons_entities": ("[DESCRIPTION]:",),
    "neurons_relations": ("[DESCRIPTION]:", "[DOMAIN]:"),
}


@pytest.mark.parametrize("category", list(PARTS))
def test_answer_parts_per_category(category, rows):
    text = prompts.task_prompt(rows[category][0], "aia", protocol="text")
    for part in ("[DESCRIPTION]:", "[DOMAIN]:", "[CODE]:"):
        assert (part in text) == (part in PARTS[category]), part
    assert "PYTHON(function.py" in text
    messages = prompts.build_messages(rows[category][0], "aia", protocol="text")
    assert [m["role"] for m in messages] == ["system", "user"] and messages[1]["content"] == text


def test_mlp_variant_only_for_mlp_rows(by_id):
    assert prompts.is_mlp(by_id["numeric/f00003"]) and not prompts.is_mlp(by_id["numeric/f00000"])
    assert "neural network" in prompts.task_prompt(by_id["numeric/f00003"], "aia", protocol="text")
    assert "neural network" not in prompts.task_prompt(by_id["numeric/f00000"], "aia", protocol="text")


def test_milan_additions(rows):
    row = rows["neurons_entities"][0]
    reply = "Response: Function input - output pairs: (a, 0.1)"
    milan = prompts.task_prompt(row, "milan", exemplar_reply=reply, protocol="text")
    both = prompts.task_prompt(row, "aia+milan", exemplar_reply=reply, protocol="text")
    assert reply in milan and reply in both
    assert "2 messages" in milan and "2 messages" not in both
    with pytest.raises(ValueError, match="exemplar_reply"):
        prompts.task_prompt(row, "milan", protocol="text")
    with pytest.raises(ValueError, match="exemplar_reply"):
        prompts.task_prompt(row, "aia", exemplar_reply=reply, protocol="text")
    with pytest.raises(ValueError, match="method"):
        prompts.task_prompt(rows["strings"][0], "milan", exemplar_reply=reply, protocol="text")
    with pytest.raises(TypeError, match="row"):
        prompts.task_prompt("strings/f00000", "aia", protocol="text")


@pytest.mark.parametrize("category", list(PARTS))
def test_tools_protocol_prompts(category, rows):
    row = rows[category][0]
    system = prompts.system_prompt("tools")
    assert "call_function" in system and "PYTHON(" not in system and "[DESCRIPTION]:" in system
    assert prompts.system_prompt("text") != system
    text, tools = prompts.task_prompt(row, "aia", protocol="text"), prompts.task_prompt(row, "aia", protocol="tools")
    # the same task, one sentence more: PYTHON(...) stands for a call of the tool
    assert (
        tools != text
        and tools.replace(
            " In this session you call f(x) with the call_function tool: "
            "where this message writes PYTHON(function.py input1 input2 ...), "
            "call call_function with the inputs [input1, input2, ...] instead of writing a command.",
            "",
        )
        == text
    )
    messages = prompts.build_messages(row, "aia", protocol="tools")
    assert [m["content"] for m in messages] == [system, tools]
    with pytest.raises(ValueError, match="protocol"):
        prompts.system_prompt("json")
