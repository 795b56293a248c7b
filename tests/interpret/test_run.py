"""Run folders: layout, resume after an interruption, concurrency, the LM cache, the CLI."""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log

from findbench import cli
from findbench._config import from_namespace
from findbench.interpret.config import InterpretConfig
from findbench.interpret.logs import read_run_logs
from findbench.interpret.run import (
    LM_CACHE,
    episode_dir,
    run_interpretations,
    summarize_run,
)
from tests.interpret.fakes import GenerationLM, interpret

#: The files of an exported episode folder (FIND's layout).
EPISODE_FILES = ("description.txt", "domain.txt", "code.py")


def logged(out, function_id, method="aia") -> dict:
    """The episode the run ``out``'s logs record for ``function_id`` (``findbench.interpret.logs``)."""
    return read_run_logs(out).episodes[(method, function_id)].record


def generated_tokens(out, function_id) -> int:
    """The output tokens the sample of ``function_id`` in the run ``out``'s logs used (its ``model_usage``)."""
    [sample] = [s for p in (out / "logs").glob("*.eval") for s in read_eval_log(str(p)).samples or []
                if s.id == function_id]
    return sum(u.output_tokens for u in sample.model_usage.values())


def episode_folders(out):
    return sorted(p for p in out.glob("*/*/f*") if p.is_dir())


def no_temporaries(out) -> bool:
    """No hidden file left behind but eval_set's own id of the logs folder."""
    return not [p for p in out.rglob(".*") if p.name != LM_CACHE and p != out / "logs" / ".eval-set-id"]


def test_oracle_run_folder_layout(data_dir, by_id, tmp_path):
    out = interpret(data_dir, "oracle", limit=2, out=tmp_path / "run", progress=False)
    info = json.loads((out / "run.json").read_text())
    assert info["interpreter"] == "oracle" and info["protocol"] == "text" and info["rounds"] == 20 and info["seed"] == 0
    assert info["data"] == str(data_dir.resolve()) and info["source"] == "data" and info["findbench_version"]
    assert info["configs"] == ["numeric", "strings", "neurons_entities", "neurons_relations"] and info["method"] == [
        "aia"
    ]
    # run.json is the config, as the run resolved it
    assert set(info) >= {f.name for f in dataclasses.fields(InterpretConfig)} and info["limit"] == 2
    assert info["out"] == str(tmp_path / "run") and info["inspect_model"] == "none/oracle"
    folders = episode_folders(out)
    assert [f.relative_to(out).as_posix() for f in folders] == [
        f"{c}/aia/f0000{i}" for c in ("neurons_entities", "neurons_relations", "numeric", "strings") for i in (0, 1)
    ]
    for folder in folders:
        assert sorted(p.name for p in folder.iterdir()) == sorted(EPISODE_FILES)
        category = folder.parent.parent.name
        row = by_id[f"{category}/{folder.name}"]
        assert (folder / "description.txt").read_text() == row["description"].strip() + "\n"
        code = (folder / "code.py").read_text()
        assert code.strip() == (row["code"] or "").strip()
        domain = (folder / "domain.txt").read_text()
        assert bool(domain) == (category in ("numeric", "neurons_relations"))
        ep = logged(out, row["function_id"])
        assert ep["row"]["function_id"] == row["function_id"] and ep["answer"] is not None
        assert ep["messages"][-1]["role"] == "assistant"
    assert no_temporaries(out)
    summary = summarize_run(out)
    assert [(s["category"], s["method"], s["episodes"], s["answered"]) for s in summary] == [
        (c, "aia", 2, 2) for c in ("numeric", "strings", "neurons_entities", "neurons_relations")
    ]


def test_random_run_and_functions_filter(data_dir, by_id, tmp_path):
    fids = ["strings/f00003", "neurons_relations/f00010", "neurons_relations/f00011"]
    out = interpret(data_dir, "random", functions=fids, out=tmp_path / "run", seed=3, progress=False)
    assert json.loads((out / "run.json").read_text())["configs"] == ["strings", "neurons_relations"]
    for fid in fids:
        text = (episode_dir(out, fid, "aia") / "description.txt").read_text().strip()
        assert text and text != by_id[fid]["description"].strip()
    assert len(episode_folders(out)) == 3


