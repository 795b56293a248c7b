"""The embedded-evaluator adapter shipped in the package: what it holds, what it resolves to,
and (slow) that it still judges held-out functions as its card says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from findbench.constants import TRAINED_MARKER
from findbench.models import shipped_judge_dir


@pytest.fixture(scope="module")
def shipped() -> Path:
    folder = shipped_judge_dir()
    assert folder is not None, "the package ships no embedded-evaluator adapter"
    return Path(folder)


def test_shipped_adapter_is_the_recipe_its_record_names(shipped):
    record = json.loads((shipped / TRAINED_MARKER).read_text())
    assert record["judge_mode"] == "pmi" and record["base_model"] == "embedded"
    cfg = json.loads((shipped / "adapter_config.json").read_text())
    assert cfg["base_model_name_or_path"] == "embedded"  # resolved by findbench on any machine
    assert cfg["r"] == record["args"]["lora_r"] == 16 and cfg["layers_to_transform"] == list(range(18, 30))
    from safetensors import safe_open

    with safe_open(str(shipped / "adapter_model.safetensors"), "pt") as f:
        keys = list(f.keys())
        assert {str(f.get_tensor(k).dtype) for k in keys} == {"torch.float16"}
    assert len(keys) == 12 * 7 * 2  # 12 layers x 7 linear modules x (A, B)
    card = (shipped / "README.md").read_text()
    assert "Shipped with findbench" in card and "0.564" in card
    assert sum(p.stat().st_size for p in shipped.iterdir()) < 8_000_000


def test_a_judge_trained_here_wins_over_the_shipped_one(shipped, tmp_path, monkeypatch):
    from findbench.models import embedded_judge_dir, resolve

    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path))
    assert resolve("embedded-evaluator") == str(shipped)
    assert embedded_judge_dir(must_exist=False) == str(tmp_path / "models" / "embedded-evaluator-v2")  # training target
    trained = tmp_path / "models" / "embedded-evaluator-v2"
    trained.mkdir(parents=True)
    (trained / TRAINED_MARKER).write_text("{}")
    assert resolve("embedded-evaluator") == str(trained)


@pytest.mark.slow
def test_shipped_judge_separates_true_from_wrong_descriptions_on_held_out_entities(shipped):
    """The card's held-out numbers (25 entity functions: 0.884 true vs 0.300 wrong), on 10
    held-out functions (the card's sample): the adapter loads onto the embedded model and still works."""
    from findbench.judge.card import judge_card
    from findbench.judge.config import JudgeCardConfig

    card = judge_card(JudgeCardConfig(judge=str(shipped), functions_per_category=10, categories="neurons_entities",
                                      rungs="true,other", out=None), progress=False)
    acc = card.accuracy["neurons_entities"]
    assert card.mode == "pmi"  # read from the shipped record
    assert acc["true"].mean >= 0.8 and acc["other"].mean <= 0.45
