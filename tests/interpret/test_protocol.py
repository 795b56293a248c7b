"""The protocols: text commands, tool-call inputs, answers and reply lines (no function runs here)."""

from __future__ import annotations

import random

import pytest

from findbench.find.export import format_pairs
from findbench.interpret.protocol import (
    MAX_COMMANDS_PER_MESSAGE,
    MAX_INPUT_CHARS,
    MAX_INPUTS_PER_COMMAND,
    MAX_MESSAGE_CHARS,
    PROTOCOLS,
    TOOL_UNRECOGNIZED_REPLY,
    UNRECOGNIZED_REPLY,
    Answer,
    CallError,
    Command,
    TurnCommands,
    check_protocol,
    format_answer,
    format_reply,
    malformed_reply,
    parse_answer,
    parse_commands,
    tool_call_text,
    tool_command,
    turn_commands,
)


def inputs(text: str) -> list[tuple[str, ...]]:
    return [c.inputs for c in parse_commands(text)]


# ----------------------------------------------------------------------------------- commands
@pytest.mark.parametrize(
    "text, expected",
    [
        # FIND's own form, with the script name
        ("PYTHON(function.py 1 2 3)", [("1", "2", "3")]),
        ("COMMAND: PYTHON(function.py -128 0.5 1e3)", [("-128", "0.5", "1e3")]),
        # spaces: inside the parentheses and before them
        ("PYTHON( function.py   1    2 )", [("1", "2")]),
        ("PYTHON (function.py 7)", [("7",)]),
        # commas outside quotes separate values, inside quotes they stay
        ("PYTHON(function.py 1, 2, 3)", [("1", "2", "3")]),
        ("PYTHON(function.py,1,2)", [("1", "2")]),
        ('PYTHON(function.py "a, b" c)', [("a, b", "c")]),
        # shell-style quoting
        ("PYTHON(function.py \"hello world\" 'it''s')", [("hello world", "its")]),
        ('PYTHON(function.py "it\'s" \'say "hi"\')', [("it's", 'say "hi"')]),
        (r"PYTHON(function.py it\'s a\ b)", [("it's", "a b")]),
        ('PYTHON(function.py "" x)', [("", "x")]),
        ("PYTHON(function.py #hashtag a#b)", [("#hashtag", "a#b")]),
        # parentheses inside a value: balanced, or quoted
        ("PYTHON(function.py f(x) (a))", [("f(x)", "(a)")]),
        ('PYTHON(function.py ")" "(")', [(")", "(")]),
        # the script as a path, after `python`, or missing
        ("PYTHON(./temp/function.py 4)", [("4",)]),
        ("PYTHON(python function.py 4)", [("4",)]),
        ('PYTHON("function.py" 4)', [("4",)]),
        ("PYTHON(4 5)", [("4", "5")]),
        # several commands, all run in order, across lines and in prose
        (
            "First PYTHON(function.py 1) then\nPYTHON(function.py a b)\nand PYTHON(function.py 2).",
            [("1",), ("a", "b"), ("2",)],
        ),
        # multi-line arguments
        ("PYTHON(function.py\n  1\n  2)", [("1", "2")]),
    ],
)
def test_commands(text, expected):
    assert inputs(text) == expected
    assert not any(c.malformed for c in parse_commands(text))


def test_command_records_its_text():
    (cmd,) = parse_commands('I will try PYTHON(function.py "a b" c) now.')
    assert cmd == Command('PYTHON(function.py "a b" c)', ("a b", "c"))
    assert not cmd.malformed


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I think the function doubles its input.",
        "python(function.py 1 2)",  # lower case is prose
        "Python(function.py 1)",
        "MYPYTHON(function.py 1)",  # not a word of its own
        "RUN(function.py 1) EXEC(ls)",  # other commands are not commands
        "```python\nprint(function(3))\n```",
        "\x00\x01 garbage ))) (((",
    ],
)
def test_no_command(text):
    assert parse_commands(text) == []


