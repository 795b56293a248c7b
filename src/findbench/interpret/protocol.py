"""The protocols between an interpreter agent and the harness (FIND §3).

``text`` (the default, FIND's): the agent writes commands, each answered with one line, and ends
with its answer::

    PYTHON(function.py 1 2.5 "New York")
    Response: Function input - output pairs: (1, y1) (2.5, y2) (New York, y3)
    [DESCRIPTION]: what the function does
    [DOMAIN]: where it behaves differently (numeric functions, relation neurons)
    [CODE]:
    ```python
    def function(x): ...
    ```

Rules (tested in ``tests/interpret/test_protocol.py``):

- A command is ``PYTHON`` (a word of its own) and a parenthesised argument list; parentheses
  inside must balance or be quoted. Every command of a message runs, in order (FIND ran only the first).
- Arguments split with POSIX shell quoting (:mod:`shlex`; ``#`` is ordinary); unquoted commas
  separate values too (FIND's pattern split on commas).
- A first value naming the script (``function.py``, ``./temp/function.py``, after ``python``) is
  dropped; every other value is passed as a plain value: no shell, no path, no flag.
- A command is *malformed* (counted, answered with an error line) when its parenthesis never
  closes, its quotes do not balance, or it passes no value.
- A message *answers* when it contains ``[DESCRIPTION]`` followed by a colon or a line break;
  its commands are not run.

``tools``: the agent calls ``call_function(inputs)`` (:data:`TOOL_NAME`) and answers in text.
:func:`tool_command` turns ``inputs`` (strings and numbers, a number passed as its text) into
the :class:`Command` a ``PYTHON(...)`` command gives. A call is malformed (a tool error) when
``inputs`` is not such a list, is empty, or holds more than :data:`MAX_INPUTS_PER_COMMAND` values
or one longer than :data:`MAX_INPUT_CHARS` (a text command is cut, or errs per value, instead)."""

from __future__ import annotations

import json
import math
import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from findbench.find.export import format_pairs

#: Interpreter methods of FIND Table 2: the interactive agent (AIA), MILAN-style description
#: from exemplars (at most two model turns) and the agent started from exemplars.
METHODS = ("aia", "milan", "aia+milan")
#: Categories whose rows carry exemplars, the only ones the MILAN methods apply to.
NEURON_CATEGORIES = ("neurons_entities", "neurons_relations")
#: The default protocol, as named in episode records and ``run.json``: FIND's text commands.
PROTOCOL = "text"
#: Every protocol: ``text`` (``PYTHON(...)`` commands in messages) and ``tools`` (native tool
#: calls of :data:`TOOL_NAME`, on Inspect with a model whose provider supports them).
PROTOCOLS = ("text", "tools")
#: The script name agents are told to call.
SCRIPT_NAME = "function.py"
#: The tool of the ``tools`` protocol.
TOOL_NAME = "call_function"
#: Values of one command that are evaluated; the rest are dropped with a note in the reply.
MAX_INPUTS_PER_COMMAND = 100
#: Longest value passed to a function; a longer one gets an error for that value.
MAX_INPUT_CHARS = 500
#: How every harness reply line starts.
REPLY_PREFIX = "Response: "
#: The reply to a message with neither a command nor an answer.
UNRECOGNIZED_REPLY = (
    f"{REPLY_PREFIX}Unrecognized command: no PYTHON command found. Run experiments by writing "
    f"PYTHON({SCRIPT_NAME} input1 input2 ...), or give your final answer starting with [DESCRIPTION]:."
)
#: The ``tools`` protocol's reply to a message with neither a tool call nor an answer.
TOOL_UNRECOGNIZED_REPLY = (
    f"{REPLY_PREFIX}Unrecognized command: no {TOOL_NAME} tool call found. Run experiments by calling the {TOOL_NAME} "
    "tool with a list of inputs, or give your final answer starting with [DESCRIPTION]:."
)


