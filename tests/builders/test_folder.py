"""The Hub-layout dataset folder writer: parquet per config, card with configs, atomicity."""

import hashlib
from dataclasses import dataclass

import datasets
import pytest

from findbench.builders.folder import PARQUET_NAME, build_dataset_folder


@dataclass
class ToyConfig(datasets.BuilderConfig):
    n: int = 3
    fail: bool = False


class Toy(datasets.GeneratorBasedBuilder):
    BUILDER_CONFIG_CLASS = ToyConfig
    BUILDER_CONFIGS = [ToyConfig(name="a"), ToyConfig(name="b")]

    def _info(self):
        return datasets.DatasetInfo(
            features=datasets.Features({"k": datasets.Value("int32"), "s": datasets.Value("string")})
        )

    def _split_generators(self, dl_manager):
        return [datasets.SplitGenerator(name=datasets.Split.TEST, gen_kwargs={})]

    def _generate_examples(self):
        for i in range(self.config.n):
            if self.config.fail and i == 1:
                raise RuntimeError("boom")
            yield i, {"k": i, "s": f"{self.config.name}{i}"}


def _build(out, configs, **kw):
    return build_dataset_folder(
        out,
        Toy,
        configs,
        card_header={"license": "mit"},
        card_body=lambda e: "body: " + ",".join(e),
        progress=False,
        **kw,
    )


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_folder_loads_and_is_byte_identical(tmp_path):
    out = tmp_path / "toy"
    _build(out, {"a": {"n": 4}, "b": {"n": 2}})
    assert (out / "a" / PARQUET_NAME).is_file()
    card = (out / "README.md").read_text()
    assert "config_name: a" in card and "num_examples: 4" in card and "body: a,b" in card
    ds = datasets.load_dataset(str(out), "a", split="test")
    assert ds["s"] == ["a0", "a1", "a2", "a3"]
    first = {p.name: _digest(p) for p in out.rglob("*") if p.is_file()}
    _build(out, {"a": {"n": 4}, "b": {"n": 2}})
    second = {p.name: _digest(p) for p in out.rglob("*") if p.is_file()}
    assert first == second


def test_adding_a_config_keeps_others(tmp_path):
    out = tmp_path / "toy"
    _build(out, {"a": {"n": 2}})
    _build(out, {"b": {"n": 5}})
    assert len(datasets.load_dataset(str(out), "a", split="test")) == 2
    assert len(datasets.load_dataset(str(out), "b", split="test")) == 5


def test_crash_leaves_previous_folder_untouched(tmp_path):
    out = tmp_path / "toy"
    _build(out, {"a": {"n": 2}})
    before = _digest(out / "a" / PARQUET_NAME)
    with pytest.raises(Exception, match="boom"):
        _build(out, {"a": {"n": 3, "fail": True}})
    assert _digest(out / "a" / PARQUET_NAME) == before
    assert [p.name for p in tmp_path.iterdir()] == ["toy"]  # no temp dirs left behind


def test_no_configs_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="configs"):
        _build(tmp_path / "x", {})