@pytest.mark.parametrize(
    "text, error",
    [
        ("PYTHON(function.py 1 2", "missing closing parenthesis"),
        ("PYTHON(function.py)", "no inputs"),
        ("PYTHON()", "no inputs"),
        ("PYTHON(function.py don't)", "No closing quotation"),
        ('PYTHON(function.py "open)', "No closing quotation"),
    ],
)
def test_malformed_commands(text, error):
    (cmd,) = parse_commands(text)
    assert cmd.malformed and error in cmd.error and cmd.inputs == ()
    reply = malformed_reply(cmd)
    assert reply.startswith("Response: Error in PYTHON(") and error in reply


def test_malformed_command_does_not_hide_the_next_one():
    cmds = parse_commands("PYTHON(function.py 1\nthen PYTHON(function.py 2)")
    assert [c.malformed for c in cmds] == [True, False] and cmds[1].inputs == ("2",)
    assert cmds[0].text == "PYTHON(function.py 1"
    cmds = parse_commands("PYTHON(function.py don't) and PYTHON(function.py 3)")
    assert [c.malformed for c in cmds] == [True, False] and cmds[1].inputs == ("3",)


def test_unclosed_command_runs_to_the_next_command():
    cmds = parse_commands("PYTHON(PYTHON(function.py 1) and PYTHON(function.py (2)")
    assert [(c.text, c.inputs, c.malformed) for c in cmds] == [
        ("PYTHON(", (), True),
        ("PYTHON(function.py 1)", ("1",), False),
        ("PYTHON(function.py (2)", (), True),
    ]
    # a quoted ")" closes nothing; when quotes never close, the plain parenthesis does (and the command errs)
    first, second = parse_commands('PYTHON(function.py ")" PYTHON(function.py 2)')
    assert first.text == 'PYTHON(function.py ")' and "No closing quotation" in first.error and second.inputs == ("2",)
    assert inputs("PYTHON(function.py ')' x) PYTHON(function.py it's)") == [(")", "x"), ()]


def test_28_kb_of_unclosed_commands():
    text = "PYTHON(" * 4000  # 28 KB: the old parser rescanned the rest for each (minutes); now one pass
    cmds = parse_commands(text)
    assert len(cmds) == 4000 and all(c.text == "PYTHON(" and "missing closing parenthesis" in c.error for c in cmds)
    turn = turn_commands(text)
    assert len(turn.commands) == MAX_COMMANDS_PER_MESSAGE and turn.dropped == 4000 - MAX_COMMANDS_PER_MESSAGE
    assert not turn.truncated and turn.commands == tuple(cmds[:MAX_COMMANDS_PER_MESSAGE])
    assert turn.note == (
        f"Response: Note: only the first {MAX_COMMANDS_PER_MESSAGE} of 4000 commands were run "
        f"(at most {MAX_COMMANDS_PER_MESSAGE} per message)."
    )
    # nested and quoted starts that never close, and starts inside one long command
    assert len(parse_commands("PYTHON('(" * 4000)) == 4000
    text = "PYTHON(don't " * 3999 + ")" * 3999
    (long,) = parse_commands(text)
    assert long.text == text and "No closing quotation" in long.error


def _naive_quoted_close(text, i):
    """The close of one start by scanning on from it (what the one-pass scanner must agree with)."""
    depth, quote = 1, None
    while i < len(text):
        c = text[i]
        if quote is not None:
            if c == "\\" and quote == '"':
                i += 1
            elif c == quote:
                quote = None
        elif c == "\\":
            i += 1
        elif c in "'\"":
            quote = c
        elif c in "()":
            depth += 1 if c == "(" else -1
            if depth == 0:
                return i
        i += 1
    return None


def test_one_pass_closes_agree_with_scanning_each_start():
    from findbench.interpret.protocol import _COMMAND_START, _plain_closes, _quoted_closes

    rng = random.Random(0)
    pieces = ["PYTHON(", "(", ")", ")", "'", '"', "\\", "a"]  # dense in what the scanner reads: its states meet often
    texts = ["PYTHON(( ' PYTHON(\\')"]  # scans at different depths meet (after ' and after \') and move on as one
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 30))) for _ in range(3000)]
    for text in texts:
        starts = [m.end() for m in _COMMAND_START.finditer(text)]
        naive = {b: _naive_quoted_close(text, b) for b in starts}
        assert _quoted_closes(text, starts) == {b: e for b, e in naive.items() if e is not None}, text
        plain = _plain_closes(text)
        for b in starts:
            depth = [text[b : j + 1].count("(") - text[b : j + 1].count(")") for j in range(b, len(text))]
            assert plain.get(b - 1) == next((b + k for k, d in enumerate(depth) if d == -1), None), text


