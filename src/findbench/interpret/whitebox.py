"""Access conditions of a ``rasp`` episode (issue 43) and the white-box tools in both protocols.

``--access`` (:data:`~findbench.interpret.protocol.ACCESS`): ``black`` (calls only, as FIND),
``white`` (the tools over the ``aligned`` weights), ``rotated`` (over the ``rotated`` variant: same
function, scrambled basis) and ``localized`` (``white`` plus the names of the components that
matter, from the row's ground truth).
The tools (:class:`~findbench.find.rasp.tools.RaspTools`, one per episode) run here, in the
findbench process, on the chosen variant's weights; the interpreter gets their replies only, never
the program, residual labels or roles.

- ``text``: a message's ``TOOL(name, {"arg": value, ...})`` commands (:func:`tool_commands`) each
  get one reply line, beside the function calls' lines;
- ``tools``: one Inspect tool per entry of :data:`~findbench.find.rasp.tools.TOOLS` and :data:`CODE_TOOL`.

The code tool ``python`` runs the interpreter's program in :mod:`findbench.sandbox` (never in this
process), where the tools are functions: each call travels to this process as a sandbox service, runs
here on the same tools and comes back as data. Every call (refused ones too, and the program's own) is
counted against the tools' budget and recorded in the episode's ``tool_calls``, a program's calls
right after its own record; a bad call is a reply naming the problem, never a stopped run."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from findbench.find.rasp import circuit, truth
from findbench.interpret.protocol import (
    CODE_TOOL,
    MAX_COMMANDS_PER_MESSAGE,
    MAX_INPUT_CHARS,
    MAX_MESSAGE_CHARS,
    REPLY_PREFIX,
)

if TYPE_CHECKING:
    from inspect_ai.tool import ToolDef

    from findbench.find.rasp.tools import RaspTools
    from findbench.interpret.episode import EpisodeState

#: The weights each access condition opens.
VARIANT = {"white": "aligned", "rotated": "rotated", "localized": "aligned"}
#: ``find_circuit``'s metrics ``findbench evaluate`` reports for white-box rasp runs.
CIRCUIT_METRICS = circuit.NODE_ROLE_METRICS
#: At most this many entries of a ``[COMPONENTS]`` answer are read; ``code`` and ``reads`` are cut.
MAX_ENTRIES, MAX_CODE_CHARS, MAX_READS = 200, 4000, 20
_NAME = re.compile(r"blocks\.(\d{1,3})\.(?:attn\.head(\d{1,3})|mlp(?:\.unit(\d{1,5}))?)")
_START = re.compile(r"\bTOOL[ \t]*\(\s*([A-Za-z_]\w{0,40})\s*,?\s*")
_DECODER = json.JSONDecoder()


def matter(row: Mapping[str, Any]) -> list[str]:
    """The names of a rasp row's components that matter (``localized``), as the tools name them:
    computed from the row's ground truth here; only names and unit indices leave it."""
    return [f"blocks.{c['layer']}.attn.head{c['head']}" if c.get("head") is not None
            else f"blocks.{c['layer']}.mlp (units {', '.join(str(u) for u in c.get('units') or [])})"
            for c in circuit.parse_json_list(row.get("components") or "[]", "components")
            if c.get("role") != "inactive"]


