"""The `findbench` command line: the command table, help, flag parsing and error handling.

Nothing heavy runs here: subcommands that would build or score are checked by replacing the
library function they call and looking at the arguments it received."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from findbench import cli
from findbench.constants import UsageError

WORKFLOW = (
    "build",
    "call",
    "export-functions",
    "interpret",
    "evaluate",
    "report",
    "compare",
    "backbone-report",
    "build-neuron-tests",
    "iia",
    "judge-data",
    "train-judge",
    "judge-card",
    "train-sae",
    "autointerp",
    "autointerp-merge",
    "autointerp-validate",
    "main",
)
# the judge commands' earlier names, removed (issue 31), and judge-report (issue 40: judge-card --rungs true,other)
OLD_NAMES = ("evaluator-data", "train-evaluator", "evaluator-report", "judge-report")


def _subcommands(parser) -> dict:
    (action,) = [a for a in parser._actions if a.dest == "command"]
    return action.choices


def test_table_lists_every_command_once_in_workflow_order():
    names = [name for name, *_ in cli.COMMANDS]
    assert tuple(names) == WORKFLOW
    choices = _subcommands(cli.make_parser())
    assert list(choices) == names


@pytest.mark.parametrize("command", OLD_NAMES)
def test_the_judge_commands_earlier_names_are_unknown(command, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--help"])
    assert exc.value.code == 2
    assert f"invalid choice: '{command}'" in capsys.readouterr().err.splitlines()[-1]


@pytest.mark.parametrize("command", WORKFLOW)
def test_help_of_each_subcommand(command, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert f"findbench {command}" in out
    assert "(default " in out or command in ("report", "train-judge", "autointerp-merge")


def test_train_judge_help_lists_the_training_flags(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["train-judge", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--lora-r", "--output-dir", "--judge-mode", "--seed", "--data-seed", "--learning-rate"):
        assert flag in out


def test_comma_separated_flags():
    # a config splits its comma-separated settings (stripped, empty items dropped), the default included
    from findbench._config import from_namespace
    from findbench.builders.config import BuildConfig
    from findbench.find.config import ExportFunctionsConfig

    assert from_namespace(ExportFunctionsConfig, cli.parse_args(["export-functions", "--out", "x"])).configs == [
        "numeric",
        "strings",
    ]
    assert from_namespace(BuildConfig, cli.parse_args(["build", "--configs", "strings, numeric"])).configs == [
        "strings",
        "numeric",
    ]
    assert BuildConfig().configs is None
    assert BuildConfig(configs="strings,, numeric ").configs == ["strings", "numeric"]


def test_renamed_flags_parse():
    args = cli.parse_args(["build-neuron-tests", "--span-judge", "regex:foo", "--tasks", "a,b"])
    assert args.span_judge == "regex:foo" and args.tasks == "a,b"
    assert cli.parse_args(["main", "--dataset-out", "d", "--out", "o"]).dataset_out == "d"
    args = cli.parse_args(["judge-card", "--judge", "embedded", "--out", "o", "--data", "b", "--evaluator-data", "ed"])
    assert (args.data, args.evaluator_data) == ("b", "ed")
    # the old spellings are gone (and no abbreviation stands in for them)
    for argv in (["build-neuron-tests", "--judge", "lm"], ["main", "--data", "d"]):
        with pytest.raises(SystemExit) as exc:
            cli.parse_args(argv)
        assert exc.value.code == 2


def test_build_neuron_tests_passes_the_span_judge(monkeypatch, tmp_path):
    import findbench.builders.neuron_test_sets as nts

    seen = {}
    monkeypatch.setattr(nts, "build", lambda cfg: seen.update(vars(cfg)) or cfg.out)
    assert (
        cli.main(
            [
                "build-neuron-tests",
                "--out",
                str(tmp_path),
                "--configs",
                "observational",
                "--span-judge",
                "regex:foo",
                "--layer",
                "1",
                "--neuron",
                "2",
                "--explanation",
                "x",
            ]
        )
        == 0
    )
    assert seen["span_judge"] == "regex:foo" and seen["configs"] == ["observational"] and seen["tasks"] is None
    assert (seen["layer"], seen["neuron"], seen["explanation"]) == (1, 2, "x")


def test_main_passes_the_dataset_folder(monkeypatch, tmp_path):
    import findbench.pipeline as pipeline

    seen = {}

    def fake_run_main(cfg):
        seen.update(asdict(cfg))
        (tmp_path / "o").mkdir()
        (tmp_path / "o" / "summary.md").write_text("# done\n")
        return {"reports": {}}

    monkeypatch.setattr(pipeline, "run_main", fake_run_main)
    assert (
        cli.main(
            [
                "main",
                "--dataset-out",
                str(tmp_path / "d"),
                "--out",
                str(tmp_path / "o"),
                "--interpreters",
                "oracle,random",
                "--rounds",
                "5",
                "--judge",
                "embedded",
                "--judge-mode",
                "pmi",
            ]
        )
        == 0
    )
    assert seen == {
        "dataset_out": str(tmp_path / "d"),
        "out": str(tmp_path / "o"),
        "seed": 0,
        "interpreters": ["oracle", "random"],
        "functions_per_category": 3,
        "lm_functions": 1,
        "rounds": 5,
        "max_tokens": 128,
        "judge": "embedded",
        "judge_mode": "pmi",
        "max_connections": 2,
    }
    # the old flags are gone: the main job never trains the judge
    with pytest.raises(SystemExit):
        cli.main(["main", "--skip-train"])


def test_iia_arguments(monkeypatch, tmp_path, capsys):
    import findbench.neuron_explanations.interventions as interventions

    seen = {}

    def fake_run_iia(cfg):
        seen.update(vars(cfg), tasks=cfg.task, ks=cfg.k_values, rankings=cfg.all_rankings())
        return [
            {
                "task": cfg.task[0],
                "layer": cfg.layers[0],
                "position": "last",
                "n_pairs": 8,
                "ks": cfg.k_values,
                "curves": {name: [0.5] * len(cfg.k_values) for name in seen["rankings"]},
            }
        ]

    monkeypatch.setattr(interventions, "run_iia", fake_run_iia)
    ranking = tmp_path / "r.json"
    ranking.write_text(json.dumps({"mine": [3, 1, 2]}))
    assert (
        cli.main(
            [
                "iia",
                "--task",
                "numbers/unit_conversion,x/y",
                "--layer",
                "0, 2",
                "--ks",
                "1,50",
                "--n-pairs",
                "8",
                "--rankings",
                "random",
                "--ranking-file",
                str(ranking),
            ]
        )
        == 0
    )
    assert seen["tasks"] == ["numbers/unit_conversion", "x/y"] and seen["layers"] == [0, 2]
    assert seen["ks"] == [1.0, 50.0] and seen["rankings"] == {"random": None, "mine": [3, 1, 2]}
    assert (seen["model"], seen["n_pairs"], seen["site"], seen["position"], seen["out"]) == (
        "embedded",
        8,
        "mlp_activation",
        "auto",
        None,
    )
    assert "K=50%:0.500" in capsys.readouterr().out
    assert cli.main(["iia", "--task", "t", "--layer", "zero"]) == 2
    assert "--layer and --ks take comma-separated numbers" in capsys.readouterr().err


def test_errors_are_one_line_unless_verbose(monkeypatch, capsys):
    import findbench.judge.card as card

    def boom(cfg, **kw):
        raise UsageError("--seed must be an int")

    monkeypatch.setattr(card, "judge_card", boom)
    argv = ["judge-card", "--judge", "embedded", "--out", "x"]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.splitlines()[-1] == "findbench judge-card: error: --seed must be an int"
    with pytest.raises(ValueError, match="seed"):
        cli.main(["-v", *argv])

    # a wrong type that findbench._checks refuses is the user's (a UsageError); any other TypeError is a bug
    # and keeps its traceback
    from findbench import _checks

    monkeypatch.setattr(card, "judge_card", lambda cfg, **kw: _checks.str_list("--categories", 3))
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith("findbench judge-card: error: --categories must be")
    monkeypatch.setattr(card, "judge_card", lambda cfg, **kw: None + 1)
    with pytest.raises(TypeError, match="unsupported operand"):
        cli.main(argv)


def test_unknown_flags_are_rejected():
    with pytest.raises(SystemExit) as exc:
        cli.parse_args(["build", "--bogus"])
    assert exc.value.code == 2
    # train-judge too (its flags are TrainArgs', spelled as every command's; HfArgumentParser's --lora_r is gone)
    with pytest.raises(SystemExit) as exc:
        cli.parse_args(["train-judge", "--lora_r", "4"])
    assert exc.value.code == 2 and cli.parse_args(["train-judge", "--lora-r", "4"]).lora_r == 4


def test_interpret_passes_its_config_and_has_no_engine_flag(monkeypatch, tmp_path, capsys):
    import findbench.interpret.run as run

    seen = {}
    monkeypatch.setattr(run, "run_interpretations", lambda cfg: seen.update(asdict(cfg)) or str(tmp_path))
    monkeypatch.setattr(run, "summarize_run", lambda out: [])
    assert cli.main(["interpret", "--interpreter", "oracle", "--method", "aia,milan", "--sample", "2"]) == 0
    assert seen["interpreter"] == "oracle" and seen["method"] == ["aia", "milan"] and seen["sample"] == 2
    assert seen["data"] is None and seen["rounds"] == 20 and seen["structured_outputs"] == "auto"
    assert "engine" not in seen
    seen.clear()
    # the removed --engine is an unknown flag now
    with pytest.raises(SystemExit) as exc:
        cli.main(["interpret", "--engine", "inspect", "--out", str(tmp_path / "out")])
    assert exc.value.code == 2 and "--engine" in capsys.readouterr().err
    assert not seen and not (tmp_path / "out").exists()


def test_switches_go_anywhere(monkeypatch):
    import findbench.interpret.evaluate as evaluate
    import findbench.interpret.report as report

    seen = {}
    monkeypatch.setattr(evaluate, "evaluate_run", lambda cfg: seen.update(asdict(cfg)) or {"table": ""})
    monkeypatch.setattr(report, "write_report", lambda cfg: seen.update(report=cfg.scores))
    assert cli.main(["evaluate", "--report", "r"]) == 0
    assert seen["run_dir"] == "r" and seen["report"] == "r/scores"


@pytest.mark.parametrize(
    "argv, flag, near",
    [
        (["interpret", "--interpreter", "embeded"], "--interpreter", "'embedded'"),
        (["evaluate", "RUN", "--judge", "embeded-evaluator"], "--judge", "'embedded-evaluator'"),
        (["main", "--interpreters", "oracle,randon"], "--interpreters", "'random'"),
        (["autointerp", "--explainer", "embeded"], "--explainer", "'embedded'"),
        (["autointerp", "--sae", "my-sae"], "--sae", None),
    ],
)
def test_misspelled_names_are_one_line_before_any_work(argv, flag, near, tmp_path, capsys):
    rc = cli.main([*argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and err.startswith(f"findbench {argv[0]}: error: {flag}:")
    if near:
        assert f"did you mean {near}" in err
    assert not (tmp_path / "out").exists()  # nothing written: the corrected command starts clean


def fake_hub_cache(root, repo_id):
    """A Hugging Face cache at ``root`` holding a snapshot of ``repo_id``."""
    snapshot = root / f"models--{repo_id.replace('/', '--')}" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    return root


def test_check_spec_accepts_what_can_name_a_model(tmp_path, monkeypatch):
    from findbench.constants import UsageError
    from findbench.models import check_spec

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE",
                        str(fake_hub_cache(tmp_path / "hub", "HuggingFaceTB/SmolLM2-135M-Instruct")))
    for spec in ("embedded", "HuggingFaceTB/SmolLM2-135M-Instruct", "http://127.0.0.1:8000/v1", str(tmp_path)):
        assert check_spec(spec, flag="--x") == spec
    assert check_spec("oracle", flag="--x", names=("oracle",)) == "oracle"
    with pytest.raises(UsageError, match="--x: unknown name 'org/model'"):
        check_spec("org/model", flag="--x", names=("a",), hub=False)
    with pytest.raises(UsageError, match="--x: "):
        check_spec("", flag="--x")


def test_cli_judge_card(monkeypatch, tmp_path, capsys):
    import findbench.judge.card as card_mod
    from findbench.cli import main
    from findbench.judge.card_doc import read_card
    from findbench.resources import data_path

    seen: dict = {}
    shipped = read_card(data_path("judge", "cards", "embedded"))

    def fake(cfg, **kw):
        seen.update(asdict(cfg))
        return shipped

    monkeypatch.setattr(card_mod, "judge_card", fake)
    assert (
        main(
            [
                "judge-card",
                "--judge",
                "embedded",
                "--judge-mode",
                "pmi",
                "--categories",
                "strings",
                "--functions-per-category",
                "all",
                "--seed",
                "3",
                "--judge-cache",
                str(tmp_path / "c.sqlite"),
                "--out",
                str(tmp_path / "card"),
            ]
        )
        == 0
    )
    assert seen["judge"] == "embedded" and seen["judge_mode"] == "pmi" and seen["categories"] == ["strings"]
    assert seen["functions_per_category"] is None and seen["seed"] == 3 and seen["out"] == str(tmp_path / "card")
    assert seen["judge_cache"] == str(tmp_path / "c.sqlite") and seen["rungs"] is None and seen["baseline"] is None
    out = capsys.readouterr().out
    assert "| rung | strings | entities | relations | all |" in out and "| true | " in out
    assert main(["judge-card", "--judge", "embedded", "--out", "x"]) == 0 and seen["functions_per_category"] == 8
    # FIND's Table A3: two rungs and a baseline in two modes
    assert (
        main(
            [
                "judge-card",
                "--judge",
                "embedded-evaluator",
                "--out",
                "x",
                "--rungs",
                "true,other",
                "--baseline",
                "embedded",
                "--baseline-mode",
                "logprob,pmi",
            ]
        )
        == 0
    )
    assert (seen["rungs"], seen["baseline"], seen["baseline_mode"]) == (
        ["true", "other"],
        "embedded",
        ["logprob", "pmi"],
    )
    with pytest.raises(SystemExit):
        main(["judge-card", "--judge", "embedded", "--functions-per-category", "1", "--out", "x"])
    capsys.readouterr()
    assert main(["judge-card", "--judge", "embedded", "--out", "x", "--rungs", "other"]) == 2
    assert capsys.readouterr().err.strip() == (
        "findbench judge-card: error: --rungs must include 'true' (every other rung is compared with it), got ['other']"
    )


def _built_find(root, rows: list[dict], *, seed: int | str = 0, source: str = "procedural"):
    """A ``find`` folder under ``root`` as `findbench build` leaves it: parquet, card and sidecar."""
    import datasets

    from findbench import schema

    folder = root / "find" / "numeric"
    folder.mkdir(parents=True)
    datasets.Dataset.from_list(rows, features=schema.features()).to_parquet(str(folder / "test-00000-of-00001.parquet"))
    (root / "find" / "README.md").write_text(
        "---\nconfigs:\n- config_name: numeric\n  data_files:\n  - split: test\n    path: numeric/test-*\n---\n",
        encoding="utf-8",
    )
    prov = {"source": source, **({"seed": seed} if source == "procedural" else {})}
    (root / "find" / "findbench.json").write_text(json.dumps({"configs": {"numeric": {"provenance": prov}}}))


def test_call_reads_the_built_find_folder_when_present(monkeypatch, tmp_path, capsys, caplog):
    import logging

    from findbench.find import numeric, rows
    from findbench.find.export import format_pairs

    # ./find holds another function under the id numeric/f00500, so its answers tell where the row came from
    other = numeric.generate_row(503, 1000, 0) | {"function_id": "numeric/f00500"}
    ys = [numeric.make_function(other)(x) for x in (3.0, 7.0)]
    assert ys != [numeric.make_function(numeric.generate_row(500, 1000, 0))(x) for x in (3.0, 7.0)]
    _built_find(tmp_path, [other])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rows, "generate_rows", lambda *a, **k: pytest.fail("generated rows"))
    monkeypatch.setattr(numeric, "generate_row", lambda *a, **k: pytest.fail("generated a row"))
    caplog.set_level(logging.INFO, logger="findbench.cli")
    assert cli.main(["call", "numeric/f00500", "3", "7"]) == 0
    assert capsys.readouterr().out.strip() == format_pairs([3.0, 7.0], ys)
    assert "call: reading numeric from ./find (written by `findbench build`" in caplog.text
    # an id past ./find's rows names them
    assert cli.main(["call", "numeric/f00501", "3"]) == 2
    assert (
        "no function 'numeric/f00501' in numeric of find (1 functions, numeric/f00500 to numeric/f00500)"
        in capsys.readouterr().err
    )


@pytest.mark.parametrize(
    "built_seed, source, used", [(0, "procedural", "find"), (4, "procedural", None), ("-", "find-v1", "find")]
)
def test_call_uses_find_only_for_its_seed_and_else_regenerates(built_seed, source, used, monkeypatch, tmp_path, caplog):
    import logging

    import findbench.find
    from findbench.find import numeric

    _built_find(tmp_path, [numeric.generate_row(503, 1000, 0)], seed=built_seed, source=source)
    monkeypatch.chdir(tmp_path)
    got = []
    monkeypatch.setattr(findbench.find, "load_function", lambda fid, **kw: got.append(kw["data"]) or (lambda x: x))
    caplog.set_level(logging.INFO, logger="findbench.cli")
    assert cli.main(["call", "numeric/f00001", "1"]) == 0
    assert cli.main(["call", "strings/f00001", "a"]) == 0  # ./find holds no strings
    assert got == [used, None]
    assert "holds no strings config; regenerating it from --seed 0" in caplog.text
    assert ("holds numeric of seed 4, not --seed 0; regenerating" in caplog.text) == (used is None)
    assert cli.main(["call", "numeric/f00001", "1", "--data", "elsewhere"]) == 0
    assert got[-1] == "elsewhere"


def test_call_refuses_an_id_past_the_category_at_once(monkeypatch, tmp_path, capsys):
    from findbench.find import numeric, rows

    monkeypatch.chdir(tmp_path)  # no ./find
    monkeypatch.setattr(rows, "generate_rows", lambda *a, **k: pytest.fail("generated rows"))
    monkeypatch.setattr(numeric, "generate_row", lambda *a, **k: pytest.fail("generated a row"))
    assert cli.main(["call", "numeric/f99999", "1", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "findbench call: error: function: no function 'numeric/f99999': numeric has 1000 functions, "
        "numeric/f00000 to numeric/f00999"
    )


UNCACHED = "findbench-tests/no-such-model"


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["interpret", "--interpreter", UNCACHED], "--interpreter"),
        (["interpret", "--interpreter", f"hf/{UNCACHED}"], "--interpreter"),
        (["evaluate", "RUN", "--judge", UNCACHED], "--judge"),
        (["main", "--interpreters", f"oracle,{UNCACHED}"], "--interpreters"),
        (["autointerp", "--model", UNCACHED], "--model"),
        (["autointerp", "--explainer", UNCACHED], "--explainer"),
        (["autointerp", "--scorer", UNCACHED], "--scorer"),
        (["backbone-report", "--backend", "lm", "--model", UNCACHED], "--model"),
        (["iia", "--task", "numbers/unit_conversion", "--layer", "1", "--model", UNCACHED], "--model"),
        (["judge-card", "--judge", UNCACHED], "--judge"),
    ],
)
def test_an_uncached_hub_id_is_refused_in_one_line_without_the_network(argv, flag, tmp_path, monkeypatch, capsys):
    import socket

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    connects = []
    monkeypatch.setattr(socket.socket, "connect", lambda self, address: connects.append(address) or pytest.fail(
        f"network call to {address}"))
    rc = cli.main([*argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"findbench {argv[0]}: error: {flag}: Hub model {UNCACHED!r} is not in the local Hugging "
                          "Face cache")
    assert f"`huggingface-cli download {UNCACHED}`" in err and "HF_HUB_OFFLINE=0" in err
    assert not connects and not (tmp_path / "out").exists()


def test_a_cached_or_downloadable_hub_id_passes(tmp_path, monkeypatch):
    from findbench.constants import UsageError
    from findbench.models import check_spec

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(fake_hub_cache(tmp_path / "hub", UNCACHED)))
    assert check_spec(UNCACHED, flag="--x") == UNCACHED
    assert check_spec(f"hf/{UNCACHED}", flag="--x", providers=lambda head: head == "hf") == f"hf/{UNCACHED}"
    assert check_spec("openai/gpt-4o", flag="--x", providers=lambda head: head == "openai") == "openai/gpt-4o"
    with pytest.raises(UsageError, match="--x: Hub model 'org/other' is not in the local"):
        check_spec("org/other", flag="--x")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # downloads allowed: from_pretrained fetches it
    assert check_spec("org/other", flag="--x") == "org/other"
