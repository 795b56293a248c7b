"""The ``text`` loop on Inspect (:func:`findbench.interpret.solver.run_episode`), driven by a
scripted mockllm model (no LM)."""

from __future__ import annotations

import json
import threading

import pytest

from findbench import cli
from findbench.interpret import prompts
from findbench.interpret import solver as solver_module
from findbench.interpret.episode import STORE_PREFIX, EpisodeState
from findbench.interpret.protocol import (
    MAX_COMMANDS_PER_MESSAGE,
    MAX_MESSAGE_CHARS,
    UNRECOGNIZED_REPLY,
    Answer,
    turn_commands,
)
from findbench.lm.base import count_tokens, estimate_tokens
from tests.interpret.fakes import GenerationLM
from tests.interpret.scripted import Script, run_episode, run_episodes

# Inspect's own retry set-up warns on every model call (a tenacity deprecation).
pytestmark = pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning")


@pytest.fixture
def run(tmp_path):
    """``run(row, replies, **solver_args)``: the episode of ``row`` answered by ``replies``."""
    return lambda row, replies, **kwargs: run_episode(row, replies, log_dir=tmp_path, **kwargs)


def findbench_call(capsys, data_dir, function_id, values) -> str:
    capsys.readouterr()
    assert cli.main(["call", function_id, *values, "--data", str(data_dir)]) == 0
    return capsys.readouterr().out.rstrip("\n")


FINAL = (
    "I have enough data.\n[DESCRIPTION]: Inserts text and capitalizes the first letter.\n"
    "[CODE]:\n```python\ndef function(x):\n    return x.capitalize()\n```"
)


def test_full_episode_with_a_scripted_model(run, by_id, data_dir, capsys):
    row = by_id["strings/f00000"]
    chat = Script([
        'Let me start.\nPYTHON(function.py hello "two words")',
        "Hmm, I wonder what to do next.",
        "PYTHON(function.py abc) and a broken one PYTHON(function.py)",
        FINAL,
    ])
    ep = run(row, chat)
    assert (ep.finished, ep.stop_reason, ep.rounds) == (True, "answer", 4)
    assert ep.answer == Answer(
        "Inserts text and capitalizes the first letter.", None, "def function(x):\n    return x.capitalize()"
    )
    assert ep.description.startswith("Inserts") and ep.domain == "" and ep.code.startswith("def function")
    roles = [m["role"] for m in ep.messages]
    assert roles == ["system", "user"] + ["assistant", "user"] * 3 + ["assistant"]
    assert ep.messages[0]["content"] == prompts.system_prompt("text")
    assert ep.messages[1]["content"] == prompts.task_prompt(row, "aia", protocol="text")
    # the harness replies: the pairs exactly as `findbench call` prints them, the nudge, two lines
    assert ep.messages[3]["content"] == "Response: " + findbench_call(
        capsys, data_dir, row["function_id"], ["hello", "two words"]
    )
    assert ep.messages[5]["content"] == UNRECOGNIZED_REPLY
    first, second = ep.messages[7]["content"].split("\n")
    assert first == "Response: " + findbench_call(capsys, data_dir, row["function_id"], ["abc"])
    assert second.startswith("Response: Error in PYTHON(function.py): no inputs")
    assert [c["round"] for c in ep.calls] == [1, 3, 3] and ep.malformed_commands == 1 and ep.unrecognized_turns == 1
    assert ep.calls[0]["inputs"] == ["hello", "two words"]
    # the model saw the conversation so far: Inspect's messages, as the record has them
    assert [messages for messages, _ in chat.seen] == [ep.messages[:n] for n in (2, 4, 6, 8)]
    # the store keeps only what the sample does not: transcript and usage are the sample's own
    assert sorted(ep.sample.store) == sorted(STORE_PREFIX + name for name in EpisodeState.model_fields
                                             if name != "store")  # Inspect's StoreModel also stores its instance
    assert ep.usage["mockllm/model"].output_tokens == sum(estimate_tokens(t) for t in chat.replies)


