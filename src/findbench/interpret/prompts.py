"""What the interpreter agent is told: one system message and one task message per episode.

The task messages follow FIND's interpreter prompts (written anew) and ask for the answer FIND
scores: numeric ``[DESCRIPTION]``, ``[DOMAIN]``, ``[CODE]`` (``mlp`` rows: a neural network);
strings and rasp ``[DESCRIPTION]``, ``[CODE]`` (rasp: the row's stated domain shown);
neurons_entities ``[DESCRIPTION]``; neurons_relations ``[DESCRIPTION]``, ``[DOMAIN]``. MILAN methods add
the outputs on the row's exemplars (``milan``:
answer within two messages). ``text`` and ``tools`` differ in the system message and one sentence.

A ``text`` turn's grammar (:func:`turn_constraint`): an optional short line without brackets or
parentheses, then 1 to :data:`MAX_TURN_COMMANDS` commands or the answer; on the last turn only the answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from findbench.interpret.protocol import (
    CODE_TOOL,
    MAX_INPUTS_PER_COMMAND,
    METHODS,
    NEURON_CATEGORIES,
    SCRIPT_NAME,
    TOOL_NAME,
    check_protocol,
)
from findbench.lm.base import Constraint
from findbench.schema import CONFIGS

#: Model turns a ``milan`` episode allows (FIND's single-round setting).
MILAN_TURNS = 2

_S = SCRIPT_NAME

_SYSTEM = (
    "You are an interpretability researcher with one tool: a script, {script}, that computes an unknown "
    "function f(x). To use it, write a command of the form PYTHON({script} input1 input2 ...) in your message. "
    "Every command in a message is run, in the order you wrote them, and the next message you receive answers "
    "each one with a line starting with \"Response:\" followed by the input - output pairs.\n"
    "Inputs are separated by spaces (or commas). Put double quotes around an input that contains a space, a "
    "comma or an apostrophe, e.g. PYTHON({script} \"New York\" \"it's\" cat). The inputs are handed to f(x) "
    "as they are: they are never run as commands.\n"
    "When you have finished experimenting, write your final answer in the format the user asks for. A message "
    "that contains [DESCRIPTION]: ends the session, so write it only once you are done."
)

_SYSTEM_TOOLS = (
    "You are an interpretability researcher with one tool, {tool}, that computes an unknown function f(x). To "
    "use it, call the {tool} tool with a list of inputs, e.g. [\"New York\", \"it's\", \"cat\"] or [1, 2.5, -3]: "
    "f(x) is run on each input and the tool answers with a line starting with \"Response:\" followed by the input "
    "- output pairs. You may call it several times in one message; the calls run in the order you make them. "
    "Give at most {max_inputs} inputs per call. The inputs are handed to f(x) as they are: they are never run as "
    "commands.\n"
    "When you have finished experimenting, write your final answer as a message, in the format the user asks "
    "for (not as a tool call). A message that contains [DESCRIPTION]: ends the session, so write it only once "
    "you are done."
)

_TOOLS_NOTE = (
    " In this session you call f(x) with the {tool} tool: where this message writes PYTHON({script} input1 input2 "
    "...), call {tool} with the inputs [input1, input2, ...] instead of writing a command."
)

_NUMERIC = (
    "Your job is to interpret a function f(x) computed by the script {script}. f(x) takes a number and "
    "returns a number.{mlp}\n"
    "Experiment by calling f(x): PYTHON({script} value) runs it on one value, and PYTHON({script} value1 "
    "value2 value3 ...) on several at once. You may run f(x) again on values you already tried. Try a wide "
    "range of values between -128 and 128 before you settle on a description.\n"
    "The outputs may be noisy. Look for a short, simple description that explains most of what f(x) does; "
    "f(x) may be a combination of several operations. f(x) may also behave differently on one interval of "
    "its domain: if it does, find that interval and describe it.\n"
    "Give your answer in three parts:\n"
    "[DESCRIPTION]: In words, what f(x) does.\n"
    "[DOMAIN]: The domain of f(x). Is there an interval where it behaves unexpectedly? If so, give the "
    "numeric bounds of that interval and say what happens there.\n"
    "[CODE]: Python code that approximates f(x): a function `def function(x):` that takes and returns a "
    "number, inside a ```python code block."
)

_MLP = (
    " f(x) is computed by a small neural network (an MLP) trained to approximate some function: describe the "
    "function it approximates."
)

_STRINGS = (
    "Your job is to interpret a function f(x) computed by the script {script}. f(x) takes a string and "
    "returns a string.\n"
    "Experiment by calling f(x): PYTHON({script} string) runs it on one input, and PYTHON({script} string1 "
    "string2 string3 ...) on several at once. Try a wide range of inputs before you settle on a description.\n"
    "Look for a short, simple description that explains most of what f(x) does; f(x) may be a combination of "
    "several operations.\n"
    "Give your answer in two parts:\n"
    "[DESCRIPTION]: In words, what f(x) does.\n"
    "[CODE]: Python code that approximates f(x): a function `def function(x):` that takes and returns a "
    "string, inside a ```python code block."
)

_RASP = (
    "Your job is to interpret a function f(x) computed by the script {script}, which runs a small transformer. "
    "f(x) takes a sequence of tokens and returns one value per token: a token or a number for each position, "
    "from that position and the tokens before or around it.{domain}\n"
    "Experiment by calling f(x): PYTHON({script} \"t1 t2 t3\") runs it on one sequence (its tokens separated "
    "by spaces, inside double quotes), and PYTHON({script} \"t1 t2\" \"t3 t1 t2\" ...) on several at once. Try "
    "many sequences of different lengths before you settle on a description.\n"
    "Look for a short, simple description that explains what f(x) does at each position.\n"
    "Give your answer in two parts:\n"
    "[DESCRIPTION]: In words, what f(x) does.\n"
    "[CODE]: Python code that computes f(x): a function `def function(x):` that takes a list of tokens and "
    "returns a list of the same length, inside a ```python code block."
)

_ENTITIES = (
    "Your job is to interpret a function f(x) computed by the script {script}. f(x) takes a word or a short "
    "phrase and returns a value between 0 and 1; values close to 1 mean that the input is associated with a "
    "particular concept. Find out what that concept is. f(x) may respond to more than one concept: if it "
    "does, name every concept it responds to.\n"
    "Experiment by calling f(x) on many inputs at once: PYTHON({script} word1 word2 word3 ...). Test a "
    "diverse, random selection of inputs from many different areas: common and rare words, concrete and "
    "abstract ones. Run many experiments before you settle on a description.\n"
    "Look for a short, simple description that explains most of what f(x) does.\n"
    "Give your answer in this form:\n"
    "[DESCRIPTION]: In words, the concept or concepts f(x) responds to."
)

_RELATIONS = (
    "Your job is to interpret a function f(x) computed by the script {script}. f(x) takes a word or a short "
    "phrase and applies a rule to it. Find out what the rule is.\n"
    "Experiment by calling f(x) on many inputs at once: PYTHON({script} word1 word2 word3 ...). Test a "
    "diverse selection of inputs about real-world things: places, events, people, objects, works, and so on. "
    "Run many experiments before you settle on a description.\n"
    "Look for a short, simple description that explains most of what f(x) does. On some inputs where you "
    "would expect the rule to apply, f(x) may not follow it: if so, describe the part of the domain where the "
    "rule does not hold.\n"
    "Give your answer in two parts:\n"
    "[DESCRIPTION]: In words, the rule f(x) applies.\n"
    "[DOMAIN]: Is there a part of the domain where the rule does not hold? If so, describe it. If not, "
    "describe the inputs the rule applies to."
)

_TEMPLATES = {"numeric": _NUMERIC, "strings": _STRINGS, "neurons_entities": _ENTITIES, "neurons_relations": _RELATIONS,
              "rasp": _RASP}

_EXEMPLARS = (
    "\nTo start you off, f(x) has already been run on some exemplar inputs:\n{reply}"
)

_MILAN_LIMIT = (
    "\nYou have {turns} messages in all. In your first message you may run one more set of experiments (or "
    "answer right away); your second message must contain your final answer."
)


def check_method(method: Any, category: str) -> str:
    """``method`` if it applies to ``category``; ValueError naming ``method`` otherwise."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method != "aia" and category not in NEURON_CATEGORIES:
        raise ValueError(
            f"method {method!r} applies only to {', '.join(NEURON_CATEGORIES)} (rows with exemplars), "
            f"not to {category!r}"
        )
    return method


