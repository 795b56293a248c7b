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
  closes (its text then runs to the end of the line or the next command), its quotes do not
  balance, or it passes no value.
- One message is read for commands up to :data:`MAX_MESSAGE_CHARS` characters, and at most
  :data:`MAX_COMMANDS_PER_MESSAGE` of its commands run (:func:`turn_commands`); what goes over is
  counted in the episode record and said in a last reply line. Parsing takes time linear in
  the message's length.
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

from findbench import _checks
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
#: What an interpreter may see of the model (``--access``): ``black`` calls only (FIND); on ``rasp``
#: also ``white`` (the white-box tools over the aligned weights), ``rotated`` (over the rotated
#: variant) and ``localized`` (``white`` plus the components that matter): :mod:`findbench.interpret.whitebox`.
ACCESS = ("black", "white", "rotated", "localized")
#: The script name agents are told to call.
SCRIPT_NAME = "function.py"
#: The tool of the ``tools`` protocol.
TOOL_NAME = "call_function"
#: Values of one command that are evaluated; the rest are dropped with a note in the reply.
MAX_INPUTS_PER_COMMAND = 100
#: Longest value passed to a function; a longer one gets an error for that value.
MAX_INPUT_CHARS = 500
#: Characters of one agent message read for commands (``text``); the rest is not, with a note in the reply.
MAX_MESSAGE_CHARS = 32_000
#: Commands (tool calls) of one agent message that run; the rest are dropped with a note in the reply.
MAX_COMMANDS_PER_MESSAGE = 20
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
#: The code tool (``--access`` other than black; spec as :data:`~findbench.find.rasp.tools.TOOLS`), run by
#: :class:`~findbench.interpret.whitebox.WhiteBox`: a sandboxed program that calls the tools.
CODE_TOOL = {
    "name": "python", "args": {"code": {"type": "string", "description": "a Python program (numpy available)"}},
    "required": ["code"],
    "doc": "Runs a Python program in a sandbox (numpy available; seconds of time, no files or network). In it the "
           "tools above are functions of the same arguments (run(tokens), ablate(component, tokens, mode), ...) that "
           "return their replies as data, each call counted like a direct one (a refused one raises ToolError). The "
           "reply is what the program prints.",
}


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

# Lexer states of the quote-aware scan: unquoted, in '...', in "...", and the two after a backslash;
# the state after each character (a character not listed keeps the state; an escaped one ends the escape).
_PLAIN, _PLAIN_ESCAPED, _SINGLE, _DOUBLE, _DOUBLE_ESCAPED = range(5)
_AFTER = {_PLAIN: {"\\": _PLAIN_ESCAPED, "'": _SINGLE, '"': _DOUBLE}, _SINGLE: {"'": _PLAIN},
          _DOUBLE: {"\\": _DOUBLE_ESCAPED, '"': _PLAIN}}
_ESCAPE_END = {_PLAIN_ESCAPED: _PLAIN, _DOUBLE_ESCAPED: _DOUBLE}


class _Runs:
    """Scans that are in the same lexer state at the same character: from here on they read the text
    alike. ``closes_at[k]`` lists the scans that end when the shared depth ``counter`` falls to ``k``."""

    __slots__ = ("closes_at", "counter")

    def __init__(self) -> None:
        self.counter = 0
        self.closes_at: dict[int, list[int]] = {}

    def absorb(self, other: _Runs) -> _Runs:
        """These runs and ``other``'s as one group (the smaller group's keys are moved)."""
        big, small = (self, other) if len(self.closes_at) >= len(other.closes_at) else (other, self)
        shift = big.counter - small.counter
        for key, ids in small.closes_at.items():
            big.closes_at.setdefault(key + shift, []).extend(ids)
        return big


def _quoted_closes(text: str, body_starts: Sequence[int]) -> dict[int, int]:
    """For each index of ``body_starts`` (just after an opening parenthesis), the index of the ``)`` closing
    it, reading quotes and backslash escapes as a POSIX shell does; absent when it never closes.

    One pass over ``text``: every scan started so far is in one of five lexer states, and scans in the same
    state move together (their depths differ by a constant), so each character costs a few steps whatever
    the number of open scans."""
    closes: dict[int, int] = {}
    groups: dict[int, _Runs] = {}
    next_start, n_starts, i, n = 0, len(body_starts), 0, len(text)
    while i < n:
        if not groups:  # nothing open: skip to the next start
            if next_start == n_starts:
                break
            i = body_starts[next_start]
            if i >= n:
                break
        while next_start < n_starts and body_starts[next_start] == i:
            runs = groups.setdefault(_PLAIN, _Runs())
            runs.closes_at.setdefault(runs.counter - 1, []).append(body_starts[next_start])
            next_start += 1
        c = text[i]
        moved: dict[int, _Runs] = {}
        for state, runs in groups.items():
            if state == _PLAIN and c in "()":
                runs.counter += 1 if c == "(" else -1
                for start in runs.closes_at.pop(runs.counter, ()) if c == ")" else ():
                    closes[start] = i
            state = _ESCAPE_END[state] if state in _ESCAPE_END else _AFTER[state].get(c, state)
            if runs.closes_at:
                moved[state] = moved[state].absorb(runs) if state in moved else runs
        groups = moved
        i += 1
    return closes


