"""Importer of the Huang et al. (2023) observational test set, on the anchor release file,
and the neuron test-set builder (parquet + card, loadable with datasets.load_dataset)."""

from __future__ import annotations

import collections
import json
import sys
import tarfile
from pathlib import Path

import pytest

from findbench.constants import UsageError
from findbench.neuron_explanations import huang2023 as h
from tests._paths import REPO

sys.path.insert(0, str(REPO))  # dataset_builders/ until it is packaged


@pytest.fixture(scope="module")
def release_dir(anchor):
    """The anchor folder holding the release's ``eval_data.tar.gz``."""
    return anchor("eval-neuron-explanation/eval_data.tar.gz").parent


@pytest.fixture(scope="module")
def rows(release_dir):
    return list(h.iter_items(h.load_release(release_dir)))


def test_parses_all_neurons_and_items(rows):
    assert len(rows) == 9592
    assert len({r["neuron"] for r in rows}) == 255
    labels = collections.Counter(r["label"] for r in rows)
    assert labels == {"false_negative": 3852, "true_positive": 3618, "false_positive": 2040, "true_negative": 82}
    assert sum(r["length_mismatch"] for r in rows) == 36
    first = rows[0]
    assert first["neuron"] == "0:1016" and first["layer"] == 0 and first["neuron_index"] == 1016
    assert first["explanation"].startswith('the word "then"')
    assert first["span_tokens"] == [" posterior", "ly"] and first["activations"][0] == pytest.approx(
        -0.11711282283067703
    )
    assert first["label"] == "true_negative" and first["in_explanation"] is False and first["fires"] is False


def test_label_semantics_match_activations(rows):
    # in_explanation = TP/FP; fires = TP/FN; fires agrees with max activation > 0 on 9,580 items
    assert all(r["in_explanation"] == (r["label"] in ("true_positive", "false_positive")) for r in rows)
    assert sum((r["max_activation"] > 0) == r["fires"] for r in rows) == 9580


def test_block_inference(rows):
    by = collections.Counter((r["block"], r["label"]) for r in rows)
    # the explanation block never holds false negatives (corpus spans the explanation misses)
    assert by[("explanation", "false_negative")] == 0
    assert by[("explanation", "true_positive")] == 2355 and by[("activating", "true_positive")] == 1263
    # blocks are contiguous per neuron: explanation first
    per = collections.defaultdict(list)
    for r in rows:
        per[r["neuron"]].append(r["block"])
    assert all(b == sorted(b, key=lambda x: x != "explanation") for b in per.values())
    assert h._block_boundary(["false_positive"] * 5 + ["true_positive"] * 20 + ["false_negative"] * 15) == 20
    assert h._block_boundary(["false_positive"] * 3 + ["true_positive"] * 3 + ["false_negative"] * 30) == 6


def test_full_set_f1(rows):
    from findbench.neuron_explanations.f1 import explanation_f1

    out = explanation_f1(
        [r["in_explanation"] for r in rows], [r["activations"] for r in rows], [r["neuron"] for r in rows]
    )
    assert out["n_neurons"] == 255
    assert out["precision"] == pytest.approx(0.6404, abs=1e-4)
    assert out["recall"] == pytest.approx(0.4623, abs=1e-4)
    assert out["f1"] == pytest.approx(0.5226, abs=1e-4)
    assert out["pooled_f1"] == pytest.approx(0.5517, abs=1e-4)


def test_malformed_release(tmp_path):
    bad = [
        {
            "neuron": "1:2",
            "gpt4_explanation": "x",
            "eval_data": [
                {"test_input": "a", "test_tokens": "['a'", "neuron_activations": "[1.0]", "label": "true_positive"}
            ],
        }
    ]
    with pytest.raises(ValueError, match="test_tokens"):
        list(h.iter_items(bad))
    bad[0]["eval_data"][0].update(test_tokens="['a']", neuron_activations="[__import__('os')]")
    with pytest.raises(ValueError, match="neuron_activations"):
        list(h.iter_items(bad))
    bad[0]["eval_data"][0].update(neuron_activations="[1.0]", label="maybe")
    with pytest.raises(ValueError, match="label"):
        list(h.iter_items(bad))
    with pytest.raises(ValueError, match="neuron"):
        list(h.iter_items([{"neuron": "x", "gpt4_explanation": "", "eval_data": []}]))
    with pytest.raises(FileNotFoundError, match="data_dir"):
        h.load_release(tmp_path)


def test_reads_json_and_tarball(tmp_path):
    rec = [
        {
            "neuron": "3:4",
            "gpt4_explanation": "days",
            "eval_data": [
                {
                    "test_input": "On Monday.",
                    "test_tokens": "[' Monday']",
                    "neuron_activations": "[-0.5]",
                    "label": "false_positive",
                },
                {
                    "test_input": "Blue sky.",
                    "test_tokens": "[' sky']",
                    "neuron_activations": "[1.5, 0.1]",
                    "label": "false_negative",
                },
            ],
        }
    ]
    (tmp_path / h.MEMBER).write_text(json.dumps(rec))
    rows = list(h.iter_items(h.load_release(tmp_path)))
    assert [r["block"] for r in rows] == ["explanation", "activating"]
    assert rows[1]["length_mismatch"] is True and rows[1]["max_activation"] == 1.5
    tgz = tmp_path / "t" / "eval_data.tar.gz"
    tgz.parent.mkdir()
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(tmp_path / h.MEMBER, arcname=h.MEMBER)
    assert h.load_release(tgz.parent) == rec