class FailingLM(GenerationLM):
    """Calls the function once, then answers; raises on its second-turn call number ``fail_at``.
    ``calls`` counts second-turn calls (each function's own request: the first turn of a
    category is one request, answered by the cache after the first)."""

    name = "failing-lm"

    def __init__(self, fail_at=None):
        self.fail_at, self.calls = fail_at, 0

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        if len(conversations[0]) == 2:
            return ["PYTHON(function.py hello France Paris)"]
        self.calls += 1
        if self.fail_at is not None and self.calls == self.fail_at:
            raise RuntimeError("connection lost")
        return ["[DESCRIPTION]: a guess"]


@pytest.mark.parametrize("max_connections", [1, 3])
def test_resume_after_an_interruption(max_connections, data_dir, tmp_path):
    out = tmp_path / "run"
    kwargs = dict(
        configs=["strings", "neurons_relations"], limit=4, out=out, max_connections=max_connections, progress=False
    )
    total = 8
    with pytest.raises(RuntimeError, match="connection lost"):
        interpret(data_dir, FailingLM(fail_at=3), **kwargs)
    done = episode_folders(out)
    # one connection: the episodes before the failure are kept; three: the two that answered may still be
    # scoring when the third fails and the task stops (a race a loaded machine loses), so none may be kept
    assert (max_connections > 1 or len(done) >= 1) and len(done) < total and no_temporaries(out)
    for folder in done:
        assert sorted(p.name for p in folder.iterdir()) == sorted(EPISODE_FILES)
    second = FailingLM()
    interpret(data_dir, second, **kwargs)
    assert 1 <= second.calls <= total - len(done)  # episodes cut off mid-flight may answer from the cache
    assert len(episode_folders(out)) == total and no_temporaries(out)
    third = FailingLM()
    interpret(data_dir, third, **kwargs)
    assert third.calls == 0
    # more functions later: only the new ones run
    fourth = FailingLM()
    interpret(data_dir, fourth, **{**kwargs, "limit": 5})
    assert 1 <= fourth.calls <= 2 and len(episode_folders(out)) == total + 2


def test_the_exported_folders_are_not_read_to_resume(data_dir, tmp_path):
    """The episode folders are an export of the logs: a damaged one runs nothing again (the log is the
    record, eval_set resumes), and summarize_run reads the logs."""
    out = tmp_path / "run"
    kwargs = dict(configs="strings", limit=2, out=out, progress=False)
    interpret(data_dir, FailingLM(), **kwargs)
    path = episode_dir(out, "strings/f00001", "aia") / "description.txt"
    path.write_bytes(b"\x00\xff garbage")
    (episode_dir(out, "strings/f00000", "aia") / "code.py").unlink()
    again = FailingLM()
    interpret(data_dir, again, **kwargs)
    assert again.calls == 0 and path.read_bytes() == b"\x00\xff garbage"
    assert [s["episodes"] for s in summarize_run(out)] == [2] and no_temporaries(out)


def test_resume_refuses_other_settings(data_dir, tmp_path):
    out = tmp_path / "run"
    interpret(data_dir, "oracle", configs="strings", limit=1, out=out, progress=False)
    for change in ({"rounds": 5}, {"seed": 1}, {"interpreter": "random"}, {"rows_or_data": None}):
        args = {"rows_or_data": data_dir, "interpreter": "oracle", **change}
        with pytest.raises(ValueError, match="out: .* other settings"):
            interpret(
                args.pop("rows_or_data"),
                args.pop("interpreter"),
                configs="strings",
                limit=1,
                out=out,
                progress=False,
                **args,
            )
    # methods and configs may grow
    interpret(
        data_dir, "oracle", configs="neurons_entities", method="aia,milan", limit=1, out=out, progress=False
    )
    info = json.loads((out / "run.json").read_text())
    assert info["configs"] == ["strings", "neurons_entities"] and info["method"] == ["aia", "milan"]


