"""The function behind the commands: replies equal ``findbench call``; no shell, no path."""

from __future__ import annotations

import os
import subprocess

import pytest

from findbench import cli
from findbench.find import load_function
from findbench.find.export import format_pairs
from findbench.interpret.calls import FunctionRunner
from findbench.interpret.protocol import MAX_INPUT_CHARS, MAX_INPUTS_PER_COMMAND, parse_commands


def reply(runner: FunctionRunner, text: str) -> str:
    (command,) = parse_commands(text)
    line, _ = runner.run(command)
    return line


def findbench_call(capsys, data_dir, function_id: str, values: list[str]) -> str:
    """What ``findbench call`` prints for ``values`` (one line, without the newline)."""
    capsys.readouterr()
    assert cli.main(["call", function_id, *values, "--data", str(data_dir)]) == 0
    return capsys.readouterr().out.rstrip("\n")


@pytest.mark.parametrize(
    "function_id, command, values",
    [
        # numeric: clean, an MLP, and a corrupted one outside its corrupted interval; floats in several spellings
        (
            "numeric/f00000",
            "PYTHON(function.py 1 -2.5 0.333333 1e3 -128, 127.99)",
            ["1", "-2.5", "0.333333", "1e3", "-128", "127.99"],
        ),
        ("numeric/f00003", "PYTHON(function.py -3 2.5 0)", ["-3", "2.5", "0"]),
        ("numeric/f00002", "PYTHON(function.py -50 0 9.5 20 64)", ["-50", "0", "9.5", "20", "64"]),
        # strings: quoting, commas, apostrophes, empty and odd values
        (
            "strings/f00000",
            'PYTHON(function.py "hello world" \'it\'\'s\' "a, b" x "it\'s" "")',
            ["hello world", "its", "a, b", "x", "it's", ""],
        ),
        (
            "strings/f00003",
            "PYTHON(function.py Hello \"MiXeD case 123\" ' padded ')",
            ["Hello", "MiXeD case 123", " padded "],
        ),
        # neurons through their default backbones (entities: embedding probes; relations: tables)
        (
            "neurons_entities/f00000",
            'PYTHON(function.py rook "frying pan" galaxy touchdown "Magnus Carlsen")',
            ["rook", "frying pan", "galaxy", "touchdown", "Magnus Carlsen"],
        ),
        ("neurons_entities/f00004", "PYTHON(function.py rook, oven, comet)", ["rook", "oven", "comet"]),
        (
            "neurons_relations/f00000",
            'PYTHON(function.py France Japan "New Zealand" cat)',
            ["France", "Japan", "New Zealand", "cat"],
        ),
    ],
)
def test_reply_equals_findbench_call(function_id, command, values, by_id, data_dir, capsys):
    (cmd,) = parse_commands(command)
    assert list(cmd.inputs) == values
    line, record = FunctionRunner(by_id[function_id]).run(cmd, round=3)
    assert line == "Response: " + findbench_call(capsys, data_dir, function_id, values)
    assert record["round"] == 3 and record["inputs"] == values and record["errors"] == [None] * len(values)


def test_corrupted_relation_equals_findbench_call(rows, data_dir, capsys):
    row = next(
        r
        for r in rows["neurons_relations"]
        if r["exception"] and "Asia" in r["exception"] and "capital" in r["concept2"]
    )
    values = ["France", "Japan", "China", "Brazil", "banana"]
    line = reply(FunctionRunner(row), "PYTHON(function.py " + " ".join(values) + ")")
    assert line == "Response: " + findbench_call(capsys, data_dir, row["function_id"], values)
    assert "(Japan, undefined)" in line and "(France, Paris)" in line


def test_non_numbers_get_an_error_for_that_value_only(by_id):
    runner = FunctionRunner(by_id["numeric/f00000"])  # 2x - 1
    line, record = runner.run(parse_commands("PYTHON(function.py 1 abc 2 [3] nan inf)")[0])
    assert (
        line
        == "Response: Function input - output pairs: (1, 1) (abc, error: not a number) (2, 3) "
        "([3], error: not a number) (nan, nan) (inf, inf)"
    )
    assert record["outputs"] == [1.0, None, 3.0, None, "nan", "inf"]
    assert record["errors"] == [None, "not a number", None, "not a number", None, None]


def test_noisy_numeric_answers_the_same_input_the_same_way_within_a_run(by_id):
    row = by_id["numeric/f00001"]
    a = FunctionRunner(row, seed=0)
    first = a.run(parse_commands("PYTHON(function.py 5 5 6 -3)")[0])[1]["outputs"]
    assert first[0] == first[1] and first[0] != 11.0  # noisy: not the clean 2*5 + 1
    again = FunctionRunner(row, seed=0).run(parse_commands("PYTHON(function.py -3 6 5)")[0])[1]["outputs"]
    assert again == [first[3], first[2], first[0]]  # whatever the order, whatever was asked before
    assert a.run(parse_commands("PYTHON(function.py 5.0)")[0])[1]["outputs"] == [first[0]]
    other = FunctionRunner(row, seed=1).run(parse_commands("PYTHON(function.py 5 6)")[0])[1]["outputs"]
    assert other != first[1:3]  # the run seed changes the draws
    # noise of a normal(0, 1) around the clean value
    assert abs(first[0] - 11.0) < 6 and abs(first[2] - 13.0) < 6


