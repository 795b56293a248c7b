"""The episode loop, driven by scripted chats (no LM)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from findbench import cli
from findbench.interpret import episode as episode_module
from findbench.interpret import prompts
from findbench.interpret.episode import (
    DEFAULT_MAX_TOKENS,
    ChatReply,
    Episode,
    count_tokens,
    estimate_tokens,
    run_episode,
)
from findbench.interpret.protocol import (
    MAX_COMMANDS_PER_MESSAGE,
    MAX_MESSAGE_CHARS,
    UNRECOGNIZED_REPLY,
    Answer,
    turn_commands,
)
from tests.interpret.fakes import GenerationLM


class ScriptedChat:
    """An async chat answering with canned replies in turn (the last one repeats)."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.seen: list[list[dict]] = []

    async def __call__(self, messages, max_tokens=None):
        self.seen.append(messages)
        return self.replies[min(len(self.seen) - 1, len(self.replies) - 1)]


def run(row, chat, **kwargs) -> Episode:
    return asyncio.run(run_episode(row, chat, **kwargs))


def findbench_call(capsys, data_dir, function_id, values) -> str:
    capsys.readouterr()
    assert cli.main(["call", function_id, *values, "--data", str(data_dir)]) == 0
    return capsys.readouterr().out.rstrip("\n")


FINAL = (
    "I have enough data.\n[DESCRIPTION]: Inserts text and capitalizes the first letter.\n"
    "[CODE]:\n```python\ndef function(x):\n    return x.capitalize()\n```"
)


def test_full_episode_with_a_scripted_chat(by_id, data_dir, capsys):
    row = by_id["strings/f00000"]
    chat = ScriptedChat([
        'Let me start.\nPYTHON(function.py hello "two words")',
        "Hmm, I wonder what to do next.",
        "PYTHON(function.py abc) and a broken one PYTHON(function.py)",
        FINAL,
    ])
    ep = run(row, chat)
    assert (ep.finished, ep.stop_reason, ep.rounds, ep.max_rounds) == (True, "answer", 4, 20)
    assert ep.answer == Answer("Inserts text and capitalizes the first letter.", None, "def function(x):\n    return x.capitalize()")
    assert ep.description.startswith("Inserts") and ep.domain == "" and ep.code.startswith("def function")
    roles = [m["role"] for m in ep.messages]
    assert roles == ["system", "user"] + ["assistant", "user"] * 3 + ["assistant"]
    assert ep.messages[0]["content"] == prompts.system_prompt()
    assert ep.messages[1]["content"] == prompts.task_prompt(row)
    # the harness replies: the pairs exactly as `findbench call` prints them, the nudge, two lines
    assert ep.messages[3]["content"] == "Response: " + findbench_call(capsys, data_dir, row["function_id"], ["hello", "two words"])
    assert ep.messages[5]["content"] == UNRECOGNIZED_REPLY
    first, second = ep.messages[7]["content"].split("\n")
    assert first == "Response: " + findbench_call(capsys, data_dir, row["function_id"], ["abc"])
    assert second.startswith("Response: Error in PYTHON(function.py): no inputs")
    assert [c["round"] for c in ep.calls] == [1, 3, 3] and ep.malformed_commands == 1 and ep.unrecognized_turns == 1
    assert ep.calls[0]["inputs"] == ["hello", "two words"]
    # the chat saw the conversation so far, and copies of it
    assert [len(m) for m in chat.seen] == [2, 4, 6, 8]
    chat.seen[0].append({"role": "user", "content": "mutated"})
    assert len(ep.messages) == 9
    assert ep.protocol == "text" and ep.usage is None and ep.seed == 0


def test_round_cap(by_id):
    chat = ScriptedChat(["PYTHON(function.py 1 2)"])
    ep = run(by_id["numeric/f00000"], chat, rounds=3)
    assert (ep.finished, ep.stop_reason, ep.rounds, ep.answer) == (False, "round_limit", 3, None)
    assert len(chat.seen) == 3 and len(ep.calls) == 3
    assert ep.messages[-1] == {"role": "user", "content": "Response: Function input - output pairs: (1, 1) (2, 3)"}
    assert ep.description == ep.domain == ep.code == ""
    chat = ScriptedChat(["no idea"])
    ep = run(by_id["numeric/f00000"], chat)
    assert ep.rounds == 20 and len(chat.seen) == 20 and ep.calls == [] and ep.messages[-1]["content"] == UNRECOGNIZED_REPLY


