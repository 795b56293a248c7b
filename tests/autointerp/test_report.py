"""The AutoInterp dashboard: what a run stores per latent (``latents.json``), the page
``findbench.autointerp.report`` draws from it, the command lines that write it, and the page
in headless Chromium (skipped without /usr/bin/chromium, as the interpret report's test).

The run is a real one, small: the embedded encoder (MiniLM) with the planted-rule SAE, whose
latents' rules are known, and the scripted LM of test_run.py (explains every latent as
"digits", flags the windows holding a digit, says Yes to every fuzz showing).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
from html.parser import HTMLParser
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest

from findbench import cli
from findbench.autointerp import run as run_mod
from findbench.autointerp.commands import AutoInterpCommand
from findbench.autointerp.config import AutoInterpConfig
from findbench.autointerp.report import REPORT_FILE, autointerp_results, load_run, render_report, write_report
from findbench.autointerp.run import run_autointerp
from tests._chromium import CHROMIUM, chromium
from tests.autointerp.test_run import SENTENCES, ScriptedLM, _cfg
from tests.autointerp.test_shards import _fifo

SCORERS = ["detection", "fuzz", "embedding"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("autointerp-report")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES * 60) + "\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FINDBENCH_CACHE", str(root / "cache"))
        cfg = AutoInterpConfig(**_cfg(dataset=str(corpus), scorers=SCORERS, n_latents=4))
        run_autointerp(AutoInterpCommand(
            model="minilm", sae="synthetic", explainer=ScriptedLM(), config=cfg, out=root / "out", progress=False
        ))
    return root / "out"


@pytest.fixture(scope="module")
def run_data(run_dir):
    results, latents = load_run(run_dir)
    return results, latents


class Page(HTMLParser):
    """The parts of the page the tests look at."""

    def __init__(self):
        super().__init__()
        self.sections: list[str] = []  # ids of the latent panels
        self.links: list[str] = []
        self.shaded: list[tuple[str, str, str]] = []  # (style, title, text) of shaded tokens
        self.sortable_heads: list[str] = []
        self.index_rows = 0
        self.scripts = 0
        self.text: list[str] = []
        self.attr_names: set[str] = set()
        self.tags: set[str] = set()
        self._stack: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self._stack.append((tag, a))
        self.attr_names.update(a)
        self.tags.add(tag)
        if tag == "section" and "latent" in a.get("class", "").split():
            self.sections.append(a.get("id", ""))
        if tag == "a" and a.get("href", "").startswith("#latent-"):
            self.links.append(a["href"][1:])
        if tag == "script":
            self.scripts += 1
        if (
            tag == "tr"
            and any(t == "table" and b.get("id") == "index" for t, b in self._stack)
            and any(t == "tbody" for t, _ in self._stack)
        ):
            self.index_rows += 1

    def handle_endtag(self, tag):
        while self._stack:
            if self._stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        self.text.append(data)
        if not self._stack:
            return
        tag, a = self._stack[-1]
        if tag == "span" and "on" in a.get("class", "").split():
            self.shaded.append((a.get("style", ""), a.get("title", ""), data))
        if tag == "th" and any(t == "table" and "sortable" in b.get("class", "") for t, b in self._stack):
            self.sortable_heads.append(data)


def _parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    return page


# ------------------------------------------------------------------------------------ stored


def test_each_latent_is_stored_with_its_windows_picks_and_planted_rule(run_dir, run_data):
    from findbench.autointerp.activations import load_model
    from findbench.autointerp.synthetic import SyntheticSAE

    results, latents = run_data
    assert results.latents_file == "latents.json" and (run_dir / "latents.json").is_file()
    model, tokenizer, _ = load_model("minilm", device="cpu")
    rules = {d["latent"]: d for d in SyntheticSAE.for_model(model, tokenizer).describe()}
    explained = [r for r in latents if not r["skipped"]]
    assert explained and {str(r["latent"]) for r in explained} == set(results.eval_result_unstructured)
    cfg = results.eval_config
    for rec in explained:
        latent = rec["latent"]
        entry = results.eval_result_unstructured[str(latent)]
        assert rec["planted"] == {k: rules[latent][k] for k in ("rule", "explanation", "n_tokens")}
        assert entry["planted"] == {k: rules[latent][k] for k in ("rule", "explanation")}
        assert rec["explanation"] == entry["explanation"] == "digits and numbers"
        # the same line for every latent: flagged in the sidecar as in the results
        assert rec["degenerate"] is entry["degenerate"] is True and rec["degenerate_reason"] == "identical"
        assert rec["explanation_truncated"] is entry["explanation_truncated"] is False
        assert rec["scores"] == {
            "detection": entry["score"],
            "fuzz": entry["fuzz_score"],
            "embedding": entry["embedding_score"],
        }
        # firing rate over the corpus's non-special tokens, and a histogram of exactly those activations
        assert 0 < rec["n_fired"] < rec["n_positions"] <= cfg["total_tokens"]
        assert rec["firing_rate"] == pytest.approx(rec["n_fired"] / rec["n_positions"])
        assert sum(rec["histogram"]["counts"]) == rec["n_fired"]
        assert rec["max_act"] < rec["histogram"]["bin_width"] * len(rec["histogram"]["counts"])
        gen = [w for w in rec["windows"] if w["role"] == "generation"]
        scoring = [w for w in rec["windows"] if w["role"] == "scoring"]
        assert len(gen) == 4 and len(scoring) == 6 and [w["index"] for w in scoring] == list(range(1, 7))
        assert sorted(w["kind"] for w in scoring) == ["iw", "random", "random", "random", "random", "top"]
        for w in rec["windows"]:
            assert len(w["tokens"]) == len(w["token_ids"]) == len(w["acts"]) == 2 * cfg["buffer"] + 1
            assert w["text"] == " ".join("".join(w["tokens"]).split())
            assert w["max_act"] == max(w["acts"]) and w["label_active"] == (w["kind"] != "random")
            for piece, tid, act in zip(w["tokens"], w["token_ids"], w["acts"]):  # a planted rule fires on tokens, by id
                assert (act > 0) == (float(rules_table(latent)[tid]) > 0), (piece, act)
        # detection: the scorer's picks against the truth, window by window
        det = rec["scorers"]["detection"]
        assert det["predictions"] == entry["predictions"] and det["active"] == entry["correct seqs"]
        for w in scoring:
            pick = w["picks"]["detection"]
            assert pick["predicted"] == (w["index"] in det["predictions"])
            assert pick["correct"] == (pick["predicted"] == (w["index"] in det["active"]))
            assert isinstance(w["picks"]["embedding"]["similarity"], float)
            fuzz = w["picks"]["fuzz"]
            assert [a["marks"] for a in fuzz] == (["true", "decoy"] if w["label_active"] else [])
            assert all(a["said_yes"] for a in fuzz)  # the scripted LM says Yes to everything
        assert sum(p["correct"] for p in (w["picks"]["detection"] for w in scoring)) == round(
            rec["scores"]["detection"] * 6
        )


_TABLES: dict[int, np.ndarray] = {}


def rules_table(latent: int) -> np.ndarray:
    """The synthetic SAE's activation of ``latent`` on every token id (MiniLM's tokenizer)."""
    if latent not in _TABLES:
        from findbench.autointerp.activations import load_model
        from findbench.autointerp.synthetic import SyntheticSAE

        model, tokenizer, _ = load_model("minilm", device="cpu")
        _TABLES[latent] = SyntheticSAE.for_model(model, tokenizer).activation_table[:, latent].numpy()
    return _TABLES[latent]


# ------------------------------------------------------------------------------------ the page


def test_report_shows_window_text_shading_planted_rules_and_a_sortable_index(run_dir, run_data):
    results, latents = run_data
    path = write_report(run_dir)
    assert path == run_dir / REPORT_FILE
    text = path.read_text()
    page = _parse(text)
    explained = [r for r in latents if not r["skipped"]]
    ids = [f"latent-{r['latent']}" for r in latents]
    assert page.sections == ids and set(page.links) >= {f"latent-{r['latent']}" for r in explained}
    assert page.index_rows == len(explained)
    assert page.sortable_heads[:3] == ["latent", "explanation", "planted rule"] and "firing rate" in page.sortable_heads
    assert all(s in page.sortable_heads for s in SCORERS)
    assert page.scripts == 1 and 'addEventListener("click"' in text and "http://" not in text and "https://" not in text
    # the one page shell and stylesheet of findbench's reports (the FIND report's too), inline
    css = files("findbench").joinpath("templates", "page.css").read_text(encoding="utf-8")
    assert text.count("<style>") == 1 and text.split("<style>", 1)[1].split("</style>", 1)[0].strip() == css.strip()
    body = "".join(page.text)
    for rec in explained:
        assert rec["planted"]["explanation"] in body and rec["planted"]["rule"] in body
        # every token of every window is on the page, in order
        for w in rec["windows"]:
            assert "".join(w["tokens"]).replace("\n", "⏎") in body
    # shading: alpha = activation / the latent's largest, the value in the tooltip
    assert page.shaded
    scale = {r["latent"]: r["max_act"] for r in explained}
    alphas = set()
    for style, title, _ in page.shaded:
        alpha = float(re.fullmatch(r"background-color: rgba\(255, 140, 0, ([0-9.]+)\)", style).group(1))
        act = float(re.match(r"activation ([0-9.e+-]+)", title).group(1))
        assert 0 < alpha <= 1
        assert any(abs(alpha - min(1.0, act / s)) < 2e-3 for s in scale.values())
        alphas.add(alpha)
    assert len(alphas) > 2  # the planted activations differ by token (1 + 0.05 * rank mod 10)
    assert "✓" in body and "flagged" in body and "decoy marks: Yes" in body
    assert "activation histogram" not in body  # recorded for every latent
    # the scripted explainer's one line for every latent: flagged in the summary, the index and each panel
    n = len(explained)
    assert (
        f"⚠ {n} of {n} explanations are degenerate ({n} identical to another latent's); they are still scored." in body
    )
    assert body.count("(degenerate: identical to another latent's)") == n
    assert body.count("⚠ degenerate: identical to another latent's") == n
    assert results.eval_result_metrics["autointerp"].n_degenerate == n
    assert "cut to the length cap" not in body
    assert body.count("positive activations over the corpus") == len(latents)


#: Run text that would be markup or break out of an attribute if it were not escaped.
EVIL = ("<script>alert(1)</script>", '" onmouseover="alert(2)', "<img src=x onerror=alert(3)>", "' onfocus='alert(4)")


def test_report_escapes_run_text(run_data):
    """Jinja2's autoescape: hostile text in every run-text field shows as that text, never as markup."""
    results, latents = run_data
    results = dataclasses.replace(results, eval_config={**results.eval_config, "sae": EVIL[1]})
    rec = json.loads(json.dumps(next(r for r in latents if not r["skipped"])))
    rec["explanation"], rec["explainer_answer"] = EVIL[0] + EVIL[1], EVIL[3]
    rec["planted"]["rule"] = EVIL[1]
    rec["windows"][0]["tokens"][0] = EVIL[2]
    skipped = dict(rec, latent=rec["latent"] + 1, skipped=EVIL[0])
    text = render_report(results, [rec, skipped])
    page = _parse(text)
    assert page.scripts == 1 and text.count("<script") == 1  # the page's own sorting script only
    assert not any(name.startswith("on") for name in page.attr_names) and "img" not in page.tags
    body = "".join(page.text)
    for evil in EVIL:
        assert evil in body, evil
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&#34; onmouseover=&#34;alert(2)" in text