def component_map(text: Any, all_units: Mapping[str, list[int]] | None = None) -> list[dict]:
    """An answer's ``[COMPONENTS]`` JSON text as a ``find_circuit`` prediction (read as hostile: at
    most :data:`MAX_ENTRIES` entries; an entry without a component name the tools use or a role of
    the taxonomy is dropped; ``reads``, ``code`` and ``score`` kept only when well-formed and cut to
    size). ``blocks.{l}.mlp`` without ``units`` stands for ``all_units[hook]`` (the layer's units)."""
    try:
        entries = json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        entries = None
    out = []
    for e in entries[:MAX_ENTRIES] if isinstance(entries, list) else []:
        name = e.get("component") if isinstance(e, dict) else None
        m = _NAME.fullmatch(name) if isinstance(name, str) else None
        if m is None or e.get("role") not in truth.ROLES:
            continue
        layer, head, unit = m.groups()
        if head is not None:
            pred = {"hook": f"blocks.{layer}.attn.hook_result", "head": int(head)}
        else:
            hook, units = f"blocks.{layer}.mlp.hook_post", e.get("units")
            if unit is not None:
                units = [int(unit)]
            elif not (isinstance(units, list) and units and all(type(u) is int and 0 <= u < 10**5 for u in units)):
                units = list((all_units or {}).get(hook, []))
            if not units:
                continue
            pred = {"hook": hook, "units": sorted(set(units))}
        pred["role"] = e["role"]
        reads = e.get("reads")
        if isinstance(reads, list) and all(isinstance(r, str) for r in reads):
            pred["reads"] = [r[:100] for r in reads[:MAX_READS]]
        if isinstance(e.get("code"), str):
            pred["code"] = e["code"][:MAX_CODE_CHARS]
        if type(e.get("score")) in (int, float) and math.isfinite(e["score"]):
            pred["score"] = float(e["score"])
        out.append(pred)
    return out


def answer_entries(prediction: list[dict]) -> str:
    """A ``find_circuit`` prediction as ``[COMPONENTS]`` JSON text (component names as the tools use)."""
    entries = []
    for p in prediction:
        layer = p["hook"].split(".")[1]
        name = f"blocks.{layer}.attn.head{p['head']}" if p.get("head") is not None else f"blocks.{layer}.mlp"
        entries.append({"component": name} | ({"units": p["units"]} if p.get("units") else {})
                       | {k: p[k] for k in ("role", "reads", "score", "code") if k in p})
    return json.dumps(entries)


def reference_components(name: str, row: Mapping[str, Any], access: str) -> str:
    """``[COMPONENTS]`` of a reference interpreter on a rasp ``row`` under white-box ``access``:
    ``oracle`` the row's truth (in the variant's unit order, with each component's code),
    ``attribution`` :func:`findbench.find.rasp.attribution.predict` on the variant's weights."""
    from findbench.find.rasp import attribution

    variant = VARIANT[access]
    if name == "attribution":
        return answer_entries(attribution.predict(dict(row), variant))
    comps = truth.for_variant(circuit.parse_json_list(row["components"], "components"), row["function_id"], variant)
    program = json.loads(row["program"]) if isinstance(row.get("program"), str) else row.get("program")
    return answer_entries(circuit.truth_prediction(comps, program))


def circuit_scores(episode: Any, row: Mapping[str, Any], seed: int = 0, *,
                   floor: bool = True) -> dict[str, float | None] | None:
    """``find_circuit``'s :data:`CIRCUIT_METRICS` of one episode (its record as the log holds it) on
    ``row`` (from the data): the answer's ``[COMPONENTS]`` against the row's components in the unit
    order of the episode's variant (no map scores 0), each with ``<metric>_observed``, the white-box
    floor: the best that maps with no understanding score, what the episode's tool replies alone support
    (:func:`tool_floor`, its tools seeded by the run's ``seed``) or the fixed floors (every component
    given the row's majority role, or marked as mattering: :data:`~findbench.find.rasp.circuit.FLOORS`),
    and ``<metric>_margin``, the metric minus that floor (None where a metric is undefined; neither
    without ``floor``); None off rasp or under ``black`` access."""
    access = episode.get("access") if isinstance(episode, dict) else None
    if row.get("category") != "rasp" or not isinstance(access, str) or access not in VARIANT:
        return None
    comps = truth.for_variant(circuit.parse_json_list(row["components"], "components"), row["function_id"],
                              VARIANT[access])
    units: dict[str, list[int]] = {}
    for c in comps:
        units.setdefault(c["hook"], []).extend(c.get("units") or [])
    answer = episode.get("answer")
    got = circuit.score_function(component_map(answer.get("components") if isinstance(answer, dict) else None,
                                                units), comps)
    out: dict[str, float | None] = {m: None if math.isnan(got[m]) else got[m] for m in CIRCUIT_METRICS}
    if not floor:
        return out
    maps = [component_map(tool_floor(episode, row, comps, seed), units),
            *(circuit.floor_predictions(comps, f) for f in circuit.FLOORS)]
    floors = [circuit.score_function(p, comps) for p in maps]
    for m in CIRCUIT_METRICS:
        out[f"{m}_observed"] = max((f[m] for f in floors if not math.isnan(f[m])), default=None)
        out[f"{m}_margin"] = None if None in (out[m], out[f"{m}_observed"]) else out[m] - out[f"{m}_observed"]
    return out


