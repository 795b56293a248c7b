"""Export FIND functions as standalone scripts for external interpreter harnesses.

Each function becomes ``<out>/<category>/fNNNNN/function.py``. Running
``python function.py 1 2 3`` prints ``Function input - output pairs: (1, y1) (2, y2) (3, y3)``,
the format FIND interpreters expect (values as :func:`format_value` shows them: the script runs
its code). Numeric and string scripts are self-contained (the row's ``code`` plus a command-line
wrapper); neuron scripts call findbench, since their backbones are models.
"""

from __future__ import annotations

import inspect
import json
import textwrap
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from findbench._io import atomic_dir
from findbench._version import __version__
from findbench.find.config import ExportFunctionsConfig


def format_value(value) -> str:
    """How a value is shown in a pair line: a float with at most 4 decimals; anything else as its text,
    written as a JSON string (in double quotes, escaped) when it could be misread: when it holds ``(``,
    ``)``, ``,``, ``"``, a backslash, white space other than the space (escaped as ``\\uXXXX`` like
    control and format characters), or white space at either end. Numbers and ordinary words show as
    they are, so only a quoted value starts with ``"`` and no input or output can forge a pair.
    (The exported ``function.py`` runs this code as ``_show``.)"""
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")) or abs(value) >= 1e15:
            return str(value)
        return f"{value:.4f}".rstrip("0").rstrip(".") or "0"
    text = str(value)

    def unseen(c: str) -> bool:  # white space but the space, controls, format characters (e.g. bidi overrides)
        return c != " " and (c.isspace() or unicodedata.category(c) in ("Cc", "Cf"))

    if text == text.strip() and not any(c in '(),"\\' or unseen(c) for c in text):
        return text
    quoted = json.dumps(text, ensure_ascii=False)  # escapes the quote, the backslash and C0 controls
    return "".join(json.dumps(c)[1:-1] if unseen(c) else c for c in quoted)


def format_pair_list(inputs: Iterable, outputs: Iterable) -> str:
    """``(x1, y1) (x2, y2) …``, each value as :func:`format_value` shows it."""
    return " ".join(f"({format_value(x)}, {format_value(y)})" for x, y in zip(inputs, outputs))


def format_pairs(inputs: Iterable, outputs: Iterable) -> str:
    """``Function input - output pairs: (x1, y1) (x2, y2) …``."""
    return f"Function input - output pairs: {format_pair_list(inputs, outputs)}"


# format_value's own source runs in the script, so a script prints the line findbench prints.
_SHOW = textwrap.indent(inspect.getsource(format_value).replace("def format_value(", "def _show(", 1), "    ")
_MAIN = '''

if __name__ == "__main__":
    import json
    import sys
    import unicodedata

{show}
    _inputs = sys.argv[1:]
    {convert}
    print("Function input - output pairs: " + " ".join("(%s, %s)" % (_show(x), _show(y)) for x, y in zip(_inputs, _outputs)))
'''

#: category -> how the script of a function with runnable ``code`` computes its outputs
_CONVERT_CODE = {
    "numeric": "_inputs = [float(x) for x in _inputs]\n    _outputs = [float(function(x)) for x in _inputs]",
    "strings": "_outputs = [function(x) for x in _inputs]",
}


def render_script(row, *, data: str | None = None, seed: int = 0) -> str:
    """The ``function.py`` text for one row."""
    fid = row["function_id"]
    header = f"# FIND {fid} ({row['name']}), exported by findbench {__version__}.\n# Usage: python function.py INPUT [INPUT ...]\n"
    convert = _CONVERT_CODE.get(row["category"])
    if convert is not None:  # the row's code runs in the script
        return header + row["code"].rstrip() + "\n" + _MAIN.format(show=_SHOW, convert=convert)
    convert = (
        "from findbench import load_function\n"
        f"    _fn = load_function({fid!r}, data={data!r}, seed={seed!r})\n"
        "    _outputs = list(_fn(_inputs))"
    )
    return header + _MAIN.format(show=_SHOW, convert=convert).lstrip("\n")


def export_functions(cfg: ExportFunctionsConfig) -> int:
    """Write one script per function of ``cfg.configs`` under ``cfg.out`` (replaced atomically) with the
    settings ``cfg`` (``findbench export-functions``'s flags). Returns the number of scripts written.
    """
    from findbench.find import load_rows

    data_abs = str(Path(cfg.data).resolve()) if cfg.data is not None else None
    n = 0
    with atomic_dir(cfg.out) as tmp:
        for category in cfg.configs:
            for row in load_rows(category, seed=cfg.seed, data=cfg.data):
                local = row["function_id"].split("/", 1)[1]
                folder = tmp / category / local
                folder.mkdir(parents=True)
                (folder / "function.py").write_text(render_script(row, data=data_abs, seed=cfg.seed), encoding="utf-8")
                n += 1
    return n
