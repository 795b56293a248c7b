"""Reference interpreters that need no LM: the ceiling and the floor of a scoreboard.

- ``oracle``: the row's ground truth (description; corrupted interval or exception subdomain as
  ``[DOMAIN]``; ``code`` as ``[CODE]``).
- ``random``: the ground truth of another function of the category, picked from the run seed and
  the function id.
- ``constant``: one category-generic answer (:data:`CONSTANT_ANSWERS`), the floor to clear (rasp code:
  the row's most common output at every position, :func:`findbench.find.rasp.circuit.code_floors`).
- ``empty``: no answer (scores 0).
- ``observed``: calls the function on a fixed seeded plan, then answers with what those
  observations alone support (:mod:`findbench.interpret.floors`): the floor every interpreter's
  margin is measured from, met by construction (margin 0).
- ``attribution`` (``rasp`` under white-box ``--access``): no description or code, a component map
  from ablations and weight structure (:mod:`findbench.find.rasp.attribution`); with white-box access
  ``oracle`` answers the true component map too (:func:`findbench.interpret.whitebox.reference_components`).

They answer in the text format (``observed`` after one turn of commands), through the same loop
and scoring as an LM."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from findbench.constants import CONSTANT_DESCRIPTIONS
from findbench.find.export import format_value
from findbench.interpret.protocol import Answer

#: Interpreter names answered without an LM: the ceiling, and the floors a method must clear.
REFERENCE_INTERPRETERS = ("oracle", "random", "constant", "empty", "observed", "attribution")

#: The ``constant`` baseline: one fixed answer per category, whatever the function. Its
#: numeric ``[DOMAIN]`` says there is no corrupted interval (right for every clean function,
#: as "None" is for detection); its code returns a fixed value of the right type.
CONSTANT_ANSWERS: dict[str, Answer] = {
    "numeric": Answer(
        description=CONSTANT_DESCRIPTIONS["numeric"],
        domain="There is no interval where the function behaves unexpectedly.",
        code="def f(x):\n    return 0\n",
    ),
    "strings": Answer(description=CONSTANT_DESCRIPTIONS["strings"], code='def f(s):\n    return ""\n'),
    "neurons_entities": Answer(description=CONSTANT_DESCRIPTIONS["neurons_entities"]),
    "neurons_relations": Answer(description=CONSTANT_DESCRIPTIONS["neurons_relations"]),
    # rasp: the row's constant-output floor where the row has its program (:func:`constant_answer`), else the copy
    "rasp": Answer(description=CONSTANT_DESCRIPTIONS["rasp"], code="def f(x):\n    return list(x)\n"),
}


def _num(value: Any) -> str:
    return format_value(float(value))


def reference_domain(row: Mapping[str, Any]) -> str | None:
    """The ground-truth ``[DOMAIN]`` text of a row (None for strings and entity neurons)."""
    category = row.get("category")
    if category == "numeric":
        kind = row.get("corruption_type")
        if not kind:
            return (
                "There is no interval where the function behaves unexpectedly: "
                "the rule in the description holds on its whole domain."
            )
        cp = row.get("corruption_params")
        cp = json.loads(cp) if isinstance(cp, str) else dict(cp or {})
        b = [float(v) for v in cp.get("boundary", [])]
        if not b:
            raise ValueError(f"row['corruption_params'] of {row.get('function_id')} has no boundary")
        low, high = row.get("domain_low"), row.get("domain_high")
        if kind == "below":
            interval, where = f"[{_num(low if low is not None else -128)}, {_num(b[0])}]", f"x <= {_num(b[0])}"
        elif kind == "above":
            interval, where = f"[{_num(b[0])}, {_num(high if high is not None else 128)}]", f"x >= {_num(b[0])}"
        else:
            interval, where = f"[{_num(b[0])}, {_num(b[-1])}]", f"{_num(b[0])} < x < {_num(b[-1])}"
        noise = (f" drawn from a normal distribution with mean {_num(cp['mean'])} and standard deviation "
                 f"{_num(cp['std'])}" if "mean" in cp and "std" in cp else "")
        return (
            f"The function behaves unexpectedly on the interval {interval} ({where}): there its output is replaced "
            f"by random values{noise}. Elsewhere it follows the rule in the description."
        )
    if category == "neurons_relations":
        exception = (row.get("exception") or "").strip()
        if exception:
            return f'The rule does not hold when {exception}: there the function returns "undefined".'
        concept = (row.get("concept1") or "").strip() or "in the rule's domain"
        return f'The rule holds for every input that is {concept}; any other input returns "undefined".'
    return None


def oracle_answer(row: Mapping[str, Any]) -> Answer:
    """The row's own ground truth as an answer."""
    code = row.get("code") if row.get("category") in ("numeric", "strings", "rasp") else None
    return Answer(
        description=str(row.get("description") or "").strip(), domain=reference_domain(row), code=(code or None)
    )


def random_answer(row: Mapping[str, Any], pool: Sequence[Mapping[str, Any]], *, seed: int = 0) -> Answer:
    """The ground truth of another function of ``row``'s category from ``pool``, picked from ``seed``,
    the row's id and the pool's ids (not their order); ValueError naming ``pool`` when there is none."""
    fid, category = row.get("function_id"), row.get("category")
    if not (others := [r for r in pool if r.get("category") == category and r.get("function_id") != fid]):
        raise ValueError(f"pool: no function of category {category!r} other than {fid} to take a random answer from")
    return oracle_answer(
        min(others, key=lambda r: hashlib.sha256(f"{seed}|{fid}|{r['function_id']}".encode()).hexdigest()))


def constant_answer(row: Mapping[str, Any]) -> Answer:
    """The ``constant`` baseline's answer for ``row``'s category (:data:`CONSTANT_ANSWERS`);
    ValueError naming ``row['category']`` for a category it has none for."""
    category = row.get("category")
    if category not in CONSTANT_ANSWERS:
        raise ValueError(f"row['category'] must be one of {tuple(CONSTANT_ANSWERS)}, got {category!r}")
    if category == "rasp" and row.get("program"):  # the row's most common output at every position
        from findbench.find.rasp.circuit import code_floors

        return Answer(description=CONSTANT_ANSWERS[category].description, code=code_floors(dict(row))["constant"])
    return CONSTANT_ANSWERS[category]


def empty_answer(row: Mapping[str, Any]) -> Answer:
    """The ``empty`` baseline's answer: no description, no domain, no code."""
    return Answer(description="")


def reference_answer(
    name: str, row: Mapping[str, Any], pool: Sequence[Mapping[str, Any]] = (), *, seed: int = 0
) -> Answer:
    """The answer of the reference interpreter ``name`` (one of :data:`REFERENCE_INTERPRETERS`)
    for ``row``; ``pool`` (the functions ``random`` picks from) and ``seed`` matter only to
    ``random``."""
    if name == "observed":
        raise ValueError(
            "name: 'observed' answers after calling the function; its turns come from "
            "findbench.interpret.floors.observed_turns"
        )
    # attribution's component map: whitebox.reference_components
    answers = {"oracle": oracle_answer, "random": lambda r: random_answer(r, pool, seed=seed),
               "constant": constant_answer, "empty": empty_answer, "attribution": empty_answer}
    if name not in answers:
        raise ValueError(f"name must be one of {REFERENCE_INTERPRETERS}, got {name!r}")
    return answers[name](row)