def test_corrupted_numeric_is_stable_inside_its_interval(by_id):
    row = by_id["numeric/f00002"]  # x^2 + 1, replaced by N(5, 0.1) for 10 < x < 20
    out1 = FunctionRunner(row).run(parse_commands("PYTHON(function.py 15 12 30)")[0])[1]["outputs"]
    out2 = FunctionRunner(row).run(parse_commands("PYTHON(function.py 12 15)")[0])[1]["outputs"]
    assert out1[:2] == out2[::-1] and all(abs(v - 5.0) < 1 for v in out1[:2]) and out1[2] == 901.0


@pytest.mark.parametrize(
    "function_id, text, expected_values",
    [
        ("strings/f00000", "PYTHON(function.py; cat /etc/passwd)", ["function.py;", "cat", "/etc/passwd"]),
        ("strings/f00000", "PYTHON(function.py $(id))", ["$(id)"]),
        ("strings/f00000", "PYTHON(../../etc/passwd)", ["../../etc/passwd"]),
        (
            "strings/f00000",
            "PYTHON(function.py `touch pwned` && touch pwned2)",
            ["`touch", "pwned`", "&&", "touch", "pwned2"],
        ),
        ("neurons_relations/f00000", "PYTHON(function.py $(id) ../../etc/passwd)", ["$(id)", "../../etc/passwd"]),
    ],
)
def test_shell_and_paths_are_plain_values(function_id, text, expected_values, by_id, tmp_path, monkeypatch):
    row = by_id[function_id]
    fn = load_function(row)
    runner = FunctionRunner(row)
    runner.function()  # built before the traps below (neuron backbones may read their data files)
    monkeypatch.chdir(tmp_path)
    # a hostile function.py in the working directory is never read or run
    (tmp_path / "function.py").write_text("open('ran', 'w').write('x')\n")

    def trap(*args, **kwargs):
        raise AssertionError(f"a process was started: {args!r}")

    for name in ("Popen", "run", "call", "check_output"):
        monkeypatch.setattr(subprocess, name, trap)
    for name in ("system", "popen", "execv", "execve", "posix_spawn", "fork"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, trap)
    line = reply(runner, text)
    outputs = [fn(v) for v in expected_values] if row["category"] == "strings" else list(fn(expected_values))
    assert line == "Response: " + format_pairs(expected_values, outputs)
    assert "root:" not in line and "uid=" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["function.py"]


def test_shell_syntax_to_a_numeric_function_is_an_error_reply(by_id):
    runner = FunctionRunner(by_id["numeric/f00000"])
    assert (
        reply(runner, "PYTHON(function.py $(id))")
        == 'Response: Function input - output pairs: ("$(id)", error: not a number)'
    )
    assert (
        reply(runner, "PYTHON(../../etc/passwd)")
        == "Response: Function input - output pairs: (../../etc/passwd, error: not a number)"
    )
    line = reply(runner, "PYTHON(function.py; cat /etc/passwd)")
    assert line.count("error: not a number") == 3


def test_limits(by_id):
    runner = FunctionRunner(by_id["numeric/f00000"])
    n = MAX_INPUTS_PER_COMMAND + 5
    line, record = runner.run(parse_commands("PYTHON(function.py " + " ".join(["1"] * n) + ")")[0])
    assert line.endswith(f"(only the first {MAX_INPUTS_PER_COMMAND} of {n} inputs were run)")
    assert len(record["inputs"]) == MAX_INPUTS_PER_COMMAND
    long = "a" * (MAX_INPUT_CHARS + 1)
    line = reply(FunctionRunner(by_id["strings/f00000"]), f"PYTHON(function.py {long} ok)")
    assert f"error: input longer than {MAX_INPUT_CHARS} characters" in line and long not in line


def test_function_errors_are_per_value_replies(by_id):
    def picky(x):
        if x == "bad":
            raise ValueError("cannot take this")
        return x.upper()

    runner = FunctionRunner(by_id["strings/f00000"], function=picky)
    assert (
        reply(runner, "PYTHON(function.py ok bad)")
        == "Response: Function input - output pairs: (ok, OK) (bad, error: ValueError: cannot take this)"
    )


def test_malformed_command_runs_nothing(by_id):
    runner = FunctionRunner(by_id["strings/f00000"], function=lambda x: pytest.fail("ran"))
    line, record = runner.run(parse_commands("PYTHON(function.py)")[0])
    assert line.startswith("Response: Error in PYTHON(function.py)") and record["error"].startswith("no inputs")
    assert record["inputs"] == [] and record["outputs"] == []


def test_mlp_without_public_weights_answers_with_errors():
    from findbench.find import numeric
    from tests.interpret.conftest import numeric_params

    params = numeric_params("absolute", "mlp", mlp=None, scale=1.0, bias=0.0)
    params["mlp_weights_missing"] = True
    row = numeric.row_from_params(params, 7, source="find-v1")
    line = reply(FunctionRunner(row), "PYTHON(function.py 1)")
    assert line.startswith('Response: Function input - output pairs: (1, "error: this function cannot be evaluated')


def test_runner_bad_input_names_the_field(by_id):
    with pytest.raises(TypeError, match="row"):
        FunctionRunner("numeric/f00000")
    with pytest.raises(ValueError, match="category"):
        FunctionRunner({"function_id": "x/f00000", "category": "images"})
    with pytest.raises(TypeError, match="seed"):
        FunctionRunner(by_id["numeric/f00000"], seed="0")
    with pytest.raises(TypeError, match=r"inputs\[0\]"):
        FunctionRunner(by_id["numeric/f00000"]).evaluate([1.0])
