"""A setting's default is written once, in its config: no function in ``src/findbench`` declares
a parameter named like a field of a settings dataclass (a config built with ``_config.arg``)
with that field's default. Such a parameter restates the setting; the function takes the config
(or a sub-config) instead. Read from the source (``ast``), so nothing heavy is imported.

A config's settings are those of its package (``interpret/``, ``judge/``, ...; the modules at the
top are one package): ``seed=0`` of a FIND generator is the generator's own default, not a
restated ``findbench main --seed``."""

from __future__ import annotations

import ast
from pathlib import Path

from tests._paths import REPO

SRC = REPO / "src" / "findbench"

#: Defaults shared by convention, not settings: every seeded function starts from seed 0.
_CONVENTIONS = {("seed", "0")}

#: Restated defaults in files other helpers are rewriting in parallel (issue 40: the run side's
#: interpret/task.py and interpret/scorers.py; AutoInterp's are gone): the integrator empties
#: this list when their branches merge. ``module:function(parameter)``.
_PENDING: set[str] = {
    "interpret/scorers.py:unit_test_accuracy(judge)",
    "interpret/task.py:find_interpret(judge)",
}


def _modules() -> dict[str, ast.Module]:
    return {str(p.relative_to(SRC)): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(SRC.rglob("*.py"))}


def _is_arg(call: ast.AST) -> bool:
    return isinstance(call, ast.Call) and (getattr(call.func, "id", None) == "arg"
                                           or getattr(call.func, "attr", None) == "arg")


def _default(node: ast.AST) -> str | None:
    """A comparable form of a default: its value when it is a literal, else its source; None for a
    default that restates nothing (None, False: "not given")."""
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)
    return None if value is None or value is False else repr(value)


def _package(module: str) -> str:
    parts = Path(module).parts
    return parts[0] if len(parts) > 1 else ""


def settings_fields(modules: dict[str, ast.Module]) -> dict[tuple[str, str], dict[str, str]]:
    """(package, field name) -> {default: the config class that declares it} over every ``arg`` field."""
    fields: dict[tuple[str, str], dict[str, str]] = {}
    for name, tree in modules.items():
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for stmt in cls.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and _is_arg(stmt.value):
                    given = stmt.value.args[0] if stmt.value.args else None
                    default = _default(given) if given is not None else None
                    if default is not None and default != "MISSING" and (stmt.target.id, default) not in _CONVENTIONS:
                        fields.setdefault((_package(name), stmt.target.id), {})[default] = f"{name}:{cls.name}"
    return fields


def restated_defaults(modules: dict[str, ast.Module]) -> dict[str, str]:
    """``module:function(parameter)`` -> the config whose field's default it repeats."""
    fields, found = settings_fields(modules), {}
    for name, tree in modules.items():
        for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            args = fn.args
            positional = [*args.posonlyargs, *args.args]
            pairs = [*zip(positional[len(positional) - len(args.defaults):], args.defaults),
                     *((a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)]
            for param, default in pairs:
                config = fields.get((_package(name), param.arg), {}).get(_default(default) or "")
                if config is not None:
                    found[f"{name}:{fn.name}({param.arg})"] = config
    return found


def test_no_function_restates_a_settings_default():
    found = restated_defaults(_modules())
    new = {k: v for k, v in found.items() if k not in _PENDING}
    assert not new, "defaults written twice (take the config instead):\n" + "\n".join(
        f"  {k} repeats {v}" for k, v in sorted(new.items()))


def test_the_pending_list_holds_only_what_is_still_there():
    """The allow-list shrinks: an entry fixed since is taken out of it."""
    assert not _PENDING - set(restated_defaults(_modules()))


def test_the_walk_finds_a_restated_default(tmp_path):
    """The check itself: a function repeating a config field's default is found, a None default
    (not given) and a different default are not."""
    source = '''
@dataclass
class Settings:
    rounds: int = arg(3, "turns")
    mode: str = arg("auto", "how")
    data: str | None = arg(None, "folder")

def run(rows, rounds: int = 3, *, mode="auto", data=None):
    ...

def other(rounds=4, mode="off"):
    ...
'''
    found = restated_defaults({"pkg/x.py": ast.parse(source), "pkg/y.py": ast.parse("def f(rounds=3): ..."),
                               "other/z.py": ast.parse("def g(rounds=3): ...")})
    assert found == {"pkg/x.py:run(rounds)": "pkg/x.py:Settings", "pkg/x.py:run(mode)": "pkg/x.py:Settings",
                     "pkg/y.py:f(rounds)": "pkg/x.py:Settings"}
