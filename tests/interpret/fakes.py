"""Scripted LMs for the harness tests: no model is loaded.

``GenerationLM`` is the base of interpreter stand-ins (they only chat); ``KnowingJudge`` is a
judge that knows the ground truth.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from findbench.judge import normalize_unit_test, render_judge_prompt


class GenerationLM:
    """Base of scripted interpreters: subclasses write ``generate``. The LM protocol also asks
    for ``candidate_logprobs``; an interpreter never calls it, and this one has no preference:
    every candidate gets the same log-probability (a uniform choice)."""

    name = "generation-lm"

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        return [[-math.log(len(candidates))] * len(candidates) for _ in conversations]


class KnowingJudge:
    """A judge that picks the right option for a prompt built from a ground-truth description,
    and option 1 for anything else. ``rows``: ``{category: rows}`` or an iterable of rows."""

    name = "knowing-judge"

    def __init__(self, rows: Mapping[str, Iterable[dict]] | Iterable[dict]):
        groups = rows.values() if isinstance(rows, Mapping) else [rows]
        self.answers: dict[str, int] = {}
        for group in groups:
            for row in group:
                if row["category"] == "numeric":
                    continue
                for ut in row.get("unit_tests") or []:
                    ut = normalize_unit_test(ut)
                    self.answers[render_judge_prompt(row["description"], ut, row["category"])[-1]["content"]] = ut[
                        "correct"
                    ]
        self.calls = 0

    def _pick(self, conversation) -> str:
        return str(self.answers.get(conversation[-1]["content"], 1))

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        self.calls += 1
        return [f"[ANSWER]: {self._pick(c)}" for c in conversations]

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        self.calls += 1
        return [[0.0 if cand == self._pick(c) else -5.0 for cand in candidates] for c in conversations]


class ListingJudge:
    """A judge that reads a listing of pairs: it picks the first option whose input the description
    shows as ``(input, ...``, else option 1. Its accuracy on a floor grows with the test inputs listed."""

    name = "listing-judge"

    @staticmethod
    def _pick(conversation) -> str:
        import json
        import re

        prompt = conversation[-1]["content"]
        description = prompt.split("Description: ", 1)[1].split("\n\nWhich of", 1)[0]
        for k, quoted in re.findall(r'^(\d+)\. ("(?:[^"\\]|\\.)*") -> ', prompt, re.MULTILINE):
            if f"({json.loads(quoted)}, " in description:
                return k
        return "1"

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        return [f"[ANSWER]: {self._pick(c)}" for c in conversations]

    def candidate_logprobs(self, conversations, candidates, *, assistant_prefix="", progress=False):
        return [[0.0 if cand == self._pick(c) else -5.0 for cand in candidates] for c in conversations]


def interpret(data, interpreter, **settings):
    """:func:`~findbench.interpret.run.run_interpretations` on the config of ``settings`` and
    ``interpreter``: ``data`` a dataset folder (or None), or a list of rows; ``progress``, ``display``
    and ``model_args`` go to the run."""
    from findbench.interpret.config import InterpretConfig
    from findbench.interpret.run import run_interpretations

    run = {k: settings.pop(k) for k in ("progress", "display", "model_args") if k in settings}
    rows = data if isinstance(data, list) else None
    folder = None if rows is not None or data is None else str(data)
    return run_interpretations(InterpretConfig(data=folder, interpreter=interpreter, **settings), rows, **run)