#: The tools whose replies show what a component does to the output (what :func:`tool_floor` reads).
EFFECT_TOOLS = ("ablate", "patch")


def tool_floor(episode: Mapping[str, Any], row: Mapping[str, Any], components: list[dict], seed: int = 0) -> str:
    """The white-box floor of an episode, as ``[COMPONENTS]`` JSON text: what its tool replies alone
    support, with no understanding. Every component the episode ablated or patched is marked as
    mattering (score: the share of those calls that changed the output) with the row's most common
    active role (``majority_role``), or ``inactive`` where no call changed anything; components it
    never intervened on are left out. The calls (the first :data:`~findbench.find.rasp.tools.BUDGET`
    recorded) are replayed on the variant's weights in their order (seeded as the episode's tools, so
    resample ablations draw the same donors): the log's arguments are read, its replies never are."""
    from findbench.find.rasp.tools import BUDGET, RaspTools

    calls = [c for c in (episode.get("tool_calls") or [])[:BUDGET]
             if isinstance(c, dict) and c.get("tool") in EFFECT_TOOLS and c.get("error") is None]
    effects: dict[str, list[bool]] = {}
    tools = RaspTools.for_row(dict(row), VARIANT[episode["access"]], seed=seed) if calls else None
    for c in calls:
        try:
            args = json.loads(c.get("arguments") or "")
            reply = json.loads(tools.call(c["tool"], args))
        except (ValueError, TypeError, RecursionError):  # cut, edited or refused: it showed nothing
            continue
        effects.setdefault(args["component"], []).append(bool(reply["changed_positions"]))
    role = circuit.floor_predictions(components, "majority_role")[0]["role"] if components else "map"
    return json.dumps([{"component": name, "role": role if any(seen) else "inactive", "score": sum(seen) / len(seen)}
                       for name, seen in effects.items()])


def tool_commands(text: str) -> list[tuple[str, Any]]:
    """The ``TOOL(name, {...})`` commands of a message's first :data:`MAX_MESSAGE_CHARS` characters,
    as ``(name, arguments)``; arguments that are not one JSON value closed by ``)`` come as a
    :class:`ValueError` (a refused call)."""
    text, out, end = text[:MAX_MESSAGE_CHARS], [], 0
    for m in _START.finditer(text):
        if m.start() < end:
            continue
        try:
            args, end = _DECODER.raw_decode(text, m.end())
            if (close := re.match(r"\s*\)", text[end:])) is None:
                raise ValueError("close the call with ')' after its JSON arguments")
            end += close.end()
        except (ValueError, RecursionError) as exc:
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            args, end = ValueError(f"arguments: give one JSON object, e.g. {{\"tokens\": [...]}} ({why})"), m.end()
        out.append((m.group(1), args))
    return out


def _record(round: int, name: str, args: Any, error: str | None, reply: str | None) -> dict:
    """One ``tool_calls`` record (arguments as JSON text cut to :data:`MAX_INPUT_CHARS`)."""
    shown = "" if args is None or isinstance(args, Exception) else json.dumps(args, separators=(",", ":"))
    return {"round": round, "tool": name[:40], "arguments": shown[:MAX_INPUT_CHARS], "error": error,
            "reply_chars": len(reply or "")}


