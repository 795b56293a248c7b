"""AutoInterp as an Inspect task (``inspect eval findbench/autointerp``): the explainer and scorer
are model roles, and the task reaches the path ``findbench autointerp`` runs, so both write the same
result files. The LMs are scripted (:class:`tests.autointerp.test_run.ScriptedLM`) or Inspect's
``mockllm`` (a provider with no log-probabilities); the run is the synthetic SAE on a small corpus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from findbench.autointerp.commands import AutoInterpCommand, autointerp_command
from findbench.autointerp.config import AutoInterpConfig
from findbench.autointerp.inspect_task import EXPLAINER_ROLE, SCORER_ROLE, autointerp
from findbench.autointerp.run import run_autointerp
from findbench.constants import UsageError

from .test_run import ScriptedLM, _cfg

pytestmark = pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning")


def _settings(corpus, out, **kw):
    """The task's settings (a setting given as None is left out)."""
    settings = _cfg(dataset=str(corpus), **{"n_latents": 6, **kw})
    settings = {"model": "minilm", "sae": "synthetic", "out": str(out), **settings}
    return {k: v for k, v in settings.items() if v is not None}


def _eval(corpus, tmp_path, name, *, model="none", roles=None, **kw):
    """One eval of the registered task (as `inspect eval findbench/autointerp -T …`); the log."""
    [log] = inspect_eval("findbench/autointerp", task_args=_settings(corpus, tmp_path / name, **kw), model=model,
                         model_roles=roles, log_dir=str(tmp_path / "logs" / name), display="none")
    return log


def _role(lm):
    return get_model(f"findbench/{lm.name}", lm=lm, memoize=False)


def _mock(text: str, n: int = 40):
    """Inspect's mockllm answering ``text`` ``n`` times (with usage, so that it counts no tokens: its
    token counter fetches an encoding from the internet)."""
    output = ModelOutput.from_content("mockllm/model", text)
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return get_model("mockllm/model", custom_outputs=[output] * n, memoize=False)


def _files(files: dict) -> dict:
    """The results JSON (without the time it was written) and latents.json of a run's ``files``."""
    results = json.loads(open(files["results"]).read())
    results.pop("datetime_epoch_millis")
    return {"results": results, "latents": json.loads(open(files["latents"]).read())}


def _scored(log) -> list:
    """The samples of a log whose latent was scored, in position order."""
    return sorted((s for s in log.samples if s.scores), key=lambda s: s.id)


def test_one_sample_per_latent_of_the_files_findbench_autointerp_writes(corpus, tmp_path):
    log = _eval(corpus, tmp_path, "task", roles={EXPLAINER_ROLE: _role(ScriptedLM())})
    assert log.status == "success", log.error
    assert sorted(s.id for s in log.samples) == [1, 2, 3, 4, 5, 6]  # n_latents=6: one sample each
    direct = run_autointerp(AutoInterpCommand(model="minilm", sae="synthetic", out=tmp_path / "direct",
                                              explainer=ScriptedLM(),
                            config=AutoInterpConfig(**_cfg(dataset=str(corpus), n_latents=6)), progress=False))
    assert _files(log.samples[0].metadata["files"]) == _files(direct.files)  # the run's files, as the CLI's
    records = _files(direct.files)["latents"]["latents"]
    assert len(records) == 6
    for sample in sorted(log.samples, key=lambda s: s.id):
        rec = records[sample.id - 1]
        assert sample.metadata["latent"] == rec["latent"] and sample.metadata["record"]["n_fired"] == rec["n_fired"]
        if rec["skipped"] is not None:
            assert not sample.scores and sample.output.completion == f"skipped: {rec['skipped']}"
            continue
        [score] = sample.scores.values()
        assert sample.output.completion == score.answer == rec["explanation"]
        assert score.value == {"autointerp": rec["scores"]["detection"], "embedding": rec["scores"]["embedding"]}
        assert score.metadata["latent"] == rec["latent"] and score.metadata["dashboard"] is None  # no report asked
    metrics = direct.results.eval_result_metrics.to_json()
    assert metrics["autointerp"]["n"] == len(_scored(log)) >= 4
    # the eval's results: each scorer's mean over the latents, the run's score
    results = {s.name: s.metrics["mean"].value for s in log.results.scores}
    assert results == pytest.approx({"autointerp": metrics["autointerp"]["autointerp_score"],
                                     "embedding": metrics["embedding"]["embedding_score"]})


