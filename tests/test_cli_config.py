"""One definition per setting: every flag of `findbench` is a field of the config its library
function takes, with the same default and help; parsing imports no model library, and a bad
flag is refused before any data, model or SAE is touched."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import typing

import pytest

from findbench import cli
from findbench._config import field_default, flag, flag_fields
from findbench.constants import UsageError

#: Libraries that parsing and refusing a flag must not import.
HEAVY = ("torch", "transformers", "inspect_ai", "datasets", "sae_lens")


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in cli.make_parser()._actions if a.dest == "command"]
    return action.choices


def _defaults(config: type) -> dict[str, tuple[object, dataclasses.Field]]:
    """Each flag of ``config`` (its sub-configs' too): its default (a sub-config's: from the field's default
    instance, such as ``AutoInterpConfig.quick()``) and its field."""
    out: dict[str, tuple[object, dataclasses.Field]] = {}
    hints = typing.get_type_hints(config)
    for f in dataclasses.fields(config):
        if f.init and dataclasses.is_dataclass(hints[f.name]):
            values = dataclasses.asdict(field_default(f))
            out |= {name: (values[name], g) for name, (_, g) in _defaults(hints[f.name]).items()}
        elif f.init and "help" in f.metadata:
            default = field_default(f)
            out[f.name] = (None if default is dataclasses.MISSING else default, f)
    return out


@pytest.mark.parametrize("name, command", [(name, command) for name, command, _ in cli.COMMANDS])
def test_every_flag_is_a_config_field_with_its_default(name, command):
    parser = _subparsers()[name]
    actions: dict[str, argparse.Action] = {}
    for action in parser._actions:  # a switch's --no-... shares its dest; the first action holds the default
        if action.dest != "help":
            actions.setdefault(action.dest, action)
    expected = _defaults(command)
    assert sorted(actions) == sorted(expected)  # no flag beside the config, no field without a flag
    assert sorted(expected) == sorted(f.name for f in flag_fields(command))
    for flag_name, (default, f) in expected.items():
        assert actions[flag_name].default == default, f"{name} --{flag_name}"
        assert actions[flag_name].help == f.metadata["help"]


def test_a_no_flag_has_its_own_help(capsys):
    """A switch that defaults to True also has --no-...: its help says what turning it off does
    (the field's no_help, else "don't <help>"), never the positive flag's words."""
    from findbench.judge.config import make_parser

    parsers = {**{name: p for name, p in _subparsers().items() if name != "train-judge"}, "train-judge": make_parser()}
    seen = 0
    for name, parser in parsers.items():
        by_dest: dict[str, list[argparse.Action]] = {}
        for action in parser._actions:
            by_dest.setdefault(action.dest, []).append(action)
        for positive, *negative in (acts for acts in by_dest.values() if len(acts) > 1):
            (no,) = negative
            assert all(o.lstrip("-").startswith("no") for o in no.option_strings), (name, no.option_strings)
            assert no.help and no.help != positive.help, (name, no.option_strings)
            seen += 1
    assert seen >= 3  # train-sae --no-resume, autointerp --no-use-demos-in-explanation, train-judge --no-hub-private
    with pytest.raises(SystemExit):
        cli.main(["autointerp", "--help"])
    assert "--no-use-demos-in-explanation\n                        don't show the explainer" in capsys.readouterr().out


def test_version(capsys):
    from findbench import __version__

    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out == f"findbench {__version__}\n"


def test_only_autointerp_changes_a_default_on_purpose():
    from findbench.autointerp.config import AutoInterpConfig

    quick = AutoInterpConfig.quick()
    assert cli.AutoInterpCommand().config == quick  # the parser's defaults are the config's own
    for key, value in AutoInterpConfig.QUICK.items():  # the help names SAEBench's value
        assert f"--{key.replace('_', '-')} {getattr(AutoInterpConfig(), key)}".replace("['detection']", "detection") \
            in cli.AutoInterpCommand.__doc__
        assert value == getattr(quick, key) != getattr(AutoInterpConfig(), key)


@pytest.mark.parametrize("name, command", [(name, command) for name, command, _ in cli.COMMANDS])
def test_help_lists_every_config_field(name, command, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([name, "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for f in flag_fields(command):
        shown = f.metadata.get("metavar", f.name) if f.metadata.get("positional") else flag(f.name)
        assert shown in text, f"{name}: {shown}"


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_parsing_imports_no_model_library():
    code = ("import sys, contextlib, io, findbench.cli as cli\n"
            "for name, *_ in cli.COMMANDS:\n"
            "    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "        cli.parse_args([name, '--help'])\n"
            f"print(sorted(m for m in {HEAVY + ('numpy',)!r} if m in sys.modules))\n")
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_train_judge_help_imports_no_model_library():
    # train-judge's flags are TrainArgs' (findbench.judge.config, standard library only at import)
    code = ("import sys, contextlib, io, findbench.cli as cli\n"
            "out = io.StringIO()\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(out):\n"
            "    cli.main(['train-judge', '--help'])\n"
            "print(all(f in out.getvalue() for f in ('--lora-r', '--no-hub-private', '--install-as-default')))\n"
            f"print(sorted(m for m in {HEAVY + ('numpy',)!r} if m in sys.modules))\n")
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "[]"]


@pytest.mark.parametrize("argv", [["--lora-r", "0"], ["--learning-rate", "0"]])
def test_train_judge_refuses_a_bad_value_in_one_line_before_any_work(argv, tmp_path):
    argv = ["train-judge", *argv, "--output-dir", str(tmp_path / "out")]
    code = ("import sys, json, findbench.cli as cli\n"
            f"rc = cli.main({argv!r})\n"
            f"print(json.dumps([rc, sorted(m for m in {HEAVY!r} if m in sys.modules)]))\n")
    result = _python(code)
    rc, heavy = json.loads(result.stdout.strip().splitlines()[-1])
    err = result.stderr.strip()
    assert rc == 2 and err in ("findbench train-judge: error: --lora-r must be ≥ 1, got 0",
                               "findbench train-judge: error: --learning-rate must be > 0, got 0.0"), err
    assert heavy == [] and not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, flag_name", [
    (["interpret", "--limit", "-1"], "--limit"),
    (["interpret", "--configs", "numerc"], "--configs"),
    (["interpret", "--method", "aia,milam"], "--method"),
    (["interpret", "--functions", "strings/fx"], "--functions"),
    (["interpret", "--interpreter", "embeded"], "--interpreter"),
    (["evaluate", "RUN", "--judge", "embeded-evaluator"], "--judge"),
    (["main", "--interpreters", "oracle,randon"], "--interpreters"),
    (["main", "--rounds", "0"], "--rounds"),
    (["build", "--configs", "numerc"], "--configs"),
    (["export-functions", "--out", "x", "--configs", "string"], "--configs"),
    (["compare", "a", "b", "--n-resamples", "0"], "--n-resamples"),
    (["iia", "--task", "t", "--layer", "zero"], "--layer"),
    (["iia", "--task", "t", "--layer", "1", "--model", "embeded"], "--model"),
    (["build-neuron-tests", "--generator", "embeded"], "--generator"),
    (["autointerp", "--sae", "my-sae"], "--sae"),
    (["autointerp", "--explainer", "embeded"], "--explainer"),
    (["autointerp", "--n-top-ex", "0"], "--n-top-ex"),
    (["autointerp-validate", "--probes", "hedge"], "--probes"),
])
def test_bad_flags_are_refused_in_one_line_before_any_work(argv, flag_name, tmp_path):
    if argv[0] not in ("compare", "export-functions"):  # those take --out as a file or a required flag
        argv = [*argv, "--out", str(tmp_path / "out")]
    code = ("import sys, json, findbench.cli as cli\n"
            f"rc = cli.main({argv!r})\n"
            f"print(json.dumps([rc, sorted(m for m in {HEAVY!r} if m in sys.modules)]))\n")
    result = _python(code)
    rc, heavy = json.loads(result.stdout.strip().splitlines()[-1])
    err = result.stderr.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and err.startswith(f"findbench {argv[0]}: error: {flag_name}"), err
    assert heavy == [] and not (tmp_path / "out").exists()


def test_the_command_line_parses_the_library_configs(tmp_path):
    from findbench._config import from_namespace
    from findbench.builders.config import BuildConfig
    from findbench.interpret.config import EvaluateConfig, InterpretConfig
    from findbench.pipeline import MainConfig

    (tmp_path / "find").mkdir()
    argv = ["interpret", "--interpreter", "oracle", "--method", "aia,milan", "--limit", "2", "--data",
            str(tmp_path / "find")]
    parsed = from_namespace(InterpretConfig, cli.parse_args(argv))
    built = InterpretConfig(data=str(tmp_path / "find"), interpreter="oracle", method=["aia", "milan"], limit=2)
    assert built == parsed and parsed.method == ["aia", "milan"]
    assert from_namespace(EvaluateConfig, cli.parse_args(["evaluate", "r"])) == EvaluateConfig(run_dir="r")
    assert EvaluateConfig(run_dir="r").out == "r/scores"
    parsed = from_namespace(BuildConfig, cli.parse_args(["build", "--configs", "strings"]))
    assert parsed == BuildConfig(configs=["strings"])
    assert from_namespace(MainConfig, cli.parse_args(["main"])) == MainConfig()


def test_library_entry_points_take_the_config(monkeypatch, tmp_path):
    from findbench.builders import find
    from findbench.builders.config import BuildConfig

    seen = {}
    monkeypatch.setattr("findbench.builders.folder.build_dataset_folder",
                        lambda out, builder, configs, provenance, **kw: seen.update(provenance, cfg=configs) or out)
    cfg = BuildConfig(out=str(tmp_path), configs="strings", seed=3)
    assert find.build(cfg, progress=False) == str(tmp_path)
    assert seen == {"strings": {"seed": 3, "source": "procedural"}, "cfg": {"strings": {"build": cfg}}}
    release = tmp_path / "release"
    release.mkdir()
    find.build(BuildConfig(out=str(tmp_path), configs="numeric", source="find-v1", data_dir=str(release)))
    assert seen["numeric"] == {"source": "find-v1", "data_dir": str(release.resolve())}
    with pytest.raises(FileNotFoundError, match="--data-dir: "):
        find.build(BuildConfig(source="find-v1", data_dir=str(tmp_path / "absent")))
    with pytest.raises(UsageError, match="--configs: the rasp config has no find-v1"):
        BuildConfig(source="find-v1", configs="rasp")


def test_the_inspect_task_checks_its_arguments_with_the_same_config():
    from findbench.constants import UsageError
    from findbench.interpret.task import find_interpret

    for task_args, message in (({"limit": -1}, "-T limit: must be"),
                               ({"configs": "numerc"}, "-T configs: unknown value 'numerc'"),
                               ({"method": "aia,milan"}, "-T method: the task runs one method"),
                               ({"protocol": "json"}, "-T protocol: unknown value")):
        with pytest.raises(UsageError, match=message):
            find_interpret(judge=None, **task_args)
