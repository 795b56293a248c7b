"""FIND's prompts for the ``lm`` backbone of synthetic neurons (FIND §2.3, appendix G).

FIND runs its neurons on Vicuna-13B: an entity neuron asks whether the input relates to its
concept(s) and reads ``p("1") / (p("0") + p("1"))``; a relation neuron asks for the attribute,
or "undefined" for another kind or inside the exception. The texts are written for findbench
after that description; :func:`fill_prompt` replaces :data:`INPUT_PLACEHOLDER` with the input.
"""

from __future__ import annotations

import re

from findbench import _checks

INPUT_PLACEHOLDER = "{input}"
#: The assistant turn starts with this text before the scored "1"/"0" token.
ENTITY_ANSWER_PREFIX = "Answer: "
#: Scored tokens of entity neurons: activation = p(first) / (p(first) + p(second)).
ENTITY_CANDIDATES = ("1", "0")
#: The answer of a relation neuron outside its rule or inside its exception.
UNDEFINED = "undefined"

_CATEGORIES = {"entities": "neurons_entities", "neurons_entities": "neurons_entities",
               "relations": "neurons_relations", "neurons_relations": "neurons_relations"}

def _check_text(name: str, value: object, *, optional: bool) -> str | None:
    if value is None and optional:
        return None
    _checks.instance(name, value, str, f"a str{' or None' if optional else ''}")
    if not value.strip():
        if optional:
            return None
        raise ValueError(f"{name} must be a non-empty string")
    return value.strip()


def render_prompt(category: str, concept1: str, concept2: str | None = None, exception: str | None = None) -> str:
    """The FIND prompt (user message) of one synthetic neuron, with :data:`INPUT_PLACEHOLDER`.

    ``category`` is ``"neurons_entities"`` / ``"entities"`` or ``"neurons_relations"`` /
    ``"relations"``. Entities: ``concept1`` and, for an OR composition, ``concept2``; no exception.
    Relations: ``concept1`` the input kind (``"a country"``), ``concept2`` the output (required),
    ``exception`` the corruption clause or None.
    """
    kind = _CATEGORIES[_checks.one_of("category", category, sorted(_CATEGORIES))]
    c1 = _check_text("concept1", concept1, optional=False)
    c2 = _check_text("concept2", concept2, optional=True)
    exc = _check_text("exception", exception, optional=True)
    if kind == "neurons_entities":
        if exc is not None:
            raise ValueError("exception: entity neurons take no exception clause")
        topic = c1 if c2 is None else f"{c1} or to {c2}"
        return (
            "You are a neuron in a language model. You respond to words and short phrases that are "
            f"related to {topic}, and stay silent on everything else.\n"
            f"Is the input below related to {topic}? Reply with the single digit 1 if it is, "
            "or 0 if it is not.\n"
            "Input: " + INPUT_PLACEHOLDER
        )
    if c2 is None:
        raise ValueError("concept2: a relation needs its output kind")
    clause = "" if exc is None else f", or if {exc}"
    return (
        f"You implement a function. When the input is {c1}, return {c2}. "
        f'If the input is not {c1}{clause}, return "undefined". '
        "Reply with the answer only: no explanation, no full sentence.\n"
        "Input: " + INPUT_PLACEHOLDER
    )


def fill_prompt(prompt: str, text: str) -> str:
    """``prompt`` with its input placeholder replaced by ``text``."""
    if not isinstance(prompt, str) or INPUT_PLACEHOLDER not in prompt:
        raise ValueError(f"prompt must be a str containing {INPUT_PLACEHOLDER!r}")
    _checks.instance("text", text, str, "a str")
    return prompt.replace(INPUT_PLACEHOLDER, text)


_PREFIX = re.compile(r"^\s*(?:\[?answer\]?|output|response)\s*[:=]\s*", re.IGNORECASE)


def parse_relation_answer(text: str) -> str:
    """The answer in an LM completion: first non-empty line, minus an "Answer:" label,
    quotes and a final period; ``"undefined"`` when the model says so."""
    _checks.instance("text", text, str, "a str")
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = _PREFIX.sub("", line).strip().strip("\"'`*").strip()
    if line.endswith(".") and not line.endswith(".."):
        line = line[:-1].rstrip()
    if re.fullmatch(r"\W*undefined\W*", line, flags=re.IGNORECASE):
        return UNDEFINED
    return line