def test_turn_caps():
    ok = "PYTHON(function.py 1) " * 3
    assert turn_commands(ok) == TurnCommands(tuple(parse_commands(ok))) and turn_commands(ok).note is None
    long = ok + "x" * MAX_MESSAGE_CHARS + " PYTHON(function.py 2)"
    turn = turn_commands(long)
    assert turn.truncated and turn.dropped == 0 and [c.inputs for c in turn.commands] == [("1",)] * 3
    assert f"only its first {MAX_MESSAGE_CHARS} were read" in turn.note
    cut = "x" * (MAX_MESSAGE_CHARS - 13) + " PYTHON(function.py 3)"  # a command across the cut is unclosed
    (command,) = turn_commands(cut).commands
    assert command.malformed and command.text == "PYTHON(funct"
    with pytest.raises(TypeError, match="text"):
        turn_commands(b"PYTHON(1)")


@pytest.mark.parametrize(
    "text, expected",
    [
        # shell syntax is just text: each token is a value, nothing else
        ("PYTHON(function.py; cat /etc/passwd)", ("function.py;", "cat", "/etc/passwd")),
        ("PYTHON(function.py $(id))", ("$(id)",)),
        (
            "PYTHON(function.py `id` && rm -rf / | tee x > y)",
            ("`id`", "&&", "rm", "-rf", "/", "|", "tee", "x", ">", "y"),
        ),
        ("PYTHON(../../etc/passwd)", ("../../etc/passwd",)),
        ("PYTHON(function.py --help -c 'import os')", ("--help", "-c", "import os")),
    ],
)
def test_shell_syntax_is_plain_values(text, expected):
    (cmd,) = parse_commands(text)
    assert cmd.inputs == expected


def test_parse_commands_type_error():
    with pytest.raises(TypeError, match="text"):
        parse_commands(None)


# ------------------------------------------------------------------------------------ answers
def test_answer_with_all_parts_code_is_last_fenced_block_after_code():
    text = (
        "Let me think.\n```python\nnot_this = 1\n```\n"
        "[DESCRIPTION]: The function doubles x and subtracts 1.\n"
        "[DOMAIN]: Defined everywhere; between 10 and 20 it returns noise.\n"
        "[CODE]:\n```python\ndef first(x):\n    return x\n```\n"
        "Better:\n```python\ndef function(x):\n    return 2 * x - 1\n```\n"
    )
    ans = parse_answer(text)
    assert ans == Answer(
        description="The function doubles x and subtracts 1.",
        domain="Defined everywhere; between 10 and 20 it returns noise.",
        code="def function(x):\n    return 2 * x - 1",
    )


def test_answer_missing_parts():
    assert parse_answer("[DESCRIPTION]: sports teams") == Answer("sports teams", None, None)
    ans = parse_answer("[DESCRIPTION]: reverses the string\n[CODE]: def function(x): return x[::-1]")
    assert ans == Answer("reverses the string", None, None)  # code only counts in a fenced block
    ans = parse_answer("[DESCRIPTION]:\n[DOMAIN]:")
    assert ans == Answer("", "", None)


def test_answer_marker_variants():
    ans = parse_answer("**[DESCRIPTION]:** capitals of countries\n**[DOMAIN]:** not for Asia")
    assert ans == Answer("capitals of countries", "not for Asia", None)
    ans = parse_answer("[DESCRIPTION]\nUppercases x.\n[CODE]\n``` python\ndef f(x):\n    return x.upper()\n```")
    assert ans == Answer("Uppercases x.", None, "def f(x):\n    return x.upper()")
    # the last [DESCRIPTION] wins; sections end at the next marker whatever its kind
    ans = parse_answer("[DESCRIPTION]: draft\n[CODE]:\n```\ndef f(x): return 1\n```\n[DESCRIPTION]: final")
    assert ans == Answer("final", None, "def f(x): return 1")


