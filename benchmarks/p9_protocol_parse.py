"""P9: reading an agent message for ``PYTHON(`` commands, one pass vs the rescanning reference.

A hostile or looping interpreter writes ``PYTHON(`` over and over without closing it (issue 29:
28 KB of it took minutes, on the event loop, stalling every episode in flight). Both procedures
read the same messages, ``"PYTHON(" * n`` for each ``n`` of ``--sizes``, and must find the same
commands (same inputs and errors; the reference's text of an unclosed command runs to the end of
its line, ours stops at the next command):

* reference: the parser before issue 29 (kept here only), which for every start scans to the
  closing parenthesis, or to the end of the message when there is none, both reading quotes
  and ignoring them;
* ours: :func:`findbench.interpret.protocol.parse_commands` (every close found in one pass).

CPU seconds (``time.process_time``), best of ``--repeats`` (the reference once above 1,000 starts).
Two more messages show the cost stays linear: ``"PYTHON('(" * n`` (quotes that never close) and
a 32,000-character message of ordinary commands.

    python benchmarks/p9_protocol_parse.py [--sizes 500,1000,2000,4000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import posixpath
import re
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

from findbench._io import atomic_write_json
from findbench.interpret.protocol import SCRIPT_NAME, Command, parse_commands

RESULTS = Path(__file__).resolve().parent / "results" / "p9_protocol_parse.json"

# ----------------------------------------------------------------- the reference (before issue 29)
_START = re.compile(r"\bPYTHON[ \t]*\(")


def _close_quoted(text: str, i: int) -> int | None:
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
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return None


def _command(raw: str, body: str) -> Command:
    lexer = shlex.shlex(body, posix=True)
    lexer.whitespace_split, lexer.commenters = True, ""
    lexer.whitespace += ","
    try:
        values = list(lexer)
    except ValueError as exc:
        reason = str(exc).strip() or "cannot split the arguments"
        return Command(
            raw, (), f'{reason}: put double quotes around an input that contains an apostrophe, e.g. "it\'s"'
        )
    script = [posixpath.basename(v.replace("\\", "/")) == SCRIPT_NAME for v in values]
    if len(values) >= 2 and values[0] in ("python", "python3") and script[1]:
        values = values[2:]
    elif values and script[0]:
        values = values[1:]
    if not values:
        return Command(raw, (), f"no inputs: write PYTHON({SCRIPT_NAME} input1 input2 ...)")
    return Command(raw, tuple(values))


def reference_parse_commands(text: str) -> list[Command]:
    """``parse_commands`` as it was at e5851b3: quadratic in the number of unclosed starts."""
    commands: list[Command] = []
    pos = 0
    while True:
        m = _START.search(text, pos)
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


# ------------------------------------------------------------------------------------ timing
def cpu_seconds(parse: Callable[[str], list[Command]], text: str, repeats: int) -> tuple[float, list[Command]]:
    best, commands = float("inf"), []
    for _ in range(repeats):
        t0 = time.process_time()
        commands = parse(text)
        best = min(best, time.process_time() - t0)
    return best, commands


def same_commands(ours: list[Command], reference: list[Command]) -> bool:
    return [(c.inputs, c.error) for c in ours] == [(c.inputs, c.error) for c in reference]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="500,1000,2000,4000", help="comma-separated numbers of unclosed PYTHON( starts"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    rows = []
    for n in sizes:
        text = "PYTHON(" * n
        ref_t, ref = cpu_seconds(reference_parse_commands, text, args.repeats if n <= 1000 else 1)
        ours_t, ours = cpu_seconds(parse_commands, text, args.repeats)
        if not same_commands(ours, ref):
            raise SystemExit(f"{n} starts: the two parsers found different commands")
        rows.append(
            {
                "starts": n,
                "chars": len(text),
                "commands": len(ours),
                "reference_cpu_s": round(ref_t, 4),
                "ours_cpu_s": round(ours_t, 5),
                "speedup": round(ref_t / ours_t, 1),
            }
        )
        print(
            f"{n:6d} starts ({len(text) / 1000:5.1f} KB): reference {ref_t:8.3f} s, ours {ours_t:.4f} s "
            f"-> {ref_t / ours_t:,.0f}x",
            flush=True,
        )

    linear = {}
    for name, unit in (("unclosed_quotes", "PYTHON('("), ("unclosed", "PYTHON(")):
        for n in (4000, 40000):
            t, commands = cpu_seconds(parse_commands, unit * n, args.repeats)
            linear[f"{name}_{n}_cpu_s"] = round(t, 4)
            assert len(commands) == n
    ordinary = " ".join(f"PYTHON(function.py {i} {i + 0.5} word{i})" for i in range(1000))[:32_000]
    linear["ordinary_32k_cpu_s"] = round(cpu_seconds(parse_commands, ordinary, args.repeats)[0], 4)
    print("ours alone: " + ", ".join(f"{k} {v}" for k, v in linear.items()))

    result = {
        "benchmark": "p9_protocol_parse",
        "message": '"PYTHON(" * starts (every command unclosed)',
        "by_size": rows,
        "speedup_at_largest": rows[-1]["speedup"] if rows else None,
        "ours_alone": linear,
        "clock": "time.process_time, best of --repeats (the reference once above 1,000 starts)",
        "repeats": args.repeats,
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()},
    }
    atomic_write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