def test_milan_methods(data_dir, tmp_path):
    out = interpret(
        data_dir, "oracle", method=["milan", "aia+milan"], limit=1, out=tmp_path / "run", progress=False
    )
    assert json.loads((out / "run.json").read_text())["configs"] == ["neurons_entities", "neurons_relations"]
    assert [f.relative_to(out).as_posix() for f in episode_folders(out)] == [
        "neurons_entities/aia+milan/f00000",
        "neurons_entities/milan/f00000",
        "neurons_relations/aia+milan/f00000",
        "neurons_relations/milan/f00000",
    ]
    ep = logged(out, "neurons_entities/f00000", "milan")
    assert ep["calls"][0]["command"] == "exemplars" and ep["rounds"] == 1  # the oracle answers at once


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"method": "aia,bogus"}, "method"),
        ({"method": []}, "method"),
        ({"method": "milan", "configs": "numeric"}, "method"),
        ({"method": "aia+milan", "configs": "strings,neurons_entities"}, "method"),
        ({"configs": "numeric,images"}, "configs"),
        ({"limit": 0}, "limit"),
        ({"rounds": 0}, "rounds"),
        ({"max_connections": 0}, "max-connections"),
        ({"max_tokens": -1}, "max-tokens"),
        ({"episode_tokens": 0}, "episode-tokens"),
        ({"episode_tokens": "100"}, "episode-tokens"),
        ({"functions": "strings/f99999"}, "functions"),
        ({"functions": "strings/7"}, "functions"),
        ({"functions": "strings/f00001", "configs": "numeric"}, "functions"),
        ({"interpreter": ""}, "interpreter"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, field, data_dir, tmp_path):
    args = {"interpreter": "oracle", **kwargs}
    with pytest.raises((ValueError, TypeError), match=field):
        interpret(data_dir, args.pop("interpreter"), out=tmp_path / "run", progress=False, **args)
    with pytest.raises(TypeError, match="interpreter"):
        interpret(data_dir, 42, out=tmp_path / "run", progress=False)
    with pytest.raises(TypeError, match="rows must be an iterable"):
        run_interpretations(InterpretConfig(interpreter="oracle", out=str(tmp_path / "run")), {"function_id": "x"})
    with pytest.raises(TypeError, match="InterpretConfig"):
        run_interpretations(str(data_dir), "oracle")


def test_rows_given_directly(rows, tmp_path):
    out = interpret(rows["strings"][:3] + rows["numeric"][:1], "oracle", out=tmp_path / "run", progress=False)
    info = json.loads((out / "run.json").read_text())
    assert info["source"] == "rows" and info["data"] is None and info["configs"] == ["numeric", "strings"]
    assert len(episode_folders(out)) == 4


class CountingLM(GenerationLM):
    name = "counting-lm"

    def __init__(self):
        self.generated = 0

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        self.generated += len(conversations)
        return ["PYTHON(function.py abc)" if len(c) == 2 else "[DESCRIPTION]: my guess" for c in conversations]


def test_lm_interpreter_uses_a_request_cache_under_out(data_dir, tmp_path):
    out = tmp_path / "run"
    lm = CountingLM()
    interpret(data_dir, lm, configs="strings", limit=3, out=out, max_connections=2, progress=False)
    # the first turn is the same request for every string function (greedy: the same reply),
    # so the cache answers it after the first episode: 1 + 3 second turns
    assert lm.generated == 4 and (out / LM_CACHE).is_file()
    assert json.loads((out / "run.json").read_text())["interpreter"] == "counting-lm"
    # an episode lost after the fact is redone from the cache, without the LM
    import shutil

    shutil.rmtree(episode_dir(out, "strings/f00001", "aia"))
    again = CountingLM()
    interpret(data_dir, again, configs="strings", limit=3, out=out, progress=False)
    assert again.generated == 0 and len(episode_folders(out)) == 3
    assert (episode_dir(out, "strings/f00001", "aia") / "description.txt").read_text() == "my guess\n"
    assert logged(out, "strings/f00001")["rounds"] == 2