def is_mlp(row: Mapping[str, Any]) -> bool:
    """Whether a numeric row is served by an MLP approximation (FIND's f00000-f00149)."""
    return row.get("category") == "numeric" and row.get("subcategory") == "mlp"


def _domain(row: Mapping[str, Any]) -> str:
    """A ``rasp`` row's stated input domain as a sentence (``""`` for other rows): vocabulary, lengths,
    preconditions (never the program)."""
    if row.get("category") != "rasp":
        return ""
    from findbench.find.rasp.black_box import domain_text

    return " " + domain_text(row["domain"])


def system_prompt(protocol: str) -> str:
    """The system message: how to call the function in ``protocol`` (``text``: commands;
    ``tools``: the ``call_function`` tool)."""
    if check_protocol(protocol) == "tools":
        return _SYSTEM_TOOLS.format(tool=TOOL_NAME, max_inputs=MAX_INPUTS_PER_COMMAND)
    return _SYSTEM.format(script=_S)


def check_row(row: Any, method: str) -> str:
    """``row``'s category, after checking that ``row`` is a dataset row of a known category and
    that ``method`` applies to it (TypeError / ValueError naming the field)."""
    if not isinstance(row, Mapping):
        raise TypeError(f"row must be a mapping (a dataset row), got {type(row).__name__}")
    if row.get("category") not in CONFIGS:
        raise ValueError(f"row['category'] must be one of {CONFIGS}, got {row.get('category')!r}")
    check_method(method, row["category"])
    return row["category"]