def _plain_closes(text: str) -> dict[int, int]:
    """Index of the ``)`` matching each ``(`` (by the ``(``'s index), ignoring quotes (for unbalanced
    apostrophes); absent when it never closes. One pass with a stack."""
    closes: dict[int, int] = {}
    stack: list[int] = []
    for m in re.finditer(r"[()]", text):
        if m.group() == "(":
            stack.append(m.start())
        elif stack:
            closes[stack.pop()] = m.start()
    return closes


def _is_script(token: str) -> bool:
    return posixpath.basename(token.replace("\\", "/")) == SCRIPT_NAME


def _command(raw: str, body: str) -> Command:
    """The command of the argument list ``body``, split shell-style (commas outside quotes separate values too;
    quotes that do not balance make it malformed)."""
    lexer = shlex.shlex(body, posix=True)
    lexer.whitespace_split = True
    lexer.whitespace += ","
    lexer.commenters = ""
    try:
        values = list(lexer)
    except ValueError as exc:
        reason = str(exc).strip() or "cannot split the arguments"
        return Command(
            raw, (), f"{reason}: put double quotes around an input that contains an apostrophe, e.g. \"it's\""
        )
    if len(values) >= 2 and values[0] in ("python", "python3") and _is_script(values[1]):
        values = values[2:]
    elif values and _is_script(values[0]):
        values = values[1:]
    return Command(raw, tuple(values), None if values else f"no inputs: write PYTHON({SCRIPT_NAME} input1 input2 ...)")


def parse_commands(text: str) -> list[Command]:
    """Every ``PYTHON(...)`` command in ``text``, in order (malformed ones included, with
    their ``error`` set). See the module docstring for the rules; time linear in ``len(text)``
    (no caps: :func:`turn_commands` applies them)."""
    _checks.instance("text", text, str, "a str")
    starts = [(m.start(), m.end()) for m in _COMMAND_START.finditer(text)]
    quoted = _quoted_closes(text, [body for _, body in starts])
    plain = _plain_closes(text)
    commands: list[Command] = []
    pos = 0
    for k, (start, body_start) in enumerate(starts):
        if start < pos:  # inside the previous command
            continue
        chosen: tuple[int, Command] | None = None  # the first way of closing that parses, else the last
        for end in (quoted.get(body_start), plain.get(body_start - 1)):
            if end is not None and (chosen is None or end != chosen[0]):
                chosen = (end, _command(text[start : end + 1], text[body_start:end]))
                if not chosen[1].malformed:
                    break
        if chosen is None:  # neither way closes: the text up to the line's end (or the next command)
            stop = starts[k + 1][0] if k + 1 < len(starts) else len(text)
            line_end = text.find("\n", body_start, stop)
            commands.append(
                Command(text[start : line_end if line_end >= 0 else stop], (), "missing closing parenthesis ')'")
            )
            pos = body_start
            continue
        commands.append(chosen[1])
        pos = chosen[0] + 1
    return commands


@dataclass(frozen=True)
class TurnCommands:
    """The commands of one agent message, within the per-turn caps.

    Attributes:
        commands: the commands to run, at most :data:`MAX_COMMANDS_PER_MESSAGE`.
        dropped: commands past that cap (not run).
        truncated: whether the message was longer than :data:`MAX_MESSAGE_CHARS` (only its first
            :data:`MAX_MESSAGE_CHARS` characters were read for commands)."""

    commands: tuple[Command, ...]
    dropped: int = 0
    truncated: bool = False

    @property
    def note(self) -> str | None:
        """The reply line saying what went over a cap, or None."""
        parts = [part for part, over in (
            (f"your message is longer than {MAX_MESSAGE_CHARS} characters; only its first {MAX_MESSAGE_CHARS} were "
             "read for commands", self.truncated),
            (f"only the first {len(self.commands)} of {len(self.commands) + self.dropped} commands were run (at most "
             f"{MAX_COMMANDS_PER_MESSAGE} per message)", self.dropped),
        ) if over]
        return f"{REPLY_PREFIX}Note: {'; '.join(parts)}." if parts else None


