"""Ground truth of a compiled program: its components (attention heads and MLP unit groups with
their variable, op, reads and role), read off the aligned weights and the residual labels, and
its near-miss programs (one op changed), whose outputs are the ``unit_tests_near`` distractors.
"""

from __future__ import annotations

import copy

import numpy as np

from findbench.find.rasp import programs as P

#: Role of each RASP op (``inactive``: tracr's zero padding).
ROLES = ("map", "sequence_map", "linear_map", "mover", "averager", "counter", "inactive")
_EPS = 1e-9


def role(op: dict) -> str:
    kind = op["op"]
    if kind == "aggregate":
        return "averager" if op.get("enc") == "numerical" else "mover"
    return {"map": "map", "sequence_map": "sequence_map", "linear_sequence_map": "linear_map",
            "selector_width": "counter"}[kind]


def reads(program: dict, name: str) -> list[str]:
    """The variables an op reads (a selector's keys and queries count as read)."""
    ops = P.ops_by_name(program)
    op, out = ops[name], []
    for key in ("keys", "queries", "sel", "x", "y"):
        if key in op:
            out += reads(program, op[key]) if op[key] in ops and ops[op[key]]["op"] == "select" else [op[key]]
    return list(dict.fromkeys(out))


def _variable(label: str) -> str:
    return label.split(":")[0]


def components(program: dict, arrays: dict, meta: dict) -> list[dict]:
    """One entry per attention head and per MLP hidden-unit group of the aligned weights:
    ``hook``, ``layer``, ``head`` (heads) or ``units`` (MLPs), ``variable``, ``op``, ``reads``,
    ``role``. A head or unit that writes nothing is ``inactive`` (one entry per layer's idle units)."""
    labels = meta["labels"]
    ops = P.ops_by_name(program)
    out = []

    def entry(hook, layer, variable, head=None, units=None):
        op = ops.get(variable)
        return {"hook": hook, "layer": layer, "head": head, "units": units or [], "variable": variable or "",
                "op": op["op"] if op else "", "reads": reads(program, variable) if op else [],
                "role": role(op) if op else "inactive"}

    for layer in range(meta["n_layers"]):
        W_O = arrays[f"{layer}.W_O"]
        for head in range(W_O.shape[0]):
            written = {_variable(labels[d]) for d in np.nonzero(np.abs(W_O[head]).sum(0) > _EPS)[0]}
            variable = min(written) if written else None
            out.append(entry(f"blocks.{layer}.attn.hook_result", layer, variable, head=head))
        W_in, W_out = arrays[f"{layer}.W_in"], arrays[f"{layer}.W_out"]
        writes = [min({_variable(labels[d]) for d in np.nonzero(np.abs(W_out[u]) > _EPS)[0]}, default=None)
                  for u in range(W_out.shape[0])]
        reads_only = [writes[u] is None and np.abs(W_in[:, u]).sum() > _EPS for u in range(W_out.shape[0])]
        groups: dict[str | None, list[int]] = {}
        for unit, variable in enumerate(writes):
            if reads_only[unit]:  # a unit that only reads joins the nearest writing unit's group
                near = [writes[u] for u in (*range(unit - 1, -1, -1), *range(unit + 1, len(writes))) if writes[u]]
                variable = near[0] if near else None
            groups.setdefault(variable, []).append(unit)
        for variable, units in sorted(groups.items(), key=lambda kv: kv[1][0]):
            out.append(entry(f"blocks.{layer}.mlp.hook_post", layer, variable, units=units))
    return out


_SWAPS = {
    "pred": {"LT": ["LEQ", "GT"], "LEQ": ["LT", "GEQ"], "GT": ["GEQ", "LT"], "GEQ": ["GT", "LEQ"],
             "EQ": ["NEQ", "LEQ", "GEQ"], "NEQ": ["EQ", "LT"], "TRUE": ["LEQ", "GEQ", "NEQ"],
             "same_parity": ["EQ", "NEQ"], "offset": ["offset_clamp"], "offset_clamp": ["offset"]},
    "fn": {"add_mod": ["sub_mod"], "sub_mod": ["add_mod"], "lt": ["gt", "eq"], "gt": ["lt", "eq"],
           "eq": ["neq", "lt", "gt"], "neq": ["eq"], "min": ["max"], "max": ["min"], "min_c": ["max_c"],
           "max_c": ["min_c"], "and": ["or"], "or": ["and"], "parity": ["not"], "mul_mod": ["add_mod"]},
}


def near_misses(program: dict) -> list[dict]:
    """Programs one change away: an integer argument ±1, a predicate or function swapped for its
    neighbour (``<`` for ``<=``, min for max, …), a linear coefficient negated."""
    out = []
    for i, op in enumerate(program["ops"]):
        table = P.SEQUENCE_MAPS if op["op"] == "sequence_map" else P.MAPS
        for field, swaps in _SWAPS.items():
            for new in swaps.get(op.get(field), []):
                if field == "pred" or new in table:
                    out.append(_with(program, i, **{field: new}))
        for j, a in enumerate(op.get("args", [])):
            if isinstance(a, int) and not isinstance(a, bool):
                for d in (1, -1):
                    args = list(op["args"])
                    args[j] = a + d
                    out.append(_with(program, i, args=args))
            elif isinstance(a, list):
                args = list(op["args"])
                args[j] = a[1:] + a[:1]
                out.append(_with(program, i, args=args))
        if op["op"] == "linear_sequence_map":
            out.append(_with(program, i, b=-op["b"]))
    return out


def _with(program: dict, i: int, **changes) -> dict:
    new = copy.deepcopy(program)
    new["ops"][i].update(changes)
    return new


def for_variant(components: list[dict], function_id: str, variant: str = "aligned", seed: int = 0) -> list[dict]:
    """``components`` as they sit in ``variant``'s weights: ``rotated`` keeps every head where it is
    but permutes each MLP's hidden units, so a unit group's ``units`` are mapped through the same
    permutation (sorted). ``aligned`` returns them unchanged. Ground-truth side only."""
    if variant == "aligned":
        return [dict(c) for c in components]
    from findbench.find.rasp import store

    if variant not in store.VARIANTS:
        raise ValueError(f"variant: {variant!r} is not one of {store.VARIANTS}")
    where = [np.argsort(perm) for perm in store.unit_permutations(function_id, seed)]  # aligned unit → rotated
    return [dict(c, units=sorted(int(where[c["layer"]][u]) for u in c["units"])) if c.get("units") else dict(c)
            for c in components]
