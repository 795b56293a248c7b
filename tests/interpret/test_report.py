"""`findbench report`: the HTML report of a scored run, its figures, and the page in a browser.

The runs are real ones on the small data folder of conftest.py: the ``oracle`` and ``random``
reference interpreters (no LM), and a scripted LM that calls the numeric functions before
answering with wrong code (so its episodes carry calls). They are scored by ``evaluate_run``
with a scripted judge (right on ground-truth descriptions, option 1 otherwise) and drawn by
``write_report``. The page is checked twice: its HTML with ``html.parser``, and as rendered by
headless Chromium (a screenshot and the DOM after rendering). Chromium is installed by
``make setup`` (scripts/setup.sh); without /usr/bin/chromium the browser test is skipped.
"""

from __future__ import annotations

import math
import os
from html.parser import HTMLParser
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest
from markupsafe import escape
from matplotlib.figure import Figure
from matplotlib.image import imread

from findbench import cli
from findbench.interpret.config import EvaluateConfig, ReportConfig
from findbench.interpret.evaluate import evaluate_run
from findbench.interpret.protocol import format_answer
from findbench.interpret.report import (
    REPORT_FILE,
    call_points,
    numeric_curves,
    plot_category,
    plot_numeric,
    write_report,
)
from findbench.interpret.scoreboard import PAPER_TABLE2
from findbench.interpret.scores import Cell, Estimate, Scores
from findbench.stats import INTERVAL_NOTE, SMALL_N_LEGEND
from tests._chromium import CHROMIUM, chromium
from tests.interpret.fakes import GenerationLM, KnowingJudge, interpret
from tests.interpret.test_run import logged

CONFIGS = ["numeric", "strings", "neurons_relations"]
WRONG_NUMERIC = "def interpretation(x):\n    return 3.0 * x + 40.0\n"
CALLED = ["-50", "-10", "0", "15", "50", "250"]  # 250 lies outside the domain [-100, 100]


class CallingLM(GenerationLM):
    """Calls the function on CALLED first, then answers with wrong code."""

    name = "calling-lm"

    def generate(self, conversations, **kwargs):
        return ["Let me look at a few values.\nPYTHON(function.py " + " ".join(CALLED) + ")"
                if not any(m["role"] == "assistant" for m in messages) else
                format_answer("A line with slope 3 and intercept 40.", "There is no unusual interval.", WRONG_NUMERIC)
                for messages in conversations]


def _scored_run(root: Path, data_dir: Path, interpreter, rows, *, configs=CONFIGS, limit=3) -> Path:
    run = interpret(data_dir, interpreter, configs=configs, limit=limit, out=root, rounds=3, progress=False)
    evaluate_run(EvaluateConfig(run, judge=KnowingJudge(rows), out=run / "scores"), progress=False)
    return run


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory, data_dir, rows) -> Path:
    run = _scored_run(tmp_path_factory.mktemp("report") / "oracle", data_dir, "oracle", rows)
    write_report(ReportConfig(run_dir=str(run)))
    return run


@pytest.fixture(scope="module")
def random_run(tmp_path_factory, data_dir, rows) -> Path:
    run = _scored_run(tmp_path_factory.mktemp("report") / "random", data_dir, "random", rows)
    write_report(ReportConfig(run_dir=str(run)))
    return run


@pytest.fixture(scope="module")
def calling_run(tmp_path_factory, data_dir, rows) -> Path:
    return _scored_run(
        tmp_path_factory.mktemp("report") / "calling", data_dir, CallingLM(), rows, configs=["numeric"], limit=None
    )


