"""`findbench build` / `call` / `export-functions` end to end on the procedural generators."""

import hashlib
import subprocess
import sys

import datasets
import pytest

from findbench import load_function, schema
from findbench.cli import main
from findbench.find.export import format_pairs


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("b") / "find"
    assert main(["build", "--configs", "strings", "--out", str(out)]) == 0
    return out


def test_build_is_loadable_and_documented(built):
    ds = datasets.load_dataset(str(built), "strings", split="test")
    assert len(ds) == 1000
    assert list(ds.features) == list(schema.COLUMNS)
    row = ds[7]
    assert row["function_id"] == "strings/f00007" and row["source"] == "procedural"
    assert len(row["unit_tests"]) == 10 and len(row["test_inputs"]) == 10
    assert len(row["unit_tests_near"]) == 10 and all(len(set(t["inputs"])) == 1 for t in row["unit_tests_near"])
    card = (built / "README.md").read_text()
    for needed in ("configs:", "config_name: strings", "license: mit", "schwettmann2023find", "`unit_tests`",
                   "`unit_tests_near`", "## Unit tests", "find-v1"):
        assert needed in card
    assert (built / "findbench.json").is_file()


def test_build_twice_is_byte_identical(built, tmp_path):
    again = tmp_path / "find"
    assert main(["build", "--configs", "strings", "--out", str(again)]) == 0
    for name in ("strings/test-00000-of-00001.parquet", "README.md", "findbench.json"):
        assert _sha(built / name) == _sha(again / name), name


def test_call_prints_find_format(built, capsys):
    row = datasets.load_dataset(str(built), "strings", split="test")[3]
    fn = load_function(row)
    assert main(["call", "strings/f00003", "hello", "it's", "--data", str(built)]) == 0
    out = capsys.readouterr().out.strip()
    assert (
        out
        == f"Function input - output pairs: (hello, {fn('hello')}) "
        f"(it's, {fn(chr(105) + chr(116) + chr(39) + chr(115))})"
    )


def test_call_and_build_errors_name_the_field(capsys):
    assert main(["call", "strings/fXYZ", "a"]) == 2
    assert "function_id" in capsys.readouterr().err
    assert main(["build", "--configs", "strings,bogus", "--out", "unused"]) == 2
    assert "configs" in capsys.readouterr().err


def test_export_functions_scripts_run_alone(built, tmp_path):
    out = tmp_path / "exported"
    assert main(["export-functions", "--out", str(out), "--configs", "strings", "--data", str(built)]) == 0
    scripts = sorted(out.glob("strings/f*/function.py"))
    assert len(scripts) == 1000
    fn = load_function("strings/f00010", data=built)
    res = subprocess.run(
        [sys.executable, "-I", str(out / "strings/f00010/function.py"), "ab c", 'q"uote'],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert res.stdout.strip() == format_pairs(["ab c", 'q"uote'], [fn("ab c"), fn('q"uote')])
    assert '("q\\"uote", ' in res.stdout  # a value with a quote is shown as a JSON string


def test_build_find_v1_import(anchor, tmp_path, capsys):
    out = tmp_path / "find-v1"
    assert main(["build", "--source", "find-v1", "--data-dir", str(anchor("find-v1")), "--out", str(out)]) == 0
    sizes = {c: len(datasets.load_dataset(str(out), c, split="test")) for c in schema.CATEGORIES}
    assert sizes == {"numeric": 1000, "strings": 1000, "neurons_entities": 200, "neurons_relations": 75}
    rel = datasets.load_dataset(str(out), "neurons_relations", split="test")
    assert set(rel["source"]) == {"find-v1"}
    assert all(len(r) == 10 and all(1 <= t["correct"] <= 3 for t in r) for r in rel["unit_tests"])
    # f00025 is "country -> capital" corrupted on Asian countries
    capsys.readouterr()
    assert main(["call", "neurons_relations/f00025", "France", "Japan", "--data", str(out)]) == 0
    assert capsys.readouterr().out.strip() == "Function input - output pairs: (France, Paris) (Japan, undefined)"
    assert "find-v1" in (out / "README.md").read_text()