def test_load_run_names_bad_input(tmp_path, run_dir):
    with pytest.raises(FileNotFoundError):
        load_run(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="exactly one"):
        load_run(tmp_path)
    other = tmp_path / "x_eval_results.json"
    other.write_text(json.dumps({"eval_type_id": "core"}))
    with pytest.raises(ValueError, match="not an AutoInterp results file"):
        load_run(other)
    assert autointerp_results(tmp_path) == [] and autointerp_results(run_dir) == [
        run_dir / "synthetic_eval_results.json"
    ]


def test_report_reads_only_inside_its_folder(run_dir, tmp_path, capsys, caplog):
    """A results file whose latents_file leads outside its folder, a results file linked in from elsewhere and a
    FIFO in its place are not read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "latents.json").write_text((run_dir / "latents.json").read_text())
    folder = tmp_path / "run"
    folder.mkdir()
    results = json.loads((run_dir / "synthetic_eval_results.json").read_text())
    for latents_file in ("../outside/latents.json", str(outside / "latents.json")):
        (folder / "synthetic_eval_results.json").write_text(json.dumps(results | {"latents_file": latents_file}))
        assert cli.main(["report", str(folder)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert f"latents_file: expected 'latents.json' (beside the results file), got {latents_file!r}" in err
        assert not (folder / REPORT_FILE).exists()
    (folder / "synthetic_eval_results.json").unlink()
    (folder / "synthetic_eval_results.json").symlink_to(run_dir / "synthetic_eval_results.json")
    with pytest.raises(ValueError, match="synthetic_eval_results.json is a symbolic link"):
        load_run(folder / "synthetic_eval_results.json")
    assert autointerp_results(folder) == [] and "is a symbolic link (refused)" in caplog.text
    (folder / "synthetic_eval_results.json").unlink()
    _fifo(folder / "synthetic_eval_results.json")
    assert autointerp_results(folder) == [] and "is not a regular file (refused)" in caplog.text
    with contextlib.suppress(OSError):  # let the writer go
        os.close(os.open(folder / "synthetic_eval_results.json", os.O_RDONLY | os.O_NONBLOCK))


# ------------------------------------------------------------------------------------ commands


def test_findbench_report_on_an_autointerp_folder_and_autointerp_report(run_dir, tmp_path, capsys, monkeypatch):
    (run_dir / REPORT_FILE).unlink(missing_ok=True)
    assert cli.main(["report", str(run_dir)]) == 0
    assert f"wrote {run_dir / REPORT_FILE}" in capsys.readouterr().out
    assert (run_dir / REPORT_FILE).is_file()
    assert cli.main(["report", str(run_dir), "--out", str(tmp_path / "elsewhere")]) == 0
    assert (tmp_path / "elsewhere" / REPORT_FILE).is_file()

    # `findbench autointerp --report`: the run's results, then the page beside them
    # (report_<run id>.html for a named run)
    named = tmp_path / "named"
    real = run_mod.run_autointerp
    cfg = AutoInterpConfig(**_cfg(dataset=str(run_dir.parent / "corpus.txt"), scorers=SCORERS, n_latents=4))
    monkeypatch.setenv("FINDBENCH_CACHE", str(run_dir.parent / "cache"))
    monkeypatch.setattr(run_mod, "run_autointerp", lambda cmd: real(dataclasses.replace(
        cmd, model="minilm", sae="synthetic", explainer=ScriptedLM(), config=cfg, progress=False)))
    assert cli.main(["autointerp", "--out", str(named), "--run-id", "b", "--report"]) == 0
    assert f"wrote {named / 'report_b.html'}" in capsys.readouterr().out
    page = _parse((named / "report_b.html").read_text())
    assert len(page.sections) == len(json.loads((run_dir / "latents.json").read_text())["latents"]) and page.shaded


# ------------------------------------------------------------------------------------ browser


def test_report_renders_inchromium(run_dir, run_data, tmp_path):
    if not CHROMIUM.is_file():
        pytest.skip("chromium is not installed (/usr/bin/chromium); run `make setup` to install it")
    from matplotlib.image import imread

    _, latents = run_data
    url = write_report(run_dir).resolve().as_uri()
    shot = tmp_path / "shot.png"
    done = chromium(
        f"--screenshot={shot}", "--window-size=1280,1600", "--hide-scrollbars", url, profile=tmp_path / "profile1"
    )
    assert shot.is_file(), f"no screenshot (rc {done.returncode}): {done.stderr[-2000:]}"
    rgb = imread(shot)[..., :3]
    assert rgb.shape[:2] == (1600, 1280) and rgb.std() > 0.05
    # shaded tokens and histogram bars: orange (255, 140, 0 at some alpha over white) somewhere on the page
    orange = (rgb[..., 0] > 0.95) & (rgb[..., 1] > 0.5) & (rgb[..., 1] < 0.85) & (rgb[..., 2] < 0.6)
    assert orange.sum() > 100

    dom = chromium("--dump-dom", url, profile=tmp_path / "profile2")
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = _parse(dom.stdout)
    assert page.sections == [f"latent-{r['latent']}" for r in latents]
    assert page.index_rows == sum(not r["skipped"] for r in latents) and page.shaded
    assert any(r["planted"]["explanation"] in "".join(page.text) for r in latents if r["planted"])

    # the index sorts in the browser: a click on "firing rate" orders the rows by it, largest first;
    # a second, smallest first
    heads = page.sortable_heads
    explained = [r for r in latents if not r["skipped"]]
    want = [f"latent-{r['latent']}" for r in sorted(explained, key=lambda r: -r["firing_rate"])]
    assert len({r["firing_rate"] for r in explained}) == len(explained) > 1
    for clicks, order in ((1, want), (2, want[::-1])):
        clicked = tmp_path / f"clicked{clicks}.html"
        click = f"document.querySelectorAll('#index th')[{heads.index('firing rate')}].click();" * clicks
        clicked.write_text(
            Path(url[len("file://") :]).read_text().replace("</body>", f"<script>{click}</script></body>")
        )
        dom = chromium("--dump-dom", clicked.as_uri(), profile=tmp_path / f"profile-click{clicks}")
        index = dom.stdout.split('id="index"', 1)[1].split("</table>", 1)[0]
        assert re.findall(r'href="#(latent-\d+)"', index) == order