def test_answer_code_cut_by_the_token_limit():
    ans = parse_answer("[DESCRIPTION]: squares\n[CODE]:\n```python\ndef function(x):\n    return x ** 2\n")
    assert ans.code == "def function(x):\n    return x ** 2"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "PYTHON(function.py 1 2)",
        "I will write the [DESCRIPTION] after a few more experiments.",  # a mention, not a marker
        "[DOMAIN]: everything\n[CODE]:\n```\nx\n```",
        "[description]: lower case is not the marker",
    ],
)
def test_not_an_answer(text):
    assert parse_answer(text) is None


def test_format_answer_round_trips():
    for answer in [
        Answer("d"),
        Answer("d", "dom"),
        Answer("multi\nline", None, "def function(x):\n    return x"),
        Answer("d", "a [bracket] here", "import numpy as np\n\ndef function(x):\n    return np.sin(x)"),
    ]:
        assert parse_answer(format_answer(answer.description, answer.domain, answer.code)) == answer
    with pytest.raises(TypeError, match="description"):
        format_answer(None)


# ------------------------------------------------------------------------------------ replies
def test_reply_format_matches_format_pairs():
    xs, ys = [1.0, -2.5, 1e20], [3.0, 0.123456, float("nan")]
    assert format_reply(xs, ys) == "Response: " + format_pairs(xs, ys)
    assert format_reply(["a b", "c"], ["A B", ""]) == "Response: Function input - output pairs: (a b, A B) (c, )"
    mixed = format_reply([1.0, "abc"], [2.0, CallError("not a number")])
    assert mixed == "Response: Function input - output pairs: (1, 2) (abc, error: not a number)"
    assert format_reply([1.0], [2.0], note="(note)").endswith("(1, 2) (note)")
    with pytest.raises(ValueError, match="length"):
        format_reply([1.0], [])
    assert (
        UNRECOGNIZED_REPLY.startswith("Response: Unrecognized command") and "PYTHON(function.py" in UNRECOGNIZED_REPLY
    )


# --------------------------------------------------------------------------------- tool calls
def test_tool_inputs_are_the_values_a_command_passes():
    command = tool_command(["hello", "two words", 1, 2.5, -3, "it's"])
    assert not command.malformed and command.inputs == ("hello", "two words", "1", "2.5", "-3", "it's")
    assert command.text == 'call_function(inputs=["hello", "two words", 1, 2.5, -3, "it\'s"])'
    assert parse_commands("PYTHON(function.py 1 2.5 -3)")[0].inputs == tool_command([1, 2.5, -3]).inputs
    assert tool_command(["x"] * MAX_INPUTS_PER_COMMAND).inputs == ("x",) * MAX_INPUTS_PER_COMMAND


@pytest.mark.parametrize(
    "inputs, error",
    [
        ("abc", "must be a list"),
        ({"a": 1}, "must be a list"),
        (None, "must be a list"),
        ([], "no inputs"),
        (["x"] * (MAX_INPUTS_PER_COMMAND + 1), f"at most {MAX_INPUTS_PER_COMMAND}"),
        (["ok", "x" * (MAX_INPUT_CHARS + 1)], "inputs[1] is longer than"),
        ([True], "inputs[0] must be a string or a finite number"),
        ([float("nan")], "finite number"),
        ([["nested"]], "inputs[0]"),
    ],
)
def test_bad_tool_inputs_are_malformed(inputs, error):
    command = tool_command(inputs)
    assert command.malformed and error in command.error and command.inputs == ()
    assert malformed_reply(command).startswith("Response: Error in call_function(")


def test_tool_call_text_and_protocols():
    assert tool_call_text({"inputs": ["a", 2]}) == 'call_function(inputs=["a", 2])'
    assert tool_call_text({"values": ["a"], "n": 1}, "other") == 'other(values=["a"], n=1)'
    assert tool_call_text(None) == "call_function()"
    assert PROTOCOLS == ("text", "tools") and [check_protocol(p) for p in PROTOCOLS] == ["text", "tools"]
    with pytest.raises(ValueError, match="protocol must be one of"):
        check_protocol("json")
    assert (
        TOOL_UNRECOGNIZED_REPLY.startswith("Response: Unrecognized command")
        and "call_function" in TOOL_UNRECOGNIZED_REPLY
    )