def test_cli_interpret(data_dir, tmp_path, capsys):
    out = tmp_path / "run"
    rc = cli.main(
        [
            "interpret",
            "--interpreter",
            "oracle",
            "--data",
            str(data_dir),
            "--configs",
            "strings,neurons_relations",
            "--method",
            "aia",
            "--limit",
            "2",
            "--out",
            str(out),
            "--max-connections",
            "2",
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"wrote {out}"
    assert printed[1].startswith("strings/aia: 2 episodes, 2 answered") and printed[2].startswith(
        "neurons_relations/aia: 2 episodes"
    )
    assert len(episode_folders(out)) == 4
    rc = cli.main(
        [
            "interpret",
            "--interpreter",
            "oracle",
            "--data",
            str(data_dir),
            "--configs",
            "numeric",
            "--method",
            "milan",
            "--out",
            str(tmp_path / "other"),
        ]
    )
    assert rc == 2 and "error: --method: " in capsys.readouterr().err
    cfg = from_namespace(InterpretConfig, cli.parse_args(["interpret"]))
    assert (cfg.interpreter, cfg.method, cfg.rounds, cfg.out, cfg.max_connections, cfg.data) == (
        "embedded",
        ["aia"],
        20,
        "outputs/interpret",
        4,
        None,
    )
    cfg = from_namespace(
        InterpretConfig,
        cli.parse_args(["interpret", "--method", "milan,aia+milan", "--functions", "strings/f00001, numeric/f00002"]),
    )
    assert cfg.method == ["milan", "aia+milan"] and cfg.functions == ["strings/f00001", "numeric/f00002"]


# ------------------------------------------------------------------- the episode's token budget


class WordLM(GenerationLM):
    """Never answers: a command every turn (2 words); a tokenizer of a token per word, so the
    budget counts 2 tokens a turn (the 23 characters would be estimated at 6). Records the
    ``max_new_tokens`` of each call."""

    name = "word-lm"

    def __init__(self):
        self.limits: list[int] = []

    @staticmethod
    def tokenizer(text, add_special_tokens=True):
        return {"input_ids": text.split()}

    @staticmethod
    def render(conversation):
        return " ".join(m["content"] for m in conversation)

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        self.limits += [max_new_tokens] * len(conversations)
        return ["PYTHON(function.py abc)" for _ in conversations]


def test_episode_tokens_stop_an_lm_interpreter_and_are_recorded(data_dir, tmp_path):
    out = tmp_path / "run"
    lm = WordLM()
    interpret(
        data_dir, lm, functions="strings/f00000", out=out, max_tokens=3, episode_tokens=5, progress=False
    )
    # 2 tokens a turn (the LM's tokenizer, through the request cache); every turn may use --max-tokens (3): the
    # third brings the episode to 6 > 5 tokens, which stops it (Inspect's token limit), and that turn is not kept
    assert lm.limits == [3, 3, 3]
    ep = logged(out, "strings/f00000")
    assert (ep["stop_reason"], ep["answer"], ep["rounds"]) == ("token_limit", None, 2)
    assert generated_tokens(out, "strings/f00000") == 6  # 2 turns kept; the tokens of the third still count
    info = json.loads((out / "run.json").read_text())
    assert (info["max_tokens"], info["episode_tokens"]) == (3, 5)
    assert summarize_run(out)[0]["answered"] == 0


def test_resume_refuses_another_episode_tokens(data_dir, tmp_path):
    out = tmp_path / "run"
    kwargs = dict(configs="strings", limit=1, out=out, progress=False)
    interpret(data_dir, "oracle", episode_tokens=500, **kwargs)
    assert json.loads((out / "run.json").read_text())["episode_tokens"] == 500
    assert logged(out, "strings/f00000")["answer"] is not None
    for other in (None, 600):
        with pytest.raises(ValueError, match=f"other settings: episode_tokens=500 \\(now {other}\\)"):
            interpret(data_dir, "oracle", episode_tokens=other, **kwargs)
    interpret(data_dir, "oracle", episode_tokens=500, **{**kwargs, "limit": 2})  # the same budget resumes
    assert len(episode_folders(out)) == 2
    # a run.json written before the setting existed reads as no limit
    info = json.loads((out / "run.json").read_text())
    del info["episode_tokens"]
    (out / "run.json").write_text(json.dumps(info))
    interpret(data_dir, "oracle", **kwargs)
    with pytest.raises(ValueError, match="episode_tokens=None \\(now 500\\)"):
        interpret(data_dir, "oracle", episode_tokens=500, **kwargs)
    interpret(data_dir, "oracle", configs="strings", limit=1, out=tmp_path / "fresh", progress=False)
    assert json.loads((tmp_path / "fresh" / "run.json").read_text())["episode_tokens"] is None


class PlainLM(GenerationLM):
    """Never answers; no tokenizer, so its turns are estimated at 4 characters a token."""

    name = "plain-lm"

    def __init__(self):
        self.limits: list[int] = []

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        self.limits.append(max_new_tokens)
        return ["PYTHON(function.py abc)"]  # 23 characters: estimated at 6 tokens


def test_episode_tokens_without_a_tokenizer_are_estimated(data_dir, tmp_path):
    out = tmp_path / "run"
    lm = PlainLM()
    interpret(data_dir, lm, configs="strings", limit=1, out=out, episode_tokens=10, progress=False)
    assert lm.limits == [512, 512]  # turns are not capped at what is left of the budget: the second passes it
    assert logged(out, "strings/f00000")["stop_reason"] == "token_limit"
    assert generated_tokens(out, "strings/f00000") == 12


def test_cli_episode_tokens(data_dir, tmp_path, capsys):
    assert cli.parse_args(["interpret"]).episode_tokens is None
    assert cli.parse_args(["interpret", "--episode-tokens", "4096"]).episode_tokens == 4096
    for bad in ("0", "-1", "abc", "2.5", ""):  # refused by argparse (not an int) or by the config (not >= 1)
        capsys.readouterr()
        try:
            rc = cli.main(["interpret", "--episode-tokens", bad, "--out", str(tmp_path / "bad")])
        except SystemExit as exc:
            rc = exc.code
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and "--episode-tokens" in err[-1] and not (tmp_path / "bad").exists()
    out = tmp_path / "run"
    args = ["interpret", "--interpreter", "oracle", "--data", str(data_dir), "--configs", "strings", "--limit", "1",
            "--out", str(out)]
    rc = cli.main([*args, "--episode-tokens", "300"])
    assert rc == 0 and json.loads((out / "run.json").read_text())["episode_tokens"] == 300
    capsys.readouterr()
    rc = cli.main([*args, "--episode-tokens", "301"])
    assert rc == 2 and "episode_tokens=300 (now 301)" in capsys.readouterr().err


def test_sample_picks_representative_functions(data_dir, tmp_path):
    """--limit keeps the first rows (numeric starts with MLP fits); --sample draws per subcategory."""
    from collections import Counter

    from findbench.find.rows import load_rows, sample_rows

    rows = load_rows("numeric")
    picked = sample_rows(rows, 5, seed=0)
    assert len(picked) == 5 and len({r["subcategory"] for r in picked}) == 5
    assert [r["function_id"] for r in picked] == [r["function_id"] for r in sample_rows(rows, 5, seed=0)]
    assert {r["subcategory"] for r in rows[:5]} == {"mlp"}
    assert sample_rows(rows[:3], 10) == rows[:3]
    with pytest.raises(ValueError, match="sample must be a positive integer"):
        sample_rows(rows, 0)

    out = interpret(data_dir, "oracle", configs="strings", sample=3, out=tmp_path / "run", progress=False)
    done = [p.name for p in sorted((out / "strings" / "aia").iterdir())]
    kinds = Counter(
        r["subcategory"] for r in load_rows("strings", data=data_dir) if r["function_id"].split("/")[1] in done
    )
    assert len(done) == 3 and set(kinds) == {"atomic", "composition"}


def test_a_misspelled_interpreter_is_one_line_and_writes_nothing(tmp_path):
    from findbench.constants import UsageError

    with pytest.raises(UsageError, match="interpreter: unknown model 'embeded'.*did you mean 'embedded'"):
        interpret(None, "embeded", configs="numeric", limit=1, out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_the_config_enters_each_file_once(data_dir, tmp_path):
    """Following the config from run_interpretations (each findbench function that takes it, at its
    first call, in any thread; the config's own methods aside) enters each file once."""
    import findbench
    from findbench.interpret.config import AgentConfig

    root, walk = Path(findbench.__file__).parent, []

    def trace(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_filename.startswith(str(root)):
            names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            args = [frame.f_locals.get(n) for n in names]
            if names[:1] != ("self",) and any(isinstance(a, (InterpretConfig, AgentConfig)) for a in args):
                walk.append((Path(code.co_filename).relative_to(root).as_posix(), code.co_name))

    cfg = InterpretConfig(interpreter="oracle", data=str(data_dir), configs="strings", limit=1, out=str(tmp_path / "r"))
    threading.settrace(trace)
    sys.settrace(trace)
    try:
        run_interpretations(cfg, progress=False)
    finally:
        sys.settrace(None)
        threading.settrace(None)
    order = [f for f, _ in dict.fromkeys(walk)]  # each function at its first call
    files = [f for i, f in enumerate(order) if i == 0 or f != order[i - 1]]
    assert files == ["interpret/run.py", "interpret/task.py", "interpret/solver.py"], walk