def task_prompt(
    row: Mapping[str, Any], method: str, *, exemplar_reply: str | None = None, protocol: str
) -> str:
    """The first user message of an episode on ``row``; ``exemplar_reply`` (MILAN methods): the reply
    line for the row's exemplars; ``protocol`` ``tools`` adds a sentence (``PYTHON(...)`` means a tool call)."""
    category = check_row(row, method)
    text = _TEMPLATES[category].format(script=_S, mlp=_MLP if is_mlp(row) else "", domain=_domain(row))
    if check_protocol(protocol) == "tools":
        # after the sentences that show the PYTHON(...) syntax
        lines = text.split("\n")
        at = next(i for i, line in enumerate(lines) if line.startswith("Experiment by calling f(x)"))
        lines[at] += _TOOLS_NOTE.format(tool=TOOL_NAME, script=_S)
        text = "\n".join(lines)
    if method != "aia":
        if not isinstance(exemplar_reply, str) or not exemplar_reply:
            raise ValueError(f"exemplar_reply: method {method!r} needs the reply for the row's exemplars")
        text += _EXEMPLARS.format(reply=exemplar_reply)
        if method == "milan":
            text += _MILAN_LIMIT.format(turns=MILAN_TURNS)
    elif exemplar_reply is not None:
        raise ValueError("exemplar_reply: only the milan methods show exemplars")
    return text


def build_messages(
    row: Mapping[str, Any], method: str, *, exemplar_reply: str | None = None, protocol: str
) -> list[dict[str, str]]:
    """``[system message, task message]`` for an episode on ``row`` in ``protocol``."""
    return [
        {"role": "system", "content": system_prompt(protocol)},
        {"role": "user", "content": task_prompt(row, method, exemplar_reply=exemplar_reply, protocol=protocol)},
    ]


