"""Hub publishing: validation and staging happen before any network call."""

from pathlib import Path

import pytest

from findbench import hub
from findbench.cli import main
from tests._paths import REPO


@pytest.fixture(scope="module")
def strings_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("hub") / "find"
    assert main(["build", "--configs", "strings", "--out", str(out)]) == 0
    return out


class RecordingApi:
    """Stands in for HfApi offline: records what publish asks of the Hub."""

    def __init__(self):
        self.calls = []

    def create_repo(self, repo_id, **kw):
        self.calls.append(("create_repo", repo_id, kw["repo_type"], kw.get("space_sdk")))
        return f"https://hub.example/{repo_id}"

    def upload_folder(self, **kw):
        files = sorted(p.name for p in Path(kw["folder_path"]).rglob("*") if p.is_file())
        self.calls.append(("upload_folder", kw["repo_id"], kw["repo_type"], files))


def test_plan_dataset_stages_a_copy(strings_folder):
    up = hub.plan_dataset(strings_folder, "org/find")
    assert up.repo_type == "dataset"
    assert "strings/test-00000-of-00001.parquet" in up.files and "README.md" in up.files
    assert (
        up.folder != strings_folder
        and (up.folder / "README.md").read_text() == (strings_folder / "README.md").read_text()
    )


def test_plan_dataset_rejects_bad_cards(tmp_path, strings_folder):
    with pytest.raises(FileNotFoundError, match="README"):
        hub.plan_dataset(tmp_path, "org/find")
    (tmp_path / "README.md").write_text("no front matter\n")
    with pytest.raises(ValueError, match="front matter"):
        hub.plan_dataset(tmp_path, "org/find")
    (tmp_path / "README.md").write_text("---\nlicense: mit\nconfigs:\n- config_name: numeric\n---\n")
    with pytest.raises(ValueError, match="numeric"):
        hub.plan_dataset(tmp_path, "org/find")
    with pytest.raises(ValueError, match="repo_id"):
        hub.plan_dataset(strings_folder, "no-org")


def test_plan_metric_and_publish_order(strings_folder):
    metric = hub.plan_metric(REPO / "metrics" / "find_nmse", "org/find_nmse")
    assert metric.repo_type == "space" and metric.space_sdk == "gradio"
    assert {"find_nmse.py", "README.md", "app.py", "requirements.txt"} <= set(metric.files)
    api = RecordingApi()
    urls = hub.publish([hub.plan_dataset(strings_folder, "org/find"), metric], api=api)
    assert urls == ["https://hub.example/org/find", "https://hub.example/org/find_nmse"]
    assert [c[:3] for c in api.calls] == [
        ("create_repo", "org/find", "dataset"),
        ("upload_folder", "org/find", "dataset"),
        ("create_repo", "org/find_nmse", "space"),
        ("upload_folder", "org/find_nmse", "space"),
    ]
    assert "test-00000-of-00001.parquet" in api.calls[1][3]


def test_plan_checkpoint_requires_weights_and_card(tmp_path):
    with pytest.raises(FileNotFoundError, match="weights"):
        hub.plan_checkpoint(tmp_path, "org/judge")
    (tmp_path / "adapter_model.safetensors").write_bytes(b"x")
    (tmp_path / "adapter_config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="model card"):
        hub.plan_checkpoint(tmp_path, "org/judge")
    (tmp_path / "README.md").write_text("---\nlicense: apache-2.0\n---\n# judge\n")
    (tmp_path / "checkpoint-10").mkdir()
    (tmp_path / "checkpoint-10" / "optimizer.bin").write_bytes(b"x")
    up = hub.plan_checkpoint(tmp_path, "org/judge")
    assert sorted(up.files) == ["README.md", "adapter_config.json", "adapter_model.safetensors"]


def test_push_to_hub_dry_run(strings_folder, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("push_to_hub", REPO / "push_to_hub.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--org", "org", "--datasets", str(strings_folder), "--metrics", "find_nmse", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dataset  org/find" in out and "space    org/find_nmse" in out