def test_a_flood_of_commands_is_capped_counted_and_noted(by_id):
    flood = "PYTHON(" * 4000  # 28 KB of unclosed commands
    long = "PYTHON(function.py 1) " + "x" * MAX_MESSAGE_CHARS + " PYTHON(function.py 2)"
    ep = run(by_id["numeric/f00000"], ScriptedChat([flood, long, "no command " * (MAX_MESSAGE_CHARS // 5), "[DESCRIPTION]: d"]))
    assert ep.finished and ep.rounds == 4
    assert (ep.malformed_commands, ep.dropped_commands, ep.truncated_messages, ep.unrecognized_turns) == (
        MAX_COMMANDS_PER_MESSAGE, 4000 - MAX_COMMANDS_PER_MESSAGE, 2, 1)
    first, second, third = (m["content"].split("\n") for m in ep.messages[3:8:2])
    assert len(first) == MAX_COMMANDS_PER_MESSAGE + 1 and first[0] == "Response: Error in PYTHON(: missing closing parenthesis ')'."
    assert first[-1] == turn_commands(flood).note and f"only the first {MAX_COMMANDS_PER_MESSAGE} of 4000" in first[-1]
    assert second == ["Response: Function input - output pairs: (1, 1)", turn_commands(long).note]  # the 2 was past the cut
    assert third == [UNRECOGNIZED_REPLY, turn_commands(long).note]
    assert [c["inputs"] for c in ep.calls[MAX_COMMANDS_PER_MESSAGE:]] == [["1"]]
    assert Episode.from_dict(json.loads(json.dumps(ep.to_dict()))) == ep
    old = {k: v for k, v in ep.to_dict().items() if k not in ("truncated_messages", "dropped_commands")}
    assert (Episode.from_dict(old).truncated_messages, Episode.from_dict(old).dropped_commands) == (0, 0)


def test_a_message_is_read_off_the_event_loop(by_id, monkeypatch):
    """While one episode's message is being read (held here until the other episode's model is
    asked), the other episode goes on: reading does not block the event loop."""
    other_asked = threading.Event()
    read = episode_module.turn_commands

    def slow_read(text):
        if text.startswith("SLOW"):
            assert other_asked.wait(10), "no other episode ran while a message was read"
        return read(text)

    async def other(messages, max_tokens=None):
        other_asked.set()
        return "[DESCRIPTION]: d"

    async def both():
        slow = ScriptedChat(["SLOW PYTHON(function.py 1)", "[DESCRIPTION]: d"])
        return await asyncio.gather(run_episode(by_id["numeric/f00000"], slow), run_episode(by_id["numeric/f00000"], other))

    monkeypatch.setattr(episode_module, "turn_commands", slow_read)
    first, second = asyncio.run(both())
    assert first.finished and second.finished and first.calls[0]["inputs"] == ["1"]


def test_answer_ends_the_episode_and_its_commands_do_not_run(by_id):
    chat = ScriptedChat(["PYTHON(function.py 3)\n[DESCRIPTION]: doubles and subtracts one\n[DOMAIN]: all reals"])
    ep = run(by_id["numeric/f00000"], chat)
    assert ep.rounds == 1 and ep.calls == [] and ep.answer == Answer("doubles and subtracts one", "all reals", None)


@pytest.mark.parametrize("category", ["neurons_entities", "neurons_relations"])
def test_milan_shows_exemplars_and_allows_two_turns(category, rows, data_dir, capsys):
    row = rows[category][0]
    chat = ScriptedChat(["PYTHON(function.py apple)"])
    ep = run(row, chat, method="milan", rounds=20)
    assert (ep.rounds, ep.max_rounds, ep.finished, len(chat.seen)) == (2, 2, False, 2)
    exemplars = list(row["exemplars"])
    expected = "Response: " + findbench_call(capsys, data_dir, row["function_id"], exemplars)
    task = ep.messages[1]["content"]
    assert expected in task and "2 messages" in task
    assert ep.calls[0] == {**ep.calls[0], "round": 0, "command": "exemplars", "inputs": exemplars}
    assert [c["round"] for c in ep.calls] == [0, 1, 2]
    # answering on the second turn is the normal end
    ep = run(row, ScriptedChat(["PYTHON(function.py apple)", "[DESCRIPTION]: fine"]), method="milan")
    assert ep.finished and ep.rounds == 2


def test_aia_milan_shows_exemplars_then_runs_the_full_loop(rows):
    row = rows["neurons_relations"][0]
    chat = ScriptedChat(["PYTHON(function.py France)"] * 4 + ["[DESCRIPTION]: capitals\n[DOMAIN]: countries"])
    ep = run(row, chat, method="aia+milan")
    assert ep.rounds == 5 and ep.finished and ep.calls[0]["command"] == "exemplars"
    assert "Function input - output pairs" in ep.messages[1]["content"] and "2 messages" not in ep.messages[1]["content"]
    assert ep.messages[3]["content"] == "Response: Function input - output pairs: (France, Paris)"


def test_max_tokens_and_usage(by_id):
    seen = []

    async def chat(messages, max_tokens=None):
        seen.append(max_tokens)
        return ChatReply("PYTHON(function.py 1)" if len(seen) < 2 else "[DESCRIPTION]: d", {"input_tokens": 10, "output_tokens": 3})

    ep = run(by_id["numeric/f00000"], chat, max_tokens=77)
    assert seen == [77, 77] and ep.usage == {"input_tokens": 20, "output_tokens": 6}


def test_episode_record_round_trips_through_json(by_id):
    ep = run(by_id["numeric/f00002"], ScriptedChat(["PYTHON(function.py 15 abc)", "[DESCRIPTION]: d\n[DOMAIN]: 10 to 20"]))
    d = json.loads(json.dumps(ep.to_dict(), allow_nan=False))
    assert Episode.from_dict(d) == ep
    assert d["answer"] == {"description": "d", "domain": "10 to 20", "code": None}
    assert d["calls"][0]["errors"] == [None, "not a number"]


class FakeLM(GenerationLM):
    """A findbench LM stand-in: records generate calls, answers from a script."""

    name = "fake"

    def __init__(self, replies):
        self.replies, self.calls = list(replies), []

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        self.calls.append((conversations, max_new_tokens, temperature))
        return [self.replies[min(len(self.calls) - 1, len(self.replies) - 1)] for _ in conversations]


# ------------------------------------------------------------------- the episode's token budget


class BudgetChat:
    """Never answers (a command each turn); records the ``max_tokens`` of each call and reports
    ``output_tokens`` of ``tokens(max_tokens)``, or no usage at all when ``tokens`` is None."""

    def __init__(self, tokens=None, text="PYTHON(function.py 1)", usage_extra=None):
        self.tokens, self.text, self.usage_extra = tokens, text, usage_extra
        self.limits: list = []

    async def __call__(self, messages, max_tokens=None):
        self.limits.append(max_tokens)
        if self.tokens is None:
            return self.text if self.usage_extra is None else ChatReply(self.text, dict(self.usage_extra))
        return ChatReply(self.text, {"input_tokens": 9, "output_tokens": self.tokens(max_tokens)})


def test_token_budget_caps_each_turn_and_stops_the_episode(by_id):
    # a model that writes up to its limit every turn: 300, 300, 300, then the 100 left
    chat = BudgetChat(tokens=lambda limit: limit)
    ep = run(by_id["numeric/f00000"], chat, max_tokens=300, episode_tokens=1000)
    assert chat.limits == [300, 300, 300, 100]
    assert (ep.finished, ep.stop_reason, ep.rounds, ep.answer) == (False, "token_limit", 4, None)
    assert (ep.max_episode_tokens, ep.generated_tokens) == (1000, 1000) and ep.usage == {"input_tokens": 36, "output_tokens": 1000}
    # the last turn's command still ran and got its reply, as on the round limit
    assert [c["round"] for c in ep.calls] == [1, 2, 3, 4] and ep.messages[-1]["role"] == "user"
    # no per-turn limit: DEFAULT_MAX_TOKENS, capped at what is left
    chat = BudgetChat(tokens=lambda limit: 400)
    ep = run(by_id["numeric/f00000"], chat, episode_tokens=1000)
    assert chat.limits == [DEFAULT_MAX_TOKENS, DEFAULT_MAX_TOKENS, 1000 - 800] and ep.rounds == 3 and ep.stop_reason == "token_limit"
    assert ep.generated_tokens == 1200
    # a budget not spent leaves the round limit in charge; an answer on the turn that spends it finishes
    chat = BudgetChat(tokens=lambda limit: 1)
    ep = run(by_id["numeric/f00000"], chat, rounds=3, episode_tokens=1000)
    assert (ep.stop_reason, ep.rounds, ep.generated_tokens, chat.limits) == ("round_limit", 3, 3, [DEFAULT_MAX_TOKENS] * 3)
    chat = BudgetChat(tokens=lambda limit: limit, text="[DESCRIPTION]: doubles")
    ep = run(by_id["numeric/f00000"], chat, episode_tokens=10)
    assert (ep.finished, ep.stop_reason, ep.rounds, ep.generated_tokens) == (True, "answer", 1, 10)
    # without a budget nothing changes: the per-turn limit as given, no cap
    chat = BudgetChat(tokens=lambda limit: 10_000)
    ep = run(by_id["numeric/f00000"], chat, rounds=2, max_tokens=50)
    assert chat.limits == [50, 50] and ep.stop_reason == "round_limit" and ep.max_episode_tokens is None
    assert ep.generated_tokens == 20_000


def test_token_budget_counts_reported_usage_else_an_estimate(by_id):
    text = "I wonder what this function does, really."  # 41 characters, no command: ceil(41 / 4) = 11 tokens a turn
    assert len(text) == 41 and estimate_tokens(text) == 11 and estimate_tokens("") == 0
    # a plain str reply: the estimate
    chat = BudgetChat(text=text)
    ep = run(by_id["numeric/f00000"], chat, episode_tokens=25)
    assert chat.limits == [25, 14, 3] and ep.rounds == 3 and ep.generated_tokens == 33 and ep.stop_reason == "token_limit"
    assert ep.usage is None and ep.unrecognized_turns == 3
    # usage without output_tokens: the estimate too
    chat = BudgetChat(text=text, usage_extra={"input_tokens": 100})
    ep = run(by_id["numeric/f00000"], chat, episode_tokens=25)
    assert chat.limits == [25, 14, 3] and ep.generated_tokens == 33 and ep.usage == {"input_tokens": 300}
    # reported output_tokens win over the estimate
    chat = BudgetChat(tokens=lambda limit: 2, text=text)
    ep = run(by_id["numeric/f00000"], chat, episode_tokens=25, rounds=4)
    assert chat.limits == [25, 23, 21, 19] and ep.generated_tokens == 8 and ep.stop_reason == "round_limit"


def test_an_episode_record_without_the_token_fields_still_loads(by_id):
    ep = run(by_id["numeric/f00000"], BudgetChat(tokens=lambda limit: 5), episode_tokens=12)
    d = json.loads(json.dumps(ep.to_dict()))
    assert (d["max_episode_tokens"], d["generated_tokens"], d["stop_reason"]) == (12, 15, "token_limit")
    assert Episode.from_dict(d) == ep
    old = {k: v for k, v in d.items() if k not in ("max_episode_tokens", "generated_tokens")}
    loaded = Episode.from_dict(old)
    assert loaded.max_episode_tokens is None and loaded.generated_tokens is None
    assert loaded.rounds == ep.rounds and loaded.calls == ep.calls


class TokenizingLM(FakeLM):
    """A FakeLM with a tokenizer (a token per word) and a chat template, as a transformers LM has."""

    name = "tokenizing"

    @staticmethod
    def tokenizer(text, add_special_tokens=True):
        return {"input_ids": text.split()}

    @staticmethod
    def render(conversation):
        return " ".join(f"<{m['role']}> {m['content']}" for m in conversation)


class Wrapper:
    """A stand-in for CachedLM: the LM it wraps is ``inner``."""

    def __init__(self, inner):
        self.inner = inner


def test_count_tokens_uses_the_lms_tokenizer_else_the_estimate():
    text = "PYTHON(function.py 4) and more"  # 4 words, 30 characters
    assert count_tokens(TokenizingLM([]), text) == 4 and count_tokens(Wrapper(TokenizingLM([])), text) == 4
    assert count_tokens(FakeLM([]), text) == 8 and count_tokens(object(), "") == 0
    conversation = [{"role": "user", "content": "a b"}, {"role": "assistant", "content": "c"}]
    assert count_tokens(TokenizingLM([]), conversation=conversation) == 5
    assert count_tokens(FakeLM([]), conversation=conversation) == 1  # "a bc": 4 characters