#: Commands a constrained turn may hold (one per line).
MAX_TURN_COMMANDS = 3
#: Values per constrained command, and characters per value / per free-text line.
_MAX_VALUES, _MAX_VALUE_CHARS, _MAX_LINE_CHARS = 10, 40, 200
#: Characters of a constrained tool command's JSON arguments.
_MAX_TOOL_CHARS = 400
_PREAMBLE = rf"([^\n\[\]()]{{1,{_MAX_LINE_CHARS}}}\n)?"
_VALUE = rf'("[^"\n()]{{1,{_MAX_VALUE_CHARS}}}"|[^\s()"\',]{{1,{_MAX_VALUE_CHARS}}})'
_COMMAND = rf"PYTHON\({SCRIPT_NAME.replace('.', chr(92) + '.')}( {_VALUE}){{1,{_MAX_VALUES}}}\)"
_LINE = rf"[^\n]{{1,{_MAX_LINE_CHARS}}}"
#: The answer parts each category's task message asks for (see the module docstring).
_ANSWER_PARTS = {
    "numeric": ("DESCRIPTION", "DOMAIN", "CODE"),
    "strings": ("DESCRIPTION", "CODE"),
    "rasp": ("DESCRIPTION", "CODE"),
    "neurons_entities": ("DESCRIPTION",),
    "neurons_relations": ("DESCRIPTION", "DOMAIN"),
}


def turn_grammar(category: str, turns: int, white_box: bool = False):
    """The grammar of each turn of an episode of ``turns`` model turns on a ``category``
    function, as a function of the messages so far: commands or the answer
    (:func:`turn_constraint`), the answer alone on the last turn. Both engines use it."""
    answer_only = turn_constraint(category, answer_only=True, white_box=white_box)
    either = turn_constraint(category, white_box=white_box)

    def grammar(messages: list[dict[str, str]]) -> Constraint:
        turn = 1 + sum(m.get("role") == "assistant" for m in messages)
        return answer_only if turn >= turns else either

    return grammar


def turn_constraint(category: str, *, answer_only: bool = False, white_box: bool = False) -> Constraint:
    """The grammar of one ``text``-protocol turn on a ``category`` function: an optional short line,
    then at most :data:`MAX_TURN_COMMANDS` commands of 1-10 values, one per line, or the category's
    answer; ``answer_only`` (an episode's last turn): the answer only. ``white_box`` (an ``--access``
    other than black) adds the tools' ``TOOL(name, {...})`` commands (one line each) and the answer's
    ``[COMPONENTS]`` part."""
    if category not in _ANSWER_PARTS:
        raise ValueError(f"category must be one of {tuple(_ANSWER_PARTS)}, got {category!r}")
    parts = [r"\[CODE\]:\n```python\ndef function\(x\):\n[^`]+```" if name == "CODE" else rf"\[{name}\]: {_LINE}"
             for name in _ANSWER_PARTS[category]]
    command = _COMMAND
    if white_box:
        from findbench.find.rasp.tools import TOOLS

        parts.append(r"\[COMPONENTS\]:\n```json\n\[[^`]+\]\n```")
        names = "|".join(t["name"] for t in (*TOOLS, CODE_TOOL))
        command = rf"({_COMMAND}|TOOL\(({names}), \{{[^\n]{{1,{_MAX_TOOL_CHARS}}}\}}\))"
    answer = r"\n".join(parts)
    if answer_only:
        return Constraint(regex=f"{_PREAMBLE}{answer}")
    commands = rf"{command}(\n{command}){{0,{MAX_TURN_COMMANDS - 1}}}"
    return Constraint(regex=f"{_PREAMBLE}({commands}|{answer})")


#: The text each task prompt shows after ``[DESCRIPTION]:`` as the form of an answer: an answer
#: that only repeats it is degenerate (:func:`findbench._guards.degenerate_reasons`).
DESCRIPTION_PLACEHOLDERS = tuple(
    dict.fromkeys(
        line.split("[DESCRIPTION]:", 1)[1].strip()
        for template in (_NUMERIC, _STRINGS, _RASP, _ENTITIES, _RELATIONS)
        for line in template.splitlines()
        if line.startswith("[DESCRIPTION]:")
    )
)