def test_named_latents_and_the_dashboard(corpus, tmp_path):
    log = _eval(corpus, tmp_path, "named", roles={EXPLAINER_ROLE: _role(ScriptedLM())}, report=True,
                latents="5,2", n_latents=None)
    assert log.status == "success", log.error
    samples = sorted(log.samples, key=lambda s: s.id)
    assert [s.input for s in samples] == [f"Explain and score latent {x} of SAE synthetic on minilm." for x in (5, 2)]
    assert [s.metadata["latent"] for s in samples] == [5, 2]
    report = log.samples[0].metadata["files"]["report"]
    for sample in _scored(log):
        link = sample.scores["autointerp_scores"].metadata["dashboard"]
        assert link == f"{Path(report).resolve().as_uri()}#latent-{sample.metadata['latent']}"
        assert f'id="latent-{sample.metadata["latent"]}"' in Path(report).read_text()


def test_roles_pick_the_explainer_and_the_scorer(corpus, tmp_path):
    explainer, scorer, model = ScriptedLM(), ScriptedLM(), ScriptedLM()
    log = _eval(corpus, tmp_path, "roles", model=_role(model),
                roles={EXPLAINER_ROLE: _role(explainer), SCORER_ROLE: _role(scorer)})
    assert log.status == "success", log.error
    n = len(_scored(log))
    assert (explainer.calls, scorer.calls, model.calls) == (n, n, 0)  # one explanation, one detection prompt each
    # without roles the eval's model explains and scores
    log = _eval(corpus, tmp_path, "model", model=_role(model))
    assert log.status == "success", log.error
    assert model.calls == 2 * n


def test_any_inspect_model_explains_through_inspect(corpus, tmp_path):
    """mockllm (no log-probabilities) writes the explanations; a findbench model scores them."""
    said = "This latent fires on digits."
    log = _eval(corpus, tmp_path, "mock", roles={EXPLAINER_ROLE: _mock(said), SCORER_ROLE: _role(ScriptedLM())})
    assert log.status == "success", log.error
    files = log.samples[0].metadata["files"]
    records = [r for r in json.loads(open(files["latents"]).read())["latents"] if r.get("explanation") is not None]
    assert records and {r["explainer_answer"] for r in records} == {said}  # the explanation: it parsed
    # the fuzz scorer reads next-token log-probabilities, which mockllm does not give: the error names the role
    log = _eval(corpus, tmp_path, "fuzz", scorers="detection,fuzz",
                roles={EXPLAINER_ROLE: _role(ScriptedLM()), SCORER_ROLE: _mock("None")})
    assert log.status == "error" and "--model-role scorer=mockllm/model" in log.error.message


def test_task_settings_are_findbench_autointerps(tmp_path):
    command = autointerp_command({"sae": "synthetic", "latents": 5, "seed": 3, "context_size": 64})
    config = command.config
    assert (command.sae, config.override_latents, config.random_seed, config.llm_context_size) == \
        ("synthetic", [5], 3, 64)
    assert config.n_latents == AutoInterpConfig().n_latents  # unused with latents: SAEBench's value, as the CLI keeps
    assert autointerp_command({}).config == AutoInterpConfig.quick() != AutoInterpConfig()  # the command line's
    assert autointerp_command({"n_latents": 4}).config == AutoInterpConfig.quick(n_latents=4)
    with pytest.raises(UsageError, match=r"^-T bogus: findbench/autointerp has no such argument"):
        autointerp(bogus=1)
    with pytest.raises(UsageError, match="^-T n_latnts: .* did you mean 'n_latents'"):
        autointerp(n_latnts=4)
    with pytest.raises(UsageError, match="^-T latents and -T n_latents are mutually exclusive"):
        autointerp(latents="1,2", n_latents=4)
    with pytest.raises(UsageError, match="^-T shard: must be I/N"):
        autointerp(shard="2/2")
    with pytest.raises(UsageError, match="^-T n_latents: must be ≥ 1, got 0"):
        autointerp(n_latents=0)
    assert [s.id for s in autointerp(sae="synthetic", latents="5,1,9,4", shard="1/2").dataset] == [1, 2]


def test_inspect_eval_refuses_a_misspelled_role_in_one_message(tmp_path):
    inspect_cli = Path(sys.executable).with_name("inspect")
    if not inspect_cli.is_file():
        pytest.skip("the inspect command is not installed beside this Python")
    cmd = [str(inspect_cli), "eval", "findbench/autointerp", "-T", "sae=synthetic", "--model", "none",
           "--model-role", "explainer=findbench/embeded", "--log-dir", str(tmp_path / "logs")]
    env = {**os.environ, "INSPECT_DISPLAY": "plain"}  # display "none" would quiet the console it prints on
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    output = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0 and "Traceback" not in output, output
    assert "--model-role explainer=findbench/embeded: unknown model 'embeded'" in output
    assert "did you mean 'embedded'?" in output and not (tmp_path / "logs").exists()
