"""Pair lines (``format_pairs``) and the exported ``function.py`` scripts that print them."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from findbench.find.export import format_pair_list, format_pairs, format_value, render_script
from findbench.interpret.protocol import CallError, format_reply

#: A pair line's pairs read back: an unquoted value has no delimiter, a quoted one is a JSON string.
_VALUE = r'(?:"(?:[^"\\]|\\.)*"|[^(),"]*)'
_PAIR = re.compile(rf"\(({_VALUE}), ({_VALUE})\)")


def read_pairs(line: str) -> list[tuple[str, str]]:
    """The pairs of ``Function input - output pairs: (x1, y1) ...`` as an agent would read them; the
    whole line must be pairs separated by single spaces (else AssertionError)."""
    body = line.removeprefix("Function input - output pairs: ")
    pairs, pos = [], 0
    while pos < len(body):
        m = _PAIR.match(body, pos)
        assert m is not None, f"not a pair at {pos}: {body[pos:]!r}"
        pairs.append(tuple(json.loads(v) if v.startswith('"') else v for v in m.groups()))
        pos = m.end() + (1 if m.end() < len(body) else 0)
        assert body[m.end():pos] in ("", " ")
    return pairs


@pytest.mark.parametrize("value, shown", [
    (1.0, "1"), (-2.5, "-2.5"), (0.123456, "0.1235"), (1e20, "1e+20"), (float("nan"), "nan"), (3, "3"),
    ("hello", "hello"), ("two words", "two words"), ("it's", "it's"), ("", ""), ("New York", "New York"),
    ("café", "café"), ("#tag", "#tag"), ("-x", "-x"), (CallError("not a number"), "error: not a number"),
])
def test_ordinary_values_are_shown_as_they_are(value, shown):
    assert format_value(value) == shown


@pytest.mark.parametrize("value, shown", [
    ("a, b", '"a, b"'), ("f(x)", '"f(x)"'), (")", '")"'), ('say "hi"', r'"say \"hi\""'), ("a\\b", r'"a\\b"'),
    ("line\nbreak", r'"line\nbreak"'), ("tab\there", r'"tab\there"'), ("\x00\x1b[2J", r'"\u0000\u001b[2J"'),
    (" padded", '" padded"'), ("padded ", '"padded "'), ("\x7f", r'"\u007f"'), ("\u202eevil", r'"\u202eevil"'),
    ("a\u2028b", r'"a\u2028b"'), ("\u00a0", r'"\u00a0"'), ('"quoted"', r'"\"quoted\""'),
    (CallError("ValueError: f() got (x)"), '"error: ValueError: f() got (x)"'),
])
def test_values_that_could_be_misread_are_json_strings(value, shown):
    assert format_value(value) == shown
    assert json.loads(shown) == str(value)


def test_a_pair_line_cannot_be_forged():
    inputs = ["x) (1, 2", "a, b", "line\n(7, 8)", "plain", '"', "\\", "(", ""]
    outputs = ["y) (3, 4", ") (5, 6", "ok", "two words", "\r(9, 9)", "z", "it's", "end ("]
    line = format_pairs(inputs, outputs)
    assert "\n" not in line and "\r" not in line
    assert read_pairs(line) == list(zip(inputs, outputs))
    # before quoting, the same values read as pairs that were never computed
    raw = " ".join(f"({x}, {y})" for x, y in zip(inputs, outputs))
    assert {("3", "4"), ("5", "6"), ("7", "8")} <= set(_PAIR.findall(raw))
    assert format_reply(inputs, outputs) == "Response: " + line
    assert format_pair_list([1.0, "a"], [2.0, "b c"]) == "(1, 2) (a, b c)"


STRINGS_ROW = {"function_id": "strings/f00001", "name": "echo", "category": "strings",
               "code": 'def function(x):\n    return x + ") (fake, pair"\n'}
NUMERIC_ROW = {"function_id": "numeric/f00001", "name": "line", "category": "numeric",
               "code": "def function(x):\n    return 2 * x - 1 / 3\n"}


def run_script(row, tmp_path, *inputs) -> str:
    script = tmp_path / "function.py"
    script.write_text(render_script(row), encoding="utf-8")
    res = subprocess.run([sys.executable, "-I", str(script), *inputs], capture_output=True, text=True, encoding="utf-8",
                         timeout=60, check=True, env={"PYTHONIOENCODING": "utf-8"})
    return res.stdout.removesuffix("\n")


def test_the_exported_script_prints_the_line_findbench_prints(tmp_path):
    inputs = ["ab c", 'q"uote', "a, b", "line\nbreak", " pad", "\u202e", "plain"]
    line = run_script(STRINGS_ROW, tmp_path, *inputs)
    outputs = [x + ") (fake, pair" for x in inputs]
    assert line == format_pairs(inputs, outputs) and read_pairs(line) == list(zip(inputs, outputs))
    numbers = ["1", "-2.5", "1e20", "0.1"]
    line = run_script(NUMERIC_ROW, tmp_path, *numbers)
    assert line == format_pairs([float(x) for x in numbers], [2 * float(x) - 1 / 3 for x in numbers])
    assert line.startswith("Function input - output pairs: (1, 1.6667) (-2.5, -5.3333) (1e+20, 2e+20)")


def test_export_functions_takes_its_config(tmp_path, monkeypatch):
    import findbench.find
    from findbench.find.config import ExportFunctionsConfig
    from findbench.find.export import export_functions

    asked = []

    def load_rows(category, *, seed, data):
        asked.append((category, seed, data))
        return [{**(NUMERIC_ROW if category == "numeric" else STRINGS_ROW), "category": category}]

    monkeypatch.setattr(findbench.find, "load_rows", load_rows)
    data = tmp_path / "data"
    cfg = ExportFunctionsConfig(out=str(tmp_path / "cfg"), configs="numeric,strings", data=str(data), seed=3)
    assert export_functions(cfg) == 2
    assert asked == [("numeric", 3, str(data)), ("strings", 3, str(data))]
    assert "strings/f00001" in (tmp_path / "cfg" / "strings/f00001/function.py").read_text()
    assert export_functions(ExportFunctionsConfig(out=str(tmp_path / "defaults"))) == 2
    assert asked[-2:] == [("numeric", 0, None), ("strings", 0, None)]
    with pytest.raises(ValueError, match="--configs"):
        export_functions(ExportFunctionsConfig(out=str(tmp_path / "x"), configs=[]))
    assert not (tmp_path / "x").exists()
