"""Model resolution: the embedded model folder, pass-through ids, the registry, build locking."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from findbench import models


def test_other_ids_pass_through(tmp_path):
    assert models.resolve("lmsys/vicuna-13b-v1.1") == "lmsys/vicuna-13b-v1.1"
    assert models.resolve(str(tmp_path)) == str(tmp_path)
    assert models.resolve(tmp_path) == str(tmp_path)
    with pytest.raises(ValueError, match="model"):
        models.resolve("")
    with pytest.raises(ValueError, match="model"):
        models.resolve(None)


def test_registry(monkeypatch):
    monkeypatch.setattr(models, "REGISTRY", dict(models.REGISTRY))
    models.register("my-judge", lambda: "/models/judge")
    assert models.resolve("my-judge") == "/models/judge"
    with pytest.raises(ValueError, match="already registered"):
        models.register("my-judge", lambda: "/x")
    models.register("my-judge", lambda: "/y", overwrite=True)
    assert models.resolve("my-judge") == "/y"
    with pytest.raises(TypeError, match="builder"):
        models.register("other", "/not/callable")
    assert "embedded" in models.REGISTRY


@pytest.mark.slow
def test_embedded_folder_is_a_plain_safetensors_model(embedded_model_dir):
    folder = Path(embedded_model_dir)
    assert (folder / "model.safetensors").is_file()
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 30
    assert "quantization_config" not in config  # plain weights: loaders must not look for a GGUF
    assert (folder / "chat_template.jinja").is_file() or "chat_template" in (
        folder / "tokenizer_config.json"
    ).read_text()
    t0 = time.perf_counter()
    assert models.resolve("embedded") == embedded_model_dir  # cached: no rebuild
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.slow
def test_embedded_model_answers(embedded_lm):
    out = embedded_lm.generate([[{"role": "user", "content": "What is the capital of France?"}]], max_new_tokens=12)
    assert "Paris" in out[0]


def test_concurrent_builds_convert_once(tmp_path, monkeypatch):
    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path))
    calls = []

    def fake_convert(dest: Path) -> None:
        calls.append(dest)
        time.sleep(0.3)  # long enough for the other thread to wait on the lock
        from findbench._io import atomic_dir

        with atomic_dir(dest) as tmp:
            (tmp / "config.json").write_text("{}")
            (tmp / models._DONE).write_text("test\n")

    monkeypatch.setattr(models, "_convert_embedded", fake_convert)
    results = []
    threads = [threading.Thread(target=lambda: results.append(models.embedded_model_dir())) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(set(results)) == 1 and Path(results[0]).parent == tmp_path / "models"


def test_failed_build_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path))

    def broken(dest: Path) -> None:
        from findbench._io import atomic_dir

        with atomic_dir(dest) as tmp:
            (tmp / "config.json").write_text("{}")
            raise RuntimeError("conversion failed")

    monkeypatch.setattr(models, "_convert_embedded", broken)
    with pytest.raises(RuntimeError, match="conversion failed"):
        models.embedded_model_dir()
    leftovers = [p.name for p in (tmp_path / "models").iterdir() if not p.name.endswith(".lock")]
    assert leftovers == []
