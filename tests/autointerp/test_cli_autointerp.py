"""`findbench autointerp` on the command line: defaults in --help, the settings it passes on,
and what it prints (scores with interval and floors, "resumed from" on a rerun)."""

from __future__ import annotations

import pytest

from findbench import cli
from findbench.autointerp import run as run_mod
from findbench.autointerp.config import AutoInterpConfig
from findbench.autointerp.results import AutoInterpResults, EvalMetrics


def test_help_shows_every_default_and_saebenchs_values(capsys):
    with pytest.raises(SystemExit):
        cli.main(["autointerp", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for shown in (
        "(default 10)",
        "(default 100000)",
        "(default auto)",
        "(default embedded)",
        "(default outputs/autointerp)",
        "SAEBench's values: --n-latents 1000, --total-tokens 2000000, --scorers detection",
        "--run-id",
        "--structured-outputs",
        "--latents",
        "--seed",
        "--context-size",
    ):
        assert shown in text, shown


def _result(out, hits=0, evidence=None, **detection):
    metrics = {
        "autointerp": {
            "autointerp_score": 0.75,
            "autointerp_std_dev": 0.1,
            "n_unparsed": 0,
            "n": 9,
            "ci": [0.7, 0.8],
            "floors": {"none": 0.714, "all": 0.286},
            "best_floor": "none",
            "margin": 0.036,
            "n_degenerate": 0,
            "n_explanation_truncated": 0,
            **detection,
        },
        "likelihood": {
            "likelihood_score": 0.6,
            "likelihood_std_dev": 0.2,
            "n": 9,
            "ci": [0.5, 0.7],
            "floors": {"chance": 0.5},
            "best_floor": "chance",
            "margin": 0.1,
            "n_degenerate": 0,
            "n_explanation_truncated": 0,
        },
    }
    results = AutoInterpResults(eval_type_id="autointerp", eval_config={}, datetime_epoch_millis=0,
                                findbench_version="0", eval_result_metrics=EvalMetrics.from_json(metrics),
                                eval_result_details=[], eval_result_unstructured={}, skipped_latents={},
                                latents_file="latents.json", run_id=None, shard=None)
    return run_mod.AutoInterpOutput(
        "m", "x", "blocks.6.hook_resid_post", 6, renderer=None, results=results,
        applied={"explainer": True, "scorer": True},
        files={"results": f"{out}/x_eval_results.json", "summary": f"{out}/m_layer6_features_summary.csv"},
        resumed={
            "evidence": evidence,
            "firing_counts": None,
            "lm_cache": {"path": f"{out}/lm_cache.sqlite", "hits": hits, "misses": 20 - hits},
        },
    )


def test_defaults_reach_the_run_and_the_summary_is_printed(monkeypatch, capsys, tmp_path):
    seen = {}

    def fake(command):
        seen["command"] = command
        return _result(tmp_path)

    monkeypatch.setattr(run_mod, "run_autointerp", fake)
    assert cli.main(["autointerp", "--out", str(tmp_path)]) == 0
    cfg = seen["command"].config
    assert cfg == AutoInterpConfig.quick() and (cfg.n_latents, cfg.total_tokens) == (10, 100_000)
    assert cfg.scorers == ["detection", "embedding", "likelihood"] and cfg.structured_outputs == "auto"
    assert seen["command"].run_id is None and seen["command"].out == str(tmp_path)
    out = capsys.readouterr().out
    assert "resumed" not in out
    assert "autointerp: 0.750 [0.700, 0.800] (n=9); floors: none 0.714, all 0.286; margin over none: +0.036" in out
    assert "likelihood: 0.600 [0.500, 0.700] (n=9); floors: chance 0.500; margin over chance: +0.100" in out
    assert "structured outputs auto: explainer on, scorer on" in out


def test_a_rerun_says_what_it_resumed_from(monkeypatch, capsys, tmp_path):
    seen = {}
    monkeypatch.setattr(
        run_mod,
        "run_autointerp",
        lambda command: seen.update(command=command)
        or _result(tmp_path, hits=20, evidence=f"{tmp_path}/evidence_1.json"),
    )
    assert (
        cli.main(
            [
                "autointerp",
                "--out",
                str(tmp_path),
                "--run-id",
                "b",
                "--structured-outputs",
                "off",
                "--latents",
                "1,2",
                "--seed",
                "3",
                "--scorers",
                "detection,fuzz",
            ]
        )
        == 0
    )
    cfg = seen["command"].config
    assert cfg.n_latents == AutoInterpConfig().n_latents  # unused with --latents: SAEBench's value
    assert (cfg.override_latents, cfg.random_seed, cfg.scorers, seen["command"].run_id) == (
        [1, 2],
        3,
        ["detection", "fuzz"],
        "b",
    )
    out = capsys.readouterr().out
    assert (
        f"resumed from {tmp_path}: evidence {tmp_path}/evidence_1.json; "
        f"20 of 20 LM answers from {tmp_path}/lm_cache.sqlite"
        in out
    )


def test_latents_and_n_latents_are_refused_together(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(run_mod, "run_autointerp", lambda *a, **kw: pytest.fail("ran"))
    for n_latents in (["--n-latents", "10"], ["--n-latents=5"]):
        assert cli.main(["autointerp", "--out", str(tmp_path), "--latents", "1,2", *n_latents]) == 2
        assert "--latents and --n-latents are mutually exclusive" in capsys.readouterr().err


def test_degenerate_and_cut_explanations_are_printed_with_the_scores(monkeypatch, capsys, tmp_path):
    result = _result(tmp_path, n_degenerate=9, n_explanation_truncated=2)
    monkeypatch.setattr(run_mod, "run_autointerp", lambda *a, **kw: result)
    assert cli.main(["autointerp", "--out", str(tmp_path), "--max-explanation-tokens", "64"]) == 0
    out = capsys.readouterr().out
    assert "unparsed answers: 0; degenerate explanations: 9 of 9; explanations cut to the length cap: 2" in out
    assert "likelihood: 0.600 [0.500, 0.700] (n=9); floors: chance 0.500; margin over chance: +0.100\n" in out


def test_autointerp_validate_scores_the_probes_and_prints_the_tables(monkeypatch, capsys, tmp_path):
    from findbench.autointerp import validation

    seen = {}

    def fake(cmd):
        seen["cmd"] = cmd
        return {"scorers": {}, "seconds": {"total": 1.0}}

    monkeypatch.setattr(validation, "planted_validation", fake)
    monkeypatch.setattr(validation, "validation_tables", lambda result: "TABLES")
    out = tmp_path / "p.json"
    assert (
        cli.main(
            [
                "autointerp-validate",
                "--model",
                "minilm",
                "--scorers",
                "embedding",
                "--probes",
                "hedged,padded",
                "--max-explanation-tokens",
                "0",
                "--seed",
                "3",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    cmd = seen["cmd"]
    assert cmd.scorers == ["embedding"] and cmd.probes == ["hedged", "padded"] and cmd.model == "minilm"
    assert cmd.max_explanation_tokens == 0 and cmd.out == str(out) and cmd.rules is None and cmd.config is None
    assert cmd.seed == 3 and cmd.total_tokens == 200_000
    assert capsys.readouterr().out.startswith("TABLES\n")
    assert (
        cli.main(
            [
                "autointerp-validate",
                "--model",
                "minilm",
                "--scorers",
                "embedding",
                "--max-explanation-tokens",
                "-1",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert "--max-explanation-tokens must be ≥ 0" in capsys.readouterr().err