def turn_commands(text: str) -> TurnCommands:
    """The commands of an agent message as the episode loop runs them: those of its first
    :data:`MAX_MESSAGE_CHARS` characters, at most :data:`MAX_COMMANDS_PER_MESSAGE` of them."""
    _checks.instance("text", text, str, "a str")
    commands = parse_commands(text[:MAX_MESSAGE_CHARS])
    return TurnCommands(
        tuple(commands[:MAX_COMMANDS_PER_MESSAGE]),
        max(0, len(commands) - MAX_COMMANDS_PER_MESSAGE),
        len(text) > MAX_MESSAGE_CHARS,
    )


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
    values = []  # a number passes as the text a command would
    for i, x in enumerate(inputs):
        if not (isinstance(x, str) or (isinstance(x, int) and not isinstance(x, bool))
                or (isinstance(x, float) and math.isfinite(x))):
            return Command(text, (), f"inputs[{i}] must be a string or a finite number, got {_json_text(x)}")
        values.append(x if isinstance(x, str) else str(x))
        if len(values[-1]) > MAX_INPUT_CHARS:
            return Command(text, (), f"inputs[{i}] is longer than {MAX_INPUT_CHARS} characters")
    return Command(text, tuple(values))


@dataclass(frozen=True)
class Answer:
    """The parts of an agent's final answer; a part it did not give is None."""

    description: str
    domain: str | None = None
    code: str | None = None
    #: ``rasp`` under white-box access: the ``[COMPONENTS]`` JSON text (read by
    #: :func:`findbench.interpret.whitebox.component_map`), at most :data:`MAX_COMPONENTS_CHARS`.
    components: str | None = None


#: The longest ``[COMPONENTS]`` part kept (characters).
MAX_COMPONENTS_CHARS = 20_000
_MARKER = re.compile(r"\[(DESCRIPTION|DOMAIN|CODE|COMPONENTS)\][ \t*]*(?::|(?=\n)|$)")
_FENCE = "```"
#: A fenced block: the fence and its info string up to the line's end, then the body (group 1) up to the next
#: fence or the end; a fence with no line end after it matches to the end, body None (one scan: linear time).
_FENCED = re.compile(r"```(?:[^\n]*\n(.*?)(?:```|\Z)|[^\n]*\Z)", re.DOTALL)


def _clean(part: str) -> str:
    """A section's text without surrounding blank space and Markdown emphasis marks."""
    return part.strip().strip("*").strip()


def parse_answer(text: str) -> Answer | None:
    """The answer in an agent message, or None when the message does not answer.

    The description is the text after the last ``[DESCRIPTION]:`` up to the next marker; the
    domain likewise after the last ``[DOMAIN]:``; the code is the body of the last fenced
    block after the last ``[CODE]:`` marker (up to a later ``[COMPONENTS]:``); the component map
    (``rasp``, white-box access) the text after the last ``[COMPONENTS]:``, or its fenced block. A
    marker is followed by a colon or a line break (Markdown bold around it is allowed).
    """
    _checks.instance("text", text, str, "a str")
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

    def fenced(name: str, other: str) -> str | None:
        """The body of the last fenced block after the last ``name`` marker, up to the next ``other`` marker (a
        code block may hold the other markers; an opening fence that never closes runs to the end, a reply cut
        by the token limit), without the info string; None when there is none."""
        found = [m for m in markers if m.group(1) == name]
        if not found:
            return None
        end = min([m.start() for m in markers if m.group(1) == other and m.start() > found[-1].end()] + [len(text)])
        blocks = [m[1] for m in _FENCED.finditer(text, found[-1].end(), end) if m[1] is not None]
        return (blocks[-1].strip("\n").rstrip() or None) if blocks else None

    components = section("COMPONENTS")
    if components is not None and components.startswith(_FENCE):
        components = fenced("COMPONENTS", "CODE") or ""
    components = components[:MAX_COMPONENTS_CHARS] if components is not None else None
    return Answer(description=section("DESCRIPTION") or "", domain=section("DOMAIN"), code=fenced("CODE", "COMPONENTS"),
                  components=components)


def format_answer(description: str, domain: str | None = None, code: str | None = None,
                  components: str | None = None) -> str:
    """An answer message in the protocol's format (parsed back by :func:`parse_answer`)."""
    _checks.instance("description", description, str, "a str")
    parts = [f"[DESCRIPTION]: {description.strip()}"]
    if domain is not None:
        parts.append(f"[DOMAIN]: {domain.strip()}")
    if code is not None:
        parts.append(f"[CODE]:\n{_FENCE}python\n{code.strip(chr(10)).rstrip()}\n{_FENCE}")
    if components is not None:
        parts.append(f"[COMPONENTS]:\n{_FENCE}json\n{components.strip()}\n{_FENCE}")
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
