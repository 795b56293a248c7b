"""findbench.find.code_scoring and the find_nmse / find_exact_match metric modules."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from findbench.find import code_scoring
from findbench.find.code_scoring import NMSE_GRID, nmse, score_exact_match, score_nmse
from findbench.sandbox import Sandbox, SandboxLimits
from tests._paths import REPO

GT = "import numpy as np\n\ndef function(x):\n    return 0.5 * x ** 2 - 3 * np.sin(x) + 4\n"
X = np.arange(-127.5, 128.0, 1.0)
GT_VALUES = 0.5 * X**2 - 3 * np.sin(X) + 4


@pytest.fixture(scope="module")
def box():
    with Sandbox(SandboxLimits(workers=2, timeout=4.0, cpu_seconds=1)) as sandbox:
        yield sandbox


def test_grid_is_finds():
    assert len(NMSE_GRID) == 256 and NMSE_GRID[0] == -127.5 and NMSE_GRID[-1] == 127.5
    assert np.allclose(np.diff(NMSE_GRID), 1.0)


def test_nmse_formula_by_hand():
    gt = [1.0, -2.0, float("nan"), None, 3.0]
    pred = [1.5, -2.0, "ignored", None, 2.0]
    assert nmse(gt, pred) == pytest.approx((0.25 + 0.0 + 1.0) / (1 + 4 + 9))
    assert nmse([0.0, 0.0], [0.0, 0.0]) == 0.0
    assert nmse([0.0, 0.0], [0.0, 1e-9]) == math.inf
    assert nmse([1.0, 2.0], [1.0, float("nan")]) == math.inf
    assert nmse([1.0, 2.0], [1.0, None]) == math.inf
    assert nmse([1.0, 2.0], [1.0, True]) == math.inf
    with pytest.raises(ValueError, match="no finite"):
        nmse([float("inf")], [1.0])


def test_score_nmse_hand_computed(box):
    shifted = GT.replace("+ 4\n", "+ 5\n")  # gt + 1
    helper_last = (
        "import numpy as np\n"
        "def noise(x):\n    return 1000.0\n"
        "def my_guess(x):\n    return 0.5 * x * x + 4\n"  # drops the sine term
    )
    failing = [
        "def f(x):\n    raise RuntimeError('nope')\n",
        "x = 1\n",
        "def f(x):\n    return float('nan')\n",
        "def f(x):\n    return 'text'\n",
        "def f(x):\n    while True:\n        pass\n",
        "def f(x:\n",
    ]
    preds = [GT, shifted, helper_last] + failing
    out = score_nmse(preds, [GT] * len(preds), sandbox=box)
    expected_shift = np.sum(np.ones_like(X)) / np.sum(GT_VALUES**2)
    expected_sine = np.sum((3 * np.sin(X)) ** 2) / np.sum(GT_VALUES**2)
    assert out["nmse"][0] == 0.0
    assert out["nmse"][1] == pytest.approx(expected_shift, rel=1e-9)
    assert out["nmse"][2] == pytest.approx(expected_sine, rel=1e-9)
    assert out["nmse"][3:] == [math.inf] * len(failing)
    assert out["success_rate"] == pytest.approx(3 / len(preds))
    assert out["n"] == len(preds)
    low, high = out["success_rate_ci"]
    assert 0.0 <= low < out["success_rate"] < high <= 1.0
    assert out["n_failed"] == len(failing)
    assert out["errors"][:3] == [None] * 3 and all(out["errors"][3:])  # one reason per failed item
    assert out["mean_nmse"] == pytest.approx((expected_shift + expected_sine) / 3, rel=1e-9)
    assert all(type(v) is float for v in out["nmse"])
    # The threshold decides success.
    tight = score_nmse(preds[:3], [GT] * 3, threshold=expected_shift / 2, sandbox=box)
    assert tight["success_rate"] == pytest.approx(1 / 3)


def test_noisy_ground_truth_and_non_finite_points(box):
    noisy = (
        "import numpy as np\nrng = np.random.default_rng(7)\n"
        "def function(x):\n    return 2 * x + rng.normal(0, 0.5)\n"
    )
    log_gt = "import numpy as np\ndef function(x):\n    return float(np.log(x))\n"  # NaN for x < 0
    log_pred = "import math\ndef f(x):\n    return math.log(x)\n"  # raises for x < 0: skipped
    zero = "def function(x):\n    return 0.0\n"
    out = score_nmse([noisy, log_pred, zero, "def f(x):\n    return 0.1\n"], [noisy, log_gt, zero, zero], sandbox=box)
    assert out["nmse"] == [0.0, 0.0, 0.0, math.inf]
    # The noiseless rule leaves the noise energy: small but not zero.
    out = score_nmse(["def f(x):\n    return 2 * x\n"], [noisy], sandbox=box)
    assert 0 < out["nmse"][0] < 1e-4 and out["success_rate"] == 1.0


def test_broken_reference_is_named(box):
    with pytest.raises(ValueError, match=r"references\[1\]"):
        score_nmse([GT, GT], [GT, "def function(x):\n    return 1 / 0\n"], sandbox=box)


def test_exact_match_quotes_and_one_raising_input(box):
    gt = "def function(s):\n    return s.replace('a', 'b')\n"
    inputs = ['say "aa"', "it's", "a\\'b", "", "banana"]
    right = "def helper(s):\n    return None\ndef f(s):\n    return ''.join('b' if c == 'a' else c for c in s)\n"
    raises_once = "def f(s):\n    if not s:\n        raise IndexError('empty')\n    return s.replace('a', 'b')\n"
    wrong = "def f(s):\n    return s\n"
    out = score_exact_match([right, raises_once, wrong], [gt] * 3, [inputs] * 3, sandbox=box)
    # wrong is right where nothing changes: "it's" and "".
    assert out["per_function"] == [1.0, 0.8, 0.4]
    assert out["exact_match"] == pytest.approx((1.0 + 0.8 + 0.4) / 3)


def _findbench_file() -> str:
    import findbench

    return str(Path(findbench.__file__).resolve().parent / "find" / "code_scoring.py")


def test_failed_items_say_why(box):
    """The sandbox's reason per failed item, one short line, no host path of findbench; None for
    an item that ran."""
    secret = _findbench_file()
    preds = [
        GT,
        "def f(x):\n    y = (x +\n    return y\n",
        "def f(x):\n    return float(open('/etc/shadow').read())\n",
        f"def f(x):\n    return float(open({secret!r}).read())\n",
        "def f(x):\n    raise ValueError('first line\\n  second line')\n",
        "import math\ndef f(x):\n    return math.inf\n",
        "def f(x):\n    while True:\n        pass\n",
    ]
    out = score_nmse(preds, [GT] * len(preds), sandbox=box)
    errors = out["errors"]
    assert len(errors) == len(preds) and errors[0] is None and out["nmse"][0] == 0.0
    assert re.fullmatch(r"SyntaxError: .+ \(line 2\)", errors[1]), errors[1]
    # refused by Landlock (EACCES), or absent from bubblewrap's view of the file system (ENOENT)
    refused = (
        r"(PermissionError: \[Errno 13\] Permission denied"
        r"|FileNotFoundError: \[Errno 2\] No such file or directory)"
    )
    assert re.fullmatch(refused + r": '/etc/shadow' \(at x = -127\.5\)", errors[2]), errors[2]
    assert re.fullmatch(refused + r": '<findbench>/find/code_scoring\.py' \(at x = -127\.5\)", errors[3]), errors[3]
    assert errors[4] == "ValueError: first line second line (at x = -127.5)"
    assert errors[5] == "returned inf (at x = -127.5)"
    assert errors[6].startswith("timeout: ") and "limit" in errors[6]
    for e in errors[1:]:
        assert "\n" not in e and "Traceback" not in e and "<program>" not in e and len(e) <= 240
        assert str(Path(secret).parent.parent) not in e
    assert out["n_failed"] == sum(e is not None for e in errors)

    gt = "def function(s):\n    return s.upper()\n"
    raises_once = "def f(s):\n    if not s:\n        raise IndexError('empty')\n    return s.upper()\n"
    shadow = "def f(s):\n    return open('/etc/shadow').read()\n"
    out = score_exact_match([gt, "def f(s:\n", raises_once, shadow], [gt] * 4, [["ab", "", "c"]] * 4, sandbox=box)
    assert out["per_function"] == [1.0, 0.0, pytest.approx(2 / 3), 0.0]
    assert out["errors"][0] is None
    assert re.fullmatch(r"SyntaxError: .+ \(line 1\)", out["errors"][1]), out["errors"][1]
    assert out["errors"][2] == "IndexError: empty (on test input 1; 1 of 3 inputs raised)"
    assert re.fullmatch(refused + r": '/etc/shadow' \(on test input 0; 3 of 3 inputs raised\)", out["errors"][3])


def test_nmse_reasons_without_an_exception():
    assert code_scoring._nmse([1.0, 2.0], [1.0, "x"]) == (math.inf, 1, "returned str, not a number")
    assert code_scoring._nmse([1.0, 2.0], [None, 2.0]) == (math.inf, 0, "no value")
    assert code_scoring._nmse([0.0, 0.0], [0.0, 1.0])[2].startswith("NMSE undefined")
    assert code_scoring._nmse([1.0], [1e300])[2] == "the squared error overflows float64"
    assert code_scoring._nmse([1.0, 2.0], [1.0, 2.5])[1:] == (None, None)


def test_exact_match_types_must_agree(box):
    gt = "def function(s):\n    return len(s) > 2\n"
    pred = "def f(s):\n    return int(len(s) > 2)\n"
    out = score_exact_match([pred, gt], [gt, gt], [["abc", "a"], ["abc", "a"]], sandbox=box)
    assert out["per_function"] == [0.0, 1.0]


@pytest.mark.parametrize(
    ("call", "exc", "field"),
    [
        (lambda: score_nmse([GT], [GT, GT]), ValueError, "predictions and references"),
        (lambda: score_nmse([GT, 3], [GT, GT]), TypeError, r"predictions\[1\]"),
        (lambda: score_nmse([GT], [None]), TypeError, r"references\[0\]"),
        (lambda: score_nmse(GT, [GT]), TypeError, "predictions"),
        (lambda: score_nmse([GT], [GT], threshold=-1), ValueError, "threshold"),
        (lambda: score_exact_match([GT], [GT], [["a"], ["b"]]), ValueError, "test_inputs"),
        (lambda: score_exact_match([GT], [GT], ["abc"]), TypeError, r"test_inputs\[0\]"),
        (lambda: score_exact_match([GT], [GT], [[]]), ValueError, r"test_inputs\[0\]"),
        (lambda: score_exact_match([GT], [GT], None), ValueError, "test_inputs"),
    ],
)
def test_malformed_inputs_name_the_field(call, exc, field):
    with pytest.raises(exc, match=field):
        call()


def test_evaluate_modules_load_and_compute():
    import evaluate

    find_nmse = evaluate.load(str(REPO / "metrics" / "find_nmse"))
    shifted = GT.replace("+ 4\n", "+ 5\n")
    out = find_nmse.compute(predictions=[GT, shifted, "x = 1\n"], references=[GT] * 3, workers=1)
    assert out["nmse"][0] == 0.0 and out["nmse"][2] == math.inf
    assert out["nmse"][1] == pytest.approx(256 / np.sum(GT_VALUES**2), rel=1e-9)
    assert out["success_rate"] == pytest.approx(2 / 3) and out["n_failed"] == 1
    assert out["errors"] == [None, None, "LookupError: the program defines no top-level function"]
    assert "landlock" in out["isolation"].split("+")
    # evaluate checks the columns against the metric's features before _compute runs: a
    # non-string first item or unequal lengths are refused there, the message showing the input
    with pytest.raises(ValueError, match=r"Input predictions: \[1\]"):
        find_nmse.compute(predictions=[1], references=[GT])
    with pytest.raises(ValueError, match=r"predictions \(1\) and references \(2\)"):
        find_nmse.compute(predictions=[GT], references=[GT, GT])
    # a missing item further on reaches _compute, which names it
    with pytest.raises(TypeError, match=r"predictions\[1\]"):
        find_nmse.compute(predictions=[GT, None], references=[GT, GT])

    find_em = evaluate.load(str(REPO / "metrics" / "find_exact_match"))
    gt = "def function(s):\n    return s.upper()\n"
    out = find_em.compute(
        predictions=[gt, "def f(s):\n    return s\n"],
        references=[gt, gt],
        test_inputs=[["it's", "A"], ['"q"', "B"]],
        workers=1,
    )
    assert out == {
        "exact_match": 0.75,
        "exact_match_ci": [0.5, 1.0],
        "n": 2,
        "per_function": [1.0, 0.5],
        "errors": [None, None],
        "isolation": out["isolation"],
    }
    assert "landlock" in out["isolation"].split("+")  # the metric output says what confined the code
    with pytest.raises(ValueError, match="test_inputs"):
        find_em.compute(predictions=[gt], references=[gt])
    with pytest.raises(TypeError, match=r"test_inputs\[0\]"):
        find_em.compute(predictions=[gt], references=[gt], test_inputs=["abc"])


def test_metric_modules_hold_no_algorithm():
    for name in ("find_nmse", "find_exact_match"):
        folder = REPO / "metrics" / name
        source = (folder / f"{name}.py").read_text()
        assert "code_scoring.score_" in source and "np." not in source
        for part in ("README.md", "app.py", "requirements.txt"):
            assert (folder / part).is_file()
        card = (folder / "README.md").read_text()
        assert card.startswith("---\n") and "app_file: app.py" in card and "## Limitations and Bias" in card
    assert code_scoring.REFERENCE_ENTRY == "function"


def test_real_find_rows_score_perfectly_against_themselves(box):
    """The dataset generators' code runs in the sandbox and scores itself perfectly."""
    from findbench.find import numeric, strings

    rows = numeric.generate(10, seed=0, progress=False)
    refs = [r["code"] for r in rows]
    shifted = [code + "\n\ndef interpretation(x):\n    return function(x) + 1.0\n" for code in refs]
    out = score_nmse(refs + shifted, refs + refs, sandbox=box)
    assert out["nmse"][:10] == [0.0] * 10 and out["n_failed"] == 0
    assert all(0 < v < math.inf for v in out["nmse"][10:])

    rows = strings.generate(12, seed=0, progress=False)
    codes = [r["code"] for r in rows]
    inputs = [r["test_inputs"] for r in rows]
    assert all(len(x) == 10 for x in inputs)
    out = score_exact_match(codes, codes, inputs, sandbox=box)
    assert out["per_function"] == [1.0] * 12
    # Swapping functions gives wrong answers (the functions differ on their test inputs).
    out = score_exact_match(codes[1:] + codes[:1], codes, inputs, sandbox=box)
    assert out["exact_match"] < 0.5


def test_the_scores_take_the_sandbox_limits_whole():
    from findbench.sandbox import SandboxLimits

    loop = "def f(x):\n    while True:\n        pass\n"
    limits = SandboxLimits(workers=1, timeout=1.0, cpu_seconds=30)
    out = score_nmse([loop], [GT], limits=limits)
    assert out["nmse"] == [math.inf] and out["errors"][0].startswith("timeout: wall-clock limit of 1 s")
    out = score_exact_match([loop], ["def function(s):\n    return s\n"], [["a"]], limits=limits)
    assert out["per_function"] == [0.0] and "wall-clock limit of 1 s" in out["errors"][0]