class WhiteBox:
    """The white-box side of one episode: the tools over the access condition's variant of ``row``."""

    def __init__(self, row: Mapping[str, Any], access: str, seed: int = 0):
        from findbench.find.rasp.tools import TOOLS, RaspTools

        self.access, self.seed = access, seed
        self.tools: RaspTools = RaspTools.for_row(dict(row), VARIANT[access], seed=seed)
        self.matter = matter(row) if access == "localized" else None
        self.specs = (*TOOLS, CODE_TOOL)
        self.names = {t["name"] for t in self.specs}
        self._sandbox: Any = None

    async def call(self, name: str, args: Any, episode: EpisodeState, round: int) -> tuple[str | None, str | None]:
        """One counted call: ``(reply, None)`` or ``(None, why)``, recorded in ``episode.tool_calls``
        (the code tool's record followed by those of the calls its program made)."""
        from findbench.find.rasp.tools import ToolError as Refused

        inner: list[dict] = []
        try:
            if isinstance(args, Exception) or name == CODE_TOOL["name"]:  # counted as the tools count a call
                self.tools.count()
            if isinstance(args, Exception):
                raise Refused(f"{name}: {args}")
            work = (self.python, args, inner) if name == CODE_TOOL["name"] else (self.tools.call, name, args)
            reply, error = await asyncio.to_thread(*work), None
        except Refused as exc:
            reply, error = None, str(exc)
        episode.tool_calls += [_record(round, name, args, error, reply), *(r | {"round": round} for r in inner)]
        return reply, error

    def python(self, args: Any, records: list[dict]) -> str:
        """The code tool: ``args["code"]`` run in the sandbox as a script whose tool calls are services
        answered here (each counted by the tools, recorded in ``records``); what it printed, and how it
        failed, cut to the tools' ``max_chars``. Raises the tools' ``ToolError``."""
        from findbench.find.rasp.tools import TOOLS, ToolError
        from findbench.sandbox import Sandbox, SandboxLimits, SandboxUnavailableError, short_reason

        if not isinstance(args, dict) or set(args) != {"code"} or not isinstance(args["code"], str):
            raise ToolError("python: give one argument, code: the program's text")

        def service(spec: dict) -> Any:
            def call(*values: Any, **named: Any) -> Any:
                kwargs = dict(zip(spec["args"], values)) | named
                try:
                    if len(values) > len(spec["args"]):  # refused and counted, as the tools refuse a call
                        self.tools.count()
                        raise ToolError(f"{spec['name']}: at most {len(spec['args'])} arguments")
                    reply = self.tools.call(spec["name"], kwargs)
                except ToolError as exc:
                    if len(records) <= self.tools.budget:  # past it a program's calls count, unrecorded
                        records.append(_record(0, spec["name"], kwargs, str(exc), None))
                    raise
                records.append(_record(0, spec["name"], kwargs, None, reply))
                with contextlib.suppress(ValueError):  # a reply cut to max_chars stays text
                    return json.loads(reply)
                return reply

            return call

        try:
            self._sandbox = self._sandbox or Sandbox(SandboxLimits(workers=1), seed=self.seed)  # random: the run's
            [result] = self._sandbox.run([args["code"]], [[]], entry=None,
                                         services={t["name"]: service(t) for t in TOOLS})
        except (SandboxUnavailableError, RuntimeError) as exc:
            raise ToolError(f"python: the sandbox cannot run programs here ({short_reason(str(exc))})") from None
        failed = "" if result.status == "ok" else f"{result.status}: {short_reason(result.message)}"
        return "\n".join(filter(None, [result.stdout.rstrip("\n"), failed]))[: self.tools.max_chars]

    def close(self) -> None:
        """Stop the code tool's sandbox (if a program ran)."""
        if self._sandbox is not None:
            self._sandbox.close()

    async def text_replies(self, text: str, episode: EpisodeState, round: int = 0) -> list[str]:
        """The reply lines of a ``text`` message's tool commands (past :data:`MAX_COMMANDS_PER_MESSAGE`:
        not run, counted in ``dropped_commands``)."""
        commands = tool_commands(text)
        episode.dropped_commands += max(0, len(commands) - MAX_COMMANDS_PER_MESSAGE)
        lines = []
        for name, args in commands[:MAX_COMMANDS_PER_MESSAGE]:
            reply, error = await self.call(name, args, episode, round)
            lines.append(f"{REPLY_PREFIX}{name}: {reply}" if error is None
                         else f"{REPLY_PREFIX}Error in {name}: {error}.")
        return lines

    def settle(self, messages: list, episode: EpisodeState, round: int = 0) -> None:
        """Count and record the last turn's white-box calls Inspect refused before they ran (arguments
        that do not fit the tool's schema): refused calls count as the others do."""
        last = max(i for i, m in enumerate(messages) if m.role == "assistant")
        for m in messages[last + 1:]:
            if m.role == "tool" and m.function in self.names and m.error is not None and m.error.type != "unknown":
                self.tools.calls += 1
                episode.tool_calls.append(_record(round, m.function, None, m.error.message[:MAX_INPUT_CHARS], None))

    def inspect_tools(self, episode: EpisodeState, answered: Any = lambda: False,
                      round: Any = lambda: 0) -> list[ToolDef]:
        """One Inspect tool per spec (refused calls raise Inspect's ToolError: a reply, not a stop);
        ``answered()`` says the current message gives the answer (then nothing runs), ``round()`` the turn."""
        from inspect_ai.tool import ToolDef, ToolError, ToolParams

        def tool(spec: dict) -> ToolDef:
            async def execute(**kwargs: Any) -> str:
                if answered():
                    raise ToolError("not run: the message gives the answer, which ends the episode")
                reply, error = await self.call(spec["name"], kwargs, episode, round())
                if error is not None:
                    raise ToolError(error)
                return reply

            described = {k: {"description": "one of " + ", ".join(v.get("enum", [k]))} | v
                         for k, v in spec["args"].items()}
            params = ToolParams(properties=described, required=list(spec["required"]))
            return ToolDef(execute, name=spec["name"], description=spec["doc"], parameters=params, parallel=False)

        return [tool(spec) for spec in self.specs]

    def prompt(self, protocol: str) -> str:
        """The paragraph added to the task message: the architecture, the tools, how to call them,
        and (``localized``) the components that matter."""
        arch = self.tools.architecture()
        vocab = arch["vocab"][:2]
        lines = [
            "\nYou can also look inside the transformer that computes f(x) (position 0 of every activation is its "
            f"BOS token). It has {arch['n_layers']} layers of {arch['n_heads']} attention heads (d_head "
            f"{arch['d_head']}) and an MLP (d_mlp {arch['d_mlp']}); d_model {arch['d_model']}.",
            f"Components: {', '.join(arch['components'])} (blocks.{{l}}.mlp.unit{{u}} names one MLP unit).",
            f"Hooks: {', '.join(arch['hooks'])}.",
            f"Tools (at most {self.tools.budget} calls in all, refused ones too; replies are rounded and cut to "
            f"{self.tools.max_chars} characters):",
            *(f"- {t['name']}({', '.join(t['args'])}): {t['doc']}" for t in self.specs),
            "Call them as tools, beside the function." if protocol == "tools" else
            "Call one with TOOL(name, {JSON arguments}), e.g. TOOL(run_with_cache, {\"tokens\": "
            f"{json.dumps(vocab)}, \"hooks\": [\"blocks.0.attn.hook_pattern\"]}}); several per message; "
            f"a program is one JSON string: TOOL(python, {json.dumps({'code': f'print(run({vocab}))'})}).",
            "Answer with a third part after [CODE]: [COMPONENTS]: a JSON list in a ```json code block, one object per "
            "component: {\"component\": a component name (blocks.{l}.mlp may add \"units\": [unit indices]), "
            f"\"role\": one of {', '.join(truth.ROLES)}, optionally \"reads\": what it reads (tokens, indices), "
            "\"score\": how much it matters (0 to 1), \"code\": a `def f(tokens):` computing its value at each "
            "position}.",
        ]
        if self.matter is not None:
            lines.append(f"The components that matter for f(x): {'; '.join(self.matter) or 'none'}.")
        return "\n".join(lines)