def check_protocol(protocol: object) -> str:
    """``protocol`` if it is one of :data:`PROTOCOLS`; ValueError naming ``protocol`` otherwise."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    return protocol  # type: ignore[return-value]


@dataclass(frozen=True)
class Command:
    """One ``PYTHON(...)`` command found in an agent message.

    Attributes:
        text: the command as written, e.g. ``'PYTHON(function.py 1 2)'``.
        inputs: the values to pass to the function, script name removed.
        error: why the command cannot run (a malformed command), or None.
    """

    text: str
    inputs: tuple[str, ...] = ()
    error: str | None = None

    @property
    def malformed(self) -> bool:
        return self.error is not None


_COMMAND_START = re.compile(r"\bPYTHON[ \t]*\(")


def _close_quoted(text: str, i: int) -> int | None:
    """Index of the ``)`` closing the parenthesis opened just before ``i``, reading quotes
    and backslash escapes as a POSIX shell does; None when it never closes."""
    depth, quote, n = 1, None, len(text)
    while i < n:
        c = text[i]
        if quote == "'":
            if c == "'":
                quote = None
        elif quote == '"':
            if c == "\\":
                i += 1
            elif c == '"':
                quote = None
        elif c == "\\":
            i += 1
        elif c in "'\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _close_plain(text: str, i: int) -> int | None:
    """Like :func:`_close_quoted`, ignoring quotes (for unbalanced apostrophes)."""
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return None


def _split_values(body: str) -> list[str]:
    """Shell-style split of an argument list; commas outside quotes separate values.
    ValueError (from shlex) when quotes do not balance."""
    lexer = shlex.shlex(body, posix=True)
    lexer.whitespace_split = True
    lexer.whitespace += ","
    lexer.commenters = ""
    return list(lexer)


def _is_script(token: str) -> bool:
    return posixpath.basename(token.replace("\\", "/")) == SCRIPT_NAME


def _command(raw: str, body: str) -> Command:
    try:
        values = _split_values(body)
    except ValueError as exc:
        reason = str(exc).strip() or "cannot split the arguments"
        return Command(raw, (), f"{reason}: put double quotes around an input that contains an apostrophe, e.g. \"it's\"")
    if len(values) >= 2 and values[0] in ("python", "python3") and _is_script(values[1]):
        values = values[2:]
    elif values and _is_script(values[0]):
        values = values[1:]
    if not values:
        return Command(raw, (), f"no inputs: write PYTHON({SCRIPT_NAME} input1 input2 ...)")
    return Command(raw, tuple(values))


def parse_commands(text: str) -> list[Command]:
    """Every ``PYTHON(...)`` command in ``text``, in order (malformed ones included, with
    their ``error`` set). See the module docstring for the rules."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    commands: list[Command] = []
    pos = 0
    while True:
        m = _COMMAND_START.search(text, pos)
        if m is None:
            return commands
        start, body_start = m.start(), m.end()
        candidates = []
        for close in (_close_quoted, _close_plain):
            end = close(text, body_start)
            if end is not None and end not in [e for e, _ in candidates]:
                candidates.append((end, _command(text[start : end + 1], text[body_start:end])))
        if not candidates:
            line_end = text.find("\n", body_start)
            raw = text[start : line_end if line_end >= 0 else len(text)]
            commands.append(Command(raw, (), "missing closing parenthesis ')'"))
            pos = body_start
            continue
        end, command = next(((e, c) for e, c in candidates if not c.malformed), candidates[-1])
        commands.append(command)
        pos = end + 1


def _json_text(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)


def tool_call_text(arguments: Mapping[str, object] | None, name: str = TOOL_NAME) -> str:
    """A tool call as one readable line, e.g. ``call_function(inputs=["hello", "two words"])``
    (arguments as JSON); the command text of its record and transcript line."""
    if not isinstance(arguments, Mapping):
        return f"{name}({_json_text(arguments)})" if arguments is not None else f"{name}()"
    return f"{name}(" + ", ".join(f"{k}={_json_text(v)}" for k, v in arguments.items()) + ")"


def _tool_value(value: object) -> str | None:
    """A tool input as the text a command would pass, or None when it is not a value."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


def tool_command(inputs: object) -> Command:
    """The :class:`Command` of a ``call_function(inputs)`` tool call (see the module docstring):
    the values as text, or ``error`` set when the call is malformed."""
    text = tool_call_text({"inputs": inputs})
    if not isinstance(inputs, (list, tuple)):
        return Command(text, (), f"inputs must be a list of strings or numbers, got {type(inputs).__name__}")
    if not inputs:
        return Command(text, (), f"no inputs: call {TOOL_NAME} with a list of one or more inputs")
    if len(inputs) > MAX_INPUTS_PER_COMMAND:
        return Command(text, (), f"too many inputs ({len(inputs)}): give at most {MAX_INPUTS_PER_COMMAND} per call")
    values = []
    for i, x in enumerate(inputs):
        value = _tool_value(x)
        if value is None:
            return Command(text, (), f"inputs[{i}] must be a string or a finite number, got {_json_text(x)}")
        if len(value) > MAX_INPUT_CHARS:
            return Command(text, (), f"inputs[{i}] is longer than {MAX_INPUT_CHARS} characters")
        values.append(value)
    return Command(text, tuple(values))


@dataclass(frozen=True)
class Answer:
    """The parts of an agent's final answer; a part it did not give is None."""

    description: str
    domain: str | None = None
    code: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {"description": self.description, "domain": self.domain, "code": self.code}


