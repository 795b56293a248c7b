"""AutoInterp as an Inspect task (``inspect eval findbench/autointerp``): the explainer and scorer
are model roles, and the task reaches the path ``findbench autointerp`` runs, so both write the same
result files. The LMs are scripted (:class:`tests.autointerp.test_run.ScriptedLM`) or Inspect's
``mockllm`` (a provider with no log-probabilities); the run is the synthetic SAE on a small corpus."""

from __future__ import annotations

import json

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from findbench.autointerp.commands import autointerp_configs
from findbench.autointerp.config import QUICK_DEFAULTS, AutoInterpConfig
from findbench.autointerp.inspect_task import EXPLAINER_ROLE, SCORER_ROLE, autointerp
from findbench.autointerp.run import run_autointerp
from findbench.constants import UsageError

from .test_run import ScriptedLM, _cfg

pytestmark = pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning")


def _settings(corpus, out, **kw):
    return {"model": "minilm", "sae": "synthetic", "out": str(out), **_cfg(dataset=str(corpus), n_latents=6, **kw)}


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


def _files(result) -> dict:
    """The results JSON (without the time it was written) and latents.json of a run."""
    files = result["files"]
    results = json.loads(open(files["results"]).read())
    results.pop("datetime_epoch_millis")
    return {"results": results, "latents": json.loads(open(files["latents"]).read())}


def test_the_task_writes_the_files_findbench_autointerp_writes(corpus, tmp_path):
    log = _eval(corpus, tmp_path, "task", roles={EXPLAINER_ROLE: _role(ScriptedLM())})
    assert log.status == "success", log.error
    [score] = log.samples[0].scores.values()
    direct = run_autointerp(model="minilm", sae="synthetic", out=tmp_path / "direct", explainer=ScriptedLM(),
                            config=AutoInterpConfig(**_cfg(dataset=str(corpus), n_latents=6)), progress=False)
    assert _files(score.metadata) == _files(direct)
    metrics = direct["eval_result_metrics"]
    assert score.value == {"autointerp": metrics["autointerp"]["autointerp_score"],
                           "autointerp_margin": metrics["autointerp"]["margin"],
                           "embedding": metrics["embedding"]["embedding_score"],
                           "embedding_margin": metrics["embedding"]["margin"]}
    assert score.metadata["eval_result_metrics"] == metrics and metrics["autointerp"]["n"] >= 4
    assert {s.name for s in log.results.scores} == set(score.value)  # each key's mean in the eval's results


def test_roles_pick_the_explainer_and_the_scorer(corpus, tmp_path):
    explainer, scorer, model = ScriptedLM(), ScriptedLM(), ScriptedLM()
    log = _eval(corpus, tmp_path, "roles", model=_role(model),
                roles={EXPLAINER_ROLE: _role(explainer), SCORER_ROLE: _role(scorer)})
    assert log.status == "success", log.error
    n = log.samples[0].scores["autointerp_scores"].metadata["eval_result_metrics"]["autointerp"]["n"]
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
    files = log.samples[0].scores["autointerp_scores"].metadata["files"]
    records = [r for r in json.loads(open(files["latents"]).read())["latents"] if r.get("explanation") is not None]
    assert records and {r["explainer_answer"] for r in records} == {said}  # the explanation: it parsed
    # the fuzz scorer reads next-token log-probabilities, which mockllm does not give: the error names the role
    log = _eval(corpus, tmp_path, "fuzz", scorers="detection,fuzz",
                roles={EXPLAINER_ROLE: _role(ScriptedLM()), SCORER_ROLE: _mock("None")})
    assert log.status == "error" and "--model-role scorer=mockllm/model" in log.error.message


def test_task_settings_are_findbench_autointerps(tmp_path):
    command, config = autointerp_configs({"sae": "synthetic", "latents": 5, "seed": 3, "context_size": 64})
    assert (command.sae, config.override_latents, config.random_seed, config.llm_context_size) == \
        ("synthetic", [5], 3, 64)
    assert config.n_latents == AutoInterpConfig().n_latents  # unused with latents: SAEBench's value, as the CLI keeps
    _, config = autointerp_configs({})
    assert {k: getattr(config, k) for k in QUICK_DEFAULTS} == QUICK_DEFAULTS  # the command line's defaults
    with pytest.raises(UsageError, match=r"unknown settings \['bogus'\]"):
        autointerp(bogus=1)
    with pytest.raises(UsageError, match="--latents and --n-latents are mutually exclusive"):
        autointerp(latents="1,2", n_latents=4)
    with pytest.raises(UsageError, match="shard must be I/N"):
        autointerp(shard="2/2")