class Page(HTMLParser):
    """The parts of report.html the tests look at."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: dict[str, int] = {}
        self.images: list[str] = []
        self.rows: list[list[str]] = []
        self.headers: list[str] = []
        self.details: list[str] = []  # the id of each <details>
        self.roles: list[str] = []
        self.text: list[str] = []
        self.attr_names: set[str] = set()
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._role = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.attr_names.update(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag not in ("img", "meta", "br"):
            self.stack.append(tag)
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        elif tag == "tr" and "table" in self.stack:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "details":
            self.details.append(attrs.get("id", ""))
        elif tag == "div" and attrs.get("class") == "role":
            self._role = True

    def handle_endtag(self, tag):
        if self.stack and self.stack[-1] == tag:
            self.stack.pop()
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            if tag == "th":
                self.headers.append(self._row[-1])
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row and "th" not in self.stack:
                self.rows.append(self._row)
            self._row = None
        elif tag == "div":
            self._role = False

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)
        if self._role:
            self.roles.append(data)


def _parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def _non_blank(path: Path) -> np.ndarray:
    image = imread(path)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    rgb = image[..., :3].astype(float)
    assert rgb.std() > 0.02  # more than one colour
    assert (rgb < 0.5).mean() > 0.002  # some dark ink: lines, text
    return image


def _episodes(run: Path) -> list[Path]:
    return sorted(p for p in run.glob("*/*/f*") if p.is_dir())


# --------------------------------------------------------------------------- files and HTML


def test_report_files_and_html_structure(oracle_run):
    scores = oracle_run / "scores"
    report = scores / REPORT_FILE
    assert report.is_file()
    for category in CONFIGS:
        _non_blank(scores / f"scores-{category}.png")
    for folder in sorted((oracle_run / "numeric" / "aia").iterdir()):
        _non_blank(scores / f"numeric-aia-{folder.name}.png")

    page = _parse(report)
    assert page.tags["html"] == page.tags["body"] == 1 and page.tags["table"] >= 1
    # the one page shell and stylesheet of findbench's reports (the AutoInterp dashboard's too), inline
    css = files("findbench").joinpath("templates", "page.css").read_text(encoding="utf-8")
    source = report.read_text(encoding="utf-8")
    assert source.split("<style>", 1)[1].split("</style>", 1)[0].strip() == css.strip() and page.tags["style"] == 1
    # every image is a relative path to a file beside the page
    assert page.images and all(not src.startswith(("/", "file:", "http")) for src in page.images)
    assert all((scores / src).is_file() for src in page.images)
    assert {f"scores-{c}.png" for c in CONFIGS} <= set(page.images)
    # Table 2: the paper's rows and the run's row
    assert page.headers[0] == "interpreter" and "numeric code (NMSE<0.1)" in page.headers
    by_name = {row[0]: row[1:] for row in page.rows if row}
    assert by_name["GPT-4"][:3] == ["0.33", "0.23", "0.82"]
    assert set(PAPER_TABLE2) <= set(by_name)
    # each of the run's cells with its interval and n, marked (n < 10), and the legend under the table
    assert by_name["oracle (this run)"][:3] == ["1.00 [1.00, 1.00] (n=3)†"] * 3
    text = "".join(page.text)
    assert (
        SMALL_N_LEGEND in text
        and INTERVAL_NOTE in text
        and "Functions scored in this run: numeric code (NMSE<0.1): 3," in text
    )
    assert "How the interpreters experimented" in text and 'href="table.md"' in report.read_text(encoding="utf-8")
    # a transcript per episode, messages labelled by role
    assert len(page.details) == len(_episodes(oracle_run)) == 3 + 3 + 3
    assert "t-numeric_f00000-aia" in page.details
    assert {"system", "user", "assistant"} <= set(page.roles)
    text = "".join(page.text)
    assert "[DESCRIPTION]" in text and "f(x) = 2*x - 1" in text


def test_wrong_code_run_scores_lower_and_is_drawn(random_run):
    scores = random_run / "scores"
    page = _parse(scores / REPORT_FILE)
    by_name = {row[0]: row[1:] for row in page.rows if row}
    assert not by_name["random (this run)"][1].startswith("1.00")  # strings exact match of another function's code
    for folder in sorted((random_run / "numeric" / "aia").iterdir()):
        _non_blank(scores / f"numeric-aia-{folder.name}.png")


def test_model_text_is_escaped(tmp_path, data_dir, rows):
    """A FIND-layout folder (no transcript): hostile text shows as text, not markup."""
    run = tmp_path / "find-results"
    folder = run / "numeric" / "f00000"
    folder.mkdir(parents=True)
    hostile = "<script>document.title='pwned'</script> & <b>bold</b> \" onmouseover=\"alert(1)"
    (folder / "description.txt").write_text(hostile)
    (folder / "code.py").write_text(WRONG_NUMERIC)
    evaluate_run(EvaluateConfig(run, data=data_dir, out=tmp_path / "scores"), progress=False)
    report = write_report(ReportConfig(run_dir=str(run), scores=str(tmp_path / "scores"), data=str(data_dir),
                                       out=str(tmp_path / "report")))
    assert report == tmp_path / "report" / REPORT_FILE
    source = report.read_text(encoding="utf-8")
    assert "<script>" not in source and "<b>bold</b>" not in source
    assert "&lt;script&gt;document.title=" in source
    page = _parse(report)
    assert page.tags.get("script") is None
    assert not any(name.startswith("on") for name in page.attr_names) and page.tags.get("b") is None
    assert "".join(page.text).count(hostile) == 3  # figure caption, judged table, the answer's description part
    assert page.details == ["t-numeric_f00000-aia"]
    assert "FIND's layout: the answer's parts only" in "".join(page.text)
    assert (tmp_path / "report" / "numeric-aia-f00000.png").is_file()
    assert not (tmp_path / "scores" / REPORT_FILE).exists()


def test_a_damaged_episode_is_named_on_its_page(tmp_path):
    """A log record that is no episode does not stop the report: its page says which log and why."""
    from findbench.find.rows import load_rows
    from findbench.interpret.runs import read_scored_run
    from tests.interpret.logged import write_logs

    row = load_rows("strings")[0]
    write_logs(tmp_path / "run", [{"row": row, "description": "x", "store": {"calls": "many"}}])
    (record,) = read_scored_run(tmp_path / "run")["records"]
    why = record["damage"]
    assert record["episode"] is None and "\n" not in why
    assert why.startswith(f"episode {row['function_id']} (aia) in {tmp_path / 'run' / 'logs'}")
    assert "the record is no episode" in why and "calls" in why
    evaluate_run(EvaluateConfig(tmp_path / "run", judge=KnowingJudge({"strings": [row]}),
                                out=tmp_path / "run" / "scores"), progress=False)
    assert escape(why) in write_report(ReportConfig(run_dir=str(tmp_path / "run"))).read_text(encoding="utf-8")


def test_calls_are_recorded_and_marked(calling_run):
    episode = logged(calling_run, "numeric/f00000")
    assert [c["inputs"] for c in episode["calls"]] == [CALLED]
    points = call_points(episode["calls"])
    assert [x for x, _ in points] == [float(v) for v in CALLED]
    assert points[0] == (-50.0, -101.0)  # 2x - 1
    report = write_report(ReportConfig(run_dir=str(calling_run)))
    page = _parse(report)
    assert "function.py -50 -10 0 15 50 250" in "".join(page.text)  # the calls table of the transcript
    _non_blank(report.parent / "numeric-aia-f00002.png")


def test_errors_name_the_field(tmp_path, oracle_run):
    with pytest.raises(FileNotFoundError, match="--scores: no scores.json"):
        write_report(ReportConfig(run_dir=str(oracle_run), scores=str(tmp_path / "nowhere")))


# ------------------------------------------------------------------------------------ browser


def test_report_renders_inchromium(oracle_run, tmp_path):
    if not CHROMIUM.is_file():
        pytest.skip("chromium is not installed (/usr/bin/chromium); run `make setup` to install it")
    report = (oracle_run / "scores" / REPORT_FILE).resolve()
    url = report.as_uri()
    shot = tmp_path / "shot.png"
    done = chromium(
        f"--screenshot={shot}", "--window-size=1280,2000", "--hide-scrollbars", url, profile=tmp_path / "profile1"
    )
    assert shot.is_file(), f"no screenshot (rc {done.returncode}): {done.stderr[-2000:]}"
    assert shot.stat().st_size > 20_000
    image = _non_blank(shot)
    assert image.shape[:2] == (2000, 1280)
    # the figures were loaded: the run's bars are orange somewhere on the page
    rgb = image[..., :3]
    orange = (rgb[..., 0] > 0.9) & (np.abs(rgb[..., 1] - 0.5) < 0.08) & (rgb[..., 2] < 0.15)
    assert orange.sum() > 200

    dom = chromium("--dump-dom", url, profile=tmp_path / "profile2")
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = Page()
    page.feed(dom.stdout)
    by_name = {row[0]: row[1:] for row in page.rows if row}
    assert by_name["GPT-4"][:3] == ["0.33", "0.23", "0.82"]
    assert by_name["oracle (this run)"][:3] == ["1.00 [1.00, 1.00] (n=3)†"] * 3
    assert len(page.details) == 9 and {"system", "assistant"} <= set(page.roles)
    assert "[DESCRIPTION]" in "".join(page.text)


# ------------------------------------------------------------------------------------ figures


def _capture(monkeypatch) -> list[Figure]:
    """Keep each Figure that is saved (it is still written to disk)."""
    seen: list[Figure] = []
    original = Figure.savefig

    def savefig(self, *args, **kwargs):
        seen.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return seen


def _legend(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_numeric_figure_oracle_and_wrong(by_id, tmp_path, monkeypatch):
    seen = _capture(monkeypatch)
    clean, corrupted = by_id["numeric/f00000"], by_id["numeric/f00002"]
    curves = numeric_curves([clean, clean, corrupted], [clean["code"], WRONG_NUMERIC, corrupted["code"]])
    oracle, wrong, oracle_corrupted = curves
    assert len(oracle.x) == 401 and oracle.x[0] == -100.0 and oracle.x[-1] == 100.0
    assert oracle.note is None and np.allclose(oracle.interpretation, oracle.truth)
    assert np.allclose(oracle.truth, [2 * x - 1 for x in oracle.x])
    assert not np.allclose(wrong.interpretation, wrong.truth) and wrong.note is None

    calls = [
        {
            "round": 1,
            "command": "PYTHON(function.py 5 12 bad)",
            "inputs": ["5", "12", "bad"],
            "outputs": [26.0, 5.02, None],
            "errors": [None, None, "ValueError: not a number"],
        }
    ]
    paths = [
        plot_numeric(clean, oracle, [], tmp_path / "oracle.png"),
        plot_numeric(clean, wrong, calls, tmp_path / "wrong.png"),
        plot_numeric(corrupted, oracle_corrupted, calls, tmp_path / "corrupted.png"),
    ]
    images = [_non_blank(p) for p in paths]
    assert not np.array_equal(images[0], images[1])
    legends = [_legend(f) for f in seen]
    assert legends[0] == ["ground truth", "interpretation (code)", "agent's calls: none"]
    assert "agent's calls (2)" in legends[1]
    assert legends[2][0] == "corrupted interval (ground truth)"
    # the shaded span is the row's corrupted interval (10, 20)
    (span,) = seen[2].axes[0].patches
    xs = span.get_patch_transform().transform(span.get_path().vertices)[:, 0]  # x in data units
    assert min(xs) == pytest.approx(10.0) and max(xs) == pytest.approx(20.0)


def test_numeric_figure_without_usable_code(by_id, tmp_path, monkeypatch):
    seen = _capture(monkeypatch)
    row = by_id["numeric/f00000"]
    codes = [
        None,
        "   \n",
        "def f(x:\n",
        "def f(x):\n    raise ValueError('nope')\n",
        "def f(x):\n    return 'text' if x < 0 else x\n",
        # runs in the sandbox only: the environment of this process is untouched
        "import os\nos.environ['FINDBENCH_REPORT_TEST'] = 'ran here'\ndef f(x):\n    return x\n",
    ]
    curves = numeric_curves([row] * len(codes), codes)
    assert [c.note for c in curves[:2]] == ["no code given", "no code given"]
    assert curves[2].interpretation is None and curves[2].note.startswith("code failed (error): SyntaxError")
    assert curves[3].interpretation is None and "ValueError: nope" in curves[3].note
    assert curves[4].interpretation is not None and curves[4].note == "no finite value on 200 of 401 points"
    assert curves[5].note is None and "FINDBENCH_REPORT_TEST" not in os.environ
    for k, curve in enumerate(curves[:4]):
        assert all(not math.isnan(v) for v in curve.truth)
        _non_blank(plot_numeric(row, curve, None, tmp_path / f"missing{k}.png"))
    legends = [_legend(f) for f in seen]
    assert legends[0][1] == "interpretation not drawn: no code given; ground truth only"
    assert legends[2][1].startswith("interpretation not drawn: code failed (error)")
    assert all(len(fig.axes[0].get_lines()) == 2 for fig in seen)  # the ground truth and an empty legend line


def test_bar_chart_has_the_paper_rows(tmp_path, monkeypatch):
    seen = _capture(monkeypatch)
    scores = Scores({"strings": {"aia": Cell(exact_match=Estimate(0.5, None, 12))}})
    _non_blank(plot_category("strings", scores, tmp_path / "strings.png", interpreter="mine"))
    (fig,) = seen
    assert _legend(fig) == ["GPT-4", "GPT-3.5", "Llama-2-70b-chat", "mine (this run)"]
    heights = [round(p.get_height(), 2) for p in fig.axes[0].patches]
    assert heights == [0.23, 0.82, 0.13, 0.66, 0.01, 0.33, 0.5, 0.0]
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert "n/a" in labels and "0.50\nn=12" in labels
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["strings code (exact match)", "strings unit test"]


def test_bar_chart_has_error_bars_and_n(tmp_path, monkeypatch):
    """The run's bars carry their bootstrap interval as error bars and say their n (marked
    when n < 10); a bar without an interval gets none."""
    import matplotlib.axes

    bars: list[dict] = []
    original = matplotlib.axes.Axes.bar

    def bar(self, *args, **kwargs):
        bars.append(kwargs)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "bar", bar)
    seen = _capture(monkeypatch)
    scores = Scores(
        {
            "strings": {
                "aia": Cell(
                    exact_match=Estimate(0.5, (0.2, 0.8), 6), unit_test_accuracy=Estimate(0.9, (0.85, 0.95), 40)
                )
            }
        }
    )
    _non_blank(plot_category("strings", scores, tmp_path / "strings.png"))
    assert [b["yerr"] for b in bars[:3]] == [None] * 3  # the paper's rows: no interval reported
    below, above = bars[3]["yerr"]
    assert below == pytest.approx([0.3, 0.05]) and above == pytest.approx([0.3, 0.05])
    (fig,) = seen
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert "0.50\nn=6†" in labels and "0.90\nn=40" in labels
    with_errors = [c for c in fig.axes[0].containers if getattr(c, "errorbar", None) is not None]
    assert len(with_errors) == 1 and len(with_errors[0].errorbar.lines[2]) == 1  # drawn, on the run's bars only


# ---------------------------------------------------------------------------------------- CLI


def test_cli_report_and_evaluate_report(calling_run, tmp_path, capsys):
    assert cli.main(["report", str(calling_run), "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / REPORT_FILE).is_file() and (tmp_path / "r" / "scores-numeric.png").is_file()
    assert f"wrote {tmp_path / 'r' / REPORT_FILE}" in capsys.readouterr().out
    # numeric only: evaluate needs no judge; --report writes the page into the scores folder
    assert cli.main(["evaluate", str(calling_run), "--out", str(tmp_path / "s"), "--report"]) == 0
    out = capsys.readouterr().out
    assert "| GPT-4 |" in out and f"wrote {tmp_path / 's' / REPORT_FILE}" in out
    assert sorted(p.name for p in (tmp_path / "s").iterdir() if p.suffix != ".png") == [
        "per_function.csv",
        "process.json",
        REPORT_FILE,
        "scores.json",
        "table.md",
        "unit_tests.csv",
    ]
    assert cli.main(["report", str(tmp_path / "absent")]) == 2


def test_evaluate_again_into_a_folder_holding_a_report(calling_run, tmp_path):
    """Rescoring replaces the scores folder together with the report made from the old scores."""
    assert cli.main(["evaluate", str(calling_run), "--out", str(tmp_path / "s"), "--report"]) == 0
    (tmp_path / "s" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds other files \\(notes.txt\\)"):
        evaluate_run(EvaluateConfig(calling_run, out=tmp_path / "s"), progress=False)
    (tmp_path / "s" / "notes.txt").unlink()
    assert cli.main(["evaluate", str(calling_run), "--out", str(tmp_path / "s")]) == 0
    assert not (tmp_path / "s" / REPORT_FILE).exists()
    assert (tmp_path / "s" / "scores.json").is_file()


def test_transcript_calls_show_pairs_as_the_reply_did():
    from findbench.find.export import format_pair_list
    from findbench.interpret.report import _pairs

    call = {
        "inputs": ["x) (1, 2", "line\n(3, 4)", "5"],
        "outputs": ["y", "z", None],
        "errors": [None, None, "not a number"],
    }
    assert _pairs(call) == r'("x) (1, 2", y) ("line\n(3, 4)", z) (5, error: not a number)'
    assert _pairs(call) == format_pair_list(call["inputs"], ["y", "z", "error: not a number"])
    assert _pairs({"inputs": [], "outputs": [], "errors": [], "error": "no inputs"}) == ""


def test_find_and_near_miss_unit_tests_each_have_a_heading_and_count(oracle_run):
    """An episode's judged unit tests come in two sections, FIND's and the near misses, each headed with
    its own count of right answers (numbered from 1 in each), and the page names the judge."""
    import html
    import re

    from findbench._io import read_csv_rows

    source = (oracle_run / "scores" / REPORT_FILE).read_text(encoding="utf-8")
    rows = read_csv_rows(oracle_run / "scores" / "unit_tests.csv")
    judged = sorted({(r["function_id"], r["method"]) for r in rows})
    assert judged and {r["tests"] for r in rows} == {"find", "near"}
    for function_id, method in judged:
        anchor = f't-{function_id.replace("/", "_")}-{method}'
        details = source.split(f'<details id="{anchor}">', 1)[1].split("</details>", 1)[0]
        headings = [html.unescape(h) for h in re.findall(r"<h4>(.*?)</h4>", details)]
        expected = []
        for name, heading in (("find", "FIND's unit tests"), ("near", "Near-miss unit tests")):
            tests = [r for r in rows if (r["function_id"], r["method"], r["tests"]) == (function_id, method, name)]
            if tests:
                expected.append(f"{heading}: {sum(r['right'] == '1' for r in tests)}/{len(tests)} right")
        assert headings == expected, anchor
        numbers = re.findall(r'<tr class="ut-(?:right|wrong)"><td>(\d+)</td>', details)
        assert numbers == [str(k) for n in (10, 10) for k in range(1, n + 1)][: len(numbers)] and len(numbers) == 20
    text = html.unescape(source)
    assert "Judge: `knowing-judge`, an LM object given from Python, in `logprob` mode." in text


def test_an_episodes_white_box_tool_calls_are_listed_and_counted():
    from findbench.interpret.report import _transcript

    episode = {"rounds": 2, "stop_reason": "answer", "messages": [], "calls": [], "tool_calls": [
        {"round": 1, "tool": "run_with_cache", "arguments": '{"tokens":[1],"hooks":["blocks.0.attn.hook_pattern"]}',
         "error": None, "reply_chars": 120},
        {"round": 1, "tool": "ablate", "arguments": '{"component":"blocks.0.mlp"}', "error": "mode: 'x' is not one",
         "reply_chars": 0},
        {"round": 2, "tool": "ablate", "arguments": "<b>" + "x" * 900, "error": None, "reply_chars": 7}, "junk"]}
    record = {"function_id": "rasp/f00001", "method": "aia", "episode": episode, "row": {}, "damage": None,
              "description": "d"}
    t = _transcript(record, None, [])
    assert "3 tool call(s): ablate 2, run_with_cache 1" in t["summary"]
    rows = [r for _, r in t["tool_calls"]]
    assert rows[0] == ["1", "run_with_cache", episode["tool_calls"][0]["arguments"], "120 characters"]
    assert rows[1][3].startswith("mode:") and len(rows[2][2]) <= 401
