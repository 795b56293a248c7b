"""Run a FIND function on the values of an agent's commands, in this process (no shell).

Values go to the row's callable (:func:`findbench.find.load_function`) as ``findbench call``
passes them, so a reply equals what it prints: numeric values are parsed with ``float`` (a bad
value errors alone) and called one by one; strings are called as written; neurons get one
batch ``f([x1, ...])`` on the row's default backbone; a ``rasp`` value is one token sequence
(:func:`findbench.find.rasp.black_box.call_text`). Noisy and corrupted numeric functions
seed their noise from the row, the run seed and the input, so within a run an input always
gets the same output (``findbench call`` draws in call order and differs only there).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from findbench import _checks
from findbench.interpret.prompts import check_row
from findbench.interpret.protocol import (
    MAX_INPUT_CHARS,
    MAX_INPUTS_PER_COMMAND,
    CallError,
    Command,
    format_reply,
    malformed_reply,
)
from findbench.schema import RASP

# Neuron backbones (a torch encoder, an LM) are shared by every runner of the process; calls
# from several episodes in flight go through them one at a time.
_BACKBONE_LOCK = threading.Lock()


def _json_value(value: Any) -> Any:
    """A JSON-safe copy of an output: non-finite floats become their text."""
    if isinstance(value, CallError):
        return None
    return str(value) if isinstance(value, float) and not math.isfinite(value) else value


def _guarded(call: Callable[[], Any]) -> Any:
    """``call()``, or a CallError naming what it raised: the values are the agent's, and one
    that a pure function cannot take must not end the episode."""
    try:
        return call()
    except Exception as exc:
        return CallError(f"{type(exc).__name__}: {exc}")


class FunctionRunner:
    """Evaluates one row's function on agent-supplied values.

    Args:
        row: a dataset row (``function_id``, ``category``, ``params``, ...).
        seed: the run seed (numeric noise only, see the module docstring).
        function: the row's callable, when the caller has one; built on first use otherwise
            (so an episode that never calls the function never loads a neuron backbone).
    """

    def __init__(self, row: Mapping[str, Any], *, seed: int = 0, function: Callable | None = None) -> None:
        self.category: str = check_row(row, "aia")  # a dataset row of a known category (every one takes aia)
        _checks.instance("seed", seed, int, "an int", exclude=bool)
        self.row = dict(row)
        self.seed = seed
        self._function = function

    def function(self) -> Callable:
        """The row's callable (built once; numeric noise keyed by the run seed, module docstring)."""
        if self._function is None:
            from findbench.find import load_function, numeric

            self._function = (numeric.make_function(self.row, noise_key=self.seed) if self.category == "numeric"
                              else load_function(self.row))
        return self._function

    def evaluate(self, inputs: Sequence[str]) -> tuple[list[Any], list[Any]]:
        """``(shown inputs, outputs)`` for values as the agent wrote them; an output is a
        :class:`~findbench.interpret.protocol.CallError` where that value failed."""
        shown: list[Any] = list(inputs)
        outputs: list[Any] = [None] * len(inputs)
        ok: list[int] = []
        for i, x in enumerate(inputs):
            _checks.instance(f"inputs[{i}]", x, str, "a str")
            if len(x) > MAX_INPUT_CHARS:
                shown[i] = x[:40] + "..."
                outputs[i] = CallError(f"input longer than {MAX_INPUT_CHARS} characters")
            else:
                ok.append(i)
        if not ok:
            return shown, outputs
        if self.category == RASP:  # one token sequence per value; shown and answered as JSON lists
            from findbench.find.rasp.black_box import call_text

            for i in ok:
                pair = _guarded(lambda v=inputs[i]: call_text(self.function(), v))
                shown[i], outputs[i] = pair if isinstance(pair, tuple) else (shown[i], pair)
            return shown, outputs
        if self.category in ("numeric", "strings"):
            from findbench.find.numeric import MissingMLPWeightsError

            try:
                fn = self.function()
            except MissingMLPWeightsError as exc:  # an imported MLP whose weights are not public
                for i in ok:
                    outputs[i] = CallError(f"this function cannot be evaluated: {exc}")
                return shown, outputs
            for i in ok:
                if self.category == "strings":
                    outputs[i] = _guarded(lambda v=inputs[i]: fn(v))
                    continue
                try:
                    shown[i] = float(inputs[i])
                except ValueError:
                    outputs[i] = CallError("not a number")
                    continue
                outputs[i] = _guarded(lambda v=shown[i]: float(fn(v)))
            return shown, outputs
        batch = [inputs[i] for i in ok]
        with _BACKBONE_LOCK:
            try:
                values = list(self.function()(batch))
            except (ArithmeticError, LookupError, TypeError, ValueError) as exc:
                values = [CallError(f"{type(exc).__name__}: {exc}")] * len(batch)
        for i, v in zip(ok, values):
            outputs[i] = v
        return shown, outputs

    def run(self, command: Command, *, round: int = 0) -> tuple[str, dict[str, Any]]:
        """The reply line to ``command`` and the record of the call.

        The record is ``{"round", "command", "inputs", "outputs", "errors"}``: inputs as
        written, outputs (None where the value failed; non-finite floats as text) and the
        error message per value (None where it ran). A malformed command runs nothing: its
        record has ``"error"`` and empty lists.
        """
        if command.malformed:
            return malformed_reply(command), {
                "round": round, "command": command.text,
                "inputs": [], "outputs": [], "errors": [], "error": command.error,
            }  # fmt: skip
        note = (f"(only the first {MAX_INPUTS_PER_COMMAND} of {len(command.inputs)} inputs were run)"
                if len(command.inputs) > MAX_INPUTS_PER_COMMAND else None)
        inputs = list(command.inputs[:MAX_INPUTS_PER_COMMAND])
        shown, outputs = self.evaluate(inputs)
        return format_reply(shown, outputs, note=note), {
            "round": round,
            "command": command.text,
            "inputs": inputs,
            "outputs": [_json_value(y) for y in outputs],
            "errors": [y.message if isinstance(y, CallError) else None for y in outputs],
        }