_MARKER = re.compile(r"\[(DESCRIPTION|DOMAIN|CODE)\][ \t*]*(?::|(?=\n)|$)")
_FENCE = "```"


def _clean(part: str) -> str:
    """A section's text without surrounding blank space and Markdown emphasis marks."""
    return part.strip().strip("*").strip()


def _last_fenced_block(segment: str) -> str | None:
    """The last fenced code block of ``segment`` (its body, without the info string); an
    opening fence that never closes runs to the end (a reply cut by the token limit)."""
    blocks: list[str] = []
    i = 0
    while True:
        open_at = segment.find(_FENCE, i)
        if open_at < 0:
            break
        line_end = segment.find("\n", open_at)
        if line_end < 0:
            break
        close_at = segment.find(_FENCE, line_end + 1)
        if close_at < 0:
            blocks.append(segment[line_end + 1 :])
            break
        blocks.append(segment[line_end + 1 : close_at])
        i = close_at + len(_FENCE)
    if not blocks:
        return None
    code = blocks[-1].strip("\n").rstrip()
    return code or None


def parse_answer(text: str) -> Answer | None:
    """The answer in an agent message, or None when the message does not answer.

    The description is the text after the last ``[DESCRIPTION]:`` up to the next marker; the
    domain likewise after the last ``[DOMAIN]:``; the code is the body of the last fenced
    block after the last ``[CODE]:`` marker. A marker is followed by a colon or a line
    break (Markdown bold around it is allowed).
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    markers = list(_MARKER.finditer(text))
    if not any(m.group(1) == "DESCRIPTION" for m in markers):
        return None

    def section(name: str) -> str | None:
        found = [k for k, m in enumerate(markers) if m.group(1) == name]
        if not found:
            return None
        k = found[-1]
        end = markers[k + 1].start() if k + 1 < len(markers) else len(text)
        return _clean(text[markers[k].end() : end])

    code_markers = [m for m in markers if m.group(1) == "CODE"]
    code = _last_fenced_block(text[code_markers[-1].end() :]) if code_markers else None
    return Answer(description=section("DESCRIPTION") or "", domain=section("DOMAIN"), code=code)


def format_answer(description: str, domain: str | None = None, code: str | None = None) -> str:
    """An answer message in the protocol's format (parsed back by :func:`parse_answer`)."""
    if not isinstance(description, str):
        raise TypeError(f"description must be a str, got {type(description).__name__}")
    parts = [f"[DESCRIPTION]: {description.strip()}"]
    if domain is not None:
        parts.append(f"[DOMAIN]: {domain.strip()}")
    if code is not None:
        parts.append(f"[CODE]:\n{_FENCE}python\n{code.strip(chr(10)).rstrip()}\n{_FENCE}")
    return "\n".join(parts)


@dataclass(frozen=True)
class CallError:
    """The output shown for an input the function could not take (e.g. not a number)."""

    message: str

    def __str__(self) -> str:
        return f"error: {self.message}"


def format_reply(inputs: Sequence[Any], outputs: Sequence[Any], *, note: str | None = None) -> str:
    """``Response: Function input - output pairs: (x1, y1) (x2, y2) ...`` (``findbench call``'s line;
    a :class:`CallError` shows as ``error: <message>``), ``note`` appended."""
    if len(inputs) != len(outputs):
        raise ValueError(f"inputs ({len(inputs)}) and outputs ({len(outputs)}) differ in length")
    line = REPLY_PREFIX + format_pairs(inputs, outputs)  # findbench call's line; a CallError shows as its message
    return f"{line} {note}" if note else line


def malformed_reply(command: Command) -> str:
    """The reply line to a malformed command."""
    return f"{REPLY_PREFIX}Error in {command.text}: {command.error}."