def test_round_cap(run, by_id):
    chat = Script(["PYTHON(function.py 1 2)"])
    ep = run(by_id["numeric/f00000"], chat, rounds=3)
    assert (ep.finished, ep.stop_reason, ep.rounds, ep.answer) == (False, "round_limit", 3, None)
    assert len(chat.seen) == 3 and len(ep.calls) == 3
    assert ep.messages[-1] == {"role": "user", "content": "Response: Function input - output pairs: (1, 1) (2, 3)"}
    assert ep.description == ep.domain == ep.code == ""
    chat = Script(["no idea"])
    ep = run(by_id["numeric/f00000"], chat)
    assert (
        ep.rounds == 20 and len(chat.seen) == 20 and ep.calls == [] and ep.messages[-1]["content"] == UNRECOGNIZED_REPLY
    )


def test_a_flood_of_commands_is_capped_counted_and_noted(run, by_id):
    flood = "PYTHON(" * 4000  # 28 KB of unclosed commands
    long = "PYTHON(function.py 1) " + "x" * MAX_MESSAGE_CHARS + " PYTHON(function.py 2)"
    ep = run(
        by_id["numeric/f00000"], Script([flood, long, "no command " * (MAX_MESSAGE_CHARS // 5), "[DESCRIPTION]: d"])
    )
    assert ep.finished and ep.rounds == 4
    assert (ep.malformed_commands, ep.dropped_commands, ep.truncated_messages, ep.unrecognized_turns) == (
        MAX_COMMANDS_PER_MESSAGE,
        4000 - MAX_COMMANDS_PER_MESSAGE,
        2,
        1,
    )
    first, second, third = (m["content"].split("\n") for m in ep.messages[3:8:2])
    assert (
        len(first) == MAX_COMMANDS_PER_MESSAGE + 1
        and first[0] == "Response: Error in PYTHON(: missing closing parenthesis ')'."
    )
    assert first[-1] == turn_commands(flood).note and f"only the first {MAX_COMMANDS_PER_MESSAGE} of 4000" in first[-1]
    assert second == [
        "Response: Function input - output pairs: (1, 1)",
        turn_commands(long).note,
    ]  # the 2 was past the cut
    assert third == [UNRECOGNIZED_REPLY, turn_commands(long).note]
    assert [c["inputs"] for c in ep.calls[MAX_COMMANDS_PER_MESSAGE:]] == [["1"]]


def test_a_message_is_read_off_the_event_loop(by_id, monkeypatch, tmp_path):
    """While one episode's message is being read (held here until the other episode's model is
    asked), the other episode goes on: reading does not block the event loop."""
    other_asked = threading.Event()
    read = solver_module.turn_commands
    slow_row, other_row = by_id["numeric/f00000"], by_id["strings/f00000"]

    def slow_read(text):
        if text.startswith("SLOW"):
            assert other_asked.wait(10), "no other episode ran while a message was read"
        return read(text)

    def reply(messages, max_tokens):
        if messages[1]["content"] == prompts.task_prompt(other_row, "aia", protocol="text"):
            other_asked.set()
            return "[DESCRIPTION]: d"
        return "SLOW PYTHON(function.py 1)" if len(messages) == 2 else "[DESCRIPTION]: d"

    monkeypatch.setattr(solver_module, "turn_commands", slow_read)
    first, second = run_episodes([slow_row, other_row], Script(reply), log_dir=tmp_path)
    assert first.finished and second.finished and first.calls[0]["inputs"] == ["1"]


def test_answer_ends_the_episode_and_its_commands_do_not_run(run, by_id):
    chat = Script(["PYTHON(function.py 3)\n[DESCRIPTION]: doubles and subtracts one\n[DOMAIN]: all reals"])
    ep = run(by_id["numeric/f00000"], chat)
    assert ep.rounds == 1 and ep.calls == [] and ep.answer == Answer("doubles and subtracts one", "all reals", None)


@pytest.mark.parametrize("category", ["neurons_entities", "neurons_relations"])
def test_milan_shows_exemplars_and_allows_two_turns(run, category, rows, data_dir, capsys):
    row = rows[category][0]
    chat = Script(["PYTHON(function.py apple)"])
    ep = run(row, chat, method="milan", rounds=20)
    assert (ep.rounds, ep.finished, len(chat.seen)) == (2, False, 2)
    exemplars = list(row["exemplars"])
    expected = "Response: " + findbench_call(capsys, data_dir, row["function_id"], exemplars)
    task = ep.messages[1]["content"]
    assert expected in task and "2 messages" in task
    assert ep.calls[0] == {**ep.calls[0], "round": 0, "command": "exemplars", "inputs": exemplars}
    assert [c["round"] for c in ep.calls] == [0, 1, 2]
    # answering on the second turn is the normal end
    ep = run(row, Script(["PYTHON(function.py apple)", "[DESCRIPTION]: fine"]), method="milan")
    assert ep.finished and ep.rounds == 2


def test_aia_milan_shows_exemplars_then_runs_the_full_loop(run, rows):
    row = rows["neurons_relations"][0]
    chat = Script(["PYTHON(function.py France)"] * 4 + ["[DESCRIPTION]: capitals\n[DOMAIN]: countries"])
    ep = run(row, chat, method="aia+milan")
    assert ep.rounds == 5 and ep.finished and ep.calls[0]["command"] == "exemplars"
    assert (
        "Function input - output pairs" in ep.messages[1]["content"] and "2 messages" not in ep.messages[1]["content"]
    )
    assert ep.messages[3]["content"] == "Response: Function input - output pairs: (France, Paris)"


def test_max_tokens_and_usage(run, by_id):
    usage = {"input_tokens": 10, "output_tokens": 3}
    chat = Script([("PYTHON(function.py 1)", usage), ("[DESCRIPTION]: d", usage)])
    ep = run(by_id["numeric/f00000"], chat, max_tokens=77)
    used = ep.usage["mockllm/model"]
    assert chat.limits == [77, 77] and (used.input_tokens, used.output_tokens, used.total_tokens) == (20, 6, 26)
    # no max_tokens: the request leaves it to the model's default
    chat = Script(["[DESCRIPTION]: d"])
    run(by_id["numeric/f00000"], chat)
    assert chat.limits == [None]


def test_the_record_reads_back_from_the_log(run, by_id, tmp_path):
    """The log on disk holds the record (read back within findbench's caps) as the run left it."""
    from findbench.interpret.logs import read_log, sample_episode

    ep = run(by_id["numeric/f00002"], Script(["PYTHON(function.py 15 abc)", "[DESCRIPTION]: d\n[DOMAIN]: 10 to 20"]))
    [path] = list(tmp_path.glob("log-*/*.eval"))
    d = sample_episode(read_log(path).samples[0])
    assert d["answer"] == {"description": "d", "domain": "10 to 20", "code": None, "components": None}
    assert d["calls"][0]["errors"] == [None, "not a number"] and d["calls"] == ep.calls
    assert d["messages"] == ep.messages and d["rounds"] == 2 and d["row"]["function_id"] == "numeric/f00002"


def test_the_record_is_typed_per_sample_state(run, by_id):
    """The store holds the record's fields; a log's store (JSON) reads back as the same typed
    EpisodeState, and one of the wrong types is refused when it is read."""
    from inspect_ai.util import Store
    from pydantic import ValidationError

    ep = run(by_id["numeric/f00002"], Script(["PYTHON(function.py 15)", "[DESCRIPTION]: d\n[DOMAIN]: 10 to 20"]))
    store = json.loads(json.dumps(dict(ep.sample.store)))
    state = EpisodeState(store=Store(store))
    assert isinstance(state.answer, Answer) and state.answer == ep.answer and state.calls == ep.calls
    for key, value in (("answer", {"description": 3}), ("calls", "many"), ("malformed_commands", "a few")):
        with pytest.raises(ValidationError):
            EpisodeState(store=Store({**store, STORE_PREFIX + key: value})).model_dump()


class FakeLM(GenerationLM):
    """A findbench LM stand-in: records generate calls, answers from a script."""

    name = "fake"

    def __init__(self, replies):
        self.replies, self.calls = list(replies), []

    def generate(self, conversations, *, max_new_tokens=64, temperature=0.0, progress=False):
        self.calls.append((conversations, max_new_tokens, temperature))
        return [self.replies[min(len(self.calls) - 1, len(self.replies) - 1)] for _ in conversations]


# ------------------------------------------------------------------- the episode's token budget


def spending(tokens):
    """A model that never answers (a command each turn) and reports ``tokens(max_tokens)`` output tokens."""
    return Script(
        lambda messages, limit: ("PYTHON(function.py 1)", {"input_tokens": 9, "output_tokens": tokens(limit)})
    )


def test_token_budget_stops_the_episode_without_the_turn_that_passes_it(run, by_id):
    # a model that writes up to its limit every turn: 300, 300, 300, then a turn that passes 1000
    chat = spending(lambda limit: limit)
    ep = run(by_id["numeric/f00000"], chat, max_tokens=300, episode_tokens=1000)
    assert chat.limits == [300] * 4  # turns are not capped at what is left of the budget
    assert (ep.finished, ep.stop_reason, ep.rounds, ep.answer) == (False, "token_limit", 3, None)
    # the fourth turn counts in the sample's usage, but is not in the transcript or the calls
    assert ep.usage["mockllm/model"].output_tokens == 1200
    assert [c["round"] for c in ep.calls] == [1, 2, 3] and ep.messages[-1]["role"] == "user"
    assert [m["role"] for m in ep.messages].count("assistant") == 3
    # a budget reached exactly: the next turn is not asked for
    chat = spending(lambda limit: 500)
    ep = run(by_id["numeric/f00000"], chat, episode_tokens=1000)
    assert chat.limits == [None, None] and (ep.rounds, ep.stop_reason) == (2, "token_limit")
    # a budget not spent leaves the round limit in charge
    chat = spending(lambda limit: 1)
    ep = run(by_id["numeric/f00000"], chat, rounds=3, episode_tokens=1000)
    assert (ep.stop_reason, ep.rounds, len(chat.seen)) == ("round_limit", 3, 3)
    # without a budget nothing stops it: the per-turn limit as given
    chat = spending(lambda limit: 10_000)
    ep = run(by_id["numeric/f00000"], chat, rounds=2, max_tokens=50)
    assert chat.limits == [50, 50] and ep.stop_reason == "round_limit"
    assert ep.usage["mockllm/model"].output_tokens == 20_000


def test_an_answer_within_the_budget_finishes_one_past_it_is_lost(run, by_id):
    answer = "[DESCRIPTION]: doubles"
    ep = run(by_id["numeric/f00000"], [(answer, {"output_tokens": 10})], episode_tokens=10)
    assert (ep.finished, ep.stop_reason, ep.rounds) == (True, "answer", 1)
    ep = run(by_id["numeric/f00000"], [(answer, {"output_tokens": 11})], episode_tokens=10)
    assert (ep.finished, ep.stop_reason, ep.rounds, ep.answer) == (False, "token_limit", 0, None)
    assert [m["role"] for m in ep.messages] == ["system", "user"]


def test_a_sample_limit_stops_the_episode_with_its_transcript(run, by_id):
    """A limit of the sample (here Inspect's message limit: 6 messages) ends the episode too; the
    record keeps the transcript so far and names the limit."""
    ep = run(by_id["numeric/f00000"], ["PYTHON(function.py 1)"], eval_args={"message_limit": 6})
    assert (ep.stop_reason, ep.finished, ep.rounds) == ("message_limit", False, 2)
    assert [m["role"] for m in ep.messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [c["round"] for c in ep.calls] == [1, 2]


def test_reference_turns_spend_no_budget(run, by_id):
    text = "I wonder what this function does, really."  # 41 characters, no command: ceil(41 / 4) = 11 tokens a turn
    assert len(text) == 41 and estimate_tokens(text) == 11 and estimate_tokens("") == 0
    ep = run(by_id["numeric/f00000"], None, reference=[text], rounds=3, episode_tokens=20)
    assert (ep.rounds, ep.stop_reason, ep.usage, ep.unrecognized_turns) == (3, "round_limit", {}, 3)


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