def test_builder_writes_loadable_folder(tmp_path, release_dir):
    import datasets

    from findbench.builders.config import BuildNeuronTestsConfig as Config
    from findbench.builders.neuron_test_sets import build

    out = build(Config(out=str(tmp_path / "nts"), configs=["huang2023"], data_dir=str(release_dir)), progress=False)
    assert (out / "huang2023" / "test-00000-of-00001.parquet").is_file()
    card = (out / "README.md").read_text()
    assert "config_name: huang2023" in card and "## huang2023" in card
    side = json.loads((out / "findbench.json").read_text())
    assert side["configs"]["huang2023"]["provenance"]["builder"] == "NeuronTestSets"
    ds = datasets.load_dataset(str(out), "huang2023", split="test")
    assert len(ds) == 9592 and ds[0]["neuron"] == "0:1016" and ds[0]["block"] == "explanation"
    assert ds.features["activations"].feature.dtype == "float64"
    assert side["configs"]["huang2023"]["provenance"]["data_dir"] == str(release_dir.resolve())
    with pytest.raises(UsageError, match="--configs: unknown"):
        build(Config(out=str(tmp_path / "x"), configs=["nope"]))
    with pytest.raises(UsageError, match="--configs: observational needs --layer"):
        build(Config(out=str(tmp_path / "x"), configs=["observational"]))


def test_builder_model_configs_with_a_local_tiny_model(tmp_path):
    """intervention_tasks and observational configs, model under study = a saved tiny model
    (the same code path as --model embedded, without the embedded weights)."""
    import datasets

    from findbench.builders.config import BuildNeuronTestsConfig
    from findbench.builders.neuron_test_sets import build
    from findbench.neuron_explanations.intervention_tasks import TASKS
    from findbench.neuron_explanations.observational import load_corpus
    from tests.neuron_explanations._tiny import tiny_llama, word_tokenizer

    task = TASKS["time/next_day"]
    tok = word_tokenizer(
        [task.prompt(f) + a for f, a in zip(task.fillers, task.answers)] + load_corpus() + ["USER ASSISTANT : List"]
    )
    folder = tmp_path / "tiny"
    tiny_llama(len(tok), seed=1).save_pretrained(folder)
    tok.save_pretrained(folder)
    out = build(BuildNeuronTestsConfig(
        out=str(tmp_path / "nts"),
        configs=["intervention_tasks", "observational"],
        model=str(folder),
        tasks=["time/next_day"],
        layer=1,
        neuron=3,
        explanation="days of the week",
        span_judge="regex:day$",
        n_strings=3,
        n_activating=4,
    ), progress=False)
    it = datasets.load_dataset(str(out), "intervention_tasks", split="test")
    assert it["filler"] == list(task.fillers) and set(it["task"]) == {"time/next_day"}
    assert all(c == (p == e) for c, p, e in zip(it["correct"], it["predicted_token_id"], it["expected_token_id"]))
    ob = datasets.load_dataset(str(out), "observational", split="test")
    act = [r for r in ob if r["block"] == "activating"]
    assert len(act) == 4 and all(r["neuron"] == "1:3" for r in ob)
    assert all(r["in_explanation"] == r["span"].lower().endswith("day") for r in act)
    side = json.loads((out / "findbench.json").read_text())
    assert side["configs"]["observational"]["provenance"]["span_judge"] == "regex:day$"


def test_build_records_the_settings_each_config_uses(tmp_path, monkeypatch):
    import findbench.builders.folder
    from findbench.builders.config import BuildNeuronTestsConfig
    from findbench.builders.neuron_test_sets import build

    asked = []

    def build_dataset_folder(out, builder, configs, provenance, **options):
        asked.append((out, provenance, {**options, "configs": configs}))
        return Path(out)

    monkeypatch.setattr(findbench.builders.folder, "build_dataset_folder", build_dataset_folder)
    corpus = tmp_path / "corpus.txt"
    cfg = BuildNeuronTestsConfig(out=str(tmp_path / "nts"), span_judge="regex:day$", configs=["intervention_tasks",
                                 "observational"], tasks="time/next_day", layer=1, neuron=3,
                                 explanation="days of the week", corpus=str(corpus))
    assert build(cfg, progress=False) == tmp_path / "nts"
    out, provenance, options = asked[0]
    assert options["progress"] is False and options["configs"]["observational"]["build"].corpus == str(corpus.resolve())
    observational = provenance["observational"]
    assert observational["span_judge"] == "regex:day$" and observational["corpus"] == str(corpus.resolve())
    assert provenance["intervention_tasks"] == {"model": "embedded", "tasks": ["time/next_day"]}
    assert build(BuildNeuronTestsConfig()) == Path("neuron_test_sets")
    assert set(asked[-1][1]) == {"huang2023", "intervention_tasks"}
    with pytest.raises(UsageError, match="--span-judge"):
        BuildNeuronTestsConfig(span_judge="bogus")
    with pytest.raises(UsageError, match="--n-strings must be"):
        BuildNeuronTestsConfig(n_strings=0)
