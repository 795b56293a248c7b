"""Episodes of the ``text`` protocol on Inspect, driven by a scripted ``mockllm`` model (no LM).

Every scripted output carries its usage (by default ``output_tokens`` the 4-characters-a-token
estimate of its text), so mockllm never counts tokens with tiktoken (which would download its
encoding)."""

from __future__ import annotations

import itertools

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from findbench.interpret.config import InterpretConfig
from findbench.interpret.episode import Episode
from findbench.interpret.solver import STORE_KEY, find_agent, transcript
from findbench.interpret.truth import json_row
from findbench.lm.base import estimate_tokens

_logs = itertools.count()


def output(text: str, usage: dict | None = None) -> ModelOutput:
    """A scripted turn: ``text`` with ``usage`` (default: 9 input tokens, the estimate as output)."""
    out = ModelOutput.from_content("mockllm/model", text)
    usage = usage if usage is not None else {"input_tokens": 9, "output_tokens": estimate_tokens(text)}
    out.usage = ModelUsage(**usage, total_tokens=sum(usage.values()))
    return out


class Script:
    """The model's turns: ``replies`` in order (the last one repeats), each a text or ``(text, usage)``,
    or a function ``reply(messages, max_tokens)`` giving one. ``seen``: the messages (as the record's
    dicts) and ``max_tokens`` of each request."""

    def __init__(self, replies):
        self.replies = replies
        self.seen: list[tuple[list[dict], int | None]] = []

    def __call__(self, input, tools, tool_choice, config) -> ModelOutput:
        messages = transcript(input)
        self.seen.append((messages, config.max_tokens))
        if callable(self.replies):
            reply = self.replies(messages, config.max_tokens)
        else:
            reply = self.replies[min(len(self.seen), len(self.replies)) - 1]
        return output(*reply) if isinstance(reply, tuple) else output(reply)

    @property
    def limits(self) -> list[int | None]:
        return [limit for _, limit in self.seen]


def run_episodes(
    rows, script, *, log_dir, method="aia", reference=None, eval_args=None, **solver_args
) -> list[Episode]:
    """The episodes of ``rows`` (one sample each, run concurrently) answered by ``script``, or
    by ``reference`` turns; ``solver_args`` go to :func:`find_agent`, ``eval_args`` to Inspect's ``eval``."""
    samples = [
        Sample(
            input="interpret",
            id=row["function_id"],
            metadata={
                "row": json_row(row),
                "method": method,
                **({"reference_turns": reference} if reference is not None else {}),
            },
        )
        for row in rows
    ]
    model = get_model("mockllm/model", custom_outputs=script, memoize=False) if script is not None else "none"
    task = Task(dataset=samples, solver=find_agent(InterpretConfig(interpreter="oracle", **solver_args).agent()))
    [log] = inspect_eval(
        task, model=model, log_dir=str(log_dir / f"log-{next(_logs)}"), display="none", **(eval_args or {})
    )
    assert log.status == "success", log.error
    by_id = {s.id: s for s in log.samples}
    return [Episode.from_dict(by_id[row["function_id"]].store[STORE_KEY]) for row in rows]


def run_episode(row, replies, *, log_dir, **kwargs) -> Episode:
    """One episode of ``row`` answered by ``replies`` (a :class:`Script`, or its replies; None with
    ``reference`` turns)."""
    script = replies if isinstance(replies, Script) or replies is None else Script(replies)
    return run_episodes([row], script, log_dir=log_dir, **kwargs)[0]
